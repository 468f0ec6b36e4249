// The resolved dump is itself a scenario: resolved JSON -> model -> the same JSON.
#include <gtest/gtest.h>

#include <filesystem>

#include "run/resolved.h"
#include "test_util.h"

using namespace rocelab;
namespace fs = std::filesystem;

namespace {

std::string dump(const model::Scenario& s) { return run::resolved_json(s).dump(2); }

void expect_round_trip(const model::Scenario& s) {
  std::string first = dump(s);
  auto again = model::load_scenario_text(first, "resolved.json");
  std::string errs;
  for (const auto& d : again.diags.sorted()) errs += d.format() + "\n";
  ASSERT_TRUE(again.ok()) << errs;
  EXPECT_EQ(dump(*again.scenario), first);
  EXPECT_EQ(again.scenario->nodes.size(), s.nodes.size());
  EXPECT_EQ(again.scenario->links.size(), s.links.size());
}

}  // namespace

TEST(RoundTrip, EveryReferenceScenario) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(ROCELAB_SOURCE_DIR) / "scenarios")) {
    if (e.path().extension() != ".yaml") continue;
    SCOPED_TRACE(e.path().string());
    auto r = model::load_scenario_file(e.path().string());
    ASSERT_TRUE(r.ok()) << e.path();
    expect_round_trip(*r.scenario);
    ++n;
  }
  EXPECT_GE(n, 5u);
}

TEST(RoundTrip, GeneratorsWithEveryOption) {
  for (const char* yaml : {
           "scale: 10\nseed: 42\nfabric: {type: leaf-spine, spines: 3, leaves: 2, hosts_per_leaf: 3, nics_per_host: 2,"
           " uplinks: 2, oversubscription: 1.5}\n",
           "scale: 1000\nfabric: {type: rail-optimized, rails: 4, hosts: 8, spines: 2, leaves_per_rail: 2}\n",
           "scale: 1000\naddressing: {pool: 198.19.0.0/20}\ndefaults: {rate: 25G, mtu: 9000}\n"
           "kinds: {host: {mtu: 4200}}\nfabric: {type: fat-tree, k: 4}\n"
           "nodes: [{name: core1, loopback: 198.19.0.200}]\n"
           "links: [{endpoints: [core1, agg1-1], rate: 400G, subnet: 198.19.10.0/31}]\n",
       }) {
    SCOPED_TRACE(yaml);
    expect_round_trip(rocelab::testing::must_load(yaml));
  }
}

TEST(RoundTrip, DumpShowsPhysicalAndEmulatedValues) {
  auto s = rocelab::testing::must_load("scale: 1000\nfabric: {type: leaf-spine, spines: 1, leaves: 1, hosts_per_leaf: 1}\n");
  auto j = run::resolved_json(s);
  const auto text = j.dump();
  EXPECT_NE(text.find("100Gbit/s"), std::string::npos);  // physical
  EXPECT_NE(text.find("100Mbit/s"), std::string::npos);  // emulated at D = 1000
  EXPECT_EQ(j["schema"], std::string(model::kResolvedSchema));
}
