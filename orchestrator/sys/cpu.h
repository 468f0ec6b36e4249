// Which core the PFC agent has to itself, and keeping the engine's threads off it. The agent
// is a real-time thread that wakes every few microseconds of wall clock: a time-shared thread
// on its core waits each time it runs (the engine waited for a CPU half the time it wanted
// one beside it, 2 cores, D = 1000), while on a core of its own it costs the engine nothing.
#pragma once

#include <cstdint>

namespace rocelab::sys {

// The agent's core: the highest CPU this process may run on, when it may run on two or more
// (a cpuset or taskset is honoured); -1 on one CPU, where there is nothing to share out.
int agent_core();

// Pin the calling thread to `cpu`; false (and unchanged) when the kernel refuses.
bool pin_thread(int cpu);

// Keeps the calling thread off `cpu` while it lives, then gives back the CPUs it had. Nothing
// when cpu < 0 or it would leave the thread no CPU.
class AvoidCore {
 public:
  explicit AvoidCore(int cpu);
  ~AvoidCore();
  AvoidCore(const AvoidCore&) = delete;
  AvoidCore& operator=(const AvoidCore&) = delete;

 private:
  bool changed_ = false;
  unsigned char saved_[128] = {};  // a cpu_set_t, kept opaque here
};

// The calling thread's timers fire on time while it lives (PR_SET_TIMERSLACK 1 ns), then the
// slack it had comes back. A time-shared thread's sleeps end up to its timer slack late (50 us
// by default; poll's the larger of it and 0.1 % of the timeout): an engine thread waking for a
// frame due at a pacing or a resume time sent it that late, 0.6 KB of a 100G line a wake at
// D = 1000 (issue 48). Real-time threads have no slack.
class PreciseTimers {
 public:
  PreciseTimers();
  ~PreciseTimers();
  PreciseTimers(const PreciseTimers&) = delete;
  PreciseTimers& operator=(const PreciseTimers&) = delete;

 private:
  int64_t saved_ = -1;
};

}  // namespace rocelab::sys
