#include "fabric/local_testbed.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "model/loader.h"
#include "model/port_target.h"
#include "netlink/batch.h"
#include "netlink/query.h"
#include "sys/netns.h"

namespace rocelab::fabric {

namespace {

Error env(std::string what) { return error(Errc::kEnvironment, std::move(what)); }

// A route socket in a node's namespace, with the calling thread inside it while this lives.
struct InNode {
  std::optional<sys::NetnsScope> scope;
  std::unique_ptr<netlink::RouteSocket> sock;
};

Result<InNode> enter(int netns_fd, const std::string& node) {
  std::string why;
  InNode in{sys::NetnsScope::enter(netns_fd, why), nullptr};
  if (!in.scope) return env(node + ": " + why);
  netlink::Status st;
  in.sock = netlink::RouteSocket::open(st);
  if (!in.sock) return env(node + ": " + st.text);
  return in;
}

// A probability as the egress program's threshold: p x 2^32, saturated.
uint32_t loss_threshold(double p) { return uint32_t(std::min(p * 4294967296.0, 4294967295.0)); }

// splitmix64 of (seed, slot): a distinct, never-zero xorshift state per port.
uint64_t loss_state(uint64_t seed, uint32_t slot) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (slot + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) | 1;
}

// A node's routes for the model's: a host in the init namespace keeps its per-NIC default
// routes whatever the fabric's state (its NICs have no other way out).
std::vector<netlink::RouteSpec> routes_of(const NodePlan& np, const model::NodeRoutes& routes) {
  return np.in_init ? np.routes : route_specs(np, routes);
}

}  // namespace

LocalTestbed::~LocalTestbed() {
  if (fabric_ && !keep_) (void)down();
}

Result<std::unique_ptr<LocalTestbed>> LocalTestbed::up(const model::Scenario& s, const UpOptions& o) {
  std::string why;
  std::unique_ptr<LocalTestbed> t(new LocalTestbed());
  t->instance_ = s.name;
  t->fabric_ = Fabric::up(s, o, why);
  if (!t->fabric_) return env(why);
  const KernelPlan& kp = t->fabric_->plan();
  for (size_t x = 0; x < kp.nodes.size(); ++x) {
    const NodePlan& np = kp.nodes[x];
    NodeInfo n{np.node, np.netns, np.host, {}, !kp.part.has(x)};
    if (!n.elsewhere)  // another machine's node keeps its place (indexes are the plan's), not its ports
      for (const PortPlan& p : np.ports) n.ports.push_back({p.ifname, p.ifindex, uint32_t(p.slot)});
    t->nodes_.push_back(std::move(n));
  }
  t->agent_socket_ = t->fabric_->agent_socket();
  t->agent_pid_ = t->fabric_->agent_pid();
  t->scenario_ = s;
  if (auto st = t->open_maps(); !st) {
    (void)t->down();
    return st.error();
  }
  return t;
}

Result<std::unique_ptr<LocalTestbed>> LocalTestbed::attach(const std::string& instance) {
  std::string why;
  auto st = instance_status(instance, false, why);
  if (!st) return error(model::is_instance_name(instance) ? Errc::kEnvironment : Errc::kBadInput, why);
  if (st->state != "up") return env("instance " + instance + " is not completely up (run 'rocelab down " + instance + "')");
  std::unique_ptr<LocalTestbed> t(new LocalTestbed());
  t->instance_ = instance;
  for (const auto& ns : st->nodes) {
    if (!ns.present) return env("instance " + instance + ": namespace " + ns.netns + " is missing");
    auto fd = sys::open_named_netns(ns.netns, why);
    if (!fd) return env(why);
    auto in = enter(fd->get(), ns.node);
    if (!in) return in.error();
    netlink::Status nst;
    auto links = netlink::list_links(*in->sock, RL_FIRST_PORT_IFINDEX, nst);
    if (!links) return env(ns.node + ": " + nst.text);
    NodeInfo n{ns.node, ns.netns, false, {}};
    for (const auto& l : *links)
      if (!ns.netns.empty() || l.name.rfind(ns.node + "-", 0) == 0)  // the init namespace holds every host's NICs
        n.ports.push_back({l.name, l.ifindex, uint32_t(l.ifindex - RL_FIRST_PORT_IFINDEX)});
    std::sort(n.ports.begin(), n.ports.end(), [](const PortInfo& a, const PortInfo& b) { return a.slot < b.slot; });
    t->nodes_.push_back(std::move(n));
    t->netns_.push_back(std::move(*fd));
  }
  if (st->agent_pid) t->agent_socket_ = agent_socket_path(instance), t->agent_pid_ = st->agent_pid;
  if (auto s = t->open_maps(); !s) return s.error();
  for (auto& n : t->nodes_) {
    rl_port_info info{};
    if (!n.ports.empty() && t->maps_->port_info(n.ports.front().slot, info, why)) n.host = info.flags & RL_PORT_HOST;
  }
  return t;
}

