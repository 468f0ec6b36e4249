// Phase 2 of loading: generators, containerlab-style overrides (defaults → kinds → fabric →
// nodes → links), interface names, the addressing plan, routes and cross-references.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "model/raw.h"
#include "model/port_target.h"

namespace rocelab::model {

std::string_view fabric_type_name(FabricType t) {
  switch (t) {
    case FabricType::kExplicit: return "explicit";
    case FabricType::kLeafSpine: return "leaf-spine";
    case FabricType::kRailOptimized: return "rail-optimized";
    case FabricType::kFatTree: return "fat-tree";
  }
  return "explicit";
}

std::string_view node_kind_name(NodeKind k) { return k == NodeKind::kHost ? "host" : "switch"; }

std::optional<size_t> Scenario::find_node(std::string_view n) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == n) return i;
  return std::nullopt;
}

size_t Scenario::count(NodeKind k) const {
  return static_cast<size_t>(std::count_if(nodes.begin(), nodes.end(), [k](const Node& n) { return n.kind == k; }));
}

double Scenario::oversubscription() const {
  double worst = 0.0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.kind != NodeKind::kSwitch) continue;
    double down = 0, up = 0;
    for (size_t li : n.ports) {
      const Node& peer = nodes[links[li].peer_of(i).node];
      double r = static_cast<double>(links[li].rate.bps);
      if (peer.kind == NodeKind::kHost) down += r;
      else if (peer.role == "spine" || peer.role == "agg" || peer.role == "core") up += r;
    }
    if (down > 0 && up > 0) worst = std::max(worst, down / up);
  }
  return worst;
}

namespace {

struct GenLink {
  size_t a, b;       // a: lower tier (host or leaf), b: upper tier
  bool uplink;       // a leaf-spine (or rail-spine) link: takes fabric.uplink_rate
};

struct Gen {
  std::vector<Node> nodes;
  std::vector<GenLink> links;
  size_t add(std::string name, NodeKind kind, std::string role) {
    Node n;
    n.name = std::move(name);
    n.kind = kind;
    n.role = std::move(role);
    nodes.push_back(std::move(n));
    return nodes.size() - 1;
  }
};

size_t planned_nodes(const GeneratorParams& g) {
  switch (g.type) {
    case FabricType::kLeafSpine:
      return static_cast<size_t>(g.spines) + static_cast<size_t>(g.leaves) * (1 + static_cast<size_t>(g.hosts_per_leaf));
    case FabricType::kRailOptimized:
      return static_cast<size_t>(g.spines) + static_cast<size_t>(g.rails * g.leaves_per_rail) + static_cast<size_t>(g.hosts);
    case FabricType::kFatTree: {
      size_t k = static_cast<size_t>(g.k);
      return k * k / 4 + k * k + k * k * k / 4;
    }
    case FabricType::kExplicit: return 0;
  }
  return 0;
}

size_t planned_links(const GeneratorParams& g) {
  switch (g.type) {
    case FabricType::kLeafSpine:
      return static_cast<size_t>(g.leaves) * (static_cast<size_t>(g.spines * g.uplinks) +
                                              static_cast<size_t>(g.hosts_per_leaf * g.nics_per_host));
    case FabricType::kRailOptimized:
      return static_cast<size_t>(g.rails * g.leaves_per_rail * g.spines * g.uplinks) +
             static_cast<size_t>(g.hosts * g.rails);
    case FabricType::kFatTree: {
      size_t k = static_cast<size_t>(g.k);
      return 3 * k * k * k / 4;
    }
    case FabricType::kExplicit: return 0;
  }
  return 0;
}

// Names: switches and hosts count from 1; rails, NICs and GPUs from 0 (GPU i uses NIC i).
Gen generate(const GeneratorParams& g) {
  Gen out;
  std::string n;
  switch (g.type) {
    case FabricType::kLeafSpine: {
      std::vector<size_t> spines, leaves;
      for (int s = 1; s <= g.spines; ++s) spines.push_back(out.add("spine" + std::to_string(s), NodeKind::kSwitch, "spine"));
      for (int l = 1; l <= g.leaves; ++l) leaves.push_back(out.add("leaf" + std::to_string(l), NodeKind::kSwitch, "leaf"));
      for (size_t l : leaves)
        for (size_t s : spines)
          for (int u = 0; u < g.uplinks; ++u) out.links.push_back({l, s, true});
      int h = 0;
      for (size_t l : leaves)
        for (int j = 0; j < g.hosts_per_leaf; ++j) {
          size_t host = out.add("host" + std::to_string(++h), NodeKind::kHost, "host");
          for (int nic = 0; nic < g.nics_per_host; ++nic) out.links.push_back({host, l, false});
        }
      break;
    }
    case FabricType::kRailOptimized: {
      std::vector<size_t> spines;
      std::vector<std::vector<size_t>> rails(static_cast<size_t>(g.rails));
      for (int s = 1; s <= g.spines; ++s) spines.push_back(out.add("spine" + std::to_string(s), NodeKind::kSwitch, "spine"));
      for (int r = 0; r < g.rails; ++r)
        for (int j = 1; j <= g.leaves_per_rail; ++j)
          rails[static_cast<size_t>(r)].push_back(out.add(
              g.leaves_per_rail == 1 ? "rail" + std::to_string(r) : "rail" + std::to_string(r) + "-" + std::to_string(j),
              NodeKind::kSwitch, "rail"));
      for (const auto& rail : rails)
        for (size_t leaf : rail)
          for (size_t s : spines)
            for (int u = 0; u < g.uplinks; ++u) out.links.push_back({leaf, s, true});
      int per_leaf = g.hosts / g.leaves_per_rail;
      for (int h = 0; h < g.hosts; ++h) {
        size_t host = out.add("host" + std::to_string(h + 1), NodeKind::kHost, "host");
        for (int r = 0; r < g.rails; ++r)
          out.links.push_back({host, rails[static_cast<size_t>(r)][static_cast<size_t>(h / per_leaf)], false});
      }
      break;
    }
    case FabricType::kFatTree: {
      int half = g.k / 2;
      std::vector<size_t> cores;
      for (int c = 1; c <= half * half; ++c) cores.push_back(out.add("core" + std::to_string(c), NodeKind::kSwitch, "core"));
      int h = 0;
      for (int p = 1; p <= g.k; ++p) {
        std::vector<size_t> aggs, edges;
        for (int i = 1; i <= half; ++i)
          aggs.push_back(out.add("agg" + std::to_string(p) + "-" + std::to_string(i), NodeKind::kSwitch, "agg"));
        for (int i = 1; i <= half; ++i)
          edges.push_back(out.add("edge" + std::to_string(p) + "-" + std::to_string(i), NodeKind::kSwitch, "edge"));
        // Aggregation switch i of every pod reaches core switches i*half .. i*half + half - 1.
        for (int i = 0; i < half; ++i)
          for (int c = 0; c < half; ++c)
            out.links.push_back({aggs[static_cast<size_t>(i)], cores[static_cast<size_t>(i * half + c)], false});
        for (size_t e : edges)
          for (size_t a : aggs) out.links.push_back({e, a, false});
        for (size_t e : edges)
          for (int j = 0; j < half; ++j)
            out.links.push_back({out.add("host" + std::to_string(++h), NodeKind::kHost, "host"), e, false});
      }
      break;
    }
    case FabricType::kExplicit: break;
  }
  return out;
}

template <class T>
std::optional<T> lower_of(const std::optional<T>& x, const std::optional<T>& y) {
  if (x && y) return std::min(*x, *y);
  return x ? x : y;
}

class Builder {
 public:
  Builder(RawScenario& raw, Diagnostics& d) : raw_(raw), s_(raw.s), d_(d) {}

