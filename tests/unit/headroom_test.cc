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
