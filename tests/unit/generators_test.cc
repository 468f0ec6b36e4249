// Generators and the address/route plan against expectations computed by hand.
#include <gtest/gtest.h>

#include <unordered_set>

#include "test_util.h"

using namespace rocelab::model;
using namespace rocelab::testing;
using S = std::set<std::string>;

TEST(LeafSpine, TwoByTwoByTwo) {
  auto s = must_load("scale: 1000\nfabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 2}\n");
  // 2 spines + 2 leaves + 2 x 2 hosts; 2 x 2 uplinks + 4 host links.
  EXPECT_EQ(s.count(NodeKind::kSwitch), 4u);
  EXPECT_EQ(s.count(NodeKind::kHost), 4u);
  EXPECT_EQ(s.links.size(), 8u);
  // Loopbacks from 198.18.0.1 in node order, /31s from 198.18.1.0 in link order.
  EXPECT_EQ(format_prefix(s.nodes[*s.find_node("spine1")].loopback), "198.18.0.1/32");
  EXPECT_EQ(format_prefix(s.nodes[*s.find_node("host4")].loopback), "198.18.0.8/32");
  const Link& l11 = link_between(s, "leaf1", "spine1");
  EXPECT_EQ(format_prefix(l11.subnet), "198.18.1.0/31");
  EXPECT_EQ(l11.a.ifname, "spine1");  // a leaf's port is named after its peer
  EXPECT_EQ(l11.b.ifname, "leaf1");
  const Link& h3 = link_between(s, "host3", "leaf2");
  EXPECT_EQ(format_prefix(h3.subnet), "198.18.1.12/31");
  EXPECT_EQ(format_ipv4(h3.a.addr), "198.18.1.12");  // the host takes the even address
  EXPECT_EQ(h3.a.ifname, "nic0");
  // ECMP: leaf1 reaches host3's subnet through both spines; spine1 through leaf2 only.
  EXPECT_EQ(nexthops(s, "leaf1", "198.18.1.12/31"), (S{"198.18.1.1@spine1", "198.18.1.3@spine2"}));
  EXPECT_EQ(nexthops(s, "spine1", "198.18.1.12/31"), (S{"198.18.1.4@leaf2"}));
  EXPECT_EQ(nexthops(s, "host1", "198.18.1.12/31"), (S{"198.18.1.9@nic0"}));
  EXPECT_EQ(nexthops(s, "leaf1", "198.18.0.4/32"), (S{"198.18.1.1@spine1", "198.18.1.3@spine2"}));  // leaf2's loopback
  // Routed prefixes: 8 loopbacks + 4 host /31s = 12, less what a node has itself.
  EXPECT_EQ(route_count(s, "spine1"), 11u);
  EXPECT_EQ(route_count(s, "leaf1"), 9u);   // own loopback, 2 connected host /31s
  EXPECT_EQ(route_count(s, "host1"), 1u);   // the pool, to leaf1
  EXPECT_EQ(s.oversubscription(), 1.0);
}

// A link fault's reconvergence: the routes a routing protocol would leave with links down.
TEST(LeafSpine, RoutesWithLinksDownAvoidThemAndWithdrawWhatIsCutOff) {
  auto s = must_load("scale: 1000\nfabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 2}\n");
  auto index_of = [&](const Link& l) { return size_t(&l - s.links.data()); };
  auto with = [&](std::vector<size_t> down) {
    Scenario t = s;
    t.routes = plan_routes(s, down);
    return t;
  };
  const size_t up11 = index_of(link_between(s, "leaf1", "spine1"));
  auto t = with({up11});
  // leaf2 reaches host1's subnet only through spine2; spine1 by the shortest live path, down
  // through leaf2 and up again (a link-state IGP's answer; BGP's valley-free policy has none).
  EXPECT_EQ(nexthops(t, "leaf2", "198.18.1.8/31"), (S{"198.18.1.7@spine2"}));
  EXPECT_EQ(nexthops(t, "spine1", "198.18.1.8/31"), (S{"198.18.1.4@leaf2"}));
  EXPECT_EQ(nexthops(t, "leaf1", "198.18.1.12/31"), (S{"198.18.1.3@spine2"}));
  // Unaffected: leaf2 to host3's subnet is its own; spine2's routes stay as they were.
  EXPECT_EQ(nexthops(t, "spine2", "198.18.1.8/31"), nexthops(s, "spine2", "198.18.1.8/31"));
  EXPECT_EQ(with({}).routes.size(), s.routes.size());
  EXPECT_EQ(nexthops(with({}), "leaf1", "198.18.1.12/31"), nexthops(s, "leaf1", "198.18.1.12/31"));
  // host3's link down: its subnet is withdrawn everywhere (host1 still hands it to its leaf,
  // which has no route left), host3 has no routes left.
  t = with({index_of(link_between(s, "host3", "leaf2"))});
  EXPECT_EQ(nexthops(t, "leaf1", "198.18.1.12/31"), S{});
  EXPECT_EQ(nexthops(t, "spine1", "198.18.1.12/31"), S{});
  EXPECT_EQ(nexthops(t, "host1", "198.18.1.12/31"), (S{"198.18.1.9@nic0"}));
  EXPECT_EQ(route_count(t, "host3"), 0u);
  // Both of leaf1's uplinks down: leaf1 reaches nothing beyond itself (host2's /31 on it is
  // connected, no route), and its hosts still hand everything to it.
  t = with({up11, index_of(link_between(s, "leaf1", "spine2"))});
  EXPECT_EQ(nexthops(t, "leaf1", "198.18.1.12/31"), S{});
  EXPECT_EQ(nexthops(t, "leaf1", "198.18.0.4/32"), S{}) << "leaf2's loopback";
  EXPECT_EQ(nexthops(t, "host1", "198.18.1.10/31"), (S{"198.18.1.9@nic0"})) << "host2, on the same leaf";
}