  bool run() {
    if (!topology()) return false;
    if (!settle_ports()) return false;
    if (!interface_names()) return false;
    if (!addresses()) return false;
    s_.routes = plan_routes(s_);
    references();
    return d_.empty();
  }

 private:
  void err(ErrorKind k, Position p, std::string msg) { d_.add(k, p, std::move(msg)); }

  std::string hint_node(std::string_view name) const {
    std::vector<std::string_view> names;
    for (const auto& n : s_.nodes) names.push_back(n.name);
    std::string h = closest(name, names);
    return h.empty() ? "" : " (did you mean '" + h + "'?)";
  }

  bool topology() {
    const GeneratorParams& g = s_.fabric;
    if (raw_.generate) {
      if (g.type == FabricType::kRailOptimized && g.hosts % g.leaves_per_rail != 0) {
        err(ErrorKind::kInconsistent, raw_.fabric_pos,
            "fabric: " + std::to_string(g.hosts) + " hosts do not split evenly over " +
                std::to_string(g.leaves_per_rail) + " leaves per rail");
        return false;
      }
      size_t nn = planned_nodes(g), nl = planned_links(g);
      if (nn > kMaxNodes || nl > kMaxLinks) {
        err(ErrorKind::kTooLarge, raw_.fabric_pos,
            "fabric: " + std::to_string(nn) + " nodes and " + std::to_string(nl) +
                " links exceed what one machine holds (at most " + std::to_string(kMaxNodes) + " nodes, " +
                std::to_string(kMaxLinks) + " links)");
        return false;
      }
      Gen gen = generate(g);
      s_.nodes = std::move(gen.nodes);
      for (const GenLink& gl : gen.links) {
        Link l;
        l.a.node = gl.a;
        l.b.node = gl.b;
        l.pos = raw_.fabric_pos;
        s_.links.push_back(std::move(l));
        uplink_.push_back(gl.uplink);
      }
      for (Node& n : s_.nodes) n.pos = raw_.fabric_pos;
      return apply_node_overrides() && apply_link_overrides();
    }
    return explicit_topology();
  }

