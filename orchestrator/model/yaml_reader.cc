#include "model/yaml_reader.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace rocelab::model {

namespace {
std::string quote(std::string_view s) {
  constexpr size_t kMax = 60;  // a 100 kB value must not make a 100 kB message
  std::string out = "'";
  if (s.size() > kMax) {
    out.append(s.substr(0, kMax));
    out += "...";
  } else {
    out.append(s);
  }
  out += "'";
  return out;
}
}  // namespace

Position Reader::position_of(const YAML::Mark& m) {
  if (m.is_null() || m.line < 0) return {};
  return Position{m.line + 1, m.column + 1};
}

Value Reader::root(const YAML::Node& n) { return Value{n, position_of(n.Mark()), ""}; }

std::string Reader::describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Scalar:
      return (n.Tag() == "!" ? "the quoted text " : "") + quote(n.Scalar());
  }
  return "something else";
}

std::string MapReader::child_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

std::optional<MapReader> Reader::map(const Value& v) {
  if (!v.node.IsMap()) {
    error(ErrorKind::kWrongType, v, (v.path.empty() ? std::string("the document") : v.path) +
                                        ": expected a map, got " + describe(v.node));
    return std::nullopt;
  }
  MapReader m(*this, v.pos, v.path);
  std::unordered_map<std::string, Position> seen;
  for (auto it = v.node.begin(); it != v.node.end(); ++it) {
    Position kp = position_of(it->first.Mark());
    if (!it->first.IsScalar()) {
      error(ErrorKind::kWrongType, kp,
            (v.path.empty() ? std::string("top level") : v.path) + ": a key must be a word, got " +
                describe(it->first));
      continue;
    }
    std::string key = it->first.Scalar();
    auto [at, fresh] = seen.emplace(key, kp);
    if (!fresh) {
      error(ErrorKind::kDuplicateKey, kp,
            m.child_path(key) + ": duplicate key (first at line " + std::to_string(at->second.line) + ")");
      continue;
    }
    // A null value carries the mark of the next token; the key's place is the useful one.
    Position vp = it->second.IsNull() ? kp : position_of(it->second.Mark());
    if (vp.line == 0) vp = kp;
    m.entries_.push_back({key, Value{it->second, vp, m.child_path(key)}, kp, false});
  }
  return m;
}

std::optional<Value> MapReader::take(std::string_view key) {
  known_.emplace_back(key);
  for (auto& e : entries_) {
    if (e.key == key) {
      e.used = true;
      return e.value;
    }
  }
  return std::nullopt;
}

bool MapReader::has(std::string_view key) const {
  for (const auto& e : entries_)
    if (e.key == key) return true;
  return false;
}

std::vector<std::pair<std::string, Value>> MapReader::take_all() {
  std::vector<std::pair<std::string, Value>> out;
  for (auto& e : entries_) {
    e.used = true;
    Value v = e.value;
    v.pos = e.key_pos;  // a free-form key is the thing a message points at
    out.emplace_back(e.key, v);
  }
  return out;
}

Position MapReader::key_pos(std::string_view key) const {
  for (const auto& e : entries_)
    if (e.key == key) return e.key_pos;
  return pos_;
}

std::optional<Value> MapReader::require(std::string_view key, std::string_view why) {
  auto v = take(key);
  if (!v) {
    // A misspelt key ("leafs") reads better as one unknown-key error with a did-you-mean than
    // as that plus a missing "leaves": done() decides once it knows which keys were unknown.
    missing_.emplace_back(key, why);
  }
  return v;
}

void MapReader::done(bool all_unknown) {
  std::vector<std::string_view> known(known_.begin(), known_.end());
  std::vector<std::string> hinted;
  for (const auto& e : entries_) {
    if (e.used) continue;
    std::string msg = child_path(e.key) + ": unknown key";
    std::string hint = closest(e.key, known);
    bool near_missing =
        std::any_of(missing_.begin(), missing_.end(), [&](const auto& m) { return m.first == hint; });
    if (!all_unknown && !near_missing) continue;
    if (!hint.empty()) {
      msg += " (did you mean '" + hint + "'?)";
      hinted.push_back(hint);
    }
    r_->error(ErrorKind::kUnknownKey, e.key_pos, msg);
  }
  for (const auto& [key, why] : missing_) {
    if (std::find(hinted.begin(), hinted.end(), key) != hinted.end()) continue;
    r_->error(ErrorKind::kMissingKey, pos_,
              (path_.empty() ? std::string("top level") : path_) + ": missing required key '" + key + "'" +
                  (why.empty() ? std::string() : " (" + why + ")"));
  }
  missing_.clear();
}

std::optional<std::vector<Value>> Reader::list(const Value& v) {
  if (!v.node.IsSequence()) {
    error(ErrorKind::kWrongType, v, v.path + ": expected a list, got " + describe(v.node));
    return std::nullopt;
  }
  std::vector<Value> out;
  size_t i = 0;
  for (const auto& item : v.node) {
    Position p = position_of(item.Mark());
    if (p.line == 0 || item.IsNull()) p = v.pos;
    out.push_back(Value{item, p, v.path + "[" + std::to_string(i++) + "]"});
  }
  return out;
}

