// The PFC deadlock detector (model/deadlock.h) on made-up wait-for graphs.
#include <gtest/gtest.h>

#include "model/deadlock.h"

namespace rocelab {
namespace {

using model::DeadlockWatch;
using model::WaitQueue;

// A ring of `n` nodes: queue i on node i toward node (i+1) % n, priority 3, hold 10.
std::vector<WaitQueue> ring(size_t n, bool paused, uint64_t dequeued) {
  std::vector<WaitQueue> q;
  for (size_t i = 0; i < n; ++i) q.push_back({100 + i, i, (i + 1) % n, 3, paused, true, dequeued, 10});
  return q;
}

TEST(PfcDeadlock, ACycleStuckForAPauseTimeIsOneDeadlockNamingItsMembersInWaitOrder) {
  DeadlockWatch w;
  EXPECT_EQ(w.sample(0, ring(5, true, 7)), 0u);
  EXPECT_EQ(w.sample(9, ring(5, true, 7)), 0u);  // stuck 9 < hold 10
  EXPECT_EQ(w.sample(10, ring(5, true, 7)), 1u);
  ASSERT_EQ(w.deadlocks().size(), 1u);
  const auto& d = w.deadlocks()[0];
  EXPECT_EQ(d.prio, 3u);
  EXPECT_EQ(d.members, (std::vector<uint64_t>{100, 101, 102, 103, 104}));
  EXPECT_EQ(d.since, 0);
  EXPECT_EQ(d.detected, 10);
  EXPECT_EQ(d.ended, -1);
  EXPECT_EQ(w.sample(50, ring(5, true, 7)), 0u);  // still the same one: not found again
  EXPECT_EQ(w.deadlocks().size(), 1u);
  // One member sends a packet: it ends.
  auto q = ring(5, true, 7);
  q[2].dequeued = 8;
  EXPECT_EQ(w.sample(60, q), 1u);
  EXPECT_EQ(w.deadlocks()[0].ended, 60);
}

TEST(PfcDeadlock, AChainThatEndsAnywhereIsNoDeadlock) {
  DeadlockWatch w;
  auto q = ring(5, true, 0);
  q[4].paused = false;  // the last switch is not paused: the chain drains through it
  for (int64_t t = 0; t <= 100; t += 10) w.sample(t, q);
  EXPECT_TRUE(w.deadlocks().empty());
  q = ring(5, true, 0);
  q[1].holds = false;  // paused with nothing to send waits for nothing
  for (int64_t t = 200; t <= 300; t += 10) w.sample(t, q);
  EXPECT_TRUE(w.deadlocks().empty());
}

TEST(PfcDeadlock, AQueueThatKeepsSendingBreaksTheCycle) {
  DeadlockWatch w;
  for (int64_t t = 0; t <= 100; t += 5) {
    auto q = ring(4, true, 0);
    q[3].dequeued = uint64_t(t);  // paused between polls but moving: pauses come and go
    w.sample(t, q);
  }
  EXPECT_TRUE(w.deadlocks().empty());
}

TEST(PfcDeadlock, TheCycleClosesWhenItsLastMemberStops) {
  DeadlockWatch w;
  for (int64_t t = 0; t <= 40; t += 10) {
    auto q = ring(3, true, 0);
    if (t < 20) q[1].dequeued = uint64_t(t);  // node 1's queue moved until 20
    w.sample(t, q);
  }
  ASSERT_EQ(w.deadlocks().size(), 1u);
  EXPECT_EQ(w.deadlocks()[0].since, 20);
  EXPECT_EQ(w.deadlocks()[0].detected, 30);
}

TEST(PfcDeadlock, PrioritiesAreSeparateGraphsAndTwoCyclesAreTwoDeadlocks) {
  DeadlockWatch w;
  auto q = ring(2, true, 0);  // nodes 0 <-> 1 on priority 3
  q[1].prio = 4;              // ... but the way back is priority 4: no cycle
  w.sample(0, q);
  w.sample(20, q);
  EXPECT_TRUE(w.deadlocks().empty());
  std::vector<WaitQueue> two = ring(2, true, 0);
  for (auto x : ring(3, true, 0)) {  // a second ring on nodes 10..12
    x.key += 50, x.node += 10, x.peer += 10;
    two.push_back(x);
  }
  w.sample(100, two);
  w.sample(120, two);
  ASSERT_EQ(w.deadlocks().size(), 2u);
  EXPECT_EQ(w.deadlocks()[0].members, (std::vector<uint64_t>{100, 101}));
  EXPECT_EQ(w.deadlocks()[1].members, (std::vector<uint64_t>{150, 151, 152}));
}

}  // namespace
}  // namespace rocelab
