// Typed, located reading of a YAML tree. Every getter reports its own diagnostic (naming the
// key path and the offending text) and returns nullopt, so a loader reads on and collects
// every error of a file in one pass.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/diagnostics.h"
#include "model/units.h"

namespace rocelab::model {

// A YAML node with where it stands in the file and its key path ("links[2].rate").
struct Value {
  YAML::Node node;
  Position pos;
  std::string path;
};

class Reader;

// One YAML map being read. Keys are claimed with take()/require(); done() reports the keys
// nobody claimed as unknown, with the nearest claimed key as a hint.
class MapReader {
 public:
  std::optional<Value> take(std::string_view key);
  // `why` teaches what the key is for, in the missing-key message.
  std::optional<Value> require(std::string_view key, std::string_view why = {});
  bool has(std::string_view key) const;
  // Every entry of a free-form map (keys are data, e.g. a DSCP map), with each key's place.
  std::vector<std::pair<std::string, Value>> take_all();
  Position key_pos(std::string_view key) const;
  // Reports unknown keys and missing required keys; every MapReader must end with it.
  // all_unknown = false reports only unknown keys that look like a missing required one
  // (for a map whose schema is unknown because its discriminating key is missing).
  void done(bool all_unknown = true);
  const Position& pos() const { return pos_; }
  const std::string& path() const { return path_; }

 private:
  friend class Reader;
  struct Entry {
    std::string key;
    Value value;
    Position key_pos;
    bool used = false;
  };
  MapReader(Reader& r, Position pos, std::string path) : r_(&r), pos_(pos), path_(std::move(path)) {}
  std::string child_path(std::string_view key) const;

  Reader* r_;
  Position pos_;
  std::string path_;
  std::vector<Entry> entries_;
  std::vector<std::string> known_;
  std::vector<std::pair<std::string, std::string>> missing_;  // required keys not present, reported by done()
};

class Reader {
 public:
  explicit Reader(Diagnostics& diags) : diags_(diags) {}
  Diagnostics& diags() { return diags_; }

  static Position position_of(const YAML::Mark& m);
  // A root value for a loaded document.
  static Value root(const YAML::Node& n);

  std::optional<MapReader> map(const Value& v);
  std::optional<std::vector<Value>> list(const Value& v);
  // A list, or a single scalar taken as a one-element list ("hosts: all" vs "hosts: [a, b]").
  std::optional<std::vector<Value>> list_or_scalar(const Value& v);

  std::optional<std::string> string(const Value& v);
  std::optional<int64_t> integer(const Value& v, int64_t lo, int64_t hi);
  std::optional<double> number(const Value& v, double lo, double hi);
  std::optional<bool> boolean(const Value& v);
  std::optional<Rate> rate(const Value& v, Rate lo, Rate hi);
  std::optional<Bytes> bytes(const Value& v, Bytes lo, Bytes hi);
  std::optional<Duration> duration(const Value& v, Duration lo, Duration hi);
  // One of a fixed set of words; an unknown word gets a did-you-mean.
  std::optional<std::string> choice(const Value& v, const std::vector<std::string_view>& allowed);

  void error(ErrorKind k, const Value& v, std::string message) { diags_.add(k, v.pos, std::move(message)); }
  void error(ErrorKind k, Position p, std::string message) { diags_.add(k, p, std::move(message)); }

  // "a list", "a map", "the text 'x'", "nothing": how a value reads in a wrong-type message.
  static std::string describe(const YAML::Node& n);

 private:
  std::optional<std::string> scalar_text(const Value& v, const char* expected);
  Diagnostics& diags_;
};

}  // namespace rocelab::model