  bool apply_node_overrides() {
    std::set<std::string> seen;
    for (const RawNode& rn : raw_.nodes) {
      if (!seen.insert(rn.name).second) {
        err(ErrorKind::kDuplicateName, rn.pos, "nodes: '" + rn.name + "' is listed twice");
        continue;
      }
      auto idx = s_.find_node(rn.name);
      if (!idx) {
        err(ErrorKind::kUnknownNode, rn.pos, "nodes: '" + rn.name + "' is not a node of the generated " +
                                                  std::string(fabric_type_name(s_.fabric.type)) + " fabric" +
                                                  hint_node(rn.name));
        continue;
      }
      Node& n = s_.nodes[*idx];
      n.pos = rn.pos;
      if (rn.kind && *rn.kind != n.kind)
        err(ErrorKind::kInconsistent, rn.pos, "nodes: '" + rn.name + "' is a " + std::string(node_kind_name(n.kind)) +
                                                  " in the generated fabric, not a " +
                                                  std::string(node_kind_name(*rn.kind)));
      if (rn.role && *rn.role != n.role)
        err(ErrorKind::kInconsistent, rn.pos, "nodes: '" + rn.name + "' has role " + n.role +
                                                  " in the generated fabric, not " + *rn.role);
      node_port_[*idx] = rn.port;
      if (rn.loopback) loopback_pin_[*idx] = {*rn.loopback, rn.loopback_pos};
    }
    return d_.empty();
  }

  bool matches(const Link& l, const RawEnd& x, const RawEnd& y) const {
    auto end_ok = [&](const Endpoint& e, const RawEnd& r) {
      return s_.nodes[e.node].name == r.node && (r.ifname.empty() || r.ifname == e.ifname);
    };
    return (end_ok(l.a, x) && end_ok(l.b, y)) || (end_ok(l.a, y) && end_ok(l.b, x));
  }

  bool apply_link_overrides() {
    // Interface names decide which parallel link an override with "node:ifname" means.
    assign_ifnames();
    for (const RawLink& rl : raw_.links) {
      bool known = true;
      for (const RawEnd* e : {&rl.a, &rl.b})
        if (!s_.find_node(e->node)) {
          err(ErrorKind::kUnknownNode, e->pos, "links: '" + e->node + "' is not a node of the generated fabric" + hint_node(e->node));
          known = false;
        }
      if (!known) continue;
      std::vector<size_t> hits;
      for (size_t i = 0; i < s_.links.size(); ++i)
        if (matches(s_.links[i], rl.a, rl.b)) hits.push_back(i);
      if (hits.empty()) {
        err(ErrorKind::kUnknownLink, rl.pos, "links: the generated fabric has no link between " + show_end(rl.a) +
                                                 " and " + show_end(rl.b));
        continue;
      }
      if (rl.subnet && hits.size() > 1) {
        err(ErrorKind::kInconsistent, rl.subnet_pos, "links: a subnet names one link, but " + show_end(rl.a) + " and " +
                                                         show_end(rl.b) + " match " + std::to_string(hits.size()) +
                                                         " parallel links (name the ports as node:ifname)");
        continue;
      }
      for (size_t i : hits) {
        if (rl.port.rate) link_port_[i].rate = rl.port.rate;
        if (rl.port.mtu) link_port_[i].mtu = rl.port.mtu;
        if (rl.port.delay) link_port_[i].delay = rl.port.delay;
        if (rl.subnet) subnet_pin_[i] = {*rl.subnet, rl.subnet_pos};
        s_.links[i].pos = rl.pos;
      }
    }
    return d_.empty();
  }

  static std::string show_end(const RawEnd& e) { return e.ifname.empty() ? e.node : e.node + ":" + e.ifname; }

