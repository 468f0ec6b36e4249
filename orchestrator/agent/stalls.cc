#include "agent/stalls.h"

#include <algorithm>

namespace rocelab::agent {

void StallLog::woke(uint64_t asleep, uint64_t woke) {
  current_ = kNone;
  if (woke < asleep || woke - asleep <= poll_ns_ + slack_ns_) return;
  if (log_.size() >= max_) {
    ++dropped_;
    return;
  }
  log_.push_back({woke, woke - asleep - poll_ns_, 0});
  current_ = log_.size() - 1;
}

void StallLog::delayed_since(uint64_t due) {
  if (current_ == kNone) return;
  fabric::AgentStall& s = log_[current_];
  const uint64_t d = due ? (due < s.t_ns ? std::min(s.t_ns - due, s.late_ns) : 0) : s.late_ns;
  s.delayed_ns = std::max(s.delayed_ns, d);
}

}  // namespace rocelab::agent
