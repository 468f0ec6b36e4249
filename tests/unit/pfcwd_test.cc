// The PFC watchdog's state machine (model/pfcwd.h) on made-up polls, and the scenario's
// qos.pfc.watchdog: SONiC's defaults, ranges and refusals.
#include <gtest/gtest.h>

#include "model/pfcwd.h"
#include "test_util.h"

namespace rocelab {
namespace {

using model::WdAction;
using model::WdQueue;
using model::WdSample;
using Ev = WdQueue::Event;

// A queue polled every `poll` ms; `storm(t)` says whether it is paused and stuck at time t.
struct Sim {
  WdQueue q;
  int64_t poll;
  WdSample s{};
  uint64_t rx_frames = 0;
  // One poll at time t (ms); while stuck the queue holds packets, sends none and is paused
  // the whole poll; `frames` PFC frames arrived since the last poll.
  Ev at(int64_t t, bool stuck, uint64_t frames) {
    const int64_t span = t - s.t;
    s.t = t;
    s.holds_packets = stuck || s.holds_packets;
    if (stuck) s.paused += span;
    else s.tx_packets += 10;
    rx_frames += frames;
    s.pfc_rx = rx_frames;
    return q.poll(s);
  }
};

TEST(PfcWatchdog, DetectsWithinOnePollOfTheDetectionTimeAndRestoresLikewise) {
  // Detection 200, restoration 400, poll 100: a storm from 1050 to 2050 (frames every 10).
  for (int64_t start : {1001, 1050, 1099}) {
    Sim sim{WdQueue({200, 400, 100}, WdAction::kDrop), 100};
    int64_t detected = -1, restored = -1;
    const int64_t end = start + 1000;
    for (int64_t t = 0; t <= 4000; t += 100) {
      // A poll sees a storm only if the queue was stuck the whole poll before it.
      const bool stuck = t - 100 >= start && t <= end;
      const uint64_t frames = t > start && t - 100 < end ? 10 : 0;
      const Ev e = sim.at(t, stuck, frames);
      if (e == Ev::kDetected) detected = t;
      if (e == Ev::kRestored) restored = t;
    }
    EXPECT_GT(detected - start, 200) << start;
    EXPECT_LE(detected - start, 300) << start;
    EXPECT_GT(restored - end, 400) << start;
    EXPECT_LE(restored - end, 500) << start;
  }
}

TEST(PfcWatchdog, ANonStormPollStartsDetectionAgain) {
  Sim sim{WdQueue({300, 300, 100}, WdAction::kDrop), 100};
  sim.at(0, false, 0);
  EXPECT_EQ(sim.at(100, true, 1), Ev::kNone);
  EXPECT_EQ(sim.at(200, true, 1), Ev::kNone);
  EXPECT_EQ(sim.at(300, false, 0), Ev::kNone);  // one poll sent something: from the start again
  EXPECT_EQ(sim.at(400, true, 1), Ev::kNone);
  EXPECT_EQ(sim.at(500, true, 1), Ev::kNone);
  EXPECT_EQ(sim.at(600, true, 1), Ev::kDetected);
  EXPECT_TRUE(sim.q.stormed());
}

TEST(PfcWatchdog, RestorationWaitsForQuietAndAlertRestoresOnTheFirstCleanPoll) {
  Sim drop{WdQueue({100, 200, 100}, WdAction::kDrop), 100};
  drop.at(0, false, 0);
  EXPECT_EQ(drop.at(100, true, 1), Ev::kDetected);
  EXPECT_EQ(drop.at(200, false, 1), Ev::kNone);  // dropping: frames still arrive
  EXPECT_EQ(drop.at(300, false, 0), Ev::kNone);
  EXPECT_EQ(drop.at(400, false, 1), Ev::kNone);  // a frame: the countdown starts over
  EXPECT_EQ(drop.at(500, false, 0), Ev::kNone);
  EXPECT_EQ(drop.at(600, false, 0), Ev::kRestored);
  Sim alert{WdQueue({100, 200, 100}, WdAction::kAlert), 100};
  alert.at(0, false, 0);
  EXPECT_EQ(alert.at(100, true, 1), Ev::kDetected);
  EXPECT_EQ(alert.at(200, true, 1), Ev::kNone);  // still paused and stuck: the storm goes on
  EXPECT_EQ(alert.at(300, false, 1), Ev::kRestored);
}

TEST(PfcWatchdog, TheDefaultPredicateWantsAStuckQueuePausedAlmostAllThePoll) {
  WdSample a{0, true, 5, 0, 0}, b{1000, true, 5, 995, 3};
  EXPECT_TRUE(model::mellanox_storm(a, b));
  b.paused = 990;  // 99 %, not more
  EXPECT_FALSE(model::mellanox_storm(a, b));
  b.paused = 995;
  b.tx_packets = 6;  // sent one
  EXPECT_FALSE(model::mellanox_storm(a, b));
  b.tx_packets = 5;
  b.holds_packets = false;  // nothing to send
  EXPECT_FALSE(model::mellanox_storm(a, b));
  // A gray receiver pausing 80 % of every poll: the old rule's false positive, not this one's.
  WdSample c{2000, true, 5, 995 + 800, 9};
  b.holds_packets = true;
  EXPECT_FALSE(model::mellanox_storm(b, c));
}

constexpr const char* kFabric = "name: wd\nscale: 10\nfabric: {type: leaf-spine, spines: 1, leaves: 2, hosts_per_leaf: 2}\n";

// Broadcom's rule reads PFC frames and pause state, not the queue: frames this poll, no XON
// among them, paused at this poll and the last.
TEST(PfcWatchdog, TheBroadcomPredicateWantsFramesWithoutXonAndAPauseAtBothPolls) {
  auto at = [](int64_t t, uint64_t rx, uint64_t xon, bool paused) {
    WdSample s;
    s.t = t, s.pfc_rx = rx, s.pfc_xon_rx = xon, s.paused_now = paused;
    return s;
  };
  EXPECT_TRUE(model::broadcom_storm(at(0, 10, 2, true), at(100, 20, 2, true)));
  EXPECT_FALSE(model::broadcom_storm(at(0, 10, 2, true), at(100, 20, 3, true)));   // an XON came
  EXPECT_FALSE(model::broadcom_storm(at(0, 10, 2, false), at(100, 20, 2, true)));  // not paused last poll
  EXPECT_FALSE(model::broadcom_storm(at(0, 10, 2, true), at(100, 10, 2, true)));   // no frame this poll
  EXPECT_FALSE(model::broadcom_storm(at(0, 10, 2, true), at(100, 20, 2, false)));  // released now
  // A gray receiver pauses and releases every poll: never stormed. A storm is, after 200.
  WdQueue gray({200, 400, 100}, WdAction::kDrop, model::broadcom_storm), storm = gray;
  uint64_t rx = 0, xon = 0;
  for (int64_t t = 0; t <= 1000; t += 100) {
    rx += 3, xon += 1;
    EXPECT_EQ(gray.poll(at(t, rx, xon, true)), Ev::kNone) << t;
  }
  Ev last = Ev::kNone;
  for (int64_t t = 0; t <= 200; t += 100) last = storm.poll(at(t, 5 * uint64_t(t), 0, true));
  EXPECT_EQ(last, Ev::kDetected);
  EXPECT_EQ(model::wd_predicate_named("broadcom"), model::broadcom_storm);
  EXPECT_EQ(model::wd_predicate_named("mellanox"), model::mellanox_storm);
  EXPECT_FALSE(model::wd_predicate_named("marvell"));
}

TEST(PfcWatchdogConfig, SonicDefaultsFillWhatIsUnset) {
  auto s = testing::must_load(std::string(kFabric) + "qos: {pfc: {watchdog: on}}\n");
  const auto& w = s.qos.pfc.watchdog;
  ASSERT_TRUE(w.enabled);
  EXPECT_EQ(w.detection->ns, 200'000'000);
  EXPECT_EQ(w.restoration->ns, 400'000'000);
  EXPECT_EQ(w.poll->ns, 200'000'000);
  EXPECT_EQ(w.action, WdAction::kDrop);
  EXPECT_EQ(w.predicate, "mellanox");
  EXPECT_EQ(testing::must_load(std::string(kFabric) + "qos: {pfc: {watchdog: {predicate: broadcom}}}\n")
                .qos.pfc.watchdog.predicate,
            "broadcom");
  auto t = testing::must_load(std::string(kFabric) + "qos: {pfc: {watchdog: {detection_time: 1s, action: alert}}}\n");
  EXPECT_EQ(t.qos.pfc.watchdog.restoration->ns, 2'000'000'000);
  EXPECT_EQ(t.qos.pfc.watchdog.action, WdAction::kAlert);
  EXPECT_FALSE(testing::must_load(kFabric).qos.pfc.watchdog.enabled);
}

TEST(PfcWatchdogConfig, BadSettingsAreRefusedWithSonicsRanges) {
  const std::pair<const char*, const char*> cases[] = {
      {"{detection_time: 50ms}", "100ms"},
      {"{detection_time: 6s}", "5s"},
      {"{restoration_time: 61s}", "60s"},
      {"{detection_time: 200ms, poll_interval: 300ms}", "poll_interval 300ms is longer than detection_time 200ms"},
      {"{action: shutdown}", "drop"},
      {"{predicate: marvell}", "broadcom"},
      {"{detect: 200ms}", "detect"},
      {"maybe", "on"},
  };
  for (const auto& [bad, why] : cases) {
    auto e = testing::errors_of(std::string(kFabric) + "qos: {pfc: {watchdog: " + bad + "}}\n");
    ASSERT_FALSE(e.empty()) << bad;
    EXPECT_NE(e[0].find(why), std::string::npos) << bad << ": " << e[0];
  }
  auto e = testing::errors_of(std::string(kFabric) + "qos: {profile: lossy, pfc: {watchdog: on}}\n");
  ASSERT_FALSE(e.empty());
  EXPECT_NE(e[0].find("no PFC priority"), std::string::npos) << e[0];
}

}  // namespace
}  // namespace rocelab
