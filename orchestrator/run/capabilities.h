// `rocelab doctor`: what this kernel and machine can and cannot do, each with why.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rocelab::run {

struct Capability {
  std::string name;
  bool ok = false;
  bool required = false;  // the fabric cannot be built without it
  std::string why;
};

struct Capabilities {
  std::vector<Capability> items;
  bool has(const std::string& name) const;
  bool all_required() const;
  nlohmann::ordered_json to_json() const;
};

// Probes for real: a private namespace with a veth and qdiscs (root only), a BPF program
// through BPF_PROG_TEST_RUN, kernel files. Nothing in the machine's own namespace changes.
Capabilities detect_capabilities();

}  // namespace rocelab::run
