// Time for everything that waits on a schedule (the transport, DCQCN, the fault timeline):
// the real runs use the monotonic clock, unit tests a fake one they advance by hand, so
// every timer-driven step is reproducible without root or real time.
#pragma once

#include <cstdint>
#include <ctime>

namespace rocelab::sys {

using Nanos = int64_t;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Nanos now() const = 0;
};

// A NIC priority's pause clock as the fabric keeps it (rl_counters.paused_*), on
// CLOCK_MONOTONIC: `since` and `arrived` are 0 while no received XOFF holds it.
struct PauseReading {
  Nanos since = 0;    // the pause in force took hold (the sender's queue stopped)
  Nanos arrived = 0;  // the XOFF that began it reached the NIC (before `since`: the reaction)
  Nanos total = 0;    // how long the pauses that ended held it
  Nanos xon = 0;      // the last XON reached the NIC (0: none yet): a pause it ended ended then
  bool on() const { return since != 0; }
};

class MonotonicClock final : public Clock {
 public:
  Nanos now() const override {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return Nanos(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }
};

class FakeClock final : public Clock {
 public:
  explicit FakeClock(Nanos start = 0) : now_(start) {}
  Nanos now() const override { return now_; }
  void set(Nanos t) { now_ = t; }
  void advance(Nanos d) { now_ += d; }

 private:
  Nanos now_;
};

}  // namespace rocelab::sys