// A single-NIC host on a switch routes the whole pool to it, as a host's default route to
// its ToR does; a host cabled to another host keeps per-destination routes.
TEST(LeafSpine, SingleNicHostsRouteThePoolToTheirLeaf) {
  auto s = must_load("scale: 1000\nfabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 2}\n");
  const auto& r = s.routes[*s.find_node("host1")].routes;
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(format_prefix(r.front().dst), format_prefix(s.pool));
  EXPECT_EQ(nexthops(s, "host1", "198.18.1.12/31"), (S{"198.18.1.9@nic0"}));
  EXPECT_EQ(nexthops(s, "leaf1", "198.18.1.12/31").size(), 2u) << "the leaf still holds the fabric's routes";
  auto d = must_load(
      "scale: 1000\nnodes: [{name: a, kind: host}, {name: b, kind: host}]\nlinks: [{endpoints: [a, b]}]\n");
  EXPECT_EQ(route_count(d, "a"), 1u) << "b's loopback, not the pool";
  EXPECT_NE(format_prefix(d.routes[*d.find_node("a")].routes.front().dst), format_prefix(d.pool));
}

TEST(LeafSpine, FourByEightByFour) {
  auto s = must_load("scale: 1000\nfabric: {type: leaf-spine, spines: 4, leaves: 8, hosts_per_leaf: 4}\n");
  EXPECT_EQ(s.count(NodeKind::kSwitch), 12u);
  EXPECT_EQ(s.count(NodeKind::kHost), 32u);
  EXPECT_EQ(s.nodes.size(), 44u);
  EXPECT_EQ(s.links.size(), 64u);  // 8 x 4 uplinks + 32 host links
  // 76 routed prefixes (44 loopbacks, 32 host /31s).
  EXPECT_EQ(route_count(s, "spine1"), 75u);
  EXPECT_EQ(route_count(s, "leaf1"), 71u);
  EXPECT_EQ(route_count(s, "host1"), 1u);  // the pool, to leaf1
  // host32 (leaf8): reached from leaf1 over all four spines.
  const Link& h32 = link_between(s, "host32", "leaf8");
  EXPECT_EQ(nexthops(s, "leaf1", format_prefix(h32.subnet)).size(), 4u);
  // Every /31 is distinct, inside the pool, and leaves room for the loopback block.
  std::unordered_set<uint32_t> seen;
  for (const auto& l : s.links) {
    EXPECT_TRUE(kDefaultPool.contains(l.subnet));
    EXPECT_TRUE(seen.insert(l.subnet.addr).second);
    EXPECT_GE(l.subnet.addr, kDefaultPool.addr + 256);
  }
}

