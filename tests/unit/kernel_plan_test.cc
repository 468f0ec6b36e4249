// The kernel plan of a fabric, checked without a kernel: what the realiser will ask for.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include <cstdlib>

#include "fabric/kernel_plan.h"
#include "model/partition.h"
#include "sys/host_info.h"
#include "test_util.h"

using namespace rocelab;
using namespace rocelab::testing;

namespace {
const char* kRail = R"(name: kp
scale: 1000
seed: 42
fabric: {type: rail-optimized, rails: 2, hosts: 4, spines: 2}
)";
}

TEST(KernelPlan, PortsPeersAndMacsAgreeAcrossEveryLink) {
  auto s = must_load(kRail);
  auto kp = fabric::plan_kernel(s);
  ASSERT_EQ(kp.nodes.size(), s.nodes.size());
  ASSERT_EQ(kp.veths.size(), s.links.size());
  std::set<std::string> macs;
  std::set<int> ifindexes;  // unique across the fabric, not only per namespace
  size_t ports = 0;
  for (size_t x = 0; x < kp.nodes.size(); ++x) {
    const auto& n = kp.nodes[x];
    EXPECT_EQ(n.netns, "rl-kp." + n.node);
    for (const auto& p : n.ports) {
      ++ports;
      EXPECT_EQ(p.ifindex, fabric::kFirstPortIfindex + static_cast<int>(p.slot));
      EXPECT_LT(p.slot, kp.ports);
      EXPECT_TRUE(ifindexes.insert(p.ifindex).second) << n.node;
      EXPECT_TRUE(macs.insert(fabric::format_mac(p.mac)).second) << "duplicate MAC " << fabric::format_mac(p.mac);
      EXPECT_EQ(p.mac[0], 0x02) << "locally administered unicast";
      // The peer's view of this link mirrors ours.
      const auto& peer = kp.nodes[p.peer_node];
      auto it = std::find_if(peer.ports.begin(), peer.ports.end(), [&](const auto& q) { return q.link == p.link; });
      ASSERT_NE(it, peer.ports.end());
      EXPECT_EQ(it->ifname, p.peer_ifname);
      EXPECT_EQ(it->ifindex, p.peer_ifindex);
      EXPECT_EQ(it->addr, p.peer_addr);
      EXPECT_EQ(it->mac, p.peer_mac);
      EXPECT_EQ(it->peer_mac, p.mac);
      EXPECT_NE(it->made_here, p.made_here) << "exactly one end creates the pair";
      EXPECT_EQ(p.addr ^ p.peer_addr, 1u) << "the two ends of a /31";
    }
  }
  EXPECT_EQ(ports, kp.ports);
  EXPECT_EQ(kp.ports, 2 * s.links.size());
}

TEST(KernelPlan, RoutesUseThePortIfindexesAndMultiNicHostsGetRules) {
  auto s = must_load(kRail);
  auto kp = fabric::plan_kernel(s);
  const auto& host1 = kp.nodes[*s.find_node("host1")];
  std::map<int, std::string> port_of;
  for (const auto& p : host1.ports) port_of[p.ifindex] = p.ifname;
  ASSERT_EQ(host1.rules.size(), 2u);
  EXPECT_EQ(host1.rules[0].priority, fabric::kFirstRulePriority);
  EXPECT_EQ(host1.rules[1].priority, fabric::kFirstRulePriority + 1);
  EXPECT_EQ(host1.rules[0].src, host1.ports[0].addr);
  for (const auto& r : host1.routes)
    for (const auto& h : r.nexthops) EXPECT_TRUE(port_of.count(h.ifindex)) << "next hop on a port of host1";
  // The per-NIC table sends the whole pool out of that NIC.
  int table = host1.rules[1].table;
  auto it = std::find_if(host1.routes.begin(), host1.routes.end(), [&](const auto& r) { return r.table == table; });
  ASSERT_NE(it, host1.routes.end());
  EXPECT_EQ(it->prefix_len, s.pool.len);
  ASSERT_EQ(it->nexthops.size(), 1u);
  EXPECT_EQ(port_of[it->nexthops[0].ifindex], host1.ports[1].ifname);
}

// qos.ecmp_hash: l3 hashes addresses only (every QP between two NICs on one path).
TEST(KernelPlan, EcmpHashPolicyFollowsTheScenario) {
  auto s = must_load(std::string(kRail) + "qos: {ecmp_hash: l3}\n");
  for (const auto& n : fabric::plan_kernel(s).nodes) {
    std::map<std::string, std::string> v(n.sysctls.begin(), n.sysctls.end());
    EXPECT_EQ(v["net/ipv4/fib_multipath_hash_policy"], "0") << n.node;
  }
  EXPECT_FALSE(errors_of(std::string(kRail) + "qos: {ecmp_hash: l5}\n").empty());
}