  bool explicit_topology() {
    std::unordered_map<std::string, size_t> index;
    for (const RawNode& rn : raw_.nodes) {
      if (index.count(rn.name)) {
        err(ErrorKind::kDuplicateName, rn.pos, "nodes: '" + rn.name + "' is defined twice (first at line " +
                                                   std::to_string(s_.nodes[index[rn.name]].pos.line) + ")");
        continue;
      }
      if (!rn.kind) {
        err(ErrorKind::kMissingKey, rn.pos, "nodes: '" + rn.name + "' needs a kind (switch or host)");
        continue;
      }
      Node n;
      n.name = rn.name;
      n.kind = *rn.kind;
      n.role = rn.role ? *rn.role : std::string(node_kind_name(n.kind));
      if ((n.kind == NodeKind::kHost) != (n.role == "host")) {
        err(ErrorKind::kInconsistent, rn.pos, "nodes: '" + rn.name + "' is a " + std::string(node_kind_name(n.kind)) +
                                                  " and cannot have role " + n.role);
        continue;
      }
      n.pos = rn.pos;
      index[n.name] = s_.nodes.size();
      node_port_[s_.nodes.size()] = rn.port;
      if (rn.loopback) loopback_pin_[s_.nodes.size()] = {*rn.loopback, rn.loopback_pos};
      s_.nodes.push_back(std::move(n));
    }
    if (s_.nodes.size() > kMaxNodes || raw_.links.size() > kMaxLinks) {
      err(ErrorKind::kTooLarge, raw_.fabric_pos, "fabric: " + std::to_string(s_.nodes.size()) + " nodes and " +
                                                     std::to_string(raw_.links.size()) + " links exceed what one machine holds");
      return false;
    }
    for (const RawLink& rl : raw_.links) {
      bool ok = true;
      for (const RawEnd* e : {&rl.a, &rl.b})
        if (!index.count(e->node)) {
          err(ErrorKind::kUnknownNode, e->pos, "links: unknown node '" + e->node + "'" + hint_node(e->node));
          ok = false;
        }
      if (!ok) continue;
      if (rl.a.node == rl.b.node) {
        err(ErrorKind::kSelfLoop, rl.pos, "links: a link from '" + rl.a.node + "' to itself");
        continue;
      }
      Link l;
      l.a.node = index[rl.a.node];
      l.b.node = index[rl.b.node];
      l.a.ifname = rl.a.ifname;
      l.b.ifname = rl.b.ifname;
      l.pos = rl.pos;
      size_t i = s_.links.size();
      link_port_[i] = rl.port;
      if (rl.subnet) subnet_pin_[i] = {*rl.subnet, rl.subnet_pos};
      s_.links.push_back(std::move(l));
      uplink_.push_back(false);
    }
    if (!d_.empty()) return false;
    build_ports();
    for (const Node& n : s_.nodes)
      if (n.kind == NodeKind::kHost && n.ports.empty())
        err(ErrorKind::kHostNotConnected, n.pos, "nodes: host '" + n.name + "' has no link");
    if (s_.nodes.empty() || s_.links.empty())
      err(ErrorKind::kMissingKey, raw_.fabric_pos, "fabric: an explicit fabric needs 'nodes' and 'links'");
    return d_.empty();
  }

  // Generated names: a host's NICs are nic0..; a switch port is named after its peer, with
  // "-k" on parallel links. Names given in the file are kept.
  void build_ports() {
    if (ports_built_) return;
    ports_built_ = true;
    for (size_t i = 0; i < s_.links.size(); ++i) {
      s_.nodes[s_.links[i].a.node].ports.push_back(i);
      s_.nodes[s_.links[i].b.node].ports.push_back(i);
    }
  }

  void assign_ifnames() {
    if (ifnames_done_) return;
    ifnames_done_ = true;
    build_ports();
    for (size_t ni = 0; ni < s_.nodes.size(); ++ni) {
      Node& n = s_.nodes[ni];
      std::map<size_t, int> per_peer;  // peer → links to it
      for (size_t li : n.ports) ++per_peer[s_.links[li].peer_of(ni).node];
      std::map<size_t, int> seen_peer;
      int nic = 0;
      for (size_t li : n.ports) {
        Link& l = s_.links[li];
        Endpoint& e = l.a.node == ni ? l.a : l.b;
        size_t peer = (l.a.node == ni ? l.b : l.a).node;
        int k = seen_peer[peer]++;
        if (!e.ifname.empty()) {
          if (n.kind == NodeKind::kHost) ++nic;
          continue;
        }
        if (n.kind == NodeKind::kHost) {
          e.ifname = "nic" + std::to_string(nic++);
        } else {
          e.ifname = s_.nodes[peer].name;
          if (per_peer[peer] > 1) e.ifname += "-" + std::to_string(k);
        }
      }
    }
  }

  bool interface_names() {
    assign_ifnames();
    for (size_t ni = 0; ni < s_.nodes.size(); ++ni) {
      const Node& n = s_.nodes[ni];
      std::unordered_map<std::string, size_t> seen;
      for (size_t li : n.ports) {
        const Link& l = s_.links[li];
        const Endpoint& e = l.end(ni);
        const Node& peer = s_.nodes[l.peer_of(ni).node];
        if (e.ifname.size() > kIfnameMax) {
          err(ErrorKind::kIfnameTooLong, l.pos,
              "links: the port of '" + n.name + "' towards '" + peer.name + "' would be named '" + e.ifname + "' (" +
                  std::to_string(e.ifname.size()) + " characters; the kernel allows " + std::to_string(kIfnameMax) +
                  "): name it as " + n.name + ":IFNAME in endpoints, or shorten the node name");
          continue;
        }
        if (e.ifname == "lo" || !seen.emplace(e.ifname, li).second)
          err(ErrorKind::kDuplicateName, l.pos, "links: '" + n.name + "' has two ports named '" + e.ifname + "'");
      }
    }
    return d_.empty();
  }