Status LocalTestbed::open_maps() {
  std::string why;
  if (fabric_) {
    auto m = bpf::FabricMaps::of(fabric_->programs(), why);
    if (!m) return env(why);
    maps_.emplace(std::move(*m));
    return ok();
  }
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (nodes_[n].ports.empty()) continue;
    auto scope = sys::NetnsScope::enter(netns_fd(n), why);
    if (!scope) return env(why);
    auto m = bpf::FabricMaps::open_attached(nodes_[n].ports.front().ifindex, why);
    if (!m) return env(why);
    maps_.emplace(std::move(*m));
    return ok();
  }
  return env("instance " + instance_ + " has no ports");
}

Status LocalTestbed::down() {
  if (!fabric_) return ok();
  std::string why;
  maps_.reset();
  if (!fabric_->down(why)) return env(why + " (run 'rocelab down " + instance_ + "')");
  fabric_.reset();
  return ok();
}

int LocalTestbed::netns_fd(size_t node) const { return fabric_ ? fabric_->netns_fd(node) : netns_.at(node).get(); }

Result<std::vector<PortStats>> LocalTestbed::counters(const std::vector<PortRef>& ports) {
  std::vector<PortRef> want = ports;
  if (want.empty()) want = *select("");
  std::stable_sort(want.begin(), want.end(), [](const PortRef& a, const PortRef& b) { return a.node < b.node; });
  std::vector<PortStats> out;
  std::string why;
  for (size_t i = 0; i < want.size();) {
    const size_t node = want[i].node;
    auto in = enter(netns_fd(node), nodes_[node].name);
    if (!in) return in.error();
    for (; i < want.size() && want[i].node == node; ++i) {
      const PortInfo& pi = nodes_[node].ports.at(want[i].port);
      PortStats ps{nodes_[node].name, pi.name, pi.ifindex, {}};
      auto probe_all = [&](std::array<uint32_t, RL_NUM_PRIO>& d) {
        for (uint32_t p = 0; p < RL_NUM_PRIO; ++p) {
          auto v = bpf::probe_depth(maps_->egress_program(), pi.ifindex, p, why);
          if (!v) return false;
          d[p] = *v;
        }
        return true;
      };
      // A consistent snapshot, seqlock style: the program's reading of every queue before and
      // after the class dump; if a queue moved in between, take it again (a few times).
      for (int attempt = 0; attempt < 4; ++attempt) {
        std::array<uint32_t, RL_NUM_PRIO> before{}, after{};
        if (!probe_all(before)) return env(why);
        netlink::Status st;
        auto cs = netlink::class_stats(*in->sock, pi.ifindex, RL_HTB_MAJOR, RL_CLASS_BASE, st);
        if (!cs) return env(ps.node + ":" + ps.port + ": " + st.text);
        for (uint32_t p = 0; p < RL_NUM_PRIO; ++p) {
          ps.prio[p].shaper_bytes = (*cs)[p].bytes;
          ps.prio[p].shaper_packets = (*cs)[p].packets;
          ps.prio[p].shaper_drops = (*cs)[p].drops;
          ps.prio[p].backlog_bytes = (*cs)[p].backlog;
        }
        if (!probe_all(after)) return env(why);
        for (uint32_t p = 0; p < RL_NUM_PRIO; ++p) ps.prio[p].depth_bytes = after[p];
        if (before == after) break;
      }
      for (uint32_t p = 0; p < RL_NUM_PRIO; ++p) ps.prio[p].c = maps_->counters().read(pi.slot, p);
      out.push_back(std::move(ps));
    }
  }
  return out;
}