std::optional<std::vector<Value>> Reader::list_or_scalar(const Value& v) {
  if (v.node.IsScalar()) return std::vector<Value>{v};
  return list(v);
}

std::optional<std::string> Reader::scalar_text(const Value& v, const char* expected) {
  if (!v.node.IsScalar()) {
    error(ErrorKind::kWrongType, v, v.path + ": expected " + expected + ", got " + describe(v.node));
    return std::nullopt;
  }
  return v.node.Scalar();
}

std::optional<std::string> Reader::string(const Value& v) { return scalar_text(v, "text"); }

std::optional<int64_t> Reader::integer(const Value& v, int64_t lo, int64_t hi) {
  auto s = scalar_text(v, "an integer");
  if (!s) return std::nullopt;
  const std::string& t = *s;
  bool ok = v.node.Tag() != "!" && !t.empty();
  size_t i = (ok && (t[0] == '-' || t[0] == '+')) ? 1 : 0;
  ok = ok && i < t.size() && t.size() - i <= 18;
  for (size_t j = i; ok && j < t.size(); ++j) ok = t[j] >= '0' && t[j] <= '9';
  if (!ok) {
    // An over-long run of digits is a number, just not one in range.
    bool digits = !t.empty() && t.find_first_not_of("0123456789") == std::string::npos;
    if (digits && v.node.Tag() != "!") {
      error(ErrorKind::kOutOfRange, v, v.path + ": " + quote(t) + " is out of range [" +
                                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
      return std::nullopt;
    }
    error(ErrorKind::kWrongType, v, v.path + ": expected an integer, got " + describe(v.node));
    return std::nullopt;
  }
  int64_t n = std::stoll(t);
  if (n < lo || n > hi) {
    error(ErrorKind::kOutOfRange, v, v.path + ": " + t + " is out of range [" + std::to_string(lo) +
                                         ", " + std::to_string(hi) + "]");
    return std::nullopt;
  }
  return n;
}

std::optional<double> Reader::number(const Value& v, double lo, double hi) {
  auto s = scalar_text(v, "a number");
  if (!s) return std::nullopt;
  auto p = parse_number(*s);
  if (!p || v.node.Tag() == "!") {
    error(ErrorKind::kWrongType, v, v.path + ": expected a number, got " + describe(v.node));
    return std::nullopt;
  }
  double d = *p.value;
  if (!std::isfinite(d) || d < lo || d > hi) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " is out of range [%g, %g]", lo, hi);
    error(ErrorKind::kOutOfRange, v, v.path + ": " + *s + buf);
    return std::nullopt;
  }
  return d;
}

std::optional<bool> Reader::boolean(const Value& v) {
  auto s = scalar_text(v, "true or false");
  if (!s) return std::nullopt;
  // Only true/false: YAML 1.1's yes/no/on/off surprise people ("the Norway problem").
  if (v.node.Tag() != "!") {
    if (*s == "true" || *s == "True" || *s == "TRUE") return true;
    if (*s == "false" || *s == "False" || *s == "FALSE") return false;
  }
  error(ErrorKind::kWrongType, v, v.path + ": expected true or false, got " + describe(v.node));
  return std::nullopt;
}

namespace {
template <class T, class ParseFn, class FormatFn>
std::optional<T> read_quantity(Reader& r, const Value& v, T lo, T hi, const char* what,
                               ParseFn parse, FormatFn format) {
  if (!v.node.IsScalar()) {
    r.error(ErrorKind::kWrongType, v, v.path + ": expected " + what + ", got " + Reader::describe(v.node));
    return std::nullopt;
  }
  auto p = parse(v.node.Scalar());
  if (!p) {
    r.error(ErrorKind::kBadValue, v, v.path + ": " + p.error);
    return std::nullopt;
  }
  if (*p.value < lo || *p.value > hi) {
    r.error(ErrorKind::kOutOfRange, v, v.path + ": " + format(*p.value) + " is out of range [" +
                                           format(lo) + ", " + format(hi) + "]");
    return std::nullopt;
  }
  return p.value;
}
}  // namespace

std::optional<Rate> Reader::rate(const Value& v, Rate lo, Rate hi) {
  return read_quantity(*this, v, lo, hi, "a rate", parse_rate, format_rate);
}

std::optional<Bytes> Reader::bytes(const Value& v, Bytes lo, Bytes hi) {
  return read_quantity(*this, v, lo, hi, "a size", parse_bytes, format_bytes);
}

std::optional<Duration> Reader::duration(const Value& v, Duration lo, Duration hi) {
  return read_quantity(*this, v, lo, hi, "a time", parse_duration, format_duration);
}

std::optional<std::string> Reader::choice(const Value& v, const std::vector<std::string_view>& allowed) {
  auto s = scalar_text(v, "a word");
  if (!s) return std::nullopt;
  for (auto a : allowed)
    if (*s == a) return s;
  std::string list;
  for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  std::string msg = v.path + ": " + quote(*s) + " is not one of " + list;
  std::string hint = closest(*s, allowed);
  if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
  error(ErrorKind::kBadValue, v, msg);
  return std::nullopt;
}

}  // namespace rocelab::model