  // The link rate and MTU. Each end's port value comes from the highest layer that sets it
  // for that end (defaults -> kinds -> fabric generator -> nodes); the link runs at the lower
  // of its two ends, as Ethernet autonegotiation does; a link's own setting beats them all.
  bool settle_ports() {
    const GeneratorParams& g = s_.fabric;
    std::optional<Rate> uplink_rate = g.uplink_rate;
    auto kind_port = [&](NodeKind k) -> const RawPort& { return k == NodeKind::kHost ? raw_.kind_host : raw_.kind_switch; };
    auto kind_end = [&](NodeKind k) {
      RawPort e;
      e.rate = kind_port(k).rate.value_or(raw_.defaults.rate.value_or(kDefaultRate));
      e.mtu = kind_port(k).mtu.value_or(raw_.defaults.mtu.value_or(kDefaultMtu));
      e.delay = kind_port(k).delay.value_or(raw_.defaults.delay.value_or(Duration{0}));
      return e;
    };
    auto layered = [&](size_t li) {
      const Link& l = s_.links[li];
      auto end = [&](size_t node) {
        RawPort e = kind_end(s_.nodes[node].kind);
        if (uplink_[li] && uplink_rate) e.rate = uplink_rate;
        if (auto np = node_port_.find(node); np != node_port_.end()) {
          if (np->second.rate) e.rate = np->second.rate;
          if (np->second.mtu) e.mtu = np->second.mtu;
          if (np->second.delay) e.delay = np->second.delay;
        }
        return e;
      };
      RawPort a = end(l.a.node), b = end(l.b.node), out;
      out.rate = lower_of(a.rate, b.rate);
      out.mtu = lower_of(a.mtu, b.mtu);
      out.delay = std::max(*a.delay, *b.delay);  // a cable as long as either end says
      if (auto lp = link_port_.find(li); lp != link_port_.end()) {
        if (lp->second.rate) out.rate = lp->second.rate;
        if (lp->second.mtu) out.mtu = lp->second.mtu;
        if (lp->second.delay) out.delay = lp->second.delay;
      }
      return out;
    };
    if (g.oversubscription && (g.type == FabricType::kLeafSpine || g.type == FabricType::kRailOptimized)) {
      // Oversubscription = host-facing capacity / spine-facing capacity of a leaf, with host
      // links as defaults and kinds make them (node and link overrides come after).
      Rate host_link = std::min(*kind_end(NodeKind::kHost).rate, *kind_end(NodeKind::kSwitch).rate);
      double host_rate = static_cast<double>(host_link.bps);
      double hosts_per_leaf = g.type == FabricType::kLeafSpine ? g.hosts_per_leaf * g.nics_per_host
                                                               : static_cast<double>(g.hosts) / g.leaves_per_rail;
      double ups = static_cast<double>(g.spines) * g.uplinks;
      if (ups == 0) {
        err(ErrorKind::kInconsistent, raw_.fabric_pos, "fabric: oversubscription needs spines");
        return false;
      }
      double wanted = hosts_per_leaf * host_rate / (*g.oversubscription * ups);
      if (uplink_rate) {
        double actual = hosts_per_leaf * host_rate / (static_cast<double>(uplink_rate->bps) * ups);
        if (std::fabs(actual - *g.oversubscription) > 0.01 * *g.oversubscription) {
          char buf[64];
          std::snprintf(buf, sizeof buf, "%.4g", actual);
          err(ErrorKind::kInconsistent, raw_.fabric_pos,
              "fabric: uplink_rate " + format_rate(*uplink_rate) + " gives oversubscription " + buf + ", not " +
                  std::to_string(*g.oversubscription).substr(0, 6) + " (set one of the two)");
          return false;
        }
      } else {
        uplink_rate = Rate{static_cast<uint64_t>(std::floor(wanted))};
        if (*uplink_rate < kRateMin) {
          err(ErrorKind::kOutOfRange, raw_.fabric_pos,
              "fabric: oversubscription makes uplinks " + format_rate(*uplink_rate) + ", below " + format_rate(kRateMin));
          return false;
        }
      }
    }
    Rate slowest = kRateMax;
    std::string slowest_name;
    for (size_t li = 0; li < s_.links.size(); ++li) {
      RawPort p = layered(li);
      s_.links[li].rate = *p.rate;
      s_.links[li].mtu = *p.mtu;
      s_.links[li].delay = *p.delay;
      if (*p.rate < slowest) {
        slowest = *p.rate;
        slowest_name = s_.nodes[s_.links[li].a.node].name + "-" + s_.nodes[s_.links[li].b.node].name;
      }
    }
    if (!s_.links.empty() && !s_.scale_auto && s_.scale.emulate(slowest) < kEmulatedRateMin)
      err(ErrorKind::kOutOfRange, raw_.scale_pos,
          "scale: D = " + std::to_string(s_.scale.factor()) + " makes link " + slowest_name + " (" +
              format_rate(slowest) + ") run at " + format_rate(s_.scale.emulate(slowest)) +
              " emulated, below the " + format_rate(kEmulatedRateMin) + " minimum");
    return d_.empty();
  }

