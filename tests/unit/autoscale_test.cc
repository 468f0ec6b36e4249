// `scale: auto`: the loader's side and choose_scale's arithmetic (no machine measured).
#include "run/autoscale.h"

#include <gtest/gtest.h>

#include "fabric/kernel_plan.h"
#include "model/loader.h"
#include "test_util.h"

namespace rocelab {
namespace {

using testing::errors_of;
using testing::must_load;

// One leaf, four hosts: every flow crosses two links (host - leaf - host).
std::string one_leaf(const std::string& scale, const std::string& workloads, const std::string& rate = "100G") {
  return "name: a\nscale: " + scale + "\ndefaults: {rate: " + rate +
         "}\nfabric: {type: leaf-spine, spines: 1, leaves: 1, hosts_per_leaf: 4}\nworkloads:\n" + workloads;
}

const std::string kIncast = "  - {name: in, type: incast, hosts: [host1, host2, host3], to: host4, message: 1MB}\n";

run::Calibration machine(double link_bps) {
  run::Calibration c;
  c.link_bps = link_bps;
  c.held_d = 1000;
  return c;
}

run::ScaleChoice choose(const model::Scenario& s, double link_bps) {
  auto ch = run::choose_scale(s, fabric::plan_kernel(s), machine(link_bps));
  EXPECT_TRUE(ch) << (ch ? "" : ch.error().what);
  return ch ? *ch : run::ScaleChoice{};
}

TEST(AutoScale, LoadsAsAutoAndRescaleSettlesIt) {
  auto s = must_load(one_leaf("auto", kIncast));
  EXPECT_TRUE(s.scale_auto);
  EXPECT_EQ(model::rescale(s, 500), std::nullopt);
  EXPECT_FALSE(s.scale_auto);
  EXPECT_DOUBLE_EQ(s.scale.factor(), 500);
  // Anything else that is not a number is still refused, at its line.
  const auto errs = errors_of(one_leaf("fast", kIncast));
  ASSERT_FALSE(errs.empty());
  EXPECT_NE(errs.front().find("test.yaml:2:"), std::string::npos) << errs.front();
}

TEST(AutoScale, SendersAtLineRateTimesTheLinksTheyCross) {
  const auto s = must_load(one_leaf("auto", kIncast));
  // Three senders at 100G, two links each: 600 Gbit/s x links. A machine that keeps up with
  // 10 Gbit/s x links may use half of it: 600G / 5G = D 120, rounded up to the next step, 150.
  const auto ch = choose(s, 10e9);
  EXPECT_DOUBLE_EQ(ch.peak_bps, 300e9);
  EXPECT_DOUBLE_EQ(ch.peak_link_bps, 600e9);
  EXPECT_DOUBLE_EQ(ch.d, 150);
  EXPECT_EQ(ch.busiest, "in");
  // A slower machine: 600G / (7e9 x 0.5) = 171.4 -> 200; a faster one: 600G / (24e9 x 0.5) = 50.
  EXPECT_DOUBLE_EQ(choose(s, 7e9).d, 200);
  EXPECT_DOUBLE_EQ(choose(s, 24e9).d, 50);
}

TEST(AutoScale, OverlappingWorkloadsAddUpAndLaterOnesDoNot) {
  const std::string two_at_once = kIncast + "  - {name: bw, type: write_bw, from: host4, to: host1, message: 1MB}\n";
  const auto both = choose(must_load(one_leaf("auto", two_at_once)), 10e9);
  EXPECT_DOUBLE_EQ(both.peak_bps, 400e9);
  EXPECT_EQ(both.busiest, "in + bw");
  // The same write, starting a second after the incast's 1 MB a sender is long sent.
  const std::string later = kIncast + "  - {name: bw, type: write_bw, from: host4, to: host1, message: 1MB, start: 1s}\n";
  const auto apart = choose(must_load(one_leaf("auto", later)), 10e9);
  EXPECT_DOUBLE_EQ(apart.peak_bps, 300e9);
  EXPECT_EQ(apart.busiest, "in");
}

TEST(AutoScale, TooSlowLinksForTheLoadAreAnErrorThatSaysWhy) {
  // 1 Mbit/s links allow D <= 15 (64 kbit/s emulated at least); a machine carrying 1 kbit/s
  // x links would need far more.
  const auto s = must_load(one_leaf("auto", kIncast, "1M"));
  auto ch = run::choose_scale(s, fabric::plan_kernel(s), machine(1e3));
  ASSERT_FALSE(ch);
  EXPECT_NE(ch.error().what.find("slowest link"), std::string::npos) << ch.error().what;
  // A machine fast enough: D within the floor.
  EXPECT_LE(choose(s, 1e9).d, 15);
}

TEST(AutoScale, NoWorkloadStillCoversTheFastestLink) {
  const std::string fabric = "fabric: {type: leaf-spine, spines: 1, leaves: 1, hosts_per_leaf: 2, uplink_rate: 100G}\n";
  const auto lossy = must_load("name: a\nscale: auto\ndefaults: {rate: 100G}\nqos: {profile: lossy}\n" + fabric);
  // 100G / (10G x 0.5) = 20, a step.
  const auto ch = choose(lossy, 10e9);
  EXPECT_DOUBLE_EQ(ch.d, 20);
  EXPECT_EQ(ch.why.find("headroom"), std::string::npos) << ch.why;
}

TEST(AutoScale, RaisedUntilLosslessHeadroomFitsTheBuffer) {
  // With PFC, D = 20 would give each port 5 Gbit/s x the agent's 50 ms reaction budget of
  // headroom, past the buffer: D goes up the steps until XOFF + headroom fit.
  const auto s = must_load("name: a\nscale: auto\ndefaults: {rate: 100G}\n"
                           "fabric: {type: leaf-spine, spines: 1, leaves: 1, hosts_per_leaf: 2, uplink_rate: 100G}\n");
  const auto ch = choose(s, 10e9);
  EXPECT_GT(ch.d, 20);
  EXPECT_NE(ch.why.find("the load alone allows D = 20"), std::string::npos) << ch.why;
  model::Scenario at = s;
  ASSERT_EQ(model::rescale(at, ch.d), std::nullopt);
  EXPECT_TRUE(run::headroom_over_buffer(fabric::plan_kernel(at)).empty());
  // And it is the smallest such step.
  ASSERT_EQ(model::rescale(at, ch.d / 1.6), std::nullopt);
  EXPECT_FALSE(run::headroom_over_buffer(fabric::plan_kernel(at)).empty());
}

TEST(AutoScale, NoCalibrationIsAnError) {
  const auto s = must_load(one_leaf("auto", kIncast));
  EXPECT_FALSE(run::choose_scale(s, fabric::plan_kernel(s), run::Calibration{}));
}

}  // namespace
}  // namespace rocelab
