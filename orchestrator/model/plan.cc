// Routes: every node gets, for every routed prefix, all equal-cost next hops on shortest
// paths. Routed prefixes are the /32 loopbacks and the /31s of host NICs (what RoCE traffic
// is addressed to); switch-to-switch /31s stay connected-only, as in a BGP-unnumbered-style
// fabric. Hosts never forward: they are sources and destinations, not transit. A host with
// one NIC on a switch reaches everything through that switch, so it gets one route to the
// pool instead (what a real host's default route to its ToR does, and no more: no default
// route, the fabric stays sealed): a k = 16 fat-tree's hosts held 2.4 million identical
// routes, three quarters of the fabric's.
#include <algorithm>
#include <deque>
#include <limits>

#include "model/raw.h"

namespace rocelab::model {

namespace {
constexpr int kFirstNicTable = 100;  // table 100 + i holds NIC i's source route
constexpr int kUnreached = std::numeric_limits<int>::max();

// Hop distance from every node to `target`, walking only through switches and live links.
std::vector<int> distances_to(const Scenario& s, size_t target, const std::vector<bool>& dead) {
  std::vector<int> dist(s.nodes.size(), kUnreached);
  std::deque<size_t> queue{target};
  dist[target] = 0;
  while (!queue.empty()) {
    size_t u = queue.front();
    queue.pop_front();
    if (u != target && s.nodes[u].kind == NodeKind::kHost) continue;  // no transit through hosts
    for (size_t li : s.nodes[u].ports) {
      if (dead[li]) continue;
      size_t v = s.links[li].peer_of(u).node;
      if (dist[v] == kUnreached) {
        dist[v] = dist[u] + 1;
        queue.push_back(v);
      }
    }
  }
  return dist;
}
}  // namespace

std::vector<NodeRoutes> plan_routes(const Scenario& s) { return plan_routes(s, {}); }

std::vector<NodeRoutes> plan_routes(const Scenario& s, const std::vector<size_t>& down) {
  std::vector<bool> dead(s.links.size(), false);
  for (size_t li : down)
    if (li < dead.size()) dead[li] = true;
  std::vector<NodeRoutes> out(s.nodes.size());
  // Each routed prefix with the node that delivers it and the node(s) that have it connected.
  struct Dest {
    Ipv4Prefix prefix;
    size_t target;
    size_t other = std::numeric_limits<size_t>::max();  // the host end of a NIC /31
  };
  std::vector<Dest> dests;
  for (size_t i = 0; i < s.nodes.size(); ++i) dests.push_back({s.nodes[i].loopback, i});
  for (size_t li = 0; li < s.links.size(); ++li) {
    const Link& l = s.links[li];
    bool ha = s.nodes[l.a.node].kind == NodeKind::kHost, hb = s.nodes[l.b.node].kind == NodeKind::kHost;
    if (ha != hb && !dead[li]) dests.push_back({l.subnet, ha ? l.b.node : l.a.node, ha ? l.a.node : l.b.node});
  }
  std::sort(dests.begin(), dests.end(), [](const Dest& x, const Dest& y) { return x.prefix < y.prefix; });

  // Single-NIC hosts on a switch: one pool route while their link lives, none when it is dead.
  std::vector<bool> uplinked(s.nodes.size(), false);
  for (size_t x = 0; x < s.nodes.size(); ++x) {
    const Node& n = s.nodes[x];
    if (n.kind != NodeKind::kHost || n.ports.size() != 1) continue;
    const Link& l = s.links[n.ports.front()];
    if (s.nodes[l.peer_of(x).node].kind != NodeKind::kSwitch) continue;
    uplinked[x] = true;
    if (!dead[n.ports.front()]) out[x].routes.push_back(Route{s.pool, {NextHop{l.peer_of(x).addr, l.end(x).ifname}}, 0});
  }
  std::vector<std::vector<int>> dist_cache(s.nodes.size());
  for (const Dest& d : dests) {
    auto& dist = dist_cache[d.target];
    if (dist.empty()) dist = distances_to(s, d.target, dead);
    for (size_t x = 0; x < s.nodes.size(); ++x) {
      if (x == d.target || x == d.other || uplinked[x] || dist[x] == kUnreached) continue;
      Route r;
      r.dst = d.prefix;
      for (size_t li : s.nodes[x].ports) {
        if (dead[li]) continue;
        const Link& l = s.links[li];
        size_t peer = l.peer_of(x).node;
        bool can_carry = peer == d.target || s.nodes[peer].kind == NodeKind::kSwitch;
        if (can_carry && dist[peer] != kUnreached && dist[peer] == dist[x] - 1)
          r.nexthops.push_back(NextHop{l.peer_of(x).addr, l.end(x).ifname});
      }
      std::sort(r.nexthops.begin(), r.nexthops.end());
      if (!r.nexthops.empty()) out[x].routes.push_back(std::move(r));
    }
  }
  // Multi-NIC hosts: traffic from NIC i's address leaves through NIC i (rail i's leaf).
  for (size_t x = 0; x < s.nodes.size(); ++x) {
    const Node& n = s.nodes[x];
    if (n.kind != NodeKind::kHost || n.ports.size() < 2) continue;
    int nic = 0;
    for (size_t li : n.ports) {
      const Link& l = s.links[li];
      int table = kFirstNicTable + nic++;
      out[x].rules.push_back(SourceRule{l.end(x).addr, table, l.end(x).ifname});
      if (dead[li]) continue;  // the rule stays; its table is empty while the NIC's link is down
      Route r;
      r.dst = s.pool;
      r.table = table;
      r.nexthops.push_back(NextHop{l.peer_of(x).addr, l.end(x).ifname});
      out[x].routes.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace rocelab::model