  bool addresses() {
    const Ipv4Prefix pool = s_.pool;
    std::unordered_map<uint32_t, std::string> used;  // address → what holds it
    auto where = [](const Position& p) { return p.line ? " (line " + std::to_string(p.line) + ")" : std::string(); };
    for (auto& [ni, pin] : loopback_pin_) {
      const auto& [pre, pos] = pin;
      if (!pool.contains(pre)) {
        err(ErrorKind::kBadAddress, pos, "nodes: loopback " + format_prefix(pre) + " of '" + s_.nodes[ni].name +
                                             "' is outside the pool " + format_prefix(pool));
        continue;
      }
      auto [it, fresh] = used.emplace(pre.addr, "the loopback of '" + s_.nodes[ni].name + "'" + where(pos));
      if (!fresh) err(ErrorKind::kDuplicateAddress, pos, "nodes: " + format_ipv4(pre.addr) + " is already " + it->second);
    }
    for (auto& [li, pin] : subnet_pin_) {
      const auto& [pre, pos] = pin;
      if (!pool.contains(pre)) {
        err(ErrorKind::kBadAddress, pos, "links: subnet " + format_prefix(pre) + " is outside the pool " + format_prefix(pool));
        continue;
      }
      for (uint32_t a : {pre.addr, pre.addr + 1}) {
        auto [it, fresh] = used.emplace(a, "in subnet " + format_prefix(pre) + where(pos));
        if (!fresh) {
          err(ErrorKind::kDuplicateAddress, pos, "links: " + format_ipv4(a) + " is already " + it->second);
          break;
        }
      }
    }
    if (!d_.empty()) return false;
    // Loopbacks from the start of the pool, link /31s after them; a /24-aligned split when
    // the pool has room, for addresses a person can read.
    uint64_t nodes = s_.nodes.size() + 1, links = s_.links.size();
    uint64_t split = ((nodes + 255) / 256) * 256;
    if (split + 2 * links > pool.size()) split = nodes + (nodes % 2);
    uint64_t need = split + 2 * links;
    if (need > pool.size()) {
      err(ErrorKind::kAddressExhausted, raw_.pool_pos.line ? raw_.pool_pos : raw_.fabric_pos,
          "addressing.pool: " + format_prefix(pool) + " holds " + std::to_string(pool.size()) + " addresses; " +
              std::to_string(s_.nodes.size()) + " loopbacks and " + std::to_string(links) + " /31 links need " +
              std::to_string(need));
      return false;
    }
    uint64_t next = 1;
    for (size_t ni = 0; ni < s_.nodes.size(); ++ni) {
      if (auto it = loopback_pin_.find(ni); it != loopback_pin_.end()) {
        s_.nodes[ni].loopback = it->second.first;
        continue;
      }
      while (next < pool.size() && used.count(pool.addr + static_cast<uint32_t>(next))) ++next;
      if (next >= pool.size()) return exhausted();
      uint32_t a = pool.addr + static_cast<uint32_t>(next++);
      used.emplace(a, "a loopback");
      s_.nodes[ni].loopback = Ipv4Prefix{a, 32};
    }
    next = std::max<uint64_t>(split, next + (next % 2));
    for (size_t li = 0; li < s_.links.size(); ++li) {
      Link& l = s_.links[li];
      if (auto it = subnet_pin_.find(li); it != subnet_pin_.end()) {
        l.subnet = it->second.first;
      } else {
        while (next + 1 < pool.size() && (used.count(pool.addr + static_cast<uint32_t>(next)) ||
                                          used.count(pool.addr + static_cast<uint32_t>(next + 1))))
          next += 2;
        if (next + 1 >= pool.size()) return exhausted();
        l.subnet = Ipv4Prefix{pool.addr + static_cast<uint32_t>(next), 31};
        next += 2;
      }
      l.a.addr = l.subnet.addr;
      l.b.addr = l.subnet.addr + 1;
    }
    return true;
  }

