// Splitting a scenario over machines (model/partition.h): hosts never leave their switches,
// pods and leaves stay whole, only links above them are cut, and the split is the same on
// every machine that computes it.
#include <gtest/gtest.h>

#include <set>

#include "model/partition.h"
#include "test_util.h"

using namespace rocelab;
using namespace rocelab::testing;

namespace {

size_t node(const model::Scenario& s, const std::string& name) {
  for (size_t x = 0; x < s.nodes.size(); ++x)
    if (s.nodes[x].name == name) return x;
  ADD_FAILURE() << "no node " << name;
  return 0;
}

void expect_hosts_with_their_switches(const model::Scenario& s, const model::Partition& p) {
  for (const auto& l : s.links)
    if (s.nodes[l.a.node].kind == model::NodeKind::kHost || s.nodes[l.b.node].kind == model::NodeKind::kHost)
      EXPECT_EQ(p.part_of[l.a.node], p.part_of[l.b.node]) << s.nodes[l.a.node].name << " - " << s.nodes[l.b.node].name;
}

}  // namespace

TEST(Partition, LeafSpineSplitsByLeafAndCutsOnlyUplinks) {
  const auto s = must_load("name: p\nscale: 1000\nfabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 4}\n");
  std::string why;
  const auto p = model::partition(s, 2, why);
  ASSERT_TRUE(p) << why;
  expect_hosts_with_their_switches(s, *p);
  EXPECT_NE(p->part_of[node(s, "leaf1")], p->part_of[node(s, "leaf2")]);
  // Each spine has one link to each leaf: two of the four uplinks are cut, whichever way.
  EXPECT_EQ(p->cut_links.size(), 2u);
  for (size_t li : p->cut_links) {
    const auto& l = s.links[li];
    EXPECT_NE(s.nodes[l.a.node].kind, model::NodeKind::kHost);
    EXPECT_NE(s.nodes[l.b.node].kind, model::NodeKind::kHost);
  }
  EXPECT_EQ(p->ports[0], p->ports[1]) << "balanced: a leaf, its hosts and a spine each";
  // The same split every time it is computed (every machine computes its own).
  const auto again = model::partition(s, 2, why);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->part_of, p->part_of);
  EXPECT_EQ(again->cut_links, p->cut_links);
}

TEST(Partition, FatTreeSplitsByPodsAndCutsOnlyCoreLinks) {
  const auto s = must_load("name: p\nscale: 1000\nfabric: {type: fat-tree, k: 4}\n");
  std::string why;
  const auto p = model::partition(s, 2, why);
  ASSERT_TRUE(p) << why;
  expect_hosts_with_their_switches(s, *p);
  for (size_t li : p->cut_links) {
    const auto& a = s.nodes[s.links[li].a.node];
    const auto& b = s.nodes[s.links[li].b.node];
    EXPECT_TRUE(a.role == "core" || b.role == "core") << a.name << " - " << b.name << ": only core links are cut";
  }
  // k = 4: 16 aggregation-core links, the other half's 8 cut.
  EXPECT_EQ(p->cut_links.size(), 8u);
  EXPECT_EQ(p->ports[0], p->ports[1]);
}

TEST(Partition, OnePartHoldsEverythingAndTooManyPartsAreRefused) {
  const auto s = must_load("name: p\nscale: 1000\nfabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 1}\n");
  std::string why;
  const auto one = model::partition(s, 1, why);
  ASSERT_TRUE(one) << why;
  EXPECT_TRUE(one->cut_links.empty());
  for (size_t part : one->part_of) EXPECT_EQ(part, 0u);
  EXPECT_FALSE(model::partition(s, 3, why));
  EXPECT_NE(why.find("at most 2 parts"), std::string::npos) << why;
  EXPECT_FALSE(model::partition(s, 0, why));
}

TEST(Partition, RailHostsTieTheirRailsTogether) {
  // Every host has a NIC on each rail's leaf: one group, so no split leaves hosts whole.
  const auto s = must_load("name: p\nscale: 1000\nfabric: {type: rail-optimized, rails: 2, hosts: 4, spines: 2}\n");
  std::string why;
  EXPECT_FALSE(model::partition(s, 2, why));
  EXPECT_NE(why.find("at most 1 parts"), std::string::npos) << why;
}