Result<std::vector<PortStats>> LocalTestbed::sample(bool take_peaks) {
  std::vector<PortStats> out;
  std::string why;
  for (size_t node = 0; node < nodes_.size(); ++node) {
    std::optional<sys::NetnsScope> in;  // entered only when a queue needs a probe
    for (const PortInfo& pi : nodes_[node].ports) {
      PortStats ps{nodes_[node].name, pi.name, pi.ifindex, {}};
      for (uint32_t p = 0; p < RL_NUM_PRIO; ++p) {
        rl_counters& c = ps.prio[p].c;
        c = maps_->counters().read(pi.slot, p);
        c.depth_peak = take_peaks ? maps_->take_peak(pi.slot, p) : 0;
        if (!c.depth_after) continue;  // its last packet (or probe) left it empty
        if (!in) {
          auto scope = sys::NetnsScope::enter(netns_fd(node), why);
          if (!scope) return env(nodes_[node].name + ": " + why);
          in.emplace(std::move(*scope));
        }
        auto d = bpf::probe_depth(maps_->egress_program(), pi.ifindex, p, why);
        if (!d) return env(ps.node + ":" + ps.port + ": " + why);
        ps.prio[p].depth_bytes = *d;
      }
      out.push_back(std::move(ps));
    }
  }
  return out;
}

Result<std::optional<AgentFigures>> LocalTestbed::agent_figures() {
  if (agent_socket_.empty()) return std::optional<AgentFigures>();
  std::string why;
  auto f = fabric::agent_figures(agent_socket_, why);
  if (!f) return env("the PFC agent: " + why);
  return std::optional<AgentFigures>(std::move(*f));
}

Status LocalTestbed::agent_alive() {
  if (agent_socket_.empty()) return ok();
  std::string why;
  if (!fabric::agent_call(agent_socket_, AgentRequest::kPing, why)) return env("the PFC agent: " + why);
  return ok();
}

Status LocalTestbed::write_draw(const PortRef& p, Draw d, uint32_t threshold, uint64_t rng) {
  std::string why;
  rl_port_info info{};
  if (!maps_->port_info(p.slot, info, why)) return env(name(p) + ": " + why);
  (d == Draw::kLoss ? info.loss : info.corrupt) = threshold;
  (d == Draw::kLoss ? info.loss_rng : info.corrupt_rng) = rng;
  if (!maps_->set_port_info(p.slot, info, why)) return env(name(p) + ": " + why);
  return ok();
}

// A seeded per-packet fault of the egress program (loss or corruption), and its exact undo.
Result<Change> LocalTestbed::set_draw(const PortRef& p, Draw d, double probability, uint64_t seed) {
  const char* what = d == Draw::kLoss ? "loss" : "corruption";
  if (!(probability >= 0 && probability <= 1))
    return error(Errc::kBadInput, std::string(what) + " probability must be within 0..1");
  std::string why;
  rl_port_info before{};
  if (!maps_->port_info(p.slot, before, why)) return env(name(p) + ": " + why);
  if (auto st = write_draw(p, d, loss_threshold(probability), loss_state(seed, p.slot)); !st) return st.error();
  const uint32_t threshold = d == Draw::kLoss ? before.loss : before.corrupt;
  const uint64_t rng = d == Draw::kLoss ? before.loss_rng : before.corrupt_rng;
  return Change(std::string(what) + " " + std::to_string(probability) + " on " + name(p),
                [this, p, d, threshold, rng] { return write_draw(p, d, threshold, rng); });
}