  bool exhausted() {
    err(ErrorKind::kAddressExhausted, raw_.pool_pos.line ? raw_.pool_pos : raw_.fabric_pos,
        "addressing.pool: " + format_prefix(s_.pool) + " has no room left for the pinned and generated addresses");
    return false;
  }

  // Workloads, faults and capture name hosts, nodes and ports that must exist.
  void references() {
    auto host = [&](const std::string& name, Position pos, const std::string& what) {
      auto idx = s_.find_node(name);
      if (!idx) err(ErrorKind::kUnknownNode, pos, what + ": unknown host '" + name + "'" + hint_node(name));
      else if (s_.nodes[*idx].kind != NodeKind::kHost)
        err(ErrorKind::kBadValue, pos, what + ": '" + name + "' is a switch, not a host");
    };
    std::set<std::string> names;
    for (const Workload& w : s_.workloads) {
      if (!names.insert(w.name).second) err(ErrorKind::kDuplicateName, w.pos, "workloads: two workloads named '" + w.name + "'");
      for (const auto& h : w.hosts) host(h, w.pos, "workloads." + w.name);
      // GPU i uses NIC i (DESIGN.md §1): a host has as many GPUs as NICs.
      auto gpu = [&](const std::string& name, int g, const std::string& what) {
        auto idx = s_.find_node(name);
        if (!idx || s_.nodes[*idx].kind != NodeKind::kHost || g == 0 || has_port(*idx, "nic" + std::to_string(g))) return;
        err(ErrorKind::kBadValue, w.pos, what + ": '" + name + "' has no gpu" + std::to_string(g) + " (GPU i uses NIC i; it has " +
                                             std::to_string(s_.nodes[*idx].ports.size()) + " NICs)");
      };
      if (!w.from.empty()) host(w.from, w.pos, "workloads." + w.name + ".from");
      if (!w.to.empty()) host(w.to, w.pos, "workloads." + w.name + ".to");
      gpu(w.from, w.from_gpu, "workloads." + w.name + ".from");
      gpu(w.to, w.to_gpu, "workloads." + w.name + ".to");
      if (!w.from.empty() && w.from == w.to && w.from_gpu == w.to_gpu)
        err(ErrorKind::kInconsistent, w.pos, "workloads." + w.name + ": from and to are the same GPU");
      if (!w.from.empty() && w.from == w.to && w.from_gpu != w.to_gpu)
        err(ErrorKind::kInconsistent, w.pos, "workloads." + w.name + ": from and to are GPUs of the same host "
                                             "(they talk over the host's own links, not the fabric)");
    }
    for (const Fault& f : s_.faults) {
      const auto t = PortTarget::parse(f.target);
      auto idx = s_.find_node(t.node);
      if (!idx) {
        err(ErrorKind::kUnknownNode, f.pos, "faults: unknown node '" + t.node + "' in target '" + f.target + "'" + hint_node(t.node));
        continue;
      }
      if (!t.port) continue;  // a node; whether its kind takes one is the kind's to say
      if (!has_port(*idx, *t.port))
        err(ErrorKind::kUnknownLink, f.pos, "faults: '" + t.node + "' has no port '" + *t.port + "'" + hint_port(*idx, *t.port));
    }
    size_t captured = 0;  // ports, as the capture sink will open them (a port named twice, twice)
    for (const std::string& p : s_.capture.ports) {
      if (p == "all") {
        captured += 2 * s_.links.size();
        continue;
      }
      const auto t = PortTarget::parse(p);
      auto idx = s_.find_node(t.node);
      if (!idx) err(ErrorKind::kUnknownNode, raw_.root_pos, "capture.ports: unknown node in '" + p + "'" + hint_node(t.node));
      else if (t.port && !has_port(*idx, *t.port))
        err(ErrorKind::kUnknownLink, raw_.root_pos, "capture.ports: '" + t.node + "' has no port '" + *t.port + "'");
      else captured += t.port ? 1 : s_.nodes[*idx].ports.size();
    }
    check_capture_budget(captured);
    // PFC: XON defaults to XOFF - 2 x MTU (DESIGN.md §2) and must leave room below XOFF.
    uint32_t mtu = s_.links.empty() ? kDefaultMtu : 0;
    for (const Link& l : s_.links) mtu = std::max(mtu, l.mtu);
    PfcConfig& pfc = s_.qos.pfc;
    if (s_.qos.pfc_enabled && !pfc.xon) {
      if (pfc.xoff.n <= 2ull * mtu)
        err(ErrorKind::kInconsistent, raw_.qos_pos, "qos.pfc: xoff " + format_bytes(pfc.xoff) +
                                                       " leaves no room for the default xon (xoff - 2 x MTU " +
                                                       std::to_string(mtu) + "); set xon or raise xoff");
      else
        pfc.xon = Bytes{pfc.xoff.n - 2ull * mtu};
    }
    resolve_watchdog(pfc.watchdog);
    if (pfc.headroom && pfc.headroom->n < mtu)
      err(ErrorKind::kOutOfRange, raw_.headroom_pos,
          "qos.pfc.headroom: " + format_bytes(*pfc.headroom) + " is below one MTU (" + std::to_string(mtu) +
              " bytes): a frame already on the wire when XOFF goes out could not be held");
  }

