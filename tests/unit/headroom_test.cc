// PFC headroom arithmetic (bpf/headroom.h), against figures worked by hand.
#include <gtest/gtest.h>

#include "bpf/headroom.h"

using namespace rocelab::bpf;

namespace {

// 100 Mbit/s for 50 ms carries 625,000 bytes; 2 x MTU 4200 adds 8,400.
TEST(Headroom, IsThePhysicalPartPlusWhatTheRateCarriesDuringTheBudget) {
  EXPECT_EQ(port_headroom({100'000'000, 8400}, 50'000'000), 633'400u);
  EXPECT_EQ(port_headroom({100'000'000, 8400}, 0), 8'400u);
  EXPECT_EQ(port_headroom({400'000'000, 9000}, 2'000'000), 109'000u);
}

// A leaf with three 100 Mbit/s host ports and one 400 Mbit/s uplink, XOFF 128 KB, budget
// 10 ms: host ports 8,400 + 125,000 = 133,400; the uplink 8,400 + 500,000 = 508,400.
TEST(Headroom, EachQueueHoldsXoffPlusTheOtherPortsHeadroom) {
  std::vector<HeadroomPort> ports = {{100'000'000, 8400}, {100'000'000, 8400}, {100'000'000, 8400}, {400'000'000, 8400}};
  auto h = node_headroom(ports, 131072, 0, 10'000'000, false);
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0].headroom, 133'400u);
  EXPECT_EQ(h[3].headroom, 508'400u);
  EXPECT_EQ(h[0].lossless_limit, 131072u + 133'400u * 2 + 508'400u);
  EXPECT_EQ(h[3].lossless_limit, 131072u + 133'400u * 3);
  EXPECT_EQ(h[0].base, 8400u);
  EXPECT_EQ(h[0].budget_us, 10'000u);
  // An 800 kB buffer caps the queues that would need more (906,272 for the host ports).
  auto capped = node_headroom(ports, 131072, 800'000, 10'000'000, false);
  EXPECT_EQ(capped[0].lossless_limit, 800'000u);
  EXPECT_EQ(capped[3].lossless_limit, 131072u + 133'400u * 3);
  // A single port's packets never return through it: it has only its own headroom.
  auto one = node_headroom({{100'000'000, 8400}}, 131072, 0, 10'000'000, false);
  EXPECT_EQ(one[0].lossless_limit, 131072u + 133'400u);
}

// Per ingress (the default): a port's PG holds XOFF, then what its own port still delivers.
TEST(Headroom, EachPriorityGroupHoldsXoffPlusItsOwnPortsHeadroom) {
  std::vector<HeadroomPort> ports = {{100'000'000, 8400}, {400'000'000, 8400}};
  auto h = node_headroom(ports, 131072, 0, 10'000'000, true);
  EXPECT_EQ(h[0].lossless_limit, 131072u + 133'400u);
  EXPECT_EQ(h[1].lossless_limit, 131072u + 508'400u);
  auto capped = node_headroom(ports, 131072, 400'000, 10'000'000, true);
  EXPECT_EQ(capped[0].lossless_limit, 131072u + 133'400u);
  EXPECT_EQ(capped[1].lossless_limit, 400'000u);
}

}  // namespace

// One queue key for BPF and C++ (rocelab_abi.h): every (slot, priority) of a large fabric
// gets its own index, in the counter array's order (slot-major, priorities contiguous), and
// the key gives both back.
TEST(QueueKey, IsOneIndexPerQueueInTheCounterArraysOrder) {
  uint32_t expect = 0;
  for (uint32_t slot = 0; slot < 4096; ++slot)
    for (uint32_t prio = 0; prio < RL_NUM_PRIO; ++prio, ++expect) {
      const uint32_t k = rl_queue_key(slot, prio);
      ASSERT_EQ(k, expect);
      ASSERT_EQ(rl_queue_slot(k), slot);
      ASSERT_EQ(rl_queue_prio(k), prio);
    }
  EXPECT_EQ(rl_queue_key(3, 8 + 5), rl_queue_key(3, 5));  // the PCP's three bits
}

// rl_line_dequeue (rocelab_abi.h, run in pause_watch at every dequeue of a port): a port at
// 100 Mbit/s of wall clock (a quantum of 512 bit-times is 5.12 us: 80 ns a byte), frames of
// 4214 B (337.12 us each), the figures worked by hand.
namespace line {
constexpr uint64_t kQuantumPs = 5'120'000, kFrame = 4214, kFrameNs = kFrame * 80;

// n back-to-back frames from t0, the i-th `extra(i)` ns late; the last leaves nothing behind.
template <class Extra>
rl_line_state run(int n, Extra extra, uint64_t t0 = 1'000'000'000) {
  rl_line_state s{};
  for (int i = 0; i < n; ++i)
    rl_line_dequeue(&s, t0 + uint64_t(i) * kFrameNs + extra(i), kFrame, i + 1 < n ? 3 * kFrame : 0, kQuantumPs, 0);
  return s;
}
}  // namespace line

TEST(LineState, ALineOnTimeLosesNothing) {
  const rl_line_state s = line::run(100, [](int) { return 0; });
  EXPECT_EQ(s.runs, 1u);
  EXPECT_EQ(s.lost_ns, 0u);
  EXPECT_EQ(s.run_start_ns, 0u) << "the run ended with the queue";
}

TEST(LineState, ATimerLatePastTheBucketLosesTheRestForGood) {
  // From the 50th frame on, 2 ms late: the run lost 2 ms less two frames (674.24 us).
  const rl_line_state s = line::run(100, [](int i) { return i >= 50 ? 2'000'000 : 0; });
  EXPECT_EQ(s.runs, 1u);
  EXPECT_EQ(s.lost_ns, 2'000'000u - 2 * line::kFrameNs);
  EXPECT_EQ(s.longest_ns, s.lost_ns);
  EXPECT_EQ(s.gap_ns, line::kFrameNs + 2'000'000u) << "the one wait, the 50th frame's own time with it";
  EXPECT_EQ(s.gap_at_ns, 1'000'000'000u + 49 * line::kFrameNs) << "from the 49th frame";
}

TEST(LineState, TheLongestStallIsNamedApartFromTheRunsSum) {
  // One backlog of 100 frames (a bottleneck never paused: one run for the phase), held
  // 1.5 ms before the 31st frame and 2 ms before the 71st: the run lost both (3.5 ms less
  // its slack of two frames), and the one stall to name is the second, where it began.
  const uint64_t t0 = 1'000'000'000;
  const rl_line_state s = line::run(100, [](int i) { return i >= 70 ? 3'500'000 : i >= 30 ? 1'500'000 : 0; }, t0);
  EXPECT_EQ(s.runs, 1u);
  EXPECT_EQ(s.lost_ns, 3'500'000u - 2 * line::kFrameNs);
  EXPECT_EQ(s.gap_ns, line::kFrameNs + 2'000'000u);
  EXPECT_EQ(s.gap_at_ns, t0 + 69 * line::kFrameNs + 1'500'000u);
  // A later run with a shorter stall does not move it.
  rl_line_state t = s;
  for (int i = 0; i < 10; ++i)
    rl_line_dequeue(&t, 2 * t0 + uint64_t(i) * line::kFrameNs + (i == 9 ? 1'000'000 : 0), line::kFrame,
                    i < 9 ? 3 * line::kFrame : 0, line::kQuantumPs, 0);
  EXPECT_EQ(t.runs, 2u);
  EXPECT_EQ(t.gap_ns, s.gap_ns);
  EXPECT_EQ(t.gap_at_ns, s.gap_at_ns);
}

TEST(LineState, LatenessTheBucketMakesUpIsNotCounted) {
  // One frame 300 us late, the next on its time again (the bucket sends it at once).
  EXPECT_EQ(line::run(100, [](int i) { return i == 40 ? 300'000 : 0; }).lost_ns, 0u);
  // Late by less than two frames at the end: within the slack.
  EXPECT_EQ(line::run(100, [](int i) { return i >= 90 ? 600'000 : 0; }).lost_ns, 0u);
}

TEST(LineState, AnEmptyQueuePausedPriorityOrCarrierLossIsNoLoss) {
  rl_line_state s{};
  // Idle between packets (nothing left behind): no run, whatever the gaps.
  for (uint64_t i = 0; i < 10; ++i) rl_line_dequeue(&s, i * 50'000'000, line::kFrame, 0, line::kQuantumPs, 0);
  EXPECT_EQ(s.runs, 0u);
  // A run, then a pause takes effect (the agent's bit): the run ends there; 5 ms paused with
  // packets held; after the resume a new run, on time.
  uint64_t t = 1'000'000'000;
  for (int i = 0; i < 10; ++i, t += line::kFrameNs) rl_line_dequeue(&s, t, line::kFrame, 3 * line::kFrame, line::kQuantumPs, 0);
  s.paused_mask = 1u << 3;
  rl_line_dequeue(&s, t, line::kFrame, 3 * line::kFrame, line::kQuantumPs, 0);  // the pause's one frame
  EXPECT_EQ(s.runs, 1u);
  t += 5'000'000;
  s.paused_mask = 0;
  for (int i = 0; i < 10; ++i, t += line::kFrameNs) rl_line_dequeue(&s, t, line::kFrame, i < 9 ? 3 * line::kFrame : 0, line::kQuantumPs, 0);
  EXPECT_EQ(s.runs, 2u);
  EXPECT_EQ(s.lost_ns, 0u);
  // A pause that begins and ends between two dequeues of a run (nothing left in between):
  // the agent counted both changes, so the run does not take the pause's 3 ms as lost.
  for (int i = 0; i < 5; ++i, t += line::kFrameNs) rl_line_dequeue(&s, t, line::kFrame, 3 * line::kFrame, line::kQuantumPs, 0);
  s.pause_changes += 2;
  t += 3'000'000;
  rl_line_dequeue(&s, t, line::kFrame, 0, line::kQuantumPs, 0);
  EXPECT_EQ(s.lost_ns, 0u);
  // A run across a link fault: the carrier went down (its count moved) and the queue with it.
  rl_line_dequeue(&s, t, line::kFrame, 3 * line::kFrame, line::kQuantumPs, 7);
  rl_line_dequeue(&s, t + 1'000'000'000, line::kFrame, 0, line::kQuantumPs, 8);
  EXPECT_EQ(s.lost_ns, 0u);
}

// rl_hold_switch (rocelab_abi.h, run in pause_watch at every context switch): a stretch is
// kept when the task leaving is another program's and ran RL_HOLD_MIN_NS or more since the
// CPU's last switch; the ring keeps the last RL_HOLD_RING.
TEST(CpuHolds, AnotherProgramsLongStretchIsKeptWithItsNameAndOursNever) {
  static rl_cpu_holds h{};  // 56 KB: not on the stack
  const char other[16] = "tokio-rt-worker", ours[16] = "rocelab";
  rl_hold_switch(&h, 1'000'000, 0, 0, ours, 7, 0, 0, 0);  // the first switch seen: nothing before it to time
  EXPECT_EQ(h.next, 0u);
  rl_hold_switch(&h, 3'000'000, 0, 0, ours, 7, 0, 0, 0);  // ours, 2 ms: not kept
  rl_hold_switch(&h, 3'450'000, 0, 0, other, 1, 1, 0, 0);  // another's, 450 us: below RL_HOLD_MIN_NS
  EXPECT_EQ(h.next, 0u);
  rl_hold_switch(&h, 5'450'000, 0, 1, other, 1, 1, 0, 0);  // another's, 2 ms: kept
  ASSERT_EQ(h.next, 1u);
  EXPECT_EQ(h.ring[0].start_ns, 3'450'000u);
  EXPECT_EQ(h.ring[0].dur_ns, 2'000'000u);
  EXPECT_EQ(h.ring[0].steal_ns, 0u);
  EXPECT_EQ(h.ring[0].tgid, 1u);
  EXPECT_EQ(h.ring[0].cpu, 1u);
  EXPECT_EQ(h.ring[0].kind, uint32_t(RL_HOLD_OTHER));
  EXPECT_STREQ(h.ring[0].comm, "tokio-rt-worker");
  uint64_t t = 5'450'000;
  for (int i = 0; i < RL_HOLD_RING + 3; ++i) rl_hold_switch(&h, t += RL_HOLD_MIN_NS + uint64_t(i), 0, 0, other, 2, 1, 0, 0);
  EXPECT_EQ(h.next, 1u + RL_HOLD_RING + 3);
  EXPECT_EQ(h.ring[(h.next - 1) % RL_HOLD_RING].dur_ns, RL_HOLD_MIN_NS + RL_HOLD_RING + 2);  // the last, where it wrapped
}

TEST(CpuHolds, ARunOfSoftirqWorkIsKeptAndStretchedWhileItLasts) {
  static rl_cpu_holds h{};
  rl_softirq_entry(&h, 1'000'000);
  rl_softirq_exit(&h, 1'300'000, 1);  // 0.3 ms: not yet
  EXPECT_EQ(h.next, 0u);
  rl_softirq_entry(&h, 1'302'000);  // 2 us later: the same run
  rl_softirq_exit(&h, 1'600'000, 1);
  ASSERT_EQ(h.next, 1u);
  EXPECT_EQ(h.ring[0].start_ns, 1'000'000u);
  EXPECT_EQ(h.ring[0].dur_ns, 600'000u);
  EXPECT_EQ(h.ring[0].kind, uint32_t(RL_HOLD_SOFTIRQ));
  EXPECT_EQ(h.ring[0].cpu, 1u);
  EXPECT_STREQ(h.ring[0].comm, "softirq");
  rl_softirq_entry(&h, 1'601'000);
  rl_softirq_exit(&h, 3'100'000, 1);  // the run goes on: its record stretched, none added
  EXPECT_EQ(h.next, 1u);
  EXPECT_EQ(h.ring[0].dur_ns, 2'100'000u);
  rl_softirq_entry(&h, 3'200'000);  // 100 us later: a new run, short
  rl_softirq_exit(&h, 3'250'000, 1);
  EXPECT_EQ(h.next, 1u);
  EXPECT_EQ(h.ring[0].dur_ns, 2'100'000u);
}

TEST(CpuHolds, AStretchTheHypervisorTookIsKeptWhateverRan) {
  static rl_cpu_holds h{};
  const char idle[16] = "swapper/0", ours[16] = "rocelab";
  rl_hold_switch(&h, 1'000'000, 7'000'000, 0, ours, 7, 0, 0, 0);
  rl_hold_switch(&h, 1'800'000, 7'499'999, 0, ours, 7, 0, 0, 0);  // ours, 0.8 ms, 0.5 ms less 1 ns stolen: not kept
  EXPECT_EQ(h.next, 0u);
  rl_hold_switch(&h, 11'800'000, 16'499'999, 0, idle, 0, 0, 0, 0);  // idle, 10 ms, 9 ms of it stolen: kept
  ASSERT_EQ(h.next, 1u);
  EXPECT_EQ(h.ring[0].start_ns, 1'800'000u);
  EXPECT_EQ(h.ring[0].dur_ns, 10'000'000u);
  EXPECT_EQ(h.ring[0].steal_ns, 9'000'000u);
  EXPECT_EQ(h.ring[0].tgid, 0u);
  EXPECT_EQ(h.ring[0].kind, uint32_t(RL_HOLD_TASK));
  EXPECT_STREQ(h.ring[0].comm, "swapper/0");
  // A steal clock brought up to date late (at a tick) may count more than the stretch: the
  // stretch's length at most.
  rl_hold_switch(&h, 12'800'000, 19'499'999, 0, ours, 7, 0, 0, 0);
  ASSERT_EQ(h.next, 2u);
  EXPECT_EQ(h.ring[1].steal_ns, 1'000'000u);
}

// The switch to the PFC loop, woken `loop_woke`: what ran since it woke is kept when that was
// RL_HOLD_MIN_NS or more and not another program's (that one is kept as such), whoever it
// was: ours, the kernel's thread or idle.
// A kworker's stretch names the longest work item it ran, kept for that alone from 0.5 ms
// (a namespace's teardown held the loop's CPU for up to 40 ms here); an item a switch
// interrupts is the leaving task's, never the next one's.
TEST(CpuHolds, TheLongestWorkItemOfAStretchIsKept) {
  static rl_cpu_holds h{};
  const char kworker[16] = "kworker/1:3", ours[16] = "rocelab";
  rl_hold_switch(&h, 1'000'000, 0, 1, ours, 7, 0, 0, 0);
  rl_work_start(&h, 1'100'000, 0xaaa);
  rl_work_end(&h, 1'300'000);  // 0.2 ms
  rl_work_start(&h, 1'300'000, 0xbbb);
  rl_work_end(&h, 2'000'000);  // 0.7 ms: the longest
  rl_work_start(&h, 2'000'000, 0xccc);
  rl_work_end(&h, 2'100'000);
  rl_hold_switch(&h, 2'200'000, 0, 1, kworker, 50, 0, RL_HOLD_F_KTHREAD, 0);  // 1.2 ms, not another's
  ASSERT_EQ(h.next, 1u);
  EXPECT_EQ(h.ring[0].kind, uint32_t(RL_HOLD_TASK));
  EXPECT_EQ(h.ring[0].work_fn, 0xbbbu);
  EXPECT_EQ(h.ring[0].work_ns, 700'000u);
  // short items only: not kept
  rl_work_start(&h, 2'300'000, 0xaaa);
  rl_work_end(&h, 2'700'000);
  rl_hold_switch(&h, 3'000'000, 0, 1, kworker, 50, 0, RL_HOLD_F_KTHREAD, 0);
  EXPECT_EQ(h.next, 1u);
  // an item still running at the switch: timed so far, and not carried into the next stretch
  rl_work_start(&h, 3'100'000, 0xddd);
  rl_hold_switch(&h, 4'000'000, 0, 1, kworker, 50, 0, RL_HOLD_F_KTHREAD, 0);
  ASSERT_EQ(h.next, 2u);
  EXPECT_EQ(h.ring[1].work_fn, 0xdddu);
  EXPECT_EQ(h.ring[1].work_ns, 900'000u);
  rl_work_end(&h, 5'000'000);  // its end, seen in the next task's stretch: not its
  rl_hold_switch(&h, 5'000'000, 0, 1, ours, 7, 0, 0, 0);
  EXPECT_EQ(h.next, 2u);
}

TEST(CpuHolds, WhatRanWhileTheWokenLoopWaitedIsKept) {
  static rl_cpu_holds h{};
  const char ours[16] = "rocelab", kthread[16] = "kworker/1:2", other[16] = "cc1plus";
  rl_hold_switch(&h, 1'000'000, 0, 1, ours, 7, 0, 0, 0);
  // ours for 3 ms, the loop woken 0.4 ms before its end: not kept (a wait of 0.4 ms)
  rl_hold_switch(&h, 4'000'000, 0, 1, ours, 7, 0, 0, 3'600'000);
  EXPECT_EQ(h.next, 0u);
  // the kernel's thread for 3 ms, the loop woken 0.5 ms before its end: kept, flagged
  rl_hold_switch(&h, 7'000'000, 0, 1, kthread, 90, 0, RL_HOLD_F_KTHREAD, 6'500'000);
  ASSERT_EQ(h.next, 1u);
  EXPECT_EQ(h.ring[0].start_ns, 4'000'000u);
  EXPECT_EQ(h.ring[0].dur_ns, 3'000'000u);
  EXPECT_EQ(h.ring[0].kind, uint32_t(RL_HOLD_LOOP));
  EXPECT_EQ(h.ring[0].flags, RL_HOLD_F_KTHREAD);
  EXPECT_EQ(h.ring[0].tgid, 90u);
  EXPECT_STREQ(h.ring[0].comm, "kworker/1:2");
  EXPECT_EQ(h.ring[0].waited_ns, 500'000u);  // the loop's wait: from its wake-up to the switch
  // woken before the stretch began (the switch at 7 ms went to ours, not to the loop woken at
  // 6.9 ms): the whole stretch counts
  rl_hold_switch(&h, 7'600'000, 0, 1, ours, 7, 0, 0, 6'900'000);
  ASSERT_EQ(h.next, 2u);
  EXPECT_EQ(h.ring[1].kind, uint32_t(RL_HOLD_LOOP));
  EXPECT_EQ(h.ring[1].dur_ns, 600'000u);
  EXPECT_EQ(h.ring[1].waited_ns, 600'000u);
  // another program's stretch the loop waited through is another program's
  rl_hold_switch(&h, 8'600'000, 0, 1, other, 3, 1, 0, 7'700'000);
  ASSERT_EQ(h.next, 3u);
  EXPECT_EQ(h.ring[2].kind, uint32_t(RL_HOLD_OTHER));
  EXPECT_EQ(h.ring[2].waited_ns, 0u);
  // the same 1 ms of ours with no loop behind it: not kept
  rl_hold_switch(&h, 9'600'000, 0, 1, ours, 7, 0, 0, 0);
  EXPECT_EQ(h.next, 3u);
}
