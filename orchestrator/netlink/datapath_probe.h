// What the kernel's networking can do, tried for real inside a private namespace.
#pragma once

#include <string>
#include <vector>

namespace rocelab::netlink {

struct Probe {
  std::string name;  // "veth", "qdisc:htb", ...
  bool ok = false;
  std::string why;   // on failure, the kernel's answer; on success, what was done
};

// Must run inside a namespace made for the probe (see sys::run_in_private_netns): it creates
// a veth pair and tries each qdisc kind on it.
std::vector<Probe> probe_datapath(const std::vector<std::string>& qdisc_kinds);

// Probe results as lines "name<TAB>0|1<TAB>why" (to cross a pipe) and back.
std::string encode(const std::vector<Probe>& probes);
std::vector<Probe> decode(const std::string& text);

}  // namespace rocelab::netlink
