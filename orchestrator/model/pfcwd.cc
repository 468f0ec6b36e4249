#include "model/pfcwd.h"

namespace rocelab::model {

std::string_view wd_action_name(WdAction a) {
  switch (a) {
    case WdAction::kDrop: return "drop";
    case WdAction::kForward: return "forward";
    case WdAction::kAlert: return "alert";
  }
  return "?";
}

std::optional<WdAction> wd_action_named(std::string_view name) {
  for (WdAction a : {WdAction::kDrop, WdAction::kForward, WdAction::kAlert})
    if (wd_action_name(a) == name) return a;
  return std::nullopt;
}

bool mellanox_storm(const WdSample& prev, const WdSample& now) {
  const int64_t span = now.t - prev.t;
  return span > 0 && now.holds_packets && now.tx_packets == prev.tx_packets &&
         double(now.paused - prev.paused) > 0.99 * double(span);
}

bool broadcom_storm(const WdSample& prev, const WdSample& now) {
  return now.t > prev.t && now.pfc_rx > prev.pfc_rx && now.pfc_xon_rx == prev.pfc_xon_rx && prev.paused_now &&
         now.paused_now;
}

std::optional<WdPredicate> wd_predicate_named(std::string_view name) {
  if (name == "mellanox") return mellanox_storm;
  if (name == "broadcom") return broadcom_storm;
  return std::nullopt;
}

WdQueue::WdQueue(WdTiming t, WdAction a, WdPredicate storm) : t_(t), action_(a), storm_(storm), left_(t.detection) {}

WdQueue::Event WdQueue::poll(const WdSample& now) {
  const std::optional<WdSample> prev = prev_;
  prev_ = now;
  if (!prev) return Event::kNone;  // the first poll only takes the counts
  if (!stormed_) {
    if (!storm_(*prev, now)) {
      left_ = t_.detection;
      return Event::kNone;
    }
    if (left_ > t_.poll) {
      left_ -= t_.poll;
      return Event::kNone;
    }
    stormed_ = true;
    left_ = t_.restoration;
    return Event::kDetected;
  }
  if (action_ == WdAction::kAlert) {
    if (storm_(*prev, now)) return Event::kNone;
  } else if (now.pfc_rx != prev->pfc_rx) {
    left_ = t_.restoration;
    return Event::kNone;
  } else if (left_ > t_.poll) {
    left_ -= t_.poll;
    return Event::kNone;
  }
  stormed_ = false;
  left_ = t_.detection;
  return Event::kRestored;
}

}  // namespace rocelab::model