TEST(LeafSpine, ParallelUplinksNicsAndOversubscription) {
  auto s = must_load(
      "scale: 1000\nfabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 4, nics_per_host: 2,\n"
      "  uplinks: 2, oversubscription: 2}\n");
  EXPECT_EQ(s.links.size(), 2u * 2 * 2 + 8u * 2);
  // 4 hosts x 2 NICs x 100G down = 800G; up = 2 spines x 2 links x R; ratio 2 -> R = 100G.
  EXPECT_EQ(link_between(s, "leaf1", "spine1").rate.bps, 100000000000ULL);
  EXPECT_DOUBLE_EQ(s.oversubscription(), 2.0);
  // Parallel links get "-k" suffixes; four ECMP next hops from leaf1 to leaf2's loopback.
  EXPECT_EQ(nexthops(s, "leaf1", "198.18.0.4/32").size(), 4u);
  const Node& host1 = s.nodes[*s.find_node("host1")];
  EXPECT_EQ(host1.ports.size(), 2u);
  EXPECT_EQ(s.links[host1.ports[1]].a.ifname, "nic1");
  EXPECT_EQ(s.links[host1.ports[1]].b.ifname, "host1-1");
  // A multi-NIC host routes each NIC's traffic out of that NIC.
  EXPECT_EQ(s.routes[*s.find_node("host1")].rules.size(), 2u);
}

TEST(RailOptimized, TwoRailsFourHostsTwoNics) {
  auto s = must_load("scale: 1000\nfabric: {type: rail-optimized, rails: 2, hosts: 4, spines: 2}\n");
  // 2 spines + 2 rail leaves + 4 hosts; rails x spines uplinks + hosts x rails NIC links.
  EXPECT_EQ(s.count(NodeKind::kSwitch), 4u);
  EXPECT_EQ(s.count(NodeKind::kHost), 4u);
  EXPECT_EQ(s.links.size(), 4u + 8u);
  // NIC i of every host cables to rail i.
  for (int h = 1; h <= 4; ++h) {
    const Node& host = s.nodes[*s.find_node("host" + std::to_string(h))];
    ASSERT_EQ(host.ports.size(), 2u);
    for (int i = 0; i < 2; ++i) {
      const Link& l = s.links[host.ports[static_cast<size_t>(i)]];
      EXPECT_EQ(l.a.ifname, "nic" + std::to_string(i));
      EXPECT_EQ(s.nodes[l.b.node].name, "rail" + std::to_string(i));
    }
  }
  // Host links: host1 nic0 198.18.1.8/31 (after 4 uplinks), nic1 .10; host2 nic0 .12, nic1 .14.
  auto host1 = *s.find_node("host1");
  EXPECT_EQ(format_ipv4(s.links[s.nodes[host1].ports[0]].a.addr), "198.18.1.8");
  EXPECT_EQ(format_ipv4(s.links[s.nodes[host1].ports[1]].a.addr), "198.18.1.10");
  // host1 reaches host2's rail-1 NIC directly over its own rail-1 NIC.
  EXPECT_EQ(nexthops(s, "host1", "198.18.1.14/31"), (S{"198.18.1.11@nic1"}));
  // host2's loopback is two hops away over either rail: ECMP over both NICs.
  EXPECT_EQ(nexthops(s, "host1", format_prefix(s.nodes[*s.find_node("host2")].loopback)),
            (S{"198.18.1.9@nic0", "198.18.1.11@nic1"}));
  // rail0 reaches a rail-1 NIC through the spines, never through a host.
  EXPECT_EQ(nexthops(s, "rail0", "198.18.1.14/31"), (S{"198.18.1.1@spine1", "198.18.1.3@spine2"}));
  // Source routing: from NIC i's address, table 100+i, which sends the pool via rail i.
  const auto& rules = s.routes[host1].rules;
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(format_ipv4(rules[1].from), "198.18.1.10");
  EXPECT_EQ(rules[1].table, 101);
  EXPECT_EQ(nexthops(s, "host1", "198.18.0.0/15", 101), (S{"198.18.1.11@nic1"}));
}

TEST(FatTree, KFour) {
  auto s = must_load("scale: 1000\nfabric: {type: fat-tree, k: 4}\n");
  // (k/2)^2 = 4 cores, k pods x (2 agg + 2 edge) = 16; k^3/4 = 16 hosts.
  EXPECT_EQ(s.count(NodeKind::kSwitch), 20u);
  EXPECT_EQ(s.count(NodeKind::kHost), 16u);
  // 16 host links + 16 edge-agg + 16 agg-core.
  EXPECT_EQ(s.links.size(), 48u);
  for (const Node& n : s.nodes) {
    size_t want = n.role == "host" ? 1 : 4;  // every switch has k ports
    EXPECT_EQ(n.ports.size(), want) << n.name;
  }
  // host16 sits under edge4-2. From edge1-1: up through both aggs of pod 1.
  const Link& h16 = link_between(s, "host16", "edge4-2");
  std::string dst = format_prefix(h16.subnet);
  EXPECT_EQ(nexthops(s, "edge1-1", dst).size(), 2u);
  // agg1-1 reaches another pod through its two cores (core1, core2).
  auto up = nexthops(s, "agg1-1", dst);
  ASSERT_EQ(up.size(), 2u);
  EXPECT_NE(up.begin()->find("@core1"), std::string::npos);
  EXPECT_NE(std::next(up.begin())->find("@core2"), std::string::npos);
  // core1 connects to agg i=1 of every pod: one way down into pod 4.
  EXPECT_EQ(nexthops(s, "core1", dst).size(), 1u);
  EXPECT_NE(nexthops(s, "core1", dst).begin()->find("@agg4-1"), std::string::npos);
  // Within a pod, edge1-1 reaches edge1-2's hosts through both aggregation switches.
  const Link& h3 = link_between(s, "host3", "edge1-2");
  EXPECT_EQ(nexthops(s, "edge1-1", format_prefix(h3.subnet)).size(), 2u);
}

