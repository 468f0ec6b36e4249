#include "fabric/kernel_plan.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "fabric/agent_protocol.h"
#include "fabric/port_config.h"
#include "sys/host_info.h"
#include "sys/state_log.h"

namespace rocelab::fabric {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// Per-node hash seeds: equal seeds on every tier would correlate the choices of successive
// ECMP stages (hash polarisation); distinct seeds derived from the scenario seed keep runs
// reproducible.
uint32_t node_hash_seed(uint64_t seed, std::string_view node) {
  auto v = static_cast<uint32_t>(splitmix64(seed ^ fnv1a(node)));
  return v ? v : 1;
}

std::vector<std::pair<std::string, std::string>> node_sysctls(bool host, uint32_t hash_seed, const std::string& hash) {
  // conf/default is written before any port exists so new ports inherit it; conf/all
  // because the kernel combines it with the per-device value (rp_filter takes the max).
  std::vector<std::pair<std::string, std::string>> v = {
      {"net/ipv6/conf/all/disable_ipv6", "1"},  // no DAD, RS or MLD noise on the wire
      {"net/ipv6/conf/default/disable_ipv6", "1"},
      {"net/ipv4/conf/all/forwarding", host ? "0" : "1"},
      {"net/ipv4/conf/default/forwarding", host ? "0" : "1"},
      {"net/ipv4/conf/all/rp_filter", "0"},  // ECMP and multi-NIC paths are asymmetric
      {"net/ipv4/conf/default/rp_filter", "0"},
      {"net/ipv4/conf/all/accept_redirects", "0"},
      {"net/ipv4/conf/default/accept_redirects", "0"},
      {"net/ipv4/conf/all/send_redirects", "0"},
      {"net/ipv4/conf/default/send_redirects", "0"},
      {"net/ipv4/icmp_echo_ignore_all", "0"},
      {"net/ipv4/icmp_ratelimit", "0"},  // the connectivity check pings many pairs at once
      // l4: per-QP UDP source ports spread flows; l3: addresses only (qos.ecmp_hash).
      {"net/ipv4/fib_multipath_hash_policy", hash == "l3" ? "0" : "1"},
      {"net/ipv4/fib_multipath_hash_seed", std::to_string(hash_seed)},
  };
  return v;
}

// Hosts sharing the init namespace: unique port names, and each NIC's traffic kept on its
// own wire. rxe routes with the NIC as oif; the kernel answers pings from the address
// pinged: both pick the NIC's table ahead of the local one, which would otherwise deliver
// a packet for another host's address straight back up the stack.
void place_hosts_in_init(KernelPlan& kp) {
  for (NodePlan& np : kp.nodes) {
    if (!np.host) continue;
    np.in_init = true;
    np.netns.clear();
    np.routes.clear();
    np.rules.clear();
    for (PortPlan& p : np.ports) {
      const std::string joined = np.node + "-" + p.ifname;
      p.ifname = joined.size() <= 15 ? joined : "rl" + std::to_string(p.ifindex);
      const int table = kInitFirstTable + static_cast<int>(p.slot);
      np.routes.push_back({0, 0, table, {{p.peer_addr, p.ifindex, true}}, 0});
      np.rules.push_back({0, table, kInitNicRulePriority, "", p.ifname});
      np.rules.push_back({p.addr, table, kInitNicRulePriority, "lo", ""});
    }
    // Packets from another host's address arrive on every NIC: local sources are accepted.
    np.sysctls.push_back({"net/ipv4/conf/all/accept_local", "1"});
    np.sysctls.push_back({"net/ipv4/conf/default/accept_local", "1"});
  }
  for (NodePlan& np : kp.nodes)
    for (PortPlan& p : np.ports)
      for (const PortPlan& q : kp.nodes[p.peer_node].ports)
        if (q.ifindex == p.peer_ifindex) p.peer_ifname = q.ifname;
}

}  // namespace

std::string rxe_device_name(const std::string& instance, size_t slot) {
  return "rl-" + instance.substr(0, 48) + "-" + std::to_string(slot);
}

netlink::Mac port_mac(uint64_t seed, size_t node, size_t port) {
  return {0x02,
          static_cast<uint8_t>(splitmix64(seed) & 0xff),
          static_cast<uint8_t>(node >> 8),
          static_cast<uint8_t>(node),
          static_cast<uint8_t>(port >> 8),
          static_cast<uint8_t>(port)};
}

