// Counters of a running fabric, per port and priority: what the port programs counted
// (mmapable map, found from an attached port) beside what each HTB class (the shaper)
// counted and holds, read from the kernel through netlink.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

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

struct NodeRef {
  std::string node, netns;
  int netns_fd = -1;  // -1: open /run/netns/NETNS
};

// Every testbed port of the given nodes (ifindex >= RL_FIRST_PORT_IFINDEX). `only` limits to
// "NODE" or "NODE:PORT" when not empty.
std::optional<std::vector<PortStats>> read_stats(const std::vector<NodeRef>& nodes, const std::string& only,
                                                 std::string& why);

// The nodes of a running instance, from its state file.
std::optional<std::vector<NodeRef>> instance_nodes(const std::string& instance, std::string& why);

}  // namespace rocelab::fabric

namespace rocelab::fabric {

// Sets the loss fault on the egress of NODE:PORT of a running instance: each data packet
// leaving it is lost with `probability` (0 clears), drawn from a generator seeded by
// (seed, port), and counted as drop reason fault_loss.
bool set_port_loss(const std::string& instance, const std::string& target, double probability, uint64_t seed,
                   std::string& why);

// Pauses (or resumes) priority `prio` on the egress of NODE:PORT of a running instance, as
// a received PFC XOFF (XON) does: the priority's TBF leaf goes to ~1000 B/s, queued
// packets stay queued, other priorities keep flowing. Only PFC priorities can pause.
bool set_port_pause(const std::string& instance, const std::string& target, uint32_t prio, bool paused,
                    std::string& why);

}  // namespace rocelab::fabric
