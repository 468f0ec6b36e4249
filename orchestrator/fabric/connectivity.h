// The connectivity check of a fresh fabric: every host NIC pings every other host NIC that
// the topology connects (ICMP echo from raw sockets bound to the NIC's address, so multi-NIC
// hosts exercise their per-NIC source routing).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fabric/realiser.h"

namespace rocelab::fabric {

struct Reachability {
  size_t pairs = 0;    // (source NIC, destination NIC) pairs the topology connects
  size_t reached = 0;  // of those, pairs that got an echo reply
  size_t disconnected = 0;  // pairs in different parts of the fabric (e.g. isolated rails): not probed
  std::vector<std::string> unreachable;  // "host1:nic0 -> host3:nic1", the first few
  double seconds = 0;
};

std::optional<Reachability> check_connectivity(const Fabric& f, std::string& why, int rounds = 3);

}  // namespace rocelab::fabric