std::string format_mac(const netlink::Mac& m) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return buf;
}

std::vector<netlink::RouteSpec> route_specs(const NodePlan& np, const model::NodeRoutes& routes) {
  std::map<std::string, int> ifindex_of;
  for (const PortPlan& p : np.ports) ifindex_of[p.ifname] = p.ifindex;
  std::vector<netlink::RouteSpec> out;
  for (const model::Route& r : routes.routes) {
    netlink::RouteSpec rs{r.dst.addr, r.dst.len, r.table, {}, r.table == 0 ? np.ecmp_buckets : uint16_t(0)};
    for (const model::NextHop& h : r.nexthops) rs.nexthops.push_back({h.via, ifindex_of.at(h.dev)});
    out.push_back(std::move(rs));
  }
  return out;
}

KernelPlan plan_kernel(const model::Scenario& s, bool hosts_in_init) {
  KernelPlan kp;
  kp.hosts_in_init = hosts_in_init;
  kp.rxe = s.hosts.engine == "rxe";
  kp.port_config = make_port_config(s.qos);
  // Each packet's ECN draw is keyed by the seed (mark_draw in ebpf/queue_depth.bpf.h).
  kp.port_config.draw_key = static_cast<uint32_t>(splitmix64(s.seed ^ 0x65636e64ULL));
  for (const auto& l : s.links) kp.max_link_delay_ns = std::max(kp.max_link_delay_ns, l.delay.ns);
  if (const auto& w = s.qos.pfc.watchdog; w.enabled && w.detection && w.restoration && w.poll) {
    kp.watchdog = true;
    kp.wd_detection_ns = s.scale.emulate(*w.detection).ns;
    kp.wd_restoration_ns = s.scale.emulate(*w.restoration).ns;
    kp.wd_poll_ns = s.scale.emulate(*w.poll).ns;
    kp.wd_action = w.action;
    kp.wd_predicate = w.predicate;
    kp.seed = s.seed;
  }
  kp.scale = s.scale.factor();
  if (s.qos.pfc.headroom) kp.pfc_headroom = static_cast<uint32_t>(std::min<uint64_t>(s.qos.pfc.headroom->n, UINT32_MAX));
  kp.nodes.resize(s.nodes.size());
  // Port index of every link end, for the peer fields.
  std::vector<std::pair<size_t, size_t>> port_of(s.links.size(), {0, 0});  // (a's port, b's port)
  for (size_t x = 0; x < s.nodes.size(); ++x)
    for (size_t p = 0; p < s.nodes[x].ports.size(); ++p) {
      size_t li = s.nodes[x].ports[p];
      (s.links[li].a.node == x ? port_of[li].first : port_of[li].second) = p;
    }

  // Fabric-wide slot of every (node, port), in node then port order.
  std::vector<size_t> first_slot(s.nodes.size());
  for (size_t x = 0; x < s.nodes.size(); ++x) {
    first_slot[x] = kp.ports;
    kp.ports += s.nodes[x].ports.size();
  }
  for (size_t x = 0; x < s.nodes.size(); ++x) {
    const model::Node& n = s.nodes[x];
    NodePlan& np = kp.nodes[x];
    np.node = n.name;
    np.netns = s.namespace_of(n);
    np.host = n.kind == model::NodeKind::kHost;
    np.loopback = n.loopback.addr;
    np.hash_seed = node_hash_seed(s.seed, n.name);
    np.sysctls = node_sysctls(np.host, np.hash_seed, s.qos.ecmp_hash);
    for (size_t p = 0; p < n.ports.size(); ++p) {
      size_t li = n.ports[p];
      const model::Link& l = s.links[li];
      const model::Endpoint& me = l.end(x);
      const model::Endpoint& peer = l.peer_of(x);
      size_t peer_port = l.a.node == x ? port_of[li].second : port_of[li].first;
      PortPlan pp;
      pp.ifname = me.ifname;
      pp.slot = first_slot[x] + p;
      pp.ifindex = kFirstPortIfindex + static_cast<int>(pp.slot);
      pp.mac = port_mac(s.seed, x, p);
      pp.addr = me.addr;
      pp.mtu = l.mtu;
      pp.rate_bps = s.scale.emulate(l.rate).bps;
      pp.link = li;
      pp.delay_ns = l.delay.ns;
      pp.made_here = l.a.node == x;
      pp.peer_node = peer.node;
      pp.peer_ifname = peer.ifname;
      pp.peer_ifindex = kFirstPortIfindex + static_cast<int>(first_slot[peer.node] + peer_port);
      pp.peer_addr = peer.addr;
      pp.peer_mac = port_mac(s.seed, peer.node, peer_port);
      np.ports.push_back(pp);
    }
    if (!np.host && s.qos.ecmp_groups == "resilient") np.ecmp_buckets = uint16_t(s.qos.ecmp_buckets);
    np.routes = route_specs(np, s.routes[x]);
    int prio = kFirstRulePriority;
    for (const model::SourceRule& r : s.routes[x].rules) np.rules.push_back({r.from, r.table, prio++});
  }
  if (hosts_in_init) place_hosts_in_init(kp);
  for (size_t li = 0; li < s.links.size(); ++li)
    kp.veths.push_back({s.links[li].a.node, port_of[li].first, s.links[li].b.node, port_of[li].second});
  return kp;
}

