// The agent's parts that need no root and no fabric (agent/cpu_watch.h, pauses.h, stalls.h,
// storms.h, watchdog.h): each driven by made-up times, frames and samples, as the PFC loop drives it.
#include <gtest/gtest.h>

#include "agent/cpu_watch.h"
#include "agent/pauses.h"
#include "agent/stalls.h"
#include "agent/storms.h"
#include "agent/watchdog.h"

namespace rocelab::agent {
namespace {

TEST(AgentCpu, TheLoopLeavesRealTimeNearHalfTheKernelsRuntimeAndTakesItAgainAtAQuarter) {
  const uint64_t ms = 1'000'000;
  CpuWatch w(1000 * ms, 950 * ms, ms / 5, 10);  // the kernel's defaults: 950 ms of each second
  uint64_t t = 0, cpu = 0;
  EXPECT_EQ(w.sample(t, cpu, 0), CpuWatch::Step::kNone);
  // 60 % of a CPU (the fabric's softirq work charged to the loop): half of 950 ms within the
  // second is reached after ~792 ms, never the kernel's 950.
  uint64_t down_at = 0;
  while (t < 2000 * ms && !down_at) {
    t += 5 * ms, cpu += 3 * ms;
    if (w.sample(t, cpu, 0) == CpuWatch::Step::kDown) down_at = t;
  }
  EXPECT_GE(down_at, 790 * ms);
  EXPECT_LE(down_at, 800 * ms);
  EXPECT_FALSE(w.realtime());
  // Idle from then on: back up once the last second used 237.5 ms or less.
  uint64_t up_at = 0;
  while (t < 4000 * ms && !up_at)
    if (t += 5 * ms; w.sample(t, cpu, 0) == CpuWatch::Step::kUp) up_at = t;
  EXPECT_GT(up_at, down_at + 400 * ms);
  EXPECT_LE(up_at, down_at + 1000 * ms);
  ASSERT_EQ(w.steps().size(), 2u);
  EXPECT_FALSE(w.steps()[0].up);
  EXPECT_GE(w.steps()[0].used_ns, 475 * ms);
  EXPECT_TRUE(w.steps()[1].up);
  EXPECT_EQ(w.on_cpu_ns(), cpu);
}

TEST(AgentCpu, TheSchedulersWaitsPastTheLimitAreLoggedAndNoRuntimeLimitMeansNoStep) {
  const uint64_t ms = 1'000'000;
  CpuWatch w(1000 * ms, 0, ms / 5, 2);  // sched_rt_runtime_us -1: unlimited
  w.sample(0, 0, 1000);
  w.sample(5 * ms, 5 * ms, 1000 + ms / 10);  // 100 us waiting: not logged
  w.sample(10 * ms, 10 * ms, 1000 + ms / 10 + 50 * ms);  // an RT throttle's 50 ms
  ASSERT_EQ(w.held().size(), 1u);
  EXPECT_EQ(w.held()[0].t_ns, 10 * ms);
  EXPECT_EQ(w.held()[0].wait_ns, 50 * ms);
  EXPECT_EQ(w.held()[0].span_ns, 5 * ms);
  EXPECT_EQ(w.waiting_ns(), ms / 10 + 50 * ms);
  uint64_t waited = 1000 + ms / 10 + 50 * ms;
  for (uint64_t t = 15 * ms; t < 3000 * ms; t += 5 * ms)  // a CPU's whole time, and 1 ms waiting each
    EXPECT_EQ(w.sample(t, t, waited += ms), CpuWatch::Step::kNone);
  EXPECT_EQ(w.held().size(), 2u);  // the log's room; the rest counted
  EXPECT_GT(w.held_dropped(), 0u);
  EXPECT_TRUE(w.steps().empty());
}

TEST(AgentStalls, AWakePastThePollAndItsSlackIsAStallAndPfcWorkSaysHowLongItWaited) {
  StallLog log(1000, 200, 3);
  log.woke(0, 1200);  // within the slack: no stall
  log.delayed_since(0);
  EXPECT_TRUE(log.stalls().empty());
  log.woke(10'000, 15'000);  // 4000 past the poll
  ASSERT_EQ(log.stalls().size(), 1u);
  EXPECT_EQ(log.stalls()[0].t_ns, 15'000u);
  EXPECT_EQ(log.stalls()[0].late_ns, 4000u);
  EXPECT_EQ(log.stalls()[0].delayed_ns, 0u);
  log.delayed_since(14'000);  // a frame that arrived 1000 before the wake
  EXPECT_EQ(log.stalls()[0].delayed_ns, 1000u);
  log.delayed_since(2'000);  // one due long before the stall began: the stall's length at most
  EXPECT_EQ(log.stalls()[0].delayed_ns, 4000u);
  log.turn_done();
  log.woke(20'000, 25'000);
  log.delayed_since(26'000);  // due after the wake: the stall did not delay it
  EXPECT_EQ(log.stalls()[1].delayed_ns, 0u);
  log.delayed_since(0);  // when it fell due is unknown: all of the stall
  EXPECT_EQ(log.stalls()[1].delayed_ns, 4000u);
  log.turn_done();
  log.delayed_since(0);  // a later turn: no stall of its own
  EXPECT_EQ(log.stalls()[1].delayed_ns, 4000u);
  log.woke(30'000, 35'000);
  log.woke(40'000, 45'000);  // past the log's three: counted, not kept
  log.delayed_since(0);
  EXPECT_EQ(log.stalls().size(), 3u);
  EXPECT_EQ(log.dropped(), 1u);
  EXPECT_EQ(log.stalls()[2].delayed_ns, 0u) << "a dropped stall's delay lands on no other";
}

TEST(AgentStorms, EachStormSendsOnItsScheduleCatchesUpBoundedAndStopsWithItsCount) {
  StormSchedule s;
  fabric::StormSpec a{1, 0x08, 0xffff, 100, 0}, b{2, 0x08, 0xffff, 1000, 3};
  std::vector<uint32_t> sent;
  auto send = [&](const fabric::StormSpec& spec) { return sent.push_back(spec.slot), true; };
  EXPECT_EQ(s.start(a, 0), 1u);
  EXPECT_EQ(s.start(b, 0), 2u);
  EXPECT_EQ(s.run(350, send), 4u + 1u);  // a at 0, 100, 200, 300; b at 0
  EXPECT_EQ(std::count(sent.begin(), sent.end(), 1u), 4);
  EXPECT_EQ(s.run(399, send), 0u);
  EXPECT_EQ(s.run(10'000, send), 64u + 3u - 1u) << "a late loop sends at most 64 of a storm's, b stops at its 3";
  EXPECT_EQ(s.run(10'050, send), 0u) << "past the catch-up the schedule moved on: next at now + interval";
  EXPECT_EQ(s.run(10'100, send), 1u);
  auto refuse = [](const fabric::StormSpec&) { return false; };
  EXPECT_EQ(s.run(20'000, refuse), 0u) << "a frame not sent waits for the next turn";
  EXPECT_EQ(s.stop(2), 3u);
  EXPECT_EQ(s.stop(0), 4u + 64u + 1u);
  EXPECT_EQ(s.run(30'000, send), 0u);
}

TEST(AgentPauses, XoffPausesOrRefreshesXonResumesAndTimeRunsOutAtTheQuanta) {
  PauseBook book;
  const uint32_t k = 7;
  // 65535 quanta at 100 Gbit/s / 1000 (quantum 5120 ns = 5'120'000 ps): 335.5 ms.
  EXPECT_EQ(book.frame(k, 65535, 5'120'000, 1000), PauseBook::Ask::kPause);
  EXPECT_FALSE(book.on(k)) << "not in force until the caller says it took hold";
  book.took_hold(k, 1500);
  EXPECT_TRUE(book.on(k));
  EXPECT_EQ(book.records().at(k).until_ns, 1000u + 65535ull * 5'120'000 / 1000);
  EXPECT_EQ(book.frame(k, 10, 5'120'000, 2000), PauseBook::Ask::kRefresh);
  EXPECT_EQ(book.records().at(k).until_ns, 2000u + 51'200u) << "a refresh sets the pause's end anew";
  EXPECT_TRUE(book.expired(53'199).empty());
  ASSERT_EQ(book.expired(53'200).size(), 1u);
  EXPECT_EQ(book.expired(53'200)[0], std::make_pair(k, uint64_t{53'200}));
  EXPECT_EQ(book.paused_ns(k, 3'500), 2'000u) << "a pause in force counts up to now";
  EXPECT_EQ(book.ended(k, 53'500), 52'000u);
  EXPECT_FALSE(book.on(k));
  EXPECT_TRUE(book.expired(100'000).empty());
  EXPECT_EQ(book.frame(k, 0, 5'120'000, 60'000), PauseBook::Ask::kResume);
  EXPECT_EQ(book.ended(k, 60'000), 52'000u) << "XON with no pause in force adds nothing";
  book.took_hold(k, 70'000);
  book.took_hold(k, 80'000);  // taking hold twice is one pause, from the first
  EXPECT_EQ(book.ended(k, 71'000), 53'000u);
  EXPECT_EQ(book.records().at(k).count, 2u);
}

model::WdSample quiet(uint64_t tx) {
  model::WdSample s;
  s.tx_packets = tx;
  return s;
}

TEST(AgentWatchdog, EachNodePollsOnItsOwnTimerAndAStormsCountsRunFromItsStart) {
  std::string why;
  fabric::AgentWatchdog cfg{true, 200, 200, 100, "bogus", "mellanox"};
  EXPECT_FALSE(Watchdog::make(cfg, {}, why));
  EXPECT_NE(why.find("bogus"), std::string::npos);
  cfg.action = "drop";
  auto wd = Watchdog::make(cfg, {100, 150}, why);
  ASSERT_TRUE(wd) << why;
  wd->watch(10, 0);
  wd->watch(20, 1);
  std::vector<uint32_t> polled;
  auto sample = [&](uint32_t k) { return polled.push_back(k), quiet(0); };
  auto none = [](uint32_t, bool) { FAIL() << "a quiet queue is no storm"; };
  wd->poll(120, sample, none);
  wd->poll(130, sample, none);
  wd->poll(160, sample, none);
  wd->poll(210, sample, none);
  EXPECT_EQ(polled, (std::vector<uint32_t>{10, 20, 10})) << "node 0 at 100, 200; node 1 at 150";

  EXPECT_FALSE(wd->ignoring(10));
  wd->detected(10, {100, 5, 40, 0});
  EXPECT_TRUE(wd->ignoring(10)) << "drop: PFC on the stormed queue is not honoured";
  auto f = wd->figures(10, {130, 25, 50, 2});  // the storm in force, up to now
  EXPECT_EQ(f.detected, 1u);
  EXPECT_EQ(f.tx_ok, 30u);
  EXPECT_EQ(f.tx_drop, 20u);
  EXPECT_EQ(f.last_rx_ok, 10u);
  EXPECT_EQ(f.rx_drop, 2u);
  wd->restored(10, {150, 45, 60, 3});
  EXPECT_FALSE(wd->ignoring(10));
  wd->detected(10, {200, 45, 60, 3});
  wd->restored(10, {210, 46, 60, 3});
  f = wd->figures(10, {999, 999, 999, 999});  // no storm in force: now's counts are not used
  EXPECT_EQ(f.restored, 2u);
  EXPECT_EQ(f.tx_ok, 50u + 10u);
  EXPECT_EQ(f.tx_drop, 40u + 1u);
  EXPECT_EQ(f.last_tx_ok, 10u);

  cfg.action = "alert";
  auto alert = Watchdog::make(cfg, {0}, why);
  ASSERT_TRUE(alert);
  alert->watch(1, 0);
  alert->detected(1, {});
  EXPECT_FALSE(alert->ignoring(1)) << "alert only reports: PFC is still honoured";
}

}  // namespace
}  // namespace rocelab::agent