Result<Change> LocalTestbed::misconfigure(const PortRef& p, Misconfig m, uint32_t dscp) {
  if (m == Misconfig::kDscp && dscp > 63) return error(Errc::kBadInput, "a DSCP is 0..63");
  std::string why;
  rl_port_info info{};
  if (!maps_->port_info(p.slot, info, why)) return env(name(p) + ": " + why);
  const uint16_t flags = info.flags;
  const uint32_t dscp_set = info.dscp_set;
  if (m == Misconfig::kPfcOff) info.flags |= RL_PORT_NO_PFC;
  if (m == Misconfig::kEcnOff) info.flags |= RL_PORT_NO_ECN;
  if (m == Misconfig::kDscp) info.dscp_set = dscp + 1;
  if (!maps_->set_port_info(p.slot, info, why)) return env(name(p) + ": " + why);
  const char* what = m == Misconfig::kPfcOff ? "PFC off" : m == Misconfig::kEcnOff ? "ECN off" : "DSCP rewritten";
  return Change(std::string(what) + " on " + name(p), [this, p, flags, dscp_set]() -> Status {
    std::string w;
    rl_port_info now{};
    if (!maps_->port_info(p.slot, now, w)) return env(name(p) + ": " + w);
    now.flags = flags;
    now.dscp_set = dscp_set;
    if (!maps_->set_port_info(p.slot, now, w)) return env(name(p) + ": " + w);
    return ok();
  });
}

Result<Change> LocalTestbed::slow_receiver(const PortRef& p, double fraction) {
  if (!(fraction > 0 && fraction < 1)) return error(Errc::kBadInput, "a slow receiver drains a fraction of its line rate, in (0, 1)");
  std::string why;
  rl_config cfg{};
  rl_port_info info{};
  if (!maps_->config(cfg, why) || !maps_->port_info(p.slot, info, why)) return env(name(p) + ": " + why);
  if (!cfg.pfc_mask) return error(Errc::kBadInput, "a slow receiver sends PFC, and this fabric has no PFC priority");
  if (!info.quantum_ps) return env(name(p) + ": the port's rate is unknown");
  const uint64_t before = info.slow_drain_bps;
  const double line_bps = 512e12 / double(info.quantum_ps);  // a quantum is 512 bit-times
  info.slow_drain_bps = std::max<uint64_t>(1, uint64_t(fraction * line_bps));
  info.slow_xoff = cfg.pfc_xoff;  // the NIC's RX buffer pauses where a switch PG would
  info.slow_occ = 0;
  info.slow_paused_until_ns = 0;
  if (!maps_->set_port_info(p.slot, info, why)) return env(name(p) + ": " + why);
  return Change("slow receiver " + name(p), [this, p, before]() -> Status {
    std::string w;
    rl_port_info now{};
    if (!maps_->port_info(p.slot, now, w)) return env(name(p) + ": " + w);
    now.slow_drain_bps = before;
    if (!maps_->set_port_info(p.slot, now, w)) return env(name(p) + ": " + w);
    return ok();
  });
}

Result<Change> LocalTestbed::pause_storm(const PortRef& p, uint8_t vector, uint16_t quanta, double frames_per_s,
                                         uint64_t frames) {
  if (agent_socket_.empty()) return error(Errc::kBadInput, "a pause storm is sent by the PFC agent, and this fabric runs none");
  if (!(frames_per_s >= 0)) return error(Errc::kBadInput, "a pause storm's frame rate must be 0 (the default) or above");
  if (frames_per_s == 0 && quanta == 0) return error(Errc::kBadInput, "a storm of pause time 0 needs its frame rate");
  if (auto st = load_routing(); !st) return st.error();  // the scenario: its D
  std::string why;
  rl_port_info info{};
  if (!maps_->port_info(p.slot, info, why)) return env(name(p) + ": " + why);
  if (!info.quantum_ps) return env(name(p) + ": the port's rate is unknown");
  // On the wall clock: a physical second is D of them; a pause time, quanta x quantum_ps
  // at the emulated rate, is wall time already.
  const double interval_ns = frames_per_s > 0 ? scenario_->scale.factor() * 1e9 / frames_per_s
                                              : double(quanta) * double(info.quantum_ps) / 2000.0;
  StormSpec spec{p.slot, vector, quanta, std::max<uint64_t>(1, uint64_t(std::llround(interval_ns))), frames};
  auto reply = agent_call(agent_socket_, AgentRequest::kStorm, to_json(spec), why);
  if (!reply) return env("pause storm on " + name(p) + ": " + why);
  const uint64_t id = reply->value("id", uint64_t{0});
  if (!id) return env("pause storm on " + name(p) + ": the agent gave it no id");
  return Change("pause storm on " + name(p), [this, p, id]() -> Status {
    std::string w;
    if (!agent_call(agent_socket_, AgentRequest::kStormStop, {{"id", id}}, w))
      return env("stop the pause storm on " + name(p) + ": " + w);
    return ok();
  });
}