// qos.ecmp_groups: resilient puts every main-table route of a switch through a next-hop group
// of ecmp_buckets buckets; hosts keep plain routes; plain is the default.
TEST(KernelPlan, ResilientGroupsOnSwitchesOnly) {
  for (const auto& n : fabric::plan_kernel(must_load(kRail)).nodes)
    for (const auto& r : n.routes) EXPECT_EQ(r.buckets, 0) << n.node;
  auto kp = fabric::plan_kernel(must_load(std::string(kRail) + "qos: {ecmp_groups: resilient, ecmp_buckets: 64}\n"));
  size_t grouped = 0;
  for (const auto& n : kp.nodes)
    for (const auto& r : n.routes) {
      EXPECT_EQ(r.buckets, n.host || r.table ? 0 : 64) << n.node;
      grouped += r.buckets ? 1 : 0;
    }
  EXPECT_GT(grouped, 0u);
  EXPECT_FALSE(errors_of(std::string(kRail) + "qos: {ecmp_groups: sticky}\n").empty());
  EXPECT_FALSE(errors_of(std::string(kRail) + "qos: {ecmp_groups: resilient, ecmp_buckets: 4}\n").empty());
}

TEST(KernelPlan, SysctlsAndSeedsPerNode) {
  auto s = must_load(kRail);
  auto kp = fabric::plan_kernel(s);
  std::set<uint32_t> seeds;
  for (const auto& n : kp.nodes) {
    EXPECT_NE(n.hash_seed, 0u) << "0 would mean a random seed";
    seeds.insert(n.hash_seed);
    std::map<std::string, std::string> v(n.sysctls.begin(), n.sysctls.end());
    EXPECT_EQ(v["net/ipv4/conf/all/forwarding"], n.host ? "0" : "1") << n.node;
    EXPECT_EQ(v["net/ipv4/fib_multipath_hash_policy"], "1");
    EXPECT_EQ(v["net/ipv4/fib_multipath_hash_seed"], std::to_string(n.hash_seed));
    EXPECT_EQ(v["net/ipv6/conf/default/disable_ipv6"], "1");
    EXPECT_EQ(v["net/ipv4/conf/default/rp_filter"], "0");
  }
  EXPECT_EQ(seeds.size(), kp.nodes.size()) << "per-node seeds avoid hash polarisation";
  // The same scenario seed gives the same plan; another seed, other MACs and hash seeds.
  auto again = fabric::plan_kernel(must_load(kRail));
  EXPECT_EQ(again.nodes[3].hash_seed, kp.nodes[3].hash_seed);
  EXPECT_EQ(again.nodes[3].ports[0].mac, kp.nodes[3].ports[0].mac);
  std::string other = kRail;
  other.replace(other.find("seed: 42"), 8, "seed: 43");
  auto diff = fabric::plan_kernel(must_load(other));
  EXPECT_NE(diff.nodes[3].hash_seed, kp.nodes[3].hash_seed);
}

// Hosts in the init namespace (real rxe before 7.1): names unique in the one namespace, one
// table per NIC chosen by its oif (rxe's route lookup) and by its address for locally made
// packets (the kernel's own replies), and both ends of every link still agree.
TEST(KernelPlan, HostsInTheInitNamespaceGetUniqueNamesAndATablePerNic) {
  auto s = must_load(kRail);
  auto kp = fabric::plan_kernel(s, true);
  ASSERT_TRUE(kp.hosts_in_init);
  std::set<std::string> init_names;
  for (const auto& n : kp.nodes) {
    EXPECT_EQ(n.in_init, n.host) << n.node;
    if (!n.host) {
      EXPECT_EQ(n.netns, "rl-kp." + n.node);
      continue;
    }
    EXPECT_TRUE(n.netns.empty()) << n.node;
    ASSERT_EQ(n.routes.size(), n.ports.size());
    ASSERT_EQ(n.rules.size(), 2 * n.ports.size());
    for (size_t i = 0; i < n.ports.size(); ++i) {
      const auto& p = n.ports[i];
      EXPECT_EQ(p.ifname.rfind(n.node + "-", 0), 0u) << p.ifname;
      EXPECT_LE(p.ifname.size(), 15u);
      EXPECT_TRUE(init_names.insert(p.ifname).second) << "two NICs named " << p.ifname;
      const int table = fabric::kInitFirstTable + int(p.slot);
      const auto& r = n.routes[i];
      EXPECT_EQ(r.table, table);
      EXPECT_EQ(r.prefix_len, 0);
      ASSERT_EQ(r.nexthops.size(), 1u);
      EXPECT_EQ(r.nexthops[0].via, p.peer_addr);
      EXPECT_EQ(r.nexthops[0].ifindex, p.ifindex);
      EXPECT_TRUE(r.nexthops[0].onlink);
      const auto& by_oif = n.rules[2 * i];
      const auto& by_src = n.rules[2 * i + 1];
      EXPECT_EQ(by_oif.oif, p.ifname);
      EXPECT_EQ(by_oif.table, table);
      EXPECT_EQ(by_src.src, p.addr);
      EXPECT_EQ(by_src.iif, "lo");
      EXPECT_EQ(by_src.table, table);
      EXPECT_LT(by_oif.priority, fabric::kInitLocalRulePriority) << "ahead of the local table";
    }
    EXPECT_NE(std::find(n.sysctls.begin(), n.sysctls.end(), std::pair<std::string, std::string>{"net/ipv4/conf/all/accept_local", "1"}),
              n.sysctls.end());
  }
  // The switches' view of each renamed NIC.
  for (const auto& n : kp.nodes)
    for (const auto& p : n.ports) {
      const auto& peer = kp.nodes[p.peer_node];
      auto it = std::find_if(peer.ports.begin(), peer.ports.end(), [&](const auto& q) { return q.ifindex == p.peer_ifindex; });
      ASSERT_NE(it, peer.ports.end());
      EXPECT_EQ(it->ifname, p.peer_ifname);
    }
}

