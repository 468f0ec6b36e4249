#include "agent/cpu_watch.h"

namespace rocelab::agent {

CpuWatch::CpuWatch(uint64_t period_ns, uint64_t runtime_ns, uint64_t held_ns, size_t max)
    : period_(period_ns), held_limit_(held_ns), max_(max) {
  // No throttle (runtime unlimited or not below the period): nothing to keep under.
  const bool throttled = period_ns > 0 && runtime_ns > 0 && runtime_ns < period_ns;
  ceiling_ = throttled ? runtime_ns / 2 : 0;
  floor_ = throttled ? runtime_ns / 4 : 0;
}

CpuWatch::Step CpuWatch::sample(uint64_t now, uint64_t on_cpu_ns, uint64_t waiting_ns) {
  if (!started_) {
    started_ = true;
    on_cpu0_ = on_cpu_ = on_cpu_ns, waiting0_ = waiting_ = waiting_ns, last_t_ = now;
    window_.push_back({now, on_cpu_ns});
    return Step::kNone;
  }
  if (waiting_ns >= waiting_ && waiting_ns - waiting_ >= held_limit_) {
    if (held_.size() < max_) held_.push_back({now, waiting_ns - waiting_, now - last_t_});
    else ++held_dropped_;
  }
  on_cpu_ = std::max(on_cpu_, on_cpu_ns), waiting_ = std::max(waiting_, waiting_ns), last_t_ = now;
  window_.push_back({now, on_cpu_});
  while (window_.size() > 2 && now - window_[1].t >= period_) window_.pop_front();
  if (!ceiling_ || pinned_off_) return Step::kNone;
  // What it used over the last period (the oldest reading at most a period back, or the first).
  const uint64_t used = on_cpu_ - window_.front().cpu;
  if (realtime_ && used >= ceiling_) {
    realtime_ = false;
    steps_.push_back({now, false, used});
    return Step::kDown;
  }
  if (!realtime_ && used <= floor_) {
    realtime_ = true;
    steps_.push_back({now, true, used});
    return Step::kUp;
  }
  return Step::kNone;
}

}  // namespace rocelab::agent
