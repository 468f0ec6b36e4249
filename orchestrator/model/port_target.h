// "NODE" or "NODE:PORT": how scenarios, faults, captures, workload ends and the CLI name a
// node or one of its ports (a workload end's "HOST:gpuN" has the same shape). Split here and
// nowhere else (tests/lint/port_target.py): a node name never holds ':', so the first one
// divides.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rocelab::model {

struct PortTarget {
  std::string node;
  std::optional<std::string> port;  // absent: the node itself ("NODE:" names an empty port)

  static PortTarget parse(std::string_view text) {
    const size_t colon = text.find(':');
    if (colon == std::string_view::npos) return {std::string(text), std::nullopt};
    return {std::string(text.substr(0, colon)), std::string(text.substr(colon + 1))};
  }
  bool is_port() const { return port.has_value(); }
  const std::string& port_or_empty() const {
    static const std::string kNone;
    return port ? *port : kNone;
  }
  std::string text() const { return port ? node + ":" + *port : node; }
};

}  // namespace rocelab::model