TEST(KernelPlan, OnlyRxeHostsAskForTheInitNamespace) {
  auto s = must_load(kRail);
  auto builtin = fabric::hosts_in_init_netns(s);
  ASSERT_TRUE(builtin);
  EXPECT_FALSE(*builtin);
  s.hosts.engine = "rxe";
  const bool namespaced = sys::kernel_info().at_least(7, 1);  // rxe follows namespaces there
  unsetenv("ROCELAB_DEDICATED_MACHINE");
  auto refused = fabric::hosts_in_init_netns(s);
  if (namespaced) {
    ASSERT_TRUE(refused);
    EXPECT_FALSE(*refused);
  } else {
    ASSERT_FALSE(refused) << "a machine not marked as the testbed's is never rearranged";
    EXPECT_NE(refused.error().what.find("--vm"), std::string::npos) << refused.error().what;
  }
  setenv("ROCELAB_DEDICATED_MACHINE", "1", 1);
  auto marked = fabric::hosts_in_init_netns(s);
  unsetenv("ROCELAB_DEDICATED_MACHINE");
  ASSERT_TRUE(marked);
  EXPECT_EQ(*marked, !namespaced);
}

// A port gets a queue (an HTB class) only for a priority traffic can reach: the DSCP map's
// image, 0 (what is not IP), the lossless and PFC ones. Each class is a tc block the kernel
// lists machine-wide, so the unreachable ones only slowed bring-up.
TEST(KernelPlan, QueuesOnlyForReachablePriorities) {
  auto queues_of = [](const std::string& yaml) {
    const auto s = must_load(yaml);
    const auto kp = fabric::plan_kernel(s);
    std::set<uint8_t> seen;
    for (const auto& np : kp.nodes)
      for (const auto& p : np.ports) seen.insert(fabric::scheduler_of(kp, np, p).queues);
    EXPECT_EQ(seen.size(), 1u) << "every port has the same queues";
    return seen.empty() ? uint8_t(0) : *seen.begin();
  };
  const std::string fabric = "scale: 1000\nfabric: {type: leaf-spine, spines: 1, leaves: 2, hosts_per_leaf: 1}\n";
  // The default map: DSCP 24-31 -> 3, 48-55 -> 6, the rest -> 0; PFC on 3.
  EXPECT_EQ(queues_of(fabric), 0b0100'1001);
  // A map that sends DSCP 10 to 1 and PFC on 4, which no DSCP reaches: both get a queue.
  EXPECT_EQ(queues_of(fabric + "qos: {dscp_map: {10: 1}, lossless: [3, 4], pfc: {priorities: [3, 4]}}\n"), 0b0101'1011);
  // Lossy: nothing pauses; still the map's three.
  EXPECT_EQ(queues_of(fabric + "qos: {profile: lossy}\n"), 0b0100'1001);
}

// Link delay (issue 16): where the kernel has netem, each delayed link runs through the wire
// namespace, delayed by physical x D, and its ends' headroom counts the round trip
// (2 x delay x rate, in physical bytes); links without delay, and a plan nobody applied the
// delay to, are untouched.
TEST(KernelPlan, DelayedLinksRunThroughTheWireAndTheirHeadroomCountsTheRoundTrip) {
  const auto s = must_load(R"(name: kp
scale: 1000
defaults: {rate: 100G, mtu: 4200}
nodes: [{name: sw, kind: switch}, {name: h1, kind: host}, {name: h2, kind: host}, {name: h3, kind: host}]
links:
  - {endpoints: [h1, sw], delay: 1us}
  - {endpoints: [h2, sw]}
  - {endpoints: [sw, h3], delay: 100ns, rate: 400G}
)");
  auto kp = fabric::plan_kernel(s);
  const auto& sw = kp.nodes[0];
  const auto before = fabric::headroom_inputs(kp, sw);
  for (const auto& h : before) EXPECT_EQ(h.base, 2u * 4200) << "no delay applied yet: the plain base";
  EXPECT_TRUE(kp.wire.netns.empty());
  for (const auto& v : kp.veths) EXPECT_EQ(v.wire, -1);

  fabric::apply_link_delay(kp, "rl-kp._wire");
  EXPECT_EQ(kp.wire.netns, "rl-kp._wire");
  ASSERT_EQ(kp.wire.links.size(), 2u);
  EXPECT_EQ(kp.wire.links[0].link, 0u);
  EXPECT_EQ(kp.wire.links[0].delay_ns, 1'000'000u) << "1 us physical at D = 1000: 1 ms of wall clock";
  EXPECT_EQ(kp.wire.links[1].link, 2u);
  EXPECT_EQ(kp.wire.links[1].delay_ns, 100'000u);
  EXPECT_EQ(kp.veths[0].wire, 0);
  EXPECT_EQ(kp.veths[1].wire, -1);
  EXPECT_EQ(kp.veths[2].wire, 1);
  // The two devices of wire link i differ in the lowest bit only (wire.bpf.c flips it).
  EXPECT_EQ(fabric::WirePlan::ifindex(1, false) ^ 1, fabric::WirePlan::ifindex(1, true));
  EXPECT_EQ(fabric::WirePlan::ifindex(0, false) % 2, 0);

  // 100 Gbit/s x 1 us x 2 = 25,000 bytes; 400 Gbit/s x 100 ns x 2 = 10,000; the undelayed
  // link none. Emulated rate x emulated delay: the same physical bytes.
  const auto after = fabric::headroom_inputs(kp, sw);
  std::map<size_t, uint32_t> base_by_link;
  for (size_t i = 0; i < sw.ports.size(); ++i) base_by_link[sw.ports[i].link] = after[i].base;
  EXPECT_EQ(base_by_link[0], 2u * 4200 + 25'000);
  EXPECT_EQ(base_by_link[1], 2u * 4200);
  EXPECT_EQ(base_by_link[2], 2u * 4200 + 10'000);
  // netem holds the packets in flight: never fewer than its default 1,000.
  EXPECT_GE(kp.wire.links[0].limit, 1000u + 25'000 / 64);

  // A headroom the scenario states is the switch's configuration: kept as given.
  auto given = fabric::plan_kernel(must_load(R"(name: kp
scale: 1000
qos: {pfc: {headroom: 50KB}}
nodes: [{name: sw, kind: switch}, {name: h1, kind: host}]
links: [{endpoints: [h1, sw], delay: 1us}]
)"));
  fabric::apply_link_delay(given, "rl-kp._wire");
  EXPECT_EQ(fabric::headroom_inputs(given, given.nodes[0]).front().base, 50u * 1024);
}

// A link cut between machines keeps its delay out of the wire and out of its headroom (the
// underlay's latency is what it has); the machine's own delayed links get both.
TEST(KernelPlan, CutLinksTakeNoWireAndNoRoundTrip) {
  const auto s = must_load("name: kp\nscale: 1000\ndefaults: {rate: 100G, delay: 1us}\n"
                           "fabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 2}\n");
  std::string why;
  const auto p = model::partition(s, 2, why);
  ASSERT_TRUE(p) << why;
  auto kp = fabric::plan_kernel(s);
  fabric::take_part(kp, *p, 0, {0xC612FE00, 0xC612FE01});
  fabric::apply_link_delay(kp, "rl-kp._wire");
  ASSERT_EQ(kp.part.cuts.size(), 2u);
  size_t wired = 0;
  for (size_t x = 0; x < kp.nodes.size(); ++x) {
    if (!kp.part.has(x)) continue;
    for (const auto& port : kp.nodes[x].ports) {
      if (port.cut >= 0) {
        EXPECT_EQ(kp.veths[port.link].wire, -1) << kp.nodes[x].node << ":" << port.ifname;
        EXPECT_EQ(fabric::round_trip_bytes(kp, port), 0u) << kp.nodes[x].node << ":" << port.ifname;
      } else {
        EXPECT_GE(kp.veths[port.link].wire, 0);
        EXPECT_EQ(fabric::round_trip_bytes(kp, port), 25'000u);  // 2 x 1 us x 100 Gbit/s
        ++wired;
      }
    }
  }
  EXPECT_EQ(kp.wire.links.size(), 3u) << "part 0's two host links and leaf1-spine1";
  EXPECT_EQ(wired, 6u) << "each of those links' two ends";
}
