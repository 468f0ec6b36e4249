// The agent: one process per instance, the fabric's "switch CPU" (DESIGN.md §1). It acts
// on PFC frames the ingress programs received (pauses that priority on that port's egress
// by its TBF leaf, until the pause time runs out or XON arrives), sends XON for a port this
// switch paused once its queues of that priority drained below XON (no packet arrives from
// a paused port to trigger it in BPF), measures its reaction time (the BPF timestamp of a
// frame's arrival to the pause in effect), and answers requests on its socket
// (fabric/agent_protocol.h). It holds no kernel object per port: its start and exit do not
// grow with the fabric.
#pragma once

#include <atomic>
#include <string>

namespace rocelab::agent {

struct Options {
  int handshake_fd = -1;  // from `up`: the configuration to read, then "ready" or the error to write
  const std::atomic<bool>* stop = nullptr;
};

// Reads its configuration, sets up, says ready, and runs until `stop`, a stop request, or
// the state file disappearing. Errors as false with `why` (also sent to `up`).
bool run(const Options& o, std::string& why);

}  // namespace rocelab::agent
