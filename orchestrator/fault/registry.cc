#include "fault/registry.h"

namespace rocelab::fault {

const std::vector<Kind>& kinds() {
  // One line per kind.
  static const std::vector<Kind> k = {
      loss_kind(),
  };
  return k;
}

const Kind* find(std::string_view type) {
  for (const Kind& k : kinds())
    if (k.type == type) return &k;
  return nullptr;
}

std::string built_list() {
  std::string out;
  const auto& k = kinds();
  for (size_t i = 0; i < k.size(); ++i) out += (i == 0 ? "" : i + 1 == k.size() ? " and " : ", ") + k[i].type;
  return out;
}

}  // namespace rocelab::fault
