#include "model/overrides.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>

namespace rocelab::model {

namespace {

std::vector<std::string> split_path(const std::string& key) {
  std::vector<std::string> parts;
  size_t from = 0;
  for (size_t dot; (dot = key.find('.', from)) != std::string::npos; from = dot + 1) parts.push_back(key.substr(from, dot - from));
  parts.push_back(key.substr(from));
  return parts;
}

// A list's index from a path part: nullopt when it is not a number below `size`.
std::optional<size_t> index_of(const std::string& part, size_t size) {
  if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || part.size() > 9) return std::nullopt;
  const size_t i = std::strtoul(part.c_str(), nullptr, 10);
  return i < size ? std::optional<size_t>(i) : std::nullopt;
}

// VALUE as YAML reads it in place (a number, a list, a map, a word such as 64KB).
YAML::Node value_of(const std::string& v) {
  try {
    YAML::Node n = YAML::Load(v);
    if (n.IsDefined()) return n;
  } catch (const YAML::Exception&) {
  }
  return YAML::Node(v);
}

}  // namespace

std::optional<std::string> apply_overrides(std::string_view text, const std::vector<std::string>& sets, std::string& why) {
  if (sets.empty()) return std::string(text);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception&) {
    return std::string(text);
  }
  if (!root.IsMap()) return std::string(text);
  for (const std::string& s : sets) {
    const size_t eq = s.find('=');
    const std::string key = eq == std::string::npos ? s : s.substr(0, eq);
    auto refuse = [&](const std::string& what) {
      why = "--set " + s + ": " + what;
      return std::nullopt;
    };
    if (eq == std::string::npos || eq == 0) return refuse("expected KEY=VALUE, KEY a dotted path (qos.ecn.kmin=64KB)");
    const std::vector<std::string> parts = split_path(key);
    for (const auto& p : parts)
      if (p.empty()) return refuse("an empty name in the path '" + key + "'");
    YAML::Node cur = root;
    std::string at;  // the path walked so far
    for (size_t i = 0; i < parts.size(); ++i) {
      const std::string& p = parts[i];
      const bool last = i + 1 == parts.size();
      const std::string here = at.empty() ? p : at + "." + p;
      YAML::Node next;
      if (cur.IsSequence()) {
        auto idx = index_of(p, cur.size());
        if (!idx)
          return refuse("'" + (at.empty() ? std::string("the file") : at) + "' is a list of " + std::to_string(cur.size()) +
                        "; give an index below that (" + (at.empty() ? "" : at + ".") + "0)");
        if (last) {
          cur[*idx] = value_of(s.substr(eq + 1));
          break;
        }
        next = cur[*idx];
      } else if (cur.IsMap() || cur.IsNull()) {
        if (last) {
          cur[p] = value_of(s.substr(eq + 1));
          break;
        }
        if (!cur[p] || cur[p].IsNull()) cur[p] = YAML::Node(YAML::NodeType::Map);
        next = cur[p];
      } else {
        return refuse("'" + at + "' is a value, not a section: '" + here + "' cannot be set");
      }
      if (!last && next.IsScalar()) return refuse("'" + here + "' is a value, not a section: '" + key + "' cannot be set");
      cur.reset(next);
      at = here;
    }
  }
  YAML::Emitter out;
  out << root;
  if (!out.good()) return why = "--set: the scenario could not be written back (" + out.GetLastError() + ")", std::nullopt;
  return std::string(out.c_str()) + "\n";
}

}  // namespace rocelab::model
