// The fault timeline against a fake Testbed on a fake clock: no root, no real time.
#include <gtest/gtest.h>

#include "fake_testbed.h"
#include "fault/registry.h"
#include "fault/timeline.h"
#include "test_util.h"

namespace rocelab {
namespace {

constexpr const char* kFabric =
    "name: ft\nscale: 1000\nfabric: {type: leaf-spine, spines: 1, leaves: 2, hosts_per_leaf: 1}\n";

sys::Nanos ms(double v) { return sys::Nanos(v * 1e6); }

TEST(FaultTimeline, ALossFaultStartsAndEndsAtItsPhysicalTimesTimesD) {
  auto s = testing::must_load(std::string(kFabric) +
                              "faults:\n  - {type: loss, target: 'leaf1:spine1', at: 2ms, duration: 3ms, probability: 0.25}\n");
  testing::FakeTestbed t(s);
  const auto port = t.port("leaf1:spine1");
  ASSERT_TRUE(port) << port.error().what;
  fault::Timeline tl(s, t);
  tl.start(t.clock_.now());
  // D = 1000: at 2 ms physical = 2 s emulated, until 5 s.
  EXPECT_EQ(tl.next_due(), ms(2000));
  t.clock_.set(ms(1999));
  EXPECT_EQ(tl.apply_due(t.clock_.now()), 0u);
  EXPECT_EQ(t.loss[port->slot], 0);
  t.clock_.set(ms(2000));
  EXPECT_EQ(tl.apply_due(t.clock_.now()), 1u);
  EXPECT_EQ(t.loss[port->slot], 0.25);
  EXPECT_EQ(tl.next_due(), ms(5000));
  t.clock_.set(ms(4999));
  EXPECT_EQ(tl.apply_due(t.clock_.now()), 0u);
  t.clock_.set(ms(5000));
  EXPECT_EQ(tl.apply_due(t.clock_.now()), 1u);
  EXPECT_EQ(t.loss[port->slot], 0);
  EXPECT_FALSE(tl.pending());
  ASSERT_EQ(tl.happened().size(), 2u);
  EXPECT_DOUBLE_EQ(tl.happened()[0].t_s, 0.002);  // physical seconds
  EXPECT_DOUBLE_EQ(tl.happened()[1].t_s, 0.005);
  EXPECT_TRUE(tl.happened()[0].begin);
  EXPECT_FALSE(tl.happened()[1].begin);
  EXPECT_FALSE(tl.failed());
}

TEST(FaultTimeline, AnEndingFaultPutsBackWhatWasThereNotZero) {
  // Two overlapping faults on one port: the inner one's end restores the outer one's loss.
  auto s = testing::must_load(std::string(kFabric) +
                              "faults:\n"
                              "  - {type: loss, target: 'leaf1:spine1', at: 0ms, duration: 10ms, probability: 0.05}\n"
                              "  - {type: loss, target: 'leaf1:spine1', at: 1ms, duration: 1ms, probability: 0.5}\n");
  testing::FakeTestbed t(s);
  const uint32_t slot = t.port("leaf1:spine1")->slot;
  fault::Timeline tl(s, t);
  tl.start(0);
  tl.apply_due(ms(1000));
  EXPECT_EQ(t.loss[slot], 0.5);
  tl.apply_due(ms(2000));
  EXPECT_EQ(t.loss[slot], 0.05) << "the inner fault's end restores the outer fault's loss";
  tl.apply_due(ms(10000));
  EXPECT_EQ(t.loss[slot], 0);
}

TEST(FaultTimeline, FinishUndoesWhatIsStillInForceNewestFirst) {
  auto s = testing::must_load(std::string(kFabric) +
                              "faults:\n"
                              "  - {type: loss, target: 'leaf1:spine1', at: 0ms, probability: 0.1}\n"
                              "  - {type: loss, target: 'leaf2:spine1', at: 1ms, probability: 0.2}\n");
  testing::FakeTestbed t(s);
  fault::Timeline tl(s, t);
  tl.start(0);
  tl.apply_due(ms(5000));
  EXPECT_FALSE(tl.pending());
  tl.finish(ms(6000));
  ASSERT_EQ(t.log.size(), 4u);
  EXPECT_EQ(t.log[2], "undo loss leaf2:spine1 -> 0.000000");
  EXPECT_EQ(t.log[3], "undo loss leaf1:spine1 -> 0.000000");
  EXPECT_EQ(t.loss[t.port("leaf1:spine1")->slot], 0);
  EXPECT_EQ(tl.happened().back().t_s, 0.006);
}

TEST(FaultTimeline, EachFaultDrawsFromItsOwnSeededStream) {
  auto s = testing::must_load(std::string(kFabric) +
                              "seed: 7\nfaults:\n"
                              "  - {type: loss, target: 'leaf1:spine1', at: 0ms, probability: 0.1}\n"
                              "  - {type: loss, target: 'leaf2:spine1', at: 0ms, probability: 0.1}\n");
  testing::FakeTestbed t(s);
  fault::Timeline tl(s, t);
  tl.start(0);
  tl.apply_due(0);
  ASSERT_EQ(t.log.size(), 2u);
  EXPECT_EQ(t.log[0], "loss leaf1:spine1 0.100000 seed " + std::to_string(7ull ^ 0x6c6f7373ull));
  EXPECT_EQ(t.log[1], "loss leaf2:spine1 0.100000 seed " + std::to_string(7ull ^ (0x6c6f7373ull * 2)));
}

TEST(FaultTimeline, AFaultTheTestbedRefusesIsRecordedAsFailed) {
  auto s = testing::must_load(std::string(kFabric) +
                              "faults:\n  - {type: loss, target: 'leaf1:spine1', at: 0ms, probability: 0.1}\n");
  testing::FakeTestbed t(s);
  s.faults[0].target = "leaf1:nowhere";  // a running fabric that is not the scenario's
  fault::Timeline tl(s, t);
  tl.start(0);
  tl.apply_due(0);
  EXPECT_TRUE(tl.failed());
  ASSERT_EQ(tl.happened().size(), 1u);
  EXPECT_NE(tl.happened()[0].error.find("no port 'nowhere'"), std::string::npos) << tl.happened()[0].error;
}

// A flap is a train of downs on one fault: period/count (down half the period unless given)
// or an explicit down, up, down... list; each down's end brings the link back.
TEST(FaultTimeline, AFlapTakesTheLinkDownAndUpOnItsTrain) {
  auto s = testing::must_load(std::string(kFabric) +
                              "faults:\n"
                              "  - {type: link_flap, target: 'leaf1:spine1', at: 1ms, period: 2ms, count: 3}\n"
                              "  - {type: link_flap, target: 'leaf2:spine1', at: 0ms, train: [1ms, 3ms, 2ms]}\n");
  testing::FakeTestbed t(s);
  const uint32_t a = t.port("leaf1:spine1")->slot, b = t.port("leaf2:spine1")->slot;
  fault::Timeline tl(s, t);
  tl.start(0);
  // (time in physical ms, leaf1:spine1 down, leaf2:spine1 down); D = 1000.
  const std::vector<std::tuple<double, int, int>> want = {
      {0, 0, 1}, {1, 1, 0}, {2, 0, 0}, {3, 1, 0}, {4, 0, 1}, {5, 1, 1}, {6, 0, 0}, {7, 0, 0}};
  for (auto [at, da, db] : want) {
    tl.apply_due(ms(at * 1000));
    EXPECT_EQ(t.link_faults[a], da) << "leaf1:spine1 at " << at << " ms";
    EXPECT_EQ(t.link_faults[b], db) << "leaf2:spine1 at " << at << " ms";
  }
  EXPECT_FALSE(tl.pending());
  EXPECT_FALSE(tl.failed());
  EXPECT_NEAR(tl.link_down_seconds(), 3 * 0.001 + 0.003, 1e-9);  // three 1 ms downs, then 1 + 2 ms
}

TEST(FaultTimeline, ACrashedNodeIsHaltedWithEveryLinkDownUntilItRecovers) {
  auto s = testing::must_load(std::string(kFabric) +
                              "faults:\n  - {type: node_crash, target: leaf1, at: 1ms, duration: 2ms}\n");
  testing::FakeTestbed t(s);
  const size_t n = t.node_index("leaf1");
  auto halted = t.node_halted(n);
  fault::Timeline tl(s, t);
  tl.start(0);
  tl.apply_due(ms(999));
  EXPECT_FALSE(halted());
  tl.apply_due(ms(1000));
  EXPECT_TRUE(halted());
  for (const auto& p : t.nodes()[n].ports) EXPECT_EQ(t.link_faults[p.slot], 1) << p.name;
  tl.apply_due(ms(3000));
  EXPECT_FALSE(halted());
  for (const auto& p : t.nodes()[n].ports) EXPECT_EQ(t.link_faults[p.slot], 0) << p.name;
  EXPECT_NEAR(tl.link_down_seconds(), 0.002 * double(t.nodes()[n].ports.size()), 1e-9);
}

TEST(FaultKinds, BadLinkFaultsAreRefusedWithTheReason) {
  for (const char* bad : {"{type: link_flap, target: 'leaf1:spine1', at: 0s, period: 1ms}",
                          "{type: link_flap, target: 'leaf1:spine1', at: 0s, period: 1ms, count: 2, down: 1ms}",
                          "{type: link_flap, target: 'leaf1:spine1', at: 0s, train: [1ms], period: 1ms}",
                          "{type: node_crash, target: 'leaf1:spine1', at: 0s}",
                          "{type: link_down, target: leaf1, at: 0s}",
                          "{type: dscp_remap, target: 'host1:nic0', at: 0s, dscp: 64}",
                          "{type: pfc_off, target: leaf9, at: 0s}"}) {
    auto e = testing::errors_of(std::string(kFabric) + "faults:\n  - " + bad + "\n");
    EXPECT_FALSE(e.empty()) << bad;
  }
}

TEST(FaultKinds, TheRegistryNamesWhatIsBuilt) {
  EXPECT_NE(fault::kinds().find("loss"), nullptr);
  EXPECT_NE(fault::kinds().find("corruption"), nullptr);
  EXPECT_NE(fault::kinds().find("node_crash"), nullptr);
  EXPECT_NE(fault::kinds().find("pause_storm"), nullptr);
  EXPECT_EQ(fault::kinds().find("pfcwd"), nullptr);
  EXPECT_EQ(fault::kinds().list(), "loss, corruption, link_down, link_flap, node_crash, pfc_off, ecn_off, dscp_remap, slow_receiver, mtu_mismatch, pause_storm");
}

TEST(FaultKinds, APauseStormNamesItsPrioritiesAndEndsItself) {
  // priority 3 -> vector 0x08; default quanta 65535; count frames at frame_rate: in force
  // for count / frame_rate (100 frames at 10,000/s: 10 ms physical, 10 s at D = 1000).
  auto s = testing::must_load(std::string(kFabric) +
                              "faults:\n"
                              "  - {type: pause_storm, target: 'host2:nic0', at: 1ms, priority: 3, frame_rate: 10000, count: 100}\n"
                              "  - {type: pause_storm, target: 'leaf1:spine1', at: 2ms, duration: 1ms, vector: 24, quanta: 100}\n");
  testing::FakeTestbed t(s);
  fault::Timeline tl(s, t);
  tl.start(0);
  tl.apply_due(ms(1000));
  ASSERT_FALSE(t.log.empty());
  EXPECT_EQ(t.log.back(), "storm host2:nic0 vector 8 quanta 65535 rate 10000 frames 100");
  tl.apply_due(ms(2000));
  EXPECT_EQ(t.log.back(), "storm leaf1:spine1 vector 24 quanta 100 rate 0 frames 0");
  tl.apply_due(ms(3000));
  EXPECT_EQ(t.log.back(), "storm over leaf1:spine1");
  EXPECT_EQ(tl.next_due(), ms(11000));
  tl.apply_due(ms(11000));
  EXPECT_EQ(t.log.back(), "storm over host2:nic0");
  EXPECT_FALSE(tl.pending());
  for (const auto& [slot, n] : t.storms) EXPECT_EQ(n, 0) << slot;
}

TEST(FaultKinds, BadPauseStormsAreRefusedWithTheReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"{type: pause_storm, target: 'host1:nic0', at: 0s, priority: 3, vector: 8}", "priority or vector, not both"},
      {"{type: pause_storm, target: 'host1:nic0', at: 0s, quanta: 0}", "needs frame_rate"},
      {"{type: pause_storm, target: host1, at: 0s}", "is a port"},
      {"{type: pause_storm, target: 'host1:nic0', at: 0s, vector: 256}", "vector"},
      {"{type: pause_storm, target: 'host1:nic0', at: 0s, quanta: 70000}", "quanta"},
      {"{type: pause_storm, target: 'host1:nic0', at: 0s, fraction: 0.5}", "fraction"},
  };
  for (const auto& [bad, why] : cases) {
    auto e = testing::errors_of(std::string(kFabric) + "faults:\n  - " + bad + "\n");
    ASSERT_FALSE(e.empty()) << bad;
    EXPECT_NE(e[0].find(why), std::string::npos) << bad << ": " << e[0];
  }
  // A fabric without PFC priorities: a storm must name one.
  auto e = testing::errors_of(std::string(kFabric) + "qos: {profile: lossy}\nfaults:\n  - {type: pause_storm, target: 'host1:nic0', at: 0s}\n");
  ASSERT_FALSE(e.empty());
  EXPECT_NE(e[0].find("names no priority"), std::string::npos) << e[0];
}

}  // namespace
}  // namespace rocelab