Result<Change> LocalTestbed::mtu_mismatch(const PortRef& p, uint32_t mtu) {
  if (auto st = load_routing(); !st) return st.error();
  // The peer: the other end of the link `p` is on.
  const size_t pn = plan_node(nodes_.at(p.node).name);
  if (pn == SIZE_MAX) return env("node " + nodes_[p.node].name + " is not in the scenario record");
  uint32_t peer_slot = UINT32_MAX;
  for (const PortPlan& pp : plan().nodes[pn].ports)
    if (pp.slot == p.slot) peer_slot = uint32_t(pp.peer_ifindex - kFirstPortIfindex);
  if (peer_slot == UINT32_MAX) return env(name(p) + " is not in the scenario record");
  std::string why;
  rl_port_info info{};
  if (!maps_->port_info(peer_slot, info, why)) return env(name(p) + "'s peer: " + why);
  const uint32_t before = info.mtu_limit;
  info.mtu_limit = mtu;
  if (!maps_->set_port_info(peer_slot, info, why)) return env(name(p) + "'s peer: " + why);
  return Change("MTU " + std::to_string(mtu) + " at " + name(p), [this, peer_slot, before]() -> Status {
    std::string w;
    rl_port_info now{};
    if (!maps_->port_info(peer_slot, now, w) ) return env(w);
    now.mtu_limit = before;
    if (!maps_->set_port_info(peer_slot, now, w)) return env(w);
    return ok();
  });
}

Result<Change> LocalTestbed::set_loss(const PortRef& p, double probability, uint64_t seed) {
  return set_draw(p, Draw::kLoss, probability, seed);
}

Result<Change> LocalTestbed::set_corruption(const PortRef& p, double probability, uint64_t seed) {
  return set_draw(p, Draw::kCorrupt, probability, seed);
}

Status LocalTestbed::write_pause(const PortRef& p, uint32_t prio, bool paused) {
  auto in = enter(netns_fd(p.node), nodes_[p.node].name);
  if (!in) return in.error();
  netlink::Status st;
  const int ifindex = nodes_[p.node].ports.at(p.port).ifindex;
  auto ps = netlink::pause_state(*in->sock, ifindex, RL_HTB_MAJOR, RL_CLASS_BASE, prio, st);
  if (!ps) return env(name(p) + ": " + st.text);
  if (!ps->pausable)
    return error(Errc::kBadInput, name(p) + ": priority " + std::to_string(prio) +
                                      " cannot pause (PFC priorities only: qos.pfc.priorities)");
  ps->spec.paused = paused;
  netlink::Batch b(*in->sock);
  b.set_pause(ps->spec);
  if (auto s = b.flush(); !s.ok()) return env(s.text);
  return ok();
}

Result<Change> LocalTestbed::set_pause(const PortRef& p, uint32_t prio, bool paused) {
  if (prio >= RL_NUM_PRIO) return error(Errc::kBadInput, "expected a priority 0..7");
  bool before = false;
  {
    auto in = enter(netns_fd(p.node), nodes_[p.node].name);
    if (!in) return in.error();
    netlink::Status st;
    auto ps = netlink::pause_state(*in->sock, nodes_[p.node].ports.at(p.port).ifindex, RL_HTB_MAJOR, RL_CLASS_BASE,
                                   prio, st);
    if (!ps) return env(name(p) + ": " + st.text);
    before = ps->spec.paused;
  }
  if (auto st = write_pause(p, prio, paused); !st) return st.error();
  return Change(std::string(paused ? "pause" : "resume") + " priority " + std::to_string(prio) + " on " + name(p),
                [this, p, prio, before] { return write_pause(p, prio, before); });
}

