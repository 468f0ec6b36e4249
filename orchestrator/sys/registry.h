// A registry of kinds keyed by the scenario's `type:` string (containerlab's node registry
// in miniature): the kinds in registration order, found by type, listed for messages.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rocelab {

template <class Kind>  // Kind has a std::string `type`
class Registry {
 public:
  explicit Registry(std::vector<Kind> kinds) : kinds_(std::move(kinds)) {}
  const std::vector<Kind>& all() const { return kinds_; }
  const Kind* find(std::string_view type) const {
    for (const Kind& k : kinds_)
      if (k.type == type) return &k;
    return nullptr;
  }
  std::vector<std::string> types() const {
    std::vector<std::string> out;
    for (const Kind& k : kinds_) out.push_back(k.type);
    return out;
  }
  std::string list() const {  // "a, b, c"
    std::string out;
    for (const Kind& k : kinds_) out += (out.empty() ? "" : ", ") + k.type;
    return out;
  }

 private:
  std::vector<Kind> kinds_;
};

}  // namespace rocelab
