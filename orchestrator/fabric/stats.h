// Counters of a running fabric, per port and priority: what the port programs counted (the
// mmapable counter map) beside what each HTB class (the shaper) counted and holds.
#pragma once

#include <array>
#include <string>

#include "rocelab_abi.h"

namespace rocelab::fabric {

struct PrioStats {
  rl_counters c{};
  uint64_t shaper_bytes = 0, shaper_packets = 0, shaper_drops = 0;
  uint32_t backlog_bytes = 0;  // queued in the class right now, as HTB reports it
  uint32_t depth_bytes = 0;    // the same, as the egress program reads it (microseconds later)
};

struct PortStats {
  std::string node, port;
  int ifindex = 0;
  std::array<PrioStats, RL_NUM_PRIO> prio{};
};

}  // namespace rocelab::fabric
