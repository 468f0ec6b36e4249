// Pause storms the agent was asked for (`rocelab` faults, fabric::StormSpec): each one's
// frames on its own schedule. Sending is the caller's; no root, no fabric.
#pragma once

#include <cstdint>
#include <functional>
#include <map>

#include "fabric/agent_protocol.h"

namespace rocelab::agent {

class StormSchedule {
 public:
  // A frame of `spec`'s out of its port; false: not sent (the schedule waits for the next turn).
  using Send = std::function<bool(const fabric::StormSpec& spec)>;

  // Starts a storm whose first frame is due at `now`; its id (never 0).
  uint64_t start(const fabric::StormSpec& spec, uint64_t now);
  // Stops storm `id` (0: every storm); the frames the stopped storms sent. The pauses they
  // caused end as their time runs out, as when a storming NIC goes quiet.
  uint64_t stop(uint64_t id);
  // Sends every storm's frames due by `now`. A late loop catches up, at most kCatchUp frames
  // a storm at once: beyond that its schedule moves on rather than sending a burst. The
  // frames sent.
  uint64_t run(uint64_t now, const Send& send);

  static constexpr int kCatchUp = 64;

 private:
  struct Storm {
    fabric::StormSpec spec;
    uint64_t next_ns = 0, sent = 0;
  };
  std::map<uint64_t, Storm> storms_;
  uint64_t last_id_ = 0;
};

}  // namespace rocelab::agent
