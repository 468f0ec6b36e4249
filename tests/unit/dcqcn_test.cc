// DCQCN against golden traces written by tests/unit/dcqcn_golden.py (an independent model of
// DESIGN.md §2's equations), plus the notification point and the time scale.
#include "engine/dcqcn.h"
#include "run/resolved.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

namespace rocelab::engine {
namespace {

struct Case {
  std::string trace, preset;
  double scale, line;
};

class Golden : public ::testing::TestWithParam<Case> {};

TEST_P(Golden, EngineMatchesEveryStep) {
  const Case c = GetParam();
  std::ifstream in(std::string(ROCELAB_SOURCE_DIR) + "/tests/unit/golden/dcqcn_" + c.trace + ".txt");
  ASSERT_TRUE(in) << "missing golden trace " << c.trace;
  auto params = DcqcnParams::preset_named(c.preset);
  ASSERT_TRUE(params);
  ReactionPoint rp(params->emulated(model::TimeScale(c.scale)), c.line);
  std::string line;
  int steps = 0;
  std::set<std::string> stages;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    Nanos at;
    std::string kind, stage;
    uint64_t bytes;
    double rc, rt, alpha;
    ASSERT_TRUE(f >> at >> kind >> bytes >> rc >> rt >> alpha >> stage) << line;
    if (kind == "cnp") rp.on_cnp(at);
    else if (kind == "sent") rp.on_sent(bytes, at);
    else rp.advance(at);
    ++steps;
    stages.insert(stage);
    SCOPED_TRACE(c.trace + ": " + line);
    EXPECT_NEAR(rp.rate(), rc, rc * 1e-9 + 1e-3);
    EXPECT_NEAR(rp.target(), rt, rt * 1e-9 + 1e-3);
    EXPECT_NEAR(rp.alpha(), alpha, 1e-10);
    EXPECT_EQ(to_string(rp.stage()), stage);
  }
  EXPECT_GE(steps, 20);
  if (c.preset != "off") {
    for (const char* s : {"cut", "fast-recovery", "additive", "hyper"}) EXPECT_TRUE(stages.count(s)) << s;
  } else {
    EXPECT_EQ(rp.rate(), c.line);
    EXPECT_GT(rp.cnps(), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, Golden,
                         ::testing::Values(Case{"paper", "paper", 1, 100e9}, Case{"nvidia", "nvidia", 1, 100e9},
                                         Case{"off", "off", 1, 100e9},
                                         Case{"paper_d1000", "paper", 1000, 100e6}),
                         [](const auto& info) { return info.param.trace; });

TEST(Dcqcn, TimeScaleStretchesTimesAndShrinksRates) {
  auto p = *DcqcnParams::preset_named("paper");
  auto e = p.emulated(model::TimeScale(1000));
  EXPECT_EQ(e.cnp_interval.ns, 50'000'000);
  EXPECT_EQ(e.alpha_timer.ns, 55'000'000);
  EXPECT_EQ(e.rate_timer.ns, 55'000'000);
  EXPECT_EQ(e.r_ai.bps, 40'000u);
  EXPECT_EQ(e.r_hai.bps, 200'000u);
  EXPECT_EQ(e.r_min.bps, 10'000u);
  EXPECT_EQ(e.byte_counter.n, p.byte_counter.n);
  EXPECT_FALSE(DcqcnParams::preset_named("dctcp"));
}

TEST(Dcqcn, RateStaysWithinMinimumAndLine) {
  auto p = *DcqcnParams::preset_named("paper");
  ReactionPoint rp(p, 100e9);
  for (int i = 0; i < 100; ++i) rp.on_cnp(i * 1000);
  EXPECT_DOUBLE_EQ(rp.rate(), 10e6);
  // Timer alone is additive only (b stays 0): 100 Gb/s / 40 Mb/s = 2,500 steps back to line.
  rp.advance(100'000 + 2400 * 55'000);
  EXPECT_LT(rp.rate(), 100e9);
  rp.advance(100'000 + 2600 * 55'000);
  EXPECT_DOUBLE_EQ(rp.rate(), 100e9);
  EXPECT_LE(rp.target(), 100e9);
}

TEST(Dcqcn, ScenarioSetsAnyParameterOnTopOfItsPreset) {
  const std::string yaml =
      "scale: 1000\nfabric: {type: leaf-spine, spines: 1, leaves: 1, hosts_per_leaf: 2}\n"
      "hosts: {dcqcn: {preset: nvidia, rate_timer: 100us, byte_counter: 64KB, threshold: 3, rate_ai: 20M,\n"
      "  g: 0.01, clamp_target: true, cnp_interval: 10us}}\n";
  auto s = rocelab::testing::must_load(yaml);
  EXPECT_EQ(s.hosts.dcqcn, "nvidia");
  auto p = DcqcnParams::preset_named(s.hosts.dcqcn)->with(s.hosts.dcqcn_set);
  EXPECT_EQ(p.rate_timer.ns, 100'000);
  EXPECT_EQ(p.byte_counter.n, 64u * 1024);
  EXPECT_EQ(p.threshold, 3);
  EXPECT_EQ(p.r_ai.bps, 20'000'000u);
  EXPECT_DOUBLE_EQ(p.g, 0.01);
  EXPECT_TRUE(p.clamp_target);
  EXPECT_EQ(p.r_hai.bps, 50'000'000u) << "what the scenario leaves alone stays the preset's";
  auto e = p.emulated(s.scale);
  EXPECT_EQ(e.rate_timer.ns, 100'000'000);
  EXPECT_EQ(e.cnp_interval.ns, 10'000'000);
  EXPECT_EQ(e.r_ai.bps, 20'000u);
  // The resolved dump carries the overrides and reloads to the same scenario.
  const std::string dumped = run::resolved_json(s).dump(2);
  auto again = rocelab::testing::must_load(dumped);
  EXPECT_EQ(run::resolved_json(again).dump(2), dumped);
  EXPECT_EQ(again.hosts.dcqcn_set.rate_ai, s.hosts.dcqcn_set.rate_ai);
}

TEST(Dcqcn, UnknownOrOutOfRangeParametersAreErrors) {
  const std::string head = "scale: 1000\nfabric: {type: leaf-spine, spines: 1, leaves: 1, hosts_per_leaf: 2}\n";
  auto e = rocelab::testing::errors_of(head + "hosts: {dcqcn: {preset: paper, rate_timr: 55us}}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("rate_timr: unknown key (did you mean 'rate_timer'?)"), std::string::npos) << e[0];
  e = rocelab::testing::errors_of(head + "hosts: {dcqcn: {g: 2}}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("test.yaml:3:"), std::string::npos) << e[0];
  e = rocelab::testing::errors_of(head + "hosts: {dcqcn: {preset: dctcp}}\n");
  ASSERT_EQ(e.size(), 1u);
}

// The gear's own words (issue 35): an mlx5 NIC's roce_np / roce_rp values, copied as the NIC
// shows them, give the same parameters as their rocelab names. The NIC's own defaults over
// the paper preset give exactly the nvidia preset.
TEST(Dcqcn, Mlx5NamesInTheirOwnUnits) {
  const std::string yaml =
      "scale: 1000\nfabric: {type: leaf-spine, spines: 1, leaves: 1, hosts_per_leaf: 2}\n"
      "hosts: {dcqcn: {preset: paper, min_time_between_cnps: 4, initial_alpha_value: 1023, dce_tcp_rtt: 1,\n"
      "  dce_tcp_g: 1019, rate_reduce_monitor_period: 4, rpg_gd: 11, rpg_min_dec_fac: 50, rpg_time_reset: 300,\n"
      "  rpg_byte_reset: 32767, rpg_threshold: 1, rpg_ai_rate: 5, rpg_hai_rate: 50, rpg_min_rate: 1,\n"
      "  clamp_tgt_rate: 0, clamp_tgt_rate_after_time_inc: 1, rate_to_set_on_first_cnp: 0}}\n";
  auto s = rocelab::testing::must_load(yaml);
  auto p = DcqcnParams::preset_named("paper")->with(s.hosts.dcqcn_set);
  auto n = *DcqcnParams::preset_named("nvidia");
  EXPECT_EQ(p.cnp_interval, n.cnp_interval);
  EXPECT_DOUBLE_EQ(p.initial_alpha, n.initial_alpha);
  EXPECT_EQ(p.alpha_window, n.alpha_window);
  EXPECT_DOUBLE_EQ(p.g, n.g);
  EXPECT_EQ(p.reduce_period, n.reduce_period);
  EXPECT_EQ(p.rpg_gd, n.rpg_gd);
  EXPECT_DOUBLE_EQ(p.max_cut, n.max_cut);
  EXPECT_EQ(p.rate_timer, n.rate_timer);
  EXPECT_EQ(p.byte_counter, n.byte_counter);
  EXPECT_EQ(p.threshold, n.threshold);
  EXPECT_EQ(p.r_ai, n.r_ai);
  EXPECT_EQ(p.r_hai, n.r_hai);
  EXPECT_EQ(p.r_min, n.r_min);
  EXPECT_EQ(p.clamp_target, n.clamp_target);
  EXPECT_EQ(p.clamp_target_after_timer, n.clamp_target_after_timer);
  EXPECT_EQ(p.rate_on_first_cnp, n.rate_on_first_cnp);
  // The resolved dump says them in rocelab's names and units, and reloads to the same.
  const std::string dumped = run::resolved_json(s).dump(2);
  EXPECT_NE(dumped.find("\"rate_ai\": \"5Mbit/s\""), std::string::npos) << dumped;
  EXPECT_EQ(run::resolved_json(rocelab::testing::must_load(dumped)).dump(2), dumped);
}

TEST(Dcqcn, Mlx5NamesRefuseTwoNamesForOneKnobAndWhatIsNotModelled) {
  const std::string head = "scale: 1000\nfabric: {type: leaf-spine, spines: 1, leaves: 1, hosts_per_leaf: 2}\n";
  auto e = rocelab::testing::errors_of(head + "hosts: {dcqcn: {rate_ai: 40M, rpg_ai_rate: 40}}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("set twice"), std::string::npos) << e[0];
  e = rocelab::testing::errors_of(head + "hosts: {dcqcn: {rpg_max_rate: 0}}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("does not model"), std::string::npos) << e[0];
  e = rocelab::testing::errors_of(head + "hosts: {dcqcn: {dce_tcp_g: 1024}}\n");
  ASSERT_EQ(e.size(), 1u);
}

// HPCC's ns-3 Mellanox-model reaction point (rdma-hw.cc, run.py's dcqcn_paper) at D = 1 and
// 100 Gbit/s, each figure worked by hand from its rules.
TEST(Dcqcn, Ns3PresetCutsOnItsGridAndStepsByTheTimerAlone) {
  const auto p = *DcqcnParams::preset_named("ns3");
  const double g = 1.0 / 256;
  ReactionPoint rp(p, 100e9);
  rp.on_cnp(0);  // starts α's window and the reduce grid; no cut yet
  rp.on_cnp(10'000);
  rp.advance(49'999);
  EXPECT_EQ(rp.rate(), 100e9);
  EXPECT_EQ(rp.cuts(), 0u);
  rp.advance(50'000);  // α's update first (a CNP came: 1), then the check cuts by α/2
  EXPECT_DOUBLE_EQ(rp.alpha(), 1.0);
  EXPECT_DOUBLE_EQ(rp.rate(), 50e9);
  EXPECT_DOUBLE_EQ(rp.target(), 100e9);  // no timer step before this cut: RT not clamped
  rp.advance(104'999);  // 100 us: no CNP in the window, α decays; no cut
  EXPECT_DOUBLE_EQ(rp.alpha(), 1 - g);
  EXPECT_EQ(rp.cuts(), 1u);
  rp.advance(105'000);  // the timer, 55 us after the cut: t = 0 < F = 1, fast recovery
  EXPECT_EQ(rp.stage(), Stage::kFastRecovery);
  EXPECT_DOUBLE_EQ(rp.rate(), 75e9);
  rp.advance(160'000);  // t = F: one additive step (RT capped at the line)
  EXPECT_EQ(rp.stage(), Stage::kAdditive);
  EXPECT_DOUBLE_EQ(rp.target(), 100e9);
  EXPECT_DOUBLE_EQ(rp.rate(), 87.5e9);
  rp.on_cnp(170'000);
  rp.on_cnp(180'000);  // two CNPs in one period: one cut, at the 200 us check
  rp.advance(200'000);
  const double alpha = (1 - g) * (1 - g) * (1 - g) + g;  // 150 us: none; 200 us: a CNP came
  EXPECT_DOUBLE_EQ(rp.alpha(), alpha);
  EXPECT_EQ(rp.cuts(), 2u);
  EXPECT_DOUBLE_EQ(rp.target(), 87.5e9);  // a timer step came since the last cut: RT <- RC
  double rc = 87.5e9 * (1 - alpha / 2);
  EXPECT_DOUBLE_EQ(rp.rate(), rc);
  rp.advance(255'000);
  rc = (87.5e9 + rc) / 2;
  EXPECT_EQ(rp.stage(), Stage::kFastRecovery);
  EXPECT_DOUBLE_EQ(rp.rate(), rc);
  rp.advance(310'000);
  EXPECT_EQ(rp.stage(), Stage::kAdditive);
  EXPECT_DOUBLE_EQ(rp.target(), 87.52e9);
  rp.advance(365'000);
  EXPECT_EQ(rp.stage(), Stage::kHyper);
  EXPECT_DOUBLE_EQ(rp.target(), 87.72e9);
  rp.advance(420'000);  // each hyper step adds R_HAI (the paper's second would add 2 x R_HAI)
  EXPECT_DOUBLE_EQ(rp.target(), 87.92e9);
  EXPECT_EQ(rp.cuts(), 2u);
  // The receiver flags a CNP for every CE-marked packet.
  NotificationPoint np(p.cnp_interval.ns);
  int sent = 0;
  for (Nanos t = 0; t < 10; ++t) sent += np.on_ce(1, t);
  EXPECT_EQ(sent, 10);
}

TEST(NotificationPoint, AtMostOneCnpPerIntervalPerQp) {
  NotificationPoint np(50'000);
  EXPECT_TRUE(np.on_ce(1, 0));
  EXPECT_FALSE(np.on_ce(1, 49'999));
  EXPECT_TRUE(np.on_ce(2, 49'999));  // another QP has its own interval
  EXPECT_TRUE(np.on_ce(1, 50'000));
  EXPECT_FALSE(np.on_ce(1, 60'000));
  int sent = 0;
  for (Nanos t = 0; t < 1'000'000; t += 1'000) sent += np.on_ce(7, t);
  EXPECT_EQ(sent, 20);
}

}  // namespace
}  // namespace rocelab::engine
