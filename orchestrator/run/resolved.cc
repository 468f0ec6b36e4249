#include "run/resolved.h"

#include "model/loader.h"

namespace rocelab::run {

using nlohmann::ordered_json;
using namespace rocelab::model;

namespace {

ordered_json generator_json(const GeneratorParams& g) {
  ordered_json j;
  j["type"] = fabric_type_name(g.type);
  switch (g.type) {
    case FabricType::kLeafSpine:
      j["spines"] = g.spines;
      j["leaves"] = g.leaves;
      j["hosts_per_leaf"] = g.hosts_per_leaf;
      j["nics_per_host"] = g.nics_per_host;
      j["uplinks"] = g.uplinks;
      break;
    case FabricType::kRailOptimized:
      j["rails"] = g.rails;
      j["hosts"] = g.hosts;
      j["spines"] = g.spines;
      j["leaves_per_rail"] = g.leaves_per_rail;
      j["uplinks"] = g.uplinks;
      break;
    case FabricType::kFatTree: j["k"] = g.k; break;
    case FabricType::kExplicit: break;
  }
  if (g.uplink_rate) j["uplink_rate"] = format_rate(*g.uplink_rate);
  if (g.oversubscription) j["oversubscription"] = *g.oversubscription;
  return j;
}

std::string end_name(const Scenario& s, const Endpoint& e) { return s.nodes[e.node].name + ":" + e.ifname; }

ordered_json dscp_json(const std::array<uint8_t, 64>& map) {
  ordered_json j = ordered_json::object();
  for (size_t lo = 0; lo < 64;) {
    size_t hi = lo;
    while (hi + 1 < 64 && map[hi + 1] == map[lo]) ++hi;
    j[lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi)] = map[lo];
    lo = hi + 1;
  }
  return j;
}

// The preset alone, or the preset and every parameter the scenario set (physical units).
ordered_json dcqcn_json(const HostsConfig& h) {
  const DcqcnOverrides& o = h.dcqcn_set;
  if (o.empty()) return h.dcqcn;
  ordered_json j{{"preset", h.dcqcn}};
  auto dur = [&](const char* k, const std::optional<Duration>& v) { if (v) j[k] = format_duration(*v); };
  auto rate = [&](const char* k, const std::optional<Rate>& v) { if (v) j[k] = format_rate(*v); };
  auto num = [&](const char* k, const std::optional<double>& v) { if (v) j[k] = *v; };
  dur("cnp_interval", o.cnp_interval);
  dur("alpha_timer", o.alpha_timer);
  dur("alpha_window", o.alpha_window);
  dur("rate_timer", o.rate_timer);
  dur("reduce_period", o.reduce_period);
  num("g", o.g);
  num("initial_alpha", o.initial_alpha);
  num("max_cut", o.max_cut);
  if (o.byte_counter) j["byte_counter"] = format_bytes(*o.byte_counter);
  if (o.threshold) j["threshold"] = *o.threshold;
  rate("rate_ai", o.rate_ai);
  rate("rate_hai", o.rate_hai);
  rate("rate_min", o.rate_min);
  rate("rate_on_first_cnp", o.rate_on_first_cnp);
  if (o.rpg_gd) j["rpg_gd"] = *o.rpg_gd;
  if (o.clamp_target) j["clamp_target"] = *o.clamp_target;
  if (o.clamp_target_after_timer) j["clamp_target_after_timer"] = *o.clamp_target_after_timer;
  if (o.notification_point) j["notification_point"] = *o.notification_point;
  if (o.reaction_point) j["reaction_point"] = *o.reaction_point;
  return j;
}

ordered_json qos_json(const Qos& q) {
  ordered_json j;
  j["profile"] = q.profile;
  ordered_json lossless = ordered_json::array();
  for (int p = 0; p < 8; ++p)
    if (q.lossless_mask & (1u << p)) lossless.push_back(p);
  j["lossless"] = lossless;
  j["dscp_map"] = dscp_json(q.dscp_to_prio);
  j["ecmp_hash"] = q.ecmp_hash;
  j["ecmp_groups"] = q.ecmp_groups;
  if (q.ecmp_groups == "resilient") j["ecmp_buckets"] = q.ecmp_buckets;
  if (!q.ecn.enabled) {
    j["ecn"] = false;
  } else if (q.ecn.preset == "custom") {
    j["ecn"] = {{"kmin", format_bytes(q.ecn.kmin)}, {"kmax", format_bytes(q.ecn.kmax)}, {"pmax", q.ecn.pmax}};
  } else {
    j["ecn"] = {{"preset", q.ecn.preset}};
  }
  if (q.ecn.enabled) j["ecn"]["marking"] = q.ecn.at_dequeue ? "dequeue" : "enqueue";
  ordered_json pfc;
  pfc["trigger"] = q.pfc.per_ingress ? "ingress" : "egress";
  pfc["xoff"] = format_bytes(q.pfc.xoff);
  if (q.pfc.xon) pfc["xon"] = format_bytes(*q.pfc.xon);
  pfc["quanta"] = q.pfc.quanta;
  ordered_json prios = ordered_json::array();
  for (int p = 0; p < 8; ++p)
    if (q.pfc_mask & (1u << p)) prios.push_back(p);
  pfc["priorities"] = prios;
  if (q.pfc.headroom) pfc["headroom"] = format_bytes(*q.pfc.headroom);
  if (const auto& w = q.pfc.watchdog; w.enabled && w.detection && w.restoration && w.poll)
    pfc["watchdog"] = {{"detection_time", format_duration(*w.detection)},
                       {"restoration_time", format_duration(*w.restoration)},
                       {"poll_interval", format_duration(*w.poll)},
                       {"action", model::wd_action_name(w.action)},
                       {"predicate", w.predicate}};
  j["pfc"] = pfc;
  j["buffer"] = {{"size", format_bytes(q.buffer.size)}, {"dynamic_th", q.buffer.dynamic_th}};
  return j;
}

ordered_json derived_json(const Scenario& s) {
  ordered_json d;
  d["instance_prefix"] = s.namespace_prefix();
  d["counts"] = {{"switches", s.count(NodeKind::kSwitch)},
                 {"hosts", s.count(NodeKind::kHost)},
                 {"links", s.links.size()},
                 {"namespaces", s.nodes.size()}};
  d["oversubscription"] = s.oversubscription();
  ordered_json em;
  em["scale"] = s.scale_auto ? ordered_json("auto (chosen when the fabric is made; figures below at D = 1)") : ordered_json(s.scale.factor());
  em["note"] = "rates / D, times x D, bytes unchanged (DESIGN.md section 3)";
  if (!s.qos.ecn.enabled) em["ecn"] = false;
  ordered_json wl = ordered_json::array();
  for (const Workload& w : s.workloads) wl.push_back({{"name", w.name}, {"start", format_duration(s.scale.emulate(w.start))}});
  em["workloads"] = wl;
  ordered_json fl = ordered_json::array();
  for (const Fault& f : s.faults) {
    ordered_json fj{{"target", f.target}, {"at", format_duration(s.scale.emulate(f.at))}};
    if (f.duration) fj["duration"] = format_duration(s.scale.emulate(*f.duration));
    if (f.period) fj["period"] = format_duration(s.scale.emulate(*f.period));
    fl.push_back(fj);
  }
  em["faults"] = fl;
  d["emulated"] = em;
  ordered_json nodes = ordered_json::object();
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    const Node& n = s.nodes[i];
    ordered_json nj;
    nj["namespace"] = s.namespace_of(n);
    ordered_json ifs = ordered_json::array();
    for (size_t li : n.ports) {
      const Link& l = s.links[li];
      const Endpoint& e = l.end(i);
      ifs.push_back({{"name", e.ifname},
                     {"address", format_ipv4(e.addr) + "/31"},
                     {"peer", end_name(s, l.peer_of(i))},
                     {"rate", format_rate(l.rate)},
                     {"rate_emulated", format_rate(s.scale.emulate(l.rate))},
                     {"mtu", l.mtu}});
    }
    nj["interfaces"] = ifs;
    // Routes as `ip route` prints them: compact, familiar, and small enough for big fabrics.
    ordered_json routes = ordered_json::array();
    for (const Route& r : s.routes[i].routes) {
      std::string line = format_prefix(r.dst);
      const bool multipath = r.nexthops.size() > 1;
      for (const NextHop& h : r.nexthops)
        line += std::string(multipath ? " nexthop" : "") + " via " + format_ipv4(h.via) + " dev " + h.dev;
      if (r.table) line += " table " + std::to_string(r.table);
      routes.push_back(std::move(line));
    }
    nj["routes"] = routes;
    if (!s.routes[i].rules.empty()) {
      ordered_json rules = ordered_json::array();
      for (const SourceRule& r : s.routes[i].rules)
        rules.push_back({{"from", format_ipv4(r.from)}, {"table", r.table}, {"nic", r.nic}});
      nj["rules"] = rules;
    }
    nodes[n.name] = nj;
  }
  d["nodes"] = nodes;
  return d;
}

}  // namespace

