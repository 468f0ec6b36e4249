#include "workload/backend.h"

namespace rocelab::workload {

const std::vector<BackendKind>& backends() {
  // One line per backend.
  static const std::vector<BackendKind> b = {
      builtin_backend(),
  };
  return b;
}

const BackendKind* find_backend(std::string_view name) {
  for (const BackendKind& b : backends())
    if (b.name == name) return &b;
  return nullptr;
}

std::string built_backends() {
  std::string out;
  for (const BackendKind& b : backends()) out += (out.empty() ? "" : ", ") + b.name;
  return out;
}

}  // namespace rocelab::workload