namespace {
// 2 x delay x rate, with rate and delay as emulated (physical / D and x D): physical bytes.
uint64_t link_round_trip(const PortPlan& p, double scale) {
  return p.delay_ns > 0 ? uint64_t(2.0 * double(p.rate_bps) / 8 * double(p.delay_ns) * scale / 1e9) : 0;
}
}  // namespace

uint64_t round_trip_bytes(const KernelPlan& kp, const PortPlan& p) {
  const bool wired = p.link < kp.veths.size() && kp.veths[p.link].wire >= 0;  // applied only through the wire
  return wired ? link_round_trip(p, kp.scale) : 0;
}

std::vector<bpf::HeadroomPort> headroom_inputs(const KernelPlan& kp, const NodePlan& np) {
  std::vector<bpf::HeadroomPort> out;
  for (const PortPlan& p : np.ports) {
    const uint64_t base = kp.pfc_headroom ? kp.pfc_headroom : 2 * uint64_t(p.mtu) + round_trip_bytes(kp, p);
    out.push_back({p.rate_bps, uint32_t(std::min<uint64_t>(base, UINT32_MAX))});
  }
  return out;
}

void take_part(KernelPlan& kp, const model::Partition& p, size_t index, const std::vector<uint32_t>& underlay) {
  kp.part = {};
  kp.part.index = index;
  kp.part.parts = p.parts;
  kp.part.local = underlay.at(index);
  kp.part.here.resize(kp.nodes.size());
  for (size_t x = 0; x < kp.nodes.size(); ++x) kp.part.here[x] = p.part_of[x] == index;
  for (size_t li : p.cut_links) {
    const VethPlan& v = kp.veths[li];
    const bool a_here = kp.part.here[v.a_node], b_here = kp.part.here[v.b_node];
    if (!a_here && !b_here) continue;  // between two other parts
    const size_t node = a_here ? v.a_node : v.b_node, port = a_here ? v.a_port : v.b_port;
    const size_t far = a_here ? v.b_node : v.a_node;
    kp.nodes[node].ports[port].cut = int(kp.part.cuts.size());
    kp.part.cuts.push_back({li, node, port, uint32_t(li + 1), underlay.at(p.part_of[far])});
  }
}

void apply_link_delay(KernelPlan& kp, const std::string& wire_netns) {
  kp.wire = {};
  for (size_t li = 0; li < kp.veths.size(); ++li) {
    VethPlan& v = kp.veths[li];
    const PortPlan& a = kp.nodes[v.a_node].ports[v.a_port];
    v.wire = -1;
    // Within this machine only: a cut link's delay is the underlay's.
    if (a.delay_ns <= 0 || !kp.part.has(v.a_node) || !kp.part.has(v.b_node)) continue;
    v.wire = int(kp.wire.links.size());
    // netem holds every packet in flight on the link: its round trip's bytes over the
    // smallest frame, beyond netem's default of 1,000.
    kp.wire.links.push_back({li, uint64_t(double(a.delay_ns) * kp.scale),
                             uint32_t(std::min<uint64_t>(1000 + link_round_trip(a, kp.scale) / 64, 1u << 20))});
  }
  if (!kp.wire.links.empty()) kp.wire.netns = wire_netns;
}