Status LocalTestbed::write_link(const PortRef& p, bool up) {
  auto in = enter(netns_fd(p.node), nodes_[p.node].name);
  if (!in) return in.error();
  netlink::Batch b(*in->sock);
  b.set_link(nodes_[p.node].ports.at(p.port).ifindex, up);
  if (auto s = b.flush(); !s.ok()) return env(name(p) + ": " + s.text);
  return ok();
}

std::function<int64_t()> LocalTestbed::pause_clock(const PortRef& p, uint32_t prio) {
  const bpf::Counters* c = &maps_->counters();
  return [c, slot = p.slot, prio, clock = &clock_] { return int64_t(c->paused_ns(slot, prio, uint64_t(clock->now()))); };
}

std::function<sys::PauseReading()> LocalTestbed::pause_in_force(const PortRef& p, uint32_t prio) {
  const bpf::Counters* c = &maps_->counters();
  return [c, slot = p.slot, prio] { return c->pause_reading(slot, prio); };
}

Result<fabric::Change> LocalTestbed::set_link(const PortRef& p, bool up) {
  bool before = false;
  {
    auto in = enter(netns_fd(p.node), nodes_[p.node].name);
    if (!in) return in.error();
    netlink::Status st;
    auto l = netlink::link(*in->sock, nodes_[p.node].ports.at(p.port).ifindex, st);
    if (!l) return env(name(p) + ": " + st.text);
    before = l->admin_up;
  }
  if (auto st = write_link(p, up); !st) return st.error();
  return Change(std::string("link ") + (up ? "up" : "down") + " on " + name(p),
                [this, p, before] { return write_link(p, before); });
}

// --- link faults and routing -----------------------------------------------------------

std::vector<size_t> LocalTestbed::links_down() const {
  std::vector<size_t> out;
  for (const auto& [link, n] : down_)
    if (n > 0) out.push_back(link);
  return out;
}

Status LocalTestbed::load_routing() {
  if (!routes_.empty()) return ok();
  if (!scenario_) {
    const std::string path = scenario_record_path(instance_);
    auto res = model::load_scenario_file(path);
    if (!res.ok())
      return env("instance " + instance_ + " has no usable scenario record (" + path +
                 "): link faults reconverge routes from it, and only 'rocelab up' keeps one");
    scenario_ = std::move(*res.scenario);
    auto in_init = hosts_in_init_netns(*scenario_);
    kplan_ = plan_kernel(*scenario_, in_init && *in_init);
    if (kplan_->ports != maps_->ports())
      return env(path + " does not describe instance " + instance_ + " (" + std::to_string(kplan_->ports) +
                 " ports, the fabric has " + std::to_string(maps_->ports()) + ")");
    // Links an earlier `inject` took down stay down: read them from the kernel.
    for (const VethPlan& v : kplan_->veths) {
      const bool a_here = kplan_->part.has(v.a_node);
      if (!a_here && !kplan_->part.has(v.b_node)) continue;  // between other machines: down_ is this machine's
      const NodePlan& a = kplan_->nodes[a_here ? v.a_node : v.b_node];
      const PortPlan& ap = a.ports[a_here ? v.a_port : v.b_port];
      const size_t x = node_index(a.node);
      if (x == SIZE_MAX) return env(path + " names node " + a.node + ", which instance " + instance_ + " lacks");
      auto in = enter(netns_fd(x), a.node);
      if (!in) return in.error();
      netlink::Status st;
      auto l = netlink::link(*in->sock, ap.ifindex, st);
      if (!l) return env(a.node + ": " + st.text);
      if (!l->admin_up) down_[ap.link] = 1;
    }
  }
  const auto routes = model::plan_routes(*scenario_, links_down());
  for (size_t x = 0; x < plan().nodes.size(); ++x) routes_.push_back(routes_of(plan().nodes[x], routes[x]));
  return ok();
}