  // SONiC's defaults for what the watchdog leaves unset (sonic-utilities pfcwd: a factor of
  // ceil(ports / 32) on the largest switch), and its rule that a poll is no longer than
  // either countdown.
  void resolve_watchdog(WatchdogConfig& w) {
    if (!w.enabled) return;
    if (!s_.qos.pfc_enabled || !s_.qos.pfc_mask)
      err(ErrorKind::kInconsistent, raw_.watchdog_pos, "qos.pfc.watchdog: the fabric has no PFC priority to watch");
    size_t ports = 0;
    for (const Node& n : s_.nodes)
      if (n.kind == NodeKind::kSwitch) ports = std::max(ports, n.ports.size());
    const int64_t factor = int64_t(std::max<size_t>(1, (ports + 31) / 32)), ms = 1000000;
    if (!w.detection) w.detection = Duration{200 * ms * factor};
    if (!w.restoration) w.restoration = Duration{2 * w.detection->ns};
    if (!w.poll) w.poll = Duration{std::min<int64_t>(200 * ms * factor, 1000 * ms)};
    if (w.poll->ns > w.detection->ns || w.poll->ns > w.restoration->ns)
      err(ErrorKind::kInconsistent, raw_.watchdog_pos,
          "qos.pfc.watchdog: poll_interval " + format_duration(*w.poll) + " is longer than detection_time " +
              format_duration(*w.detection) + " or restoration_time " + format_duration(*w.restoration) +
              " (SONiC refuses it: a poll must fit in each countdown)");
  }

  // Every captured port pins a kernel ring and may fill its file: a capture beyond the budget
  // is refused here, with the sums, rather than taking the machine's memory or disk.
  void check_capture_budget(size_t ports) {
    const Capture& c = s_.capture;
    const uint64_t rings = ports * kCaptureRingBytes, disk = ports * c.size.n;
    if (rings > kCaptureRingBudget)
      err(ErrorKind::kInconsistent, c.pos, "capture: " + std::to_string(ports) + " ports x " +
                                               format_bytes(Bytes{kCaptureRingBytes}) + " of kernel ring each = " +
                                               format_bytes(Bytes{rings}) + ", over the budget of " +
                                               format_bytes(Bytes{kCaptureRingBudget}) + " (" +
                                               std::to_string(kCaptureRingBudget / kCaptureRingBytes) +
                                               " ports): name the ports to capture");
    else if (disk > kCaptureDiskBudget)
      err(ErrorKind::kInconsistent, c.pos, "capture: " + std::to_string(ports) + " ports x size " + format_bytes(c.size) +
                                               " = " + format_bytes(Bytes{disk}) + " of files, over the budget of " +
                                               format_bytes(Bytes{kCaptureDiskBudget}) + ": lower capture.size or name fewer ports");
  }

  bool has_port(size_t ni, const std::string& ifname) const {
    for (size_t li : s_.nodes[ni].ports)
      if (s_.links[li].end(ni).ifname == ifname) return true;
    return false;
  }
  std::string hint_port(size_t ni, const std::string& ifname) const {
    std::vector<std::string_view> names;
    for (size_t li : s_.nodes[ni].ports) names.push_back(s_.links[li].end(ni).ifname);
    std::string h = closest(ifname, names);
    if (!h.empty()) return " (did you mean '" + h + "'?)";
    std::string all;  // nothing close: name them (ports are named after their peer on switches)
    for (size_t i = 0; i < names.size() && i < 8; ++i) all += (i ? ", " : "") + std::string(names[i]);
    return names.empty() ? " (it has no ports)" : " (its ports: " + all + (names.size() > 8 ? ", ..." : "") + ")";
  }

  RawScenario& raw_;
  Scenario& s_;
  Diagnostics& d_;
  std::vector<bool> uplink_;
  std::map<size_t, RawPort> node_port_, link_port_;
  std::map<size_t, std::pair<Ipv4Prefix, Position>> loopback_pin_, subnet_pin_;
  bool ifnames_done_ = false;
  bool ports_built_ = false;
};

}  // namespace

std::optional<Scenario> build_scenario(RawScenario raw, Diagnostics& diags) {
  Builder b(raw, diags);
  if (!b.run()) return std::nullopt;
  return std::move(raw.s);
}

}  // namespace rocelab::model
