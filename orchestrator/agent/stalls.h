// The PFC loop's stalls (fabric::AgentStall): a poll that returned well past its timeout
// means this real-time thread was runnable and not run, and every shaper and timer of the
// fabric overslept with it. What PFC's work waited on a stall is told by that work, in the
// same turn of the loop; a stall with none delayed nothing of PFC's. No root, no fabric.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fabric/agent_protocol.h"

namespace rocelab::agent {

class StallLog {
 public:
  // `poll_ns`: the loop's poll timeout; past it by more than `slack_ns` a wake is a stall.
  // At most `max` are kept; the rest are counted.
  StallLog(uint64_t poll_ns, uint64_t slack_ns, size_t max) : poll_ns_(poll_ns), slack_ns_(slack_ns), max_(max) {}

  // The loop went to sleep at `asleep` and woke at `woke` (CLOCK_MONOTONIC).
  void woke(uint64_t asleep, uint64_t woke);
  // PFC's work, done now, was due at `due` (a frame's arrival, a pause's end); 0: at some
  // moment of the stall, unknown, so all of it. The stall this turn woke from delayed it.
  void delayed_since(uint64_t due);
  // The turn's work is done: what comes later was not delayed by its stall.
  void turn_done() { current_ = kNone; }

  const std::vector<fabric::AgentStall>& stalls() const { return log_; }
  uint64_t dropped() const { return dropped_; }

 private:
  static constexpr size_t kNone = ~size_t{0};
  uint64_t poll_ns_, slack_ns_;
  size_t max_;
  std::vector<fabric::AgentStall> log_;
  uint64_t dropped_ = 0;
  size_t current_ = kNone;  // the stall this turn woke from, in log_
};

}  // namespace rocelab::agent
