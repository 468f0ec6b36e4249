#include "workload/fairness.h"

#include <gtest/gtest.h>

#include <cmath>

namespace rocelab::workload {
namespace {

constexpr double kU = 8000;  // bit/s per rate unit: whole bytes per step

// A flow into `to` whose responder delivers rates[k] units during [k, k+1) × step seconds,
// starting at `start`; line 100 units and no header overhead, so the fair share of n flows is
// 100 / n units.
FlowResult flow(const std::string& to, double start, double step, const std::vector<double>& rates) {
  FlowResult f;
  f.workload = "w";
  f.from = "h";
  f.to = to;
  f.streaming = true;
  f.rx_line_bps = 100 * kU;
  double t = start, bytes = 0;
  f.rate_trace.push_back({t, 0, 0});
  for (double r : rates) {
    t += step;
    bytes += r * kU * step / 8;
    f.rate_trace.push_back({t, 0, uint64_t(std::llround(bytes))});
  }
  f.bytes = f.wire_bytes = uint64_t(std::llround(bytes));
  return f;
}

TEST(Fairness, EqualFlowsConvergeAtOnce) {
  WorkloadRun r;
  r.flows = {flow("x", 0, 1, std::vector<double>(10, 400)), flow("x", 0, 1, std::vector<double>(10, 400))};
  for (auto& f : r.flows) f.rx_line_bps = 800 * kU;  // two flows, fair share 400
  auto g = fairness(r, 2);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_DOUBLE_EQ(g[0].fair_share_bps, 400 * kU);
  EXPECT_EQ(g[0].goodput.size(), 5u);
  EXPECT_DOUBLE_EQ(g[0].converge_s, 0);
  EXPECT_NEAR(g[0].share_ratio[0], 1, 1e-9);
  EXPECT_NEAR(g[0].share_ratio[1], 1, 1e-9);
}

TEST(Fairness, ConvergenceIsTheFirstWindowAfterTheLastOutOfTolerance) {
  // The second flow starts at t = 4; windows of 1 s from there. Flow A gives way over three
  // windows (80, 70, 52 then 50); flow B takes the rest.
  WorkloadRun r;
  std::vector<double> a = {100, 100, 100, 100, 80, 70, 52, 50, 50, 50, 50, 50};
  std::vector<double> b = {20, 30, 48, 50, 50, 50, 50, 50};
  r.flows = {flow("x", 0, 1, a), flow("x", 4, 1, b)};
  auto g = fairness(r, 1);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_DOUBLE_EQ(g[0].overlap_start_s, 4);
  EXPECT_DOUBLE_EQ(g[0].fair_share_bps, 50 * kU);
  ASSERT_EQ(g[0].goodput.size(), 8u);
  EXPECT_NEAR(g[0].goodput[0][0], 80 * kU, 1e-6);
  EXPECT_NEAR(g[0].goodput[0][1], 20 * kU, 1e-6);
  EXPECT_DOUBLE_EQ(g[0].converge_s, 2);  // window 2 (52 / 48) is the first of the settled run
  EXPECT_NEAR(g[0].share_ratio[0], (52 + 5 * 50) / 6.0 / 50, 1e-6);
  EXPECT_NEAR(g[0].share_ratio[1], (48 + 5 * 50) / 6.0 / 50, 1e-6);
}

TEST(Fairness, NeverConvergingIsInfiniteAndUsesTheLaterHalf) {
  WorkloadRun r;
  r.flows = {flow("x", 0, 1, std::vector<double>(8, 70)), flow("x", 0, 1, std::vector<double>(8, 30))};
  auto g = fairness(r, 1);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_TRUE(std::isinf(g[0].converge_s));
  EXPECT_NEAR(g[0].share_ratio[0], 1.4, 1e-6);
  EXPECT_NEAR(g[0].share_ratio[1], 0.6, 1e-6);
}

TEST(Fairness, GroupsByReceiverAndSkipsLoneOrShortOrLockStepFlows) {
  WorkloadRun r;
  r.flows = {flow("x", 0, 1, std::vector<double>(6, 50)), flow("x", 0, 1, std::vector<double>(6, 50)),
             flow("y", 0, 1, std::vector<double>(6, 100)),   // alone into y
             flow("z", 0, 1, std::vector<double>(6, 50)), flow("z", 5, 1, std::vector<double>(6, 50)),  // overlap 1 s
             flow("x", 0, 1, std::vector<double>(6, 50))};
  r.flows[5].streaming = false;  // a collective's flow: not part of x's group
  auto g = fairness(r, 1);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].to, "x");
  EXPECT_EQ(g[0].flows, (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(fairness(r, 0).empty());
}

TEST(Fairness, PayloadEfficiencyLowersTheFairShare) {
  WorkloadRun r;
  r.flows = {flow("x", 0, 1, std::vector<double>(4, 45)), flow("x", 0, 1, std::vector<double>(4, 45))};
  for (auto& f : r.flows) f.wire_bytes = f.bytes * 10 / 9;  // 90 % payload
  auto g = fairness(r, 1);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_NEAR(g[0].fair_share_bps, 45 * kU, 1);
  EXPECT_NEAR(g[0].share_ratio[0], 1, 0.01);
}

TEST(Fairness, UtilizationWhileAllSendStopsAtTheFirstEnd) {
  // Two flows into x at 45 units each for 4 s, then one alone at 20 for 4 s more: 90 % busy
  // while both send, whatever the tail did.
  WorkloadRun r;
  std::vector<double> tail = {45, 45, 45, 45, 20, 20, 20, 20};
  r.flows = {flow("x", 0, 1, std::vector<double>(4, 45)), flow("x", 0, 1, tail)};
  WorkloadResult w;
  w.flows = {0, 1};
  EXPECT_NEAR(utilization_while_all_send(r, w), 0.9, 1e-6);
  r.flows[1].streaming = false;
  EXPECT_EQ(utilization_while_all_send(r, w), 0);
}

}  // namespace
}  // namespace rocelab::workload
