// The PFC loop's own CPU, as the scheduler saw it (its thread's schedstat, read every few
// milliseconds): how long the scheduler kept it waiting while runnable, and how much CPU it
// used. The kernel stops real-time threads for the rest of its period once they used
// sched_rt_runtime_us of a sched_rt_period_us (95 % of a second): a loop charged with the
// fabric's softirq work (every frame it sends runs the port's qdisc and the packets it lets out
// through the next namespaces, in its context) reached it on a fresh machine, and the kernel
// froze PFC for up to 50 ms, 50 us at D = 1000: 600 KB of a 100G line (issue 48). So the loop
// steps down to a time-shared thread while its share of the last period nears half of what
// the kernel allows, and back up once it fell to a quarter: the throttle is never reached,
// and each step is on the record. No root, no fabric.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "fabric/agent_protocol.h"

namespace rocelab::agent {

class CpuWatch {
 public:
  // `period_ns`, `runtime_ns`: the kernel's RT bandwidth (sched_rt_period_us, _runtime_us;
  // runtime 0 or above the period: no throttle, nothing to keep under). `held_ns`: a wait of
  // the scheduler's this long between two readings is logged (at most `max` of them).
  CpuWatch(uint64_t period_ns, uint64_t runtime_ns, uint64_t held_ns, size_t max);

  enum class Step { kNone, kDown, kUp };
  // A reading at `now` (CLOCK_MONOTONIC) of the thread's time on a CPU and waiting for one,
  // both since it started. kDown: leave real-time priority now; kUp: take it again.
  Step sample(uint64_t now, uint64_t on_cpu_ns, uint64_t waiting_ns);
  bool realtime() const { return realtime_; }
  // The thread could not be made real-time at all: never asked to step up.
  void never_realtime() { realtime_ = false, pinned_off_ = true; }

  const std::vector<fabric::AgentHeld>& held() const { return held_; }
  uint64_t held_dropped() const { return held_dropped_; }
  const std::vector<fabric::AgentStep>& steps() const { return steps_; }
  uint64_t waiting_ns() const { return waiting_ - waiting0_; }
  uint64_t on_cpu_ns() const { return on_cpu_ - on_cpu0_; }

 private:
  uint64_t period_, ceiling_, floor_, held_limit_;
  size_t max_;
  struct Reading {
    uint64_t t, cpu;
  };
  std::deque<Reading> window_;  // readings within the last period
  bool started_ = false, realtime_ = true, pinned_off_ = false;
  uint64_t on_cpu0_ = 0, waiting0_ = 0, on_cpu_ = 0, waiting_ = 0, last_t_ = 0;
  std::vector<fabric::AgentHeld> held_;
  uint64_t held_dropped_ = 0;
  std::vector<fabric::AgentStep> steps_;
};

}  // namespace rocelab::agent
