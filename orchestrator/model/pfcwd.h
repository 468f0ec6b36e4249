// The PFC watchdog of a switch queue (FAULTS.md; SONiC's orchagent pfcwd and its
// pfc_detect_*.lua / pfc_restore.lua), as a state machine fed one sample per poll: pure, so
// the agent runs it on live counters and tests on made-up ones.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace rocelab::model {

enum class WdAction { kDrop, kForward, kAlert };
std::string_view wd_action_name(WdAction a);
std::optional<WdAction> wd_action_named(std::string_view name);

// The watchdog's times, all in one unit (the agent: wall-clock ns, physical × D).
struct WdTiming {
  int64_t detection = 0, restoration = 0, poll = 0;
};

// A lossless queue as one poll reads it; the counts are cumulative.
struct WdSample {
  int64_t t = 0;               // when read
  bool holds_packets = false;  // the queue is not empty
  uint64_t tx_packets = 0;     // data packets the queue sent
  int64_t paused = 0;          // time received PFC has held the queue, a pause in force included
  uint64_t pfc_rx = 0;         // PFC frames received naming its priority
  uint64_t pfc_xon_rx = 0;     // of those, XONs (pause time 0): each ends a pause, XOFF -> XON
  bool paused_now = false;     // a received XOFF holds the queue as it is read
};

// Whether the poll from `prev` to `now` looks like a storm. The default is the current
// Mellanox rule (sonic-swss PR#3036): the queue holds packets, sent none, and was paused for
// more than 99 % of the poll. (The old rule, paused >= 80 %, fired on gray slow receivers.)
using WdPredicate = bool (*)(const WdSample& prev, const WdSample& now);
bool mellanox_storm(const WdSample& prev, const WdSample& now);
// Broadcom's (pfc_detect_broadcom.lua): PFC frames arrived this poll, none was an XON (no
// XOFF -> XON transition), and the queue was paused at this poll and the last. It reads
// no queue depth: a paused empty queue under a storm counts.
bool broadcom_storm(const WdSample& prev, const WdSample& now);
// By the name a scenario gives it (qos.pfc.watchdog.predicate): mellanox | broadcom.
std::optional<WdPredicate> wd_predicate_named(std::string_view name);

class WdQueue {
 public:
  enum class Event { kNone, kDetected, kRestored };
  WdQueue(WdTiming t, WdAction a, WdPredicate storm = mellanox_storm);
  // One poll. Detection counts down from the detection time by a poll for each poll the
  // predicate holds (any other poll starts it again) and declares the storm when no more
  // than one poll is left; restoration counts down from the restoration time while no PFC
  // frame arrives (one resets it). `alert` restores on the first poll the predicate fails.
  Event poll(const WdSample& now);
  bool stormed() const { return stormed_; }

 private:
  WdTiming t_;
  WdAction action_;
  WdPredicate storm_;
  std::optional<WdSample> prev_;
  bool stormed_ = false;
  int64_t left_ = 0;
};

}  // namespace rocelab::model