Status LocalTestbed::set_link_both(size_t link, bool up) {
  const VethPlan& v = plan().veths.at(link);
  for (auto [n, p] : {std::pair{v.a_node, v.a_port}, std::pair{v.b_node, v.b_port}}) {
    if (!plan().part.has(n)) continue;  // another machine's end: its part downs it at the same time
    const NodePlan& np = plan().nodes[n];
    const PortPlan& pp = np.ports[p];
    auto in = enter(netns_fd(node_index(np.node)), np.node);
    if (!in) return in.error();
    netlink::Batch b(*in->sock);
    b.set_link(pp.ifindex, up);
    if (!up) ++downed_[uint32_t(pp.slot)];
    // A device going down takes its permanent neighbour entries with it: put them back.
    if (up) b.replace_neigh({pp.ifindex, pp.peer_addr, pp.peer_mac});
    if (auto s = b.flush(); !s.ok()) return env(np.node + ":" + pp.ifname + ": " + s.text);
  }
  return ok();
}

Status LocalTestbed::reconverge() {
  const auto routes = model::plan_routes(*scenario_, links_down());
  using Key = std::tuple<int, uint32_t, int>;  // table, prefix, length
  for (size_t x = 0; x < plan().nodes.size(); ++x) {
    if (!plan().part.has(x)) continue;  // its own machine reconverges it, from the same model
    const NodePlan& np = plan().nodes[x];
    auto want = routes_of(np, routes[x]);
    std::map<Key, const netlink::RouteSpec*> have;
    for (const auto& r : routes_[x]) have[{r.table, r.dst, r.prefix_len}] = &r;
    std::vector<const netlink::RouteSpec*> replace, remove;
    for (const auto& r : want) {
      auto it = have.find({r.table, r.dst, r.prefix_len});
      if (it == have.end() || !(*it->second == r)) replace.push_back(&r);
      if (it != have.end()) have.erase(it);
    }
    for (const auto& [k, r] : have) remove.push_back(r);
    if (replace.empty() && remove.empty()) continue;
    auto in = enter(netns_fd(node_index(np.node)), np.node);
    if (!in) return in.error();
    netlink::Batch b(*in->sock);
    for (const auto* r : replace) b.replace_route(*r);
    for (const auto* r : remove) b.delete_route(*r);
    if (auto s = b.flush(); !s.ok()) return env(np.node + ": reconverging: " + s.text);
    path_changes_ += replace.size() + remove.size();
    routes_[x] = std::move(want);
  }
  return ok();
}

Result<Change> LocalTestbed::fail_link(const PortRef& p) {
  if (auto st = load_routing(); !st) return st.error();
  const NodeInfo& n = nodes_.at(p.node);
  const size_t pn = plan_node(n.name);
  if (pn == SIZE_MAX) return env("node " + n.name + " is not in the scenario record");
  const auto& ports = plan().nodes[pn].ports;
  auto pp = std::find_if(ports.begin(), ports.end(), [&](const PortPlan& x) { return x.slot == p.slot; });
  if (pp == ports.end()) return env(name(p) + " is not in the scenario record");
  return fail_link_at(pp->link, "link " + name(p) + " down");
}

// Resolved through the model, not this machine's devices: the named end may be elsewhere.
Result<Change> LocalTestbed::fail_link_named(std::string_view target) {
  if (!plan().part.split()) return Testbed::fail_link_named(target);
  if (auto st = load_routing(); !st) return st.error();
  const auto t = model::PortTarget::parse(target);
  const std::string &node = t.node, &port = t.port_or_empty();
  const size_t x = plan_node(node);
  if (x == SIZE_MAX || port.empty()) return error(Errc::kBadInput, "instance " + instance_ + " has no port '" + std::string(target.substr(0, 64)) + "'");
  if (const auto li = model::link_at(*scenario_, x, port)) return fail_link_at(*li, "link " + node + ":" + port + " down");
  return error(Errc::kBadInput, "node " + node + " has no port '" + port.substr(0, 64) + "' on a link");
}