netlink::SchedulerSpec scheduler_of(const KernelPlan& kp, const NodePlan& np, const PortPlan& p) {
  constexpr uint32_t kHostLosslessLimit = 256u << 20;
  const rl_config& c = kp.port_config;
  netlink::SchedulerSpec sch{p.ifindex, RL_HTB_MAJOR, RL_CLASS_BASE, p.rate_bps, p.mtu, {}, c.pfc_mask};
  // A queue only for a priority traffic can reach: the DSCP map's image, 0 (not IP), the
  // lossless and PFC ones. Every tc class adds a block to one machine-wide list that each new
  // block scans: the default map's three queues instead of eight brought a k = 12 fat-tree
  // up in 10-12.7 s instead of 15.2-15.5 s.
  sch.queues = uint8_t(1u | c.pfc_mask | c.lossless_mask);
  for (const uint8_t q : c.dscp_to_prio) sch.queues |= uint8_t(1u << (q & (RL_NUM_PRIO - 1)));
  for (int q = 0; q < RL_NUM_PRIO; ++q) sch.fifo_limit[q] = c.queue_limit[q] + 64 * 1024;
  // Lossless queues stop at XOFF + headroom, which the agent may raise: at most the pool.
  for (int q = 0; q < RL_NUM_PRIO; ++q)
    if ((c.lossless_mask >> q) & 1)
      sch.fifo_limit[q] = c.buffer_size ? std::max(sch.fifo_limit[q], c.buffer_size + 64 * 1024) : kHostLosslessLimit;
  // A host holds its paused lossless traffic until its senders block (the socket buffers
  // fill first): room far beyond any send buffer.
  if (np.host)
    for (int q = 0; q < RL_NUM_PRIO; ++q)
      if ((c.pfc_mask >> q) & 1) sch.fifo_limit[q] = kHostLosslessLimit;
  return sch;
}

AgentConfig agent_config(const KernelPlan& kp, const std::string& instance) {
  AgentConfig cfg;
  cfg.instance = instance;
  cfg.state_path = std::string(sys::kStateDir) + "/" + instance + ".state";
  cfg.socket_path = agent_socket_path(instance);
  cfg.scale = kp.scale;
  cfg.watchdog = {kp.watchdog, kp.wd_detection_ns, kp.wd_restoration_ns, kp.wd_poll_ns,
                  std::string(model::wd_action_name(kp.wd_action)), kp.wd_predicate};
  // This machine's nodes only (all of them unless the fabric is split), numbered anew.
  std::vector<int32_t> index(kp.nodes.size(), -1);
  for (size_t x = 0, k = 0; x < kp.nodes.size(); ++x)
    if (kp.part.has(x)) index[x] = int32_t(k++);
  for (size_t x = 0; x < kp.nodes.size(); ++x) {
    const NodePlan& np = kp.nodes[x];
    if (index[x] < 0) continue;
    const int64_t phase = kp.watchdog ? int64_t(splitmix64(kp.seed ^ fnv1a(np.node) ^ 0x7764) % uint64_t(kp.wd_poll_ns)) : 0;
    cfg.nodes.push_back({np.node, np.netns, phase});
    for (const PortPlan& p : np.ports) {
      const auto sch = scheduler_of(kp, np, p);
      const bool to_switch = !np.host && p.peer_node < kp.nodes.size() && !kp.nodes[p.peer_node].host;
      cfg.ports.push_back({uint32_t(index[x]), uint32_t(p.slot), p.ifindex, p.ifname, p.rate_bps, p.mtu, sch.pausable,
                           sch.fifo_limit, to_switch ? index[p.peer_node] : -1});
    }
  }
  return cfg;
}

Result<bool> hosts_in_init_netns(const model::Scenario& s) {
  if (s.hosts.engine != "rxe") return false;
  const sys::KernelInfo k = sys::kernel_info();
  if (k.at_least(7, 1)) return false;  // rxe's sockets and routes follow the namespace (DESIGN.md "Real rxe")
  const char* mine = std::getenv("ROCELAB_DEDICATED_MACHINE");
  if (mine && std::string_view(mine) == "1") return true;
  return error(Errc::kEnvironment,
               "hosts.engine: rxe on kernel " + k.release +
                   " works only in the machine's own network namespace (rxe follows namespaces from Linux 7.1), "
                   "and rocelab does not rearrange yours: run it in the VM image (rocelab run --vm SCENARIO), or on a "
                   "machine that belongs to the testbed with ROCELAB_DEDICATED_MACHINE=1 (a Vagrant box)");
}

}  // namespace rocelab::fabric
