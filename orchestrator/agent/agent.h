// The agent: one process per instance, the fabric's "switch CPU" (DESIGN.md §1). It acts
// on PFC frames the ingress programs received (pauses that priority on that port's egress
// by its TBF leaf, until the pause time runs out or XON arrives), sends XON for a port this
// switch paused once its queues of that priority drained below XON (no packet arrives from
// a paused port to trigger it in BPF), and measures its reaction time: from the BPF
// timestamp of a frame's arrival to the pause in effect.
#pragma once

#include <atomic>
#include <string>
#include <vector>

namespace rocelab::agent {

struct AgentNode {
  std::string node, netns;
};

struct Options {
  std::string instance;
  std::vector<AgentNode> nodes;
  std::string state_path;   // the agent stops when this file is gone (the fabric was taken down)
  std::string stats_path;   // JSON written every half second and at exit
  const std::atomic<bool>* stop = nullptr;
};

// Runs until `stop`, or until the state file disappears. Errors as false with `why`.
bool run(const Options& o, std::string& why);

}  // namespace rocelab::agent