ordered_json resolved_json(const Scenario& s, bool with_derived) {
  ordered_json j;
  j["schema"] = kResolvedSchema;
  j["name"] = s.name;
  if (!s.description.empty()) j["description"] = s.description;
  j["seed"] = s.seed;
  j["scale"] = s.scale_auto ? ordered_json("auto") : ordered_json(s.scale.factor());  // loads back as it was
  j["addressing"] = {{"pool", format_prefix(s.pool)}};
  ordered_json fabric{{"type", "explicit"}};
  if (s.fabric.type != FabricType::kExplicit) fabric["generated_by"] = generator_json(s.fabric);
  j["fabric"] = fabric;
  ordered_json nodes = ordered_json::array();
  for (const Node& n : s.nodes)
    nodes.push_back({{"name", n.name}, {"kind", node_kind_name(n.kind)}, {"role", n.role},
                     {"loopback", format_prefix(n.loopback)}});
  j["nodes"] = nodes;
  ordered_json links = ordered_json::array();
  for (const Link& l : s.links)
    links.push_back({{"endpoints", {end_name(s, l.a), end_name(s, l.b)}},
                     {"rate", format_rate(l.rate)},
                     {"mtu", l.mtu},
                     {"delay", format_duration(l.delay)},
                     {"subnet", format_prefix(l.subnet)}});
  j["links"] = links;
  j["qos"] = qos_json(s.qos);
  j["hosts"] = {{"engine", s.hosts.engine}, {"dcqcn", dcqcn_json(s.hosts)}};
  // Absent: the engine's adaptive timer, which a file cannot name, so the dump loads back.
  if (s.hosts.rc.fixed) j["hosts"]["rc"] = {{"timeout", s.hosts.rc.timeout}, {"retry_cnt", s.hosts.rc.retry_cnt}};
  ordered_json wl = ordered_json::array();
  for (const Workload& w : s.workloads) {
    ordered_json wj{{"name", w.name}, {"type", w.type}};
    if (!w.hosts.empty()) wj["hosts"] = w.hosts;
    // A GPU other than 0 as HOST:gpuN, as the file may write it.
    if (!w.from.empty()) wj["from"] = w.from_gpu ? w.from + ":gpu" + std::to_string(w.from_gpu) : w.from;
    if (!w.to.empty()) wj["to"] = w.to_gpu ? w.to + ":gpu" + std::to_string(w.to_gpu) : w.to;
    if (w.ring_as_listed) wj["ring"] = "as_listed";
    wj["message"] = format_bytes(w.message);
    wj["qps"] = w.qps;
    wj["dscp"] = w.dscp;
    wj["iterations"] = w.iterations;
    wj["start"] = format_duration(w.start);
    wl.push_back(wj);
  }
  j["workloads"] = wl;
  ordered_json fl = ordered_json::array();
  for (const Fault& f : s.faults) {
    ordered_json fj{{"type", f.type}, {"target", f.target}, {"at", format_duration(f.at)}};
    if (f.duration) fj["duration"] = format_duration(*f.duration);
    if (f.period) fj["period"] = format_duration(*f.period);
    if (f.probability) fj["probability"] = *f.probability;
    if (f.priority) fj["priority"] = *f.priority;
    if (f.count) fj["count"] = *f.count;
    if (f.dscp) fj["dscp"] = *f.dscp;
    if (f.fraction) fj["fraction"] = *f.fraction;
    if (f.mtu) fj["mtu"] = *f.mtu;
    if (f.vector) fj["vector"] = *f.vector;
    if (f.quanta) fj["quanta"] = *f.quanta;
    if (f.frame_rate) fj["frame_rate"] = *f.frame_rate;
    if (f.down) fj["down"] = format_duration(*f.down);
    if (!f.train.empty()) {
      ordered_json t = ordered_json::array();
      for (const auto& d : f.train) t.push_back(format_duration(d));
      fj["train"] = t;
    }
    fl.push_back(fj);
  }
  j["faults"] = fl;
  ordered_json ex = ordered_json::array();
  for (const Expectation& e : s.expect) {
    if (e.name == e.text) ex.push_back(e.text);
    else ex.push_back({{"expr", e.text}, {"name", e.name}});
  }
  j["expect"] = ex;
  j["capture"] = {{"ports", s.capture.ports}, {"snaplen", format_bytes(s.capture.snaplen)},
                  {"packets", s.capture.packets}, {"size", format_bytes(s.capture.size)}};
  j["telemetry"] = {{"series", s.telemetry.series ? "on" : "off"}};
  if (s.telemetry.interval) j["telemetry"]["interval"] = format_duration(*s.telemetry.interval);  // unset: the run picks
  if (with_derived) j["derived"] = derived_json(s);
  return j;
}

}  // namespace rocelab::run
