// `rocelab sweep`'s grid (issue 35): --set entries into axes and fixed settings, seeds, the
// points in run order; and figures (an expect: expression without its comparison).
#include "model/sweep.h"

#include <gtest/gtest.h>

#include "model/expect.h"

using namespace rocelab::model;

TEST(SweepGrid, AnEntryWithSeveralValuesIsAnAxisOneValueIsFixed) {
  std::string why;
  auto g = parse_grid({"qos.ecn.kmin=8KB,16KB, 32KB", "hosts.dcqcn.preset=paper", "qos.lossless=[3, 4],[3]"}, why);
  ASSERT_TRUE(g) << why;
  EXPECT_EQ(g->fixed, std::vector<std::string>{"hosts.dcqcn.preset=paper"});
  ASSERT_EQ(g->axes.size(), 2u);
  EXPECT_EQ(g->axes[0].key, "qos.ecn.kmin");
  EXPECT_EQ(g->axes[0].values, (std::vector<std::string>{"8KB", "16KB", "32KB"}));
  EXPECT_EQ(g->axes[1].values, (std::vector<std::string>{"[3, 4]", "[3]"}));  // commas in brackets belong to the value
  auto q = parse_axis("qos.pfc.watchdog={detection_time: 200ms, action: drop},{detection_time: 100ms}", why);
  ASSERT_TRUE(q) << why;
  EXPECT_EQ(q->values.size(), 2u);
}

TEST(SweepGrid, BadEntriesSayWhy) {
  std::string why;
  EXPECT_FALSE(parse_grid({"qos.ecn.kmin=8KB,,16KB"}, why));
  EXPECT_NE(why.find("an empty value"), std::string::npos) << why;
  EXPECT_FALSE(parse_grid({"qos.ecn.kmin"}, why));
  EXPECT_NE(why.find("expected KEY=VALUE"), std::string::npos) << why;
  EXPECT_FALSE(parse_grid({"qos.ecn.kmin=8KB,16KB", "qos.ecn.kmin=32KB"}, why));
  EXPECT_NE(why.find("given twice"), std::string::npos) << why;
}

TEST(SweepGrid, SeedsAreRangesAndLists) {
  std::string why;
  EXPECT_EQ(*parse_seeds("1-3", why), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(*parse_seeds("5,1,5,2-3", why), (std::vector<uint64_t>{5, 1, 2, 3}));  // each once, in the order given
  EXPECT_FALSE(parse_seeds("3-1", why));
  EXPECT_FALSE(parse_seeds("a", why));
  EXPECT_FALSE(parse_seeds("1-1000", why));
  EXPECT_NE(why.find("more than 100 seeds"), std::string::npos) << why;
}

TEST(SweepGrid, PointsVaryTheLastAxisFastestAndSeedsInnermost) {
  std::string why;
  auto g = parse_grid({"a.x=1,2", "b.y=p,q,r"}, why);
  ASSERT_TRUE(g);
  g->seeds = {7, 8};
  auto pts = sweep_points(*g);
  ASSERT_EQ(pts.size(), 12u);
  EXPECT_EQ(pts[0].label(*g), "x=1 y=p seed 7");
  EXPECT_EQ(pts[1].label(*g), "x=1 y=p seed 8");
  EXPECT_EQ(pts[2].label(*g), "x=1 y=q seed 7");
  EXPECT_EQ(pts[11].label(*g), "x=2 y=r seed 8");
  EXPECT_EQ(pts[11].index, 11u);
  EXPECT_EQ(pts[5].sets(*g), (std::vector<std::string>{"a.x=1", "b.y=r"}));
  g->seeds.clear();
  EXPECT_EQ(sweep_points(*g).size(), 6u);
  EXPECT_FALSE(sweep_points(*g)[0].seed.has_value());
}

TEST(SweepGrid, RepeatsRunEachSeedSeveralTimesInnermost) {
  std::string why;
  auto g = parse_grid({"a.x=1,2"}, why);
  ASSERT_TRUE(g);
  g->seeds = {7, 8};
  g->repeat = 3;
  auto pts = sweep_points(*g);
  ASSERT_EQ(pts.size(), 12u);
  EXPECT_EQ(pts[0].label(*g), "x=1 seed 7 (run 1 of 3)");
  EXPECT_EQ(pts[2].label(*g), "x=1 seed 7 (run 3 of 3)");
  EXPECT_EQ(pts[3].label(*g), "x=1 seed 8 (run 1 of 3)");
  EXPECT_EQ(pts[11].label(*g), "x=2 seed 8 (run 3 of 3)");
  EXPECT_EQ(pts[4].repeat, 1u);
}

// Run to run: the widest group of one knob value at one seed; seed to seed: the widest
// spread of the seeds' means of one knob value. Unmeasured runs are left out.
TEST(SweepSpread, RunToRunIsWithinASeedAndSeedToSeedIsBetweenTheirMeans) {
  std::string why;
  auto g = parse_grid({"a.x=1,2"}, why);
  ASSERT_TRUE(g);
  g->seeds = {1, 2};
  g->repeat = 2;
  const auto pts = sweep_points(*g);  // x=1: s1 r1, s1 r2, s2 r1, s2 r2; x=2: the same
  // x=1: seed 1 reads 100 and 110 (10 / 105), seed 2 reads 200 twice; means 105 and 200.
  // x=2: seed 1 reads 50 and one run measured nothing, seed 2 reads 50 and 60 (10 / 55).
  const std::vector<std::optional<double>> v = {100, 110, 200, 200, 50, std::nullopt, 50, 60};
  const auto s = figure_spread(pts, v);
  ASSERT_TRUE(s.run_to_run);
  EXPECT_NEAR(*s.run_to_run, 10.0 / 55, 1e-12);
  ASSERT_TRUE(s.seed_to_seed);
  EXPECT_NEAR(*s.seed_to_seed, 95.0 / 152.5, 1e-12);
  // One run a seed: no run-to-run spread; a figure that never moves: 0.
  g->repeat = 1;
  const auto one = sweep_points(*g);
  const auto s1 = figure_spread(one, {3, 3, 3, 3});
  EXPECT_FALSE(s1.run_to_run);
  EXPECT_EQ(s1.seed_to_seed, 0.0);
  // A zero mean that moved has no relative spread.
  SweepGrid seeds_only;
  seeds_only.seeds = {1, 2};
  EXPECT_FALSE(figure_spread(sweep_points(seeds_only), {-1, 1}).seed_to_seed);
}

TEST(Figures, AFigureIsOneNumberNotAComparison) {
  auto ok = parse_value("max(queue_max) / 1KB");
  ASSERT_FALSE(ok.error) << ok.error->message;
  MetricSet m;
  MetricValue q;
  q.kind = MetricKind::kSeries;
  q.samples = {{{{"node", "sw"}}, 2048}, {{{"node", "sw"}}, 4096}};
  m["queue_max"] = q;
  std::string why;
  auto v = evaluate_value(*ok.root, m, why);
  ASSERT_TRUE(v) << why;
  EXPECT_DOUBLE_EQ(*v, 4.0);
  EXPECT_FALSE(evaluate_value(*parse_value("pause_time").root, m, why));
  EXPECT_NE(why.find("was not produced"), std::string::npos) << why;
  auto cmp = parse_value("max(queue_max) > 3");
  ASSERT_TRUE(cmp.error);
  EXPECT_NE(cmp.error->message.find("not a comparison"), std::string::npos);
  auto series = parse_value("queue_max");
  ASSERT_TRUE(series.error);
  EXPECT_NE(series.error->message.find("take an aggregate"), std::string::npos) << series.error->message;
}