Result<Change> LocalTestbed::crash_node_named(std::string_view node) {
  const size_t n = node_index(node);
  if (n == SIZE_MAX || !nodes_[n].elsewhere) return Testbed::crash_node_named(node);
  // Another machine's node: it halts there; here its links fail, as its own part fails them.
  if (auto st = load_routing(); !st) return st.error();
  std::vector<Change> links;
  for (size_t li = 0; li < scenario_->links.size(); ++li) {
    const model::Link& l = scenario_->links[li];
    if (l.a.node != n && l.b.node != n) continue;
    auto c = fail_link_at(li, "a link of " + std::string(node) + " down");
    if (!c) {
      (void)combined("", std::move(links)).undo();
      return c.error();
    }
    links.push_back(std::move(*c));
  }
  return combined("crash " + std::string(node) + " (on another machine): its links", std::move(links));
}

// Down at the ends this machine holds (none, one or both), then this machine's routes.
Result<Change> LocalTestbed::fail_link_at(size_t link, const std::string& what) {
  if (down_[link]++ == 0) {
    Status st = set_link_both(link, false);
    if (st) st = reconverge();
    if (!st) {
      // Put back whatever half of it happened.
      down_.erase(link);
      (void)set_link_both(link, true);
      (void)reconverge();
      return st.error();
    }
  }
  return Change(what, [this, link]() -> Status {
    if (--down_[link] > 0) return ok();
    down_.erase(link);
    if (auto st = set_link_both(link, true); !st) return st;
    return reconverge();
  });
}

Result<std::vector<std::string>> LocalTestbed::clear_faults() {
  if (auto st = load_routing(); !st) return st.error();
  std::vector<std::string> done;
  std::string why;
  for (size_t n = 0; n < nodes_.size(); ++n)
    for (size_t p = 0; p < nodes_[n].ports.size(); ++p) {
      const PortRef ref{n, p, nodes_[n].ports[p].slot};
      rl_port_info info{};
      if (!maps_->port_info(ref.slot, info, why)) return env(name(ref) + ": " + why);
      if (info.loss && write_draw(ref, Draw::kLoss, 0, info.loss_rng)) done.push_back("loss off on " + name(ref));
      if (info.corrupt && write_draw(ref, Draw::kCorrupt, 0, info.corrupt_rng)) done.push_back("corruption off on " + name(ref));
      if ((info.flags & (RL_PORT_NO_PFC | RL_PORT_NO_ECN)) || info.dscp_set || info.slow_drain_bps || info.mtu_limit) {
        if (!maps_->port_info(ref.slot, info, why)) return env(name(ref) + ": " + why);
        info.flags &= uint16_t(~(RL_PORT_NO_PFC | RL_PORT_NO_ECN));
        info.dscp_set = 0;
        info.slow_drain_bps = 0;
        info.mtu_limit = 0;
        if (!maps_->set_port_info(ref.slot, info, why)) return env(name(ref) + ": " + why);
        done.push_back("misconfiguration or slow receiver undone on " + name(ref));
      }
    }
  if (!agent_socket_.empty()) {
    auto r = agent_call(agent_socket_, AgentRequest::kStormStop, {{"id", 0}}, why);
    if (!r) return env("stop the pause storms: " + why);
    if (r->value("frames", uint64_t{0})) done.push_back("pause storms stopped");
  }
  const auto down = links_down();
  down_.clear();
  for (size_t link : down) {
    if (auto st = set_link_both(link, true); !st) return st.error();
    const VethPlan& v = plan().veths[link];
    done.push_back("link " + plan().nodes[v.a_node].node + ":" + plan().nodes[v.a_node].ports[v.a_port].ifname + " up");
  }
  const uint64_t before = path_changes_;
  if (auto st = reconverge(); !st) return st.error();
  if (path_changes_ > before) done.push_back(std::to_string(path_changes_ - before) + " routes reconverged");
  return done;
}

size_t LocalTestbed::plan_node(const std::string& name) const {
  for (size_t i = 0; i < plan().nodes.size(); ++i)
    if (plan().nodes[i].node == name) return i;
  return SIZE_MAX;
}

}  // namespace rocelab::fabric