TEST(Explicit, OverrideLayers) {
  auto s = must_load(R"(scale: 1000
defaults: {rate: 100G, mtu: 9000}
kinds: {switch: {rate: 400G}, host: {rate: 200G}}
nodes:
  - {name: sw1, kind: switch}
  - {name: sw2, kind: switch}
  - {name: h1, kind: host}
  - {name: h2, kind: host, mtu: 4200}
links:
  - endpoints: [sw1, sw2]
  - endpoints: [sw1:p2, sw2:p2]
    rate: 800G
  - endpoints: [h1, sw1]
  - endpoints: [h2, sw2]
)");
  EXPECT_EQ(link_between(s, "h1", "sw1").rate.bps, 200000000000ULL);  // kind layer: the slower end
  EXPECT_EQ(link_between(s, "h1", "sw1").mtu, 9000u);                  // defaults
  EXPECT_EQ(link_between(s, "h2", "sw2").mtu, 4200u);                  // node layer beats defaults
  EXPECT_EQ(s.links[0].rate.bps, 400000000000ULL);                     // kind: both switches
  EXPECT_EQ(s.links[1].rate.bps, 800000000000ULL);                     // link layer beats all
  EXPECT_EQ(s.links[1].a.ifname, "p2");
}

TEST(Generated, NodeAndLinkOverridesApplyOnTop) {
  auto s = must_load(R"(scale: 1000
fabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 1, uplink_rate: 400G}
nodes:
  - {name: host1, rate: 25G}
links:
  - {endpoints: [leaf2, spine2], rate: 200G}
)");
  EXPECT_EQ(link_between(s, "host1", "leaf1").rate.bps, 25000000000ULL);
  EXPECT_EQ(link_between(s, "host2", "leaf2").rate.bps, 100000000000ULL);
  EXPECT_EQ(link_between(s, "leaf2", "spine2").rate.bps, 200000000000ULL);
  EXPECT_EQ(link_between(s, "leaf1", "spine2").rate.bps, 400000000000ULL);
}

// A kind setting only one end's value does not lift the other end above its own layers:
// the link takes the lower of the two ends' effective values.
TEST(Generated, EachEndKeepsItsOwnLayersAndTheLinkTakesTheLower) {
  auto s = must_load(R"(scale: 1000
defaults: {mtu: 4200}
kinds: {switch: {mtu: 9000}}
fabric: {type: leaf-spine, spines: 1, leaves: 1, hosts_per_leaf: 2}
nodes:
  - {name: leaf1, rate: 25G}
  - {name: host2, mtu: 9000}
)");
  EXPECT_EQ(link_between(s, "leaf1", "spine1").mtu, 9000u);              // both ends switches
  EXPECT_EQ(link_between(s, "host1", "leaf1").mtu, 4200u);               // host end: defaults
  EXPECT_EQ(link_between(s, "host2", "leaf1").mtu, 9000u);               // host end: node layer
  EXPECT_EQ(link_between(s, "host1", "leaf1").rate.bps, 25000000000ULL); // leaf1's node layer
  EXPECT_EQ(link_between(s, "leaf1", "spine1").rate.bps, 25000000000ULL);
}

TEST(Addressing, SmallPoolPacksAndPinsAreKept) {
  auto s = must_load(R"(scale: 1000
addressing: {pool: 198.18.7.0/26}
nodes:
  - {name: a, kind: switch, loopback: 198.18.7.50}
  - {name: b, kind: host}
links:
  - {endpoints: [b, a], subnet: 198.18.7.2/31}
)");
  EXPECT_EQ(format_prefix(s.nodes[0].loopback), "198.18.7.50/32");
  EXPECT_EQ(format_prefix(s.nodes[1].loopback), "198.18.7.1/32");
  EXPECT_EQ(format_prefix(s.links[0].subnet), "198.18.7.2/31");
}
