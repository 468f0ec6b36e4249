// Phase 1 of loading: YAML syntax, schema (keys, types, ranges) and per-section consistency.
#include "model/loader.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "model/overrides.h"
#include "model/port_target.h"
#include "model/raw.h"
#include "model/yaml_reader.h"

namespace rocelab::model {

namespace {

bool valid_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

std::string shown(std::string_view s) {
  return s.size() > 40 ? "'" + std::string(s.substr(0, 40)) + "...'" : "'" + std::string(s) + "'";
}

class Loader {
 public:
  Loader(std::string_view text, Diagnostics& d) : text_(text), r_(d) {}

  std::optional<RawScenario> load(const YAML::Node& doc) {
    RawScenario raw;
    Value root = Reader::root(doc);
    raw.root_pos = root.pos.line ? root.pos : Position{1, 1};
    root.pos = raw.root_pos;
    auto m = r_.map(root);
    if (!m) return std::nullopt;
    Scenario& s = raw.s;

    if (auto v = m->take("schema")) {
      // Written by `validate --resolved -j`; a file may carry it, and then it must match.
      if (auto sv = r_.string(*v); sv && *sv != kResolvedSchema)
        r_.error(ErrorKind::kBadValue, *v, "schema: '" + *sv + "' is not " + std::string(kResolvedSchema));
    }
    if (auto v = m->take("name")) {
      if (auto n = r_.string(*v)) {
        if (is_instance_name(*n)) s.name = *n;
        else
          r_.error(ErrorKind::kBadValue, *v,
                   "name: " + shown(*n) + " is not a valid instance name (lower-case letters, digits "
                   "and '-', at most " + std::to_string(kInstanceNameMax) + " characters)");
      }
    }
    if (auto v = m->take("description"))
      if (auto d = r_.string(*v)) s.description = *d;
    if (auto v = m->take("seed"))
      if (auto n = r_.integer(*v, 0, std::numeric_limits<int64_t>::max())) s.seed = static_cast<uint64_t>(*n);
    if (auto v = m->require("scale", "the time scale D: emulated rates are physical / D, e.g. scale: 1000, "
                                      "or scale: auto for the smallest D this machine keeps up with")) {
      raw.scale_pos = v->pos;
      if (v->node.IsScalar() && v->node.Tag() != "!" && v->node.Scalar() == "auto") {
        s.scale_auto = true;
      } else if (v->node.IsScalar() && v->node.Tag() != "!") {
        auto p = parse_number(v->node.Scalar());
        if (p && *p.value <= 0)
          r_.error(ErrorKind::kOutOfRange, *v,
                   "scale: the scale factor D must be positive, got " + v->node.Scalar());
        else if (auto d = r_.number(*v, 1e-9, 1e6))
          s.scale = TimeScale(*d);
      } else {
        r_.number(*v, 0, 0);  // reports the wrong type
      }
    } else {
      raw.scale_pos = raw.root_pos;
    }
    if (auto v = m->take("addressing")) read_addressing(*v, raw);
    if (auto v = m->take("defaults")) read_port(*v, raw.defaults, false);
    if (auto v = m->take("kinds")) read_kinds(*v, raw);
    if (auto v = m->take("fabric")) {
      raw.has_fabric = true;
      raw.fabric_pos = v->pos;
      raw.generate = read_fabric(*v, s.fabric);
    } else {
      raw.fabric_pos = raw.root_pos;
    }
    if (auto v = m->take("nodes")) read_nodes(*v, raw);
    if (auto v = m->take("links")) read_links(*v, raw);
    if (!raw.has_fabric && raw.nodes.empty())
      r_.error(ErrorKind::kMissingKey, raw.root_pos,
               "top level: missing required key 'fabric' (a generator such as "
               "'fabric: {type: leaf-spine, ...}', or explicit 'nodes' and 'links')");
    raw.qos_pos = raw.root_pos;
    if (auto v = m->take("qos")) read_qos(*v, raw);
    if (auto v = m->take("hosts")) read_hosts(*v, s.hosts);
    if (auto v = m->take("workloads")) read_workloads(*v, s.workloads);
    if (auto v = m->take("faults")) read_faults(*v, s.faults);
    if (auto v = m->take("expect")) read_expect(*v, s.expect);
    if (auto v = m->take("capture")) read_capture(*v, s.capture);
    if (auto v = m->take("telemetry")) read_telemetry(*v, s.telemetry);
    m->take("derived");  // output-only section of a resolved dump: recomputed, never read
    m->done();
    return raw;
  }

 private:
  void read_addressing(const Value& v, RawScenario& raw) {
    auto m = r_.map(v);
    if (!m) return;
    if (auto p = m->take("pool")) {
      raw.pool_pos = p->pos;
      if (auto t = r_.string(*p)) {
        auto pre = parse_prefix(*t);
        if (!pre)
          r_.error(ErrorKind::kBadAddress, *p, "addressing.pool: " + shown(*t) + " is not an IPv4 prefix (e.g. 198.18.0.0/15)");
        else if (!pre->aligned())
          r_.error(ErrorKind::kBadAddress, *p, "addressing.pool: " + *t + " has host bits set (did you mean " +
                                                   format_prefix(Ipv4Prefix{pre->addr & pre->mask(), pre->len}) + "?)");
        else if (pre->len < 8 || pre->len > 29)
          r_.error(ErrorKind::kOutOfRange, *p, "addressing.pool: prefix length /" + std::to_string(pre->len) +
                                                   " is out of range [/8, /29]");
        else
          raw.s.pool = *pre;
      }
    }
    m->done();
  }

  void read_port(const Value& v, RawPort& port, bool in_node_map) {
    auto m = r_.map(v);
    if (!m) return;
    read_port_keys(*m, port);
    (void)in_node_map;
    m->done();
  }

  void read_port_keys(MapReader& m, RawPort& port) {
    if (auto v = m.take("rate")) port.rate = r_.rate(*v, kRateMin, kRateMax);
    if (auto v = m.take("mtu"))
      if (auto n = r_.integer(*v, kMtuMin, kMtuMax)) port.mtu = static_cast<uint32_t>(*n);
    if (auto v = m.take("delay")) port.delay = r_.duration(*v, Duration{0}, Duration{1'000'000'000});
  }

  void read_kinds(const Value& v, RawScenario& raw) {
    auto m = r_.map(v);
    if (!m) return;
    if (auto s = m->take("switch")) read_port(*s, raw.kind_switch, false);
    if (auto h = m->take("host")) read_port(*h, raw.kind_host, false);
    m->done();
  }

  std::optional<int> count(MapReader& m, std::string_view key, int lo, int hi, bool required, int dflt) {
    auto v = required ? m.require(key) : m.take(key);
    if (!v) return required ? std::nullopt : std::optional<int>(dflt);
    auto n = r_.integer(*v, lo, hi);
    if (!n) return std::nullopt;
    return static_cast<int>(*n);
  }

  void read_generator_keys(MapReader& m, GeneratorParams& g, FabricType type) {
    g.type = type;
    auto set = [](int& dst, std::optional<int> v) {
      if (v) dst = *v;
    };
    switch (type) {
      case FabricType::kLeafSpine:
        set(g.spines, count(m, "spines", 1, 64, true, 0));
        set(g.leaves, count(m, "leaves", 1, 256, true, 0));
        set(g.hosts_per_leaf, count(m, "hosts_per_leaf", 1, 256, true, 0));
        set(g.nics_per_host, count(m, "nics_per_host", 1, 16, false, 1));
        set(g.uplinks, count(m, "uplinks", 1, 16, false, 1));
        break;
      case FabricType::kRailOptimized:
        set(g.rails, count(m, "rails", 1, 16, true, 0));
        set(g.hosts, count(m, "hosts", 1, 1024, true, 0));
        set(g.spines, count(m, "spines", 0, 64, true, 0));
        set(g.leaves_per_rail, count(m, "leaves_per_rail", 1, 64, false, 1));
        set(g.uplinks, count(m, "uplinks", 1, 16, false, 1));
        g.nics_per_host = g.rails;
        break;
      case FabricType::kFatTree:
        if (auto v = m.require("k"))
          if (auto n = r_.integer(*v, 2, 22)) {  // k = 22: 3,267 nodes, within kMaxNodes
            if (*n % 2 != 0) r_.error(ErrorKind::kBadValue, *v, "fabric.k: a fat-tree needs an even k, got " + std::to_string(*n));
            else g.k = static_cast<int>(*n);
          }
        break;
      case FabricType::kExplicit: break;
    }
    if (type == FabricType::kLeafSpine || type == FabricType::kRailOptimized) {
      if (auto v = m.take("uplink_rate")) g.uplink_rate = r_.rate(*v, kRateMin, kRateMax);
      if (auto v = m.take("oversubscription")) g.oversubscription = r_.number(*v, 0.01, 1000);
    }
  }

  std::optional<FabricType> fabric_type(const Value& v) {
    auto t = r_.choice(v, {"leaf-spine", "rail-optimized", "fat-tree", "explicit"});
    if (!t) return std::nullopt;
    if (*t == "leaf-spine") return FabricType::kLeafSpine;
    if (*t == "rail-optimized") return FabricType::kRailOptimized;
    if (*t == "fat-tree") return FabricType::kFatTree;
    return FabricType::kExplicit;
  }

  // True when the fabric is to be generated (a generator type, not explicit).
  bool read_fabric(const Value& v, GeneratorParams& g) {
    auto m = r_.map(v);
    if (!m) return false;
    auto tv = m->require("type");
    std::optional<FabricType> type = tv ? fabric_type(*tv) : std::nullopt;
    if (type) read_generator_keys(*m, g, *type);
    if (type == FabricType::kExplicit) {
      // A resolved dump records the generator a fabric came from.
      if (auto gv = m->take("generated_by")) {
        if (auto gm = r_.map(*gv)) {
          auto gt = gm->require("type");
          if (auto t = gt ? fabric_type(*gt) : std::nullopt) {
            if (*t == FabricType::kExplicit)
              r_.error(ErrorKind::kBadValue, *gt, "fabric.generated_by.type: must name a generator");
            else
              read_generator_keys(*gm, g, *t);
          }
          gm->done();
        }
      }
    }
    m->done(type.has_value());  // without a type the other keys cannot be judged
    return type && *type != FabricType::kExplicit;
  }

  std::optional<std::string> node_name(const Value& v) {
    auto s = r_.string(v);
    if (!s) return std::nullopt;
    bool ok = !s->empty() && s->size() <= kNodeNameMax && (*s)[0] != '-' && (*s)[0] != '_';
    for (char c : *s) ok = ok && valid_name_char(c);
    if (!ok) {
      r_.error(ErrorKind::kBadValue, v, v.path + ": " + shown(*s) +
                                            " is not a valid node name (letters, digits, '-' and '_', "
                                            "starting with a letter or digit, at most " +
                                            std::to_string(kNodeNameMax) + " characters)");
      return std::nullopt;
    }
    return s;
  }

  // A workload end: HOST (its GPU 0) or HOST:gpuN (GPU N, which uses NIC N).
  void rank_name(const Value& v, std::string& host, int& gpu) {
    auto s = r_.string(v);
    if (!s) return;
    const auto t = PortTarget::parse(*s);
    if (!t.port) {
      if (auto n = node_name(v)) host = *n;
      return;
    }
    const std::string& suffix = *t.port;
    const bool digits = suffix.size() > 3 && suffix.size() <= 6 && suffix.compare(0, 3, "gpu") == 0 &&
                        std::all_of(suffix.begin() + 3, suffix.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      r_.error(ErrorKind::kBadValue, v, v.path + ": " + shown(*s) + " is not HOST or HOST:gpuN (GPU N uses the host's NIC N)");
      return;
    }
    Value head = v;
    head.node = YAML::Node(t.node);
    if (auto n = node_name(head)) {
      host = *n;
      gpu = std::stoi(suffix.substr(3));
    }
  }

  // A list of nodes ({name: leaf1, rate: 100G}) or, as containerlab writes them, a map from
  // name to settings (leaf1: {rate: 100G}).
  void read_nodes(const Value& v, RawScenario& raw) {
    if (v.node.IsMap()) {
      auto m = r_.map(v);
      if (!m) return;
      for (auto& [key, body] : m->take_all()) {
        const Value name{YAML::Node(key), body.pos, body.path};
        read_node(body, &name, raw);
      }
      m->done();
      return;
    }
    auto items = r_.list(v);
    if (!items) return;
    for (const auto& item : *items) read_node(item, nullptr, raw);
  }

  void read_node(const Value& item, const Value* name, RawScenario& raw) {
    auto m = r_.map(item);
    if (!m) return;
    RawNode n;
    n.pos = item.pos;
    if (name) {
      if (auto s = node_name(*name)) n.name = *s;
    } else if (auto nv = m->require("name")) {
      if (auto s = node_name(*nv)) n.name = *s;
    }
    if (auto kv = m->take("kind"))
      if (auto k = r_.choice(*kv, {"switch", "host"})) n.kind = *k == "host" ? NodeKind::kHost : NodeKind::kSwitch;
    if (auto rv = m->take("role"))
      n.role = r_.choice(*rv, {"spine", "leaf", "rail", "core", "agg", "edge", "switch", "host"});
    read_port_keys(*m, n.port);
    if (auto lv = m->take("loopback")) {
      n.loopback_pos = lv->pos;
      if (auto t = r_.string(*lv)) {
        auto p = parse_prefix(*t, true);
        if (!p || p->len != 32)
          r_.error(ErrorKind::kBadAddress, *lv, lv->path + ": " + shown(*t) + " is not an IPv4 /32 address");
        else
          n.loopback = p;
      }
    }
    m->done();
    raw.nodes.push_back(std::move(n));
  }

  std::optional<RawEnd> endpoint(const Value& v) {
    auto s = r_.string(v);
    if (!s) return std::nullopt;
    RawEnd e;
    e.pos = v.pos;
    const auto t = PortTarget::parse(*s);
    Value nv = v;
    nv.node = YAML::Node(t.node);
    if (!node_name(nv)) return std::nullopt;
    e.node = t.node;
    if (t.port) {
      e.ifname = *t.port;
      if (!check_ifname(e.ifname, v)) return std::nullopt;
    }
    return e;
  }

  bool check_ifname(const std::string& name, const Value& v) {
    bool chars = !name.empty() && name != "." && name != "..";
    for (char c : name) chars = chars && (valid_name_char(c) || c == '.');
    if (!chars) {
      r_.error(ErrorKind::kBadValue, v, v.path + ": interface name " + shown(name) +
                                            " may hold only letters, digits, '-', '_' and '.'");
      return false;
    }
    if (name.size() > kIfnameMax) {
      r_.error(ErrorKind::kIfnameTooLong, v, v.path + ": interface name '" + name + "' is " +
                                                 std::to_string(name.size()) + " characters; the kernel allows " +
                                                 std::to_string(kIfnameMax));
      return false;
    }
    return true;
  }

  void read_links(const Value& v, RawScenario& raw) {
    auto items = r_.list(v);
    if (!items) return;
    for (const auto& item : *items) {
      auto m = r_.map(item);
      if (!m) continue;
      RawLink l;
      l.pos = item.pos;
      bool ok = true;
      if (auto ev = m->require("endpoints")) {
        if (auto ends = r_.list(*ev)) {
          if (ends->size() != 2) {
            r_.error(ErrorKind::kBadValue, *ev, ev->path + ": a link has exactly 2 endpoints, got " +
                                                    std::to_string(ends->size()));
            ok = false;
          } else {
            auto a = endpoint((*ends)[0]);
            auto b = endpoint((*ends)[1]);
            if (a && b) {
              l.a = *a;
              l.b = *b;
            } else {
              ok = false;
            }
          }
        } else {
          ok = false;
        }
      } else {
        ok = false;
      }
      read_port_keys(*m, l.port);
      if (auto sv = m->take("subnet")) {
        l.subnet_pos = sv->pos;
        if (auto t = r_.string(*sv)) {
          auto p = parse_prefix(*t);
          if (!p || p->len != 31 || !p->aligned())
            r_.error(ErrorKind::kBadAddress, *sv, sv->path + ": " + shown(*t) + " is not an IPv4 /31 subnet (even address, /31)");
          else
            l.subnet = p;
        }
      }
      m->done();
      if (ok) raw.links.push_back(std::move(l));
    }
  }

  void read_dscp_map(const Value& v, Qos& q) {
    auto m = r_.map(v);
    if (!m) return;
    for (auto& [key, val] : m->take_all()) {
      // "26" or "24-31"
      int lo = -1, hi = -1;
      size_t dash = key.find('-');
      auto num = [](std::string_view t) {
        if (t.empty() || t.size() > 2) return -1;
        int n = 0;
        for (char c : t) {
          if (c < '0' || c > '9') return -1;
          n = n * 10 + (c - '0');
        }
        return n;
      };
      lo = num(std::string_view(key).substr(0, dash));
      hi = dash == std::string::npos ? lo : num(std::string_view(key).substr(dash + 1));
      if (lo < 0 || hi < 0 || lo > 63 || hi > 63 || lo > hi) {
        r_.error(ErrorKind::kBadValue, val, "qos.dscp_map: " + shown(key) +
                                                " is not a DSCP value or range within 0..63 (e.g. 26 or 24-31)");
        continue;
      }
      Value pv = val;
      pv.path = "qos.dscp_map." + key;
      if (auto prio = r_.integer(pv, 0, 7))
        for (int d = lo; d <= hi; ++d) q.dscp_to_prio[static_cast<size_t>(d)] = static_cast<uint8_t>(*prio);
    }
  }

  void read_qos(const Value& v, RawScenario& raw) {
    Qos& q = raw.s.qos;
    raw.qos_pos = v.pos;
    auto m = r_.map(v);
    if (!m) return;
    if (auto pv = m->take("profile")) {
      if (auto p = r_.choice(*pv, {"roce-lossless", "lossy", "pfc-only", "ecn-only"})) {
        q.profile = *p;
        q.pfc_enabled = *p == "roce-lossless" || *p == "pfc-only";
        q.ecn.enabled = *p == "roce-lossless" || *p == "ecn-only";
        q.lossless_mask = q.pfc_enabled ? (1u << 3) : 0;
        q.pfc_mask = q.lossless_mask;
      }
    }
    if (auto lv = m->take("lossless")) {
      if (auto items = r_.list(*lv)) {
        uint8_t mask = 0;
        for (const auto& it : *items) {
          if (auto p = r_.integer(it, 0, 7)) {
            if (mask & (1u << *p))
              r_.error(ErrorKind::kDuplicateName, it, it.path + ": priority " + std::to_string(*p) + " listed twice");
            mask |= static_cast<uint8_t>(1u << *p);
          }
        }
        q.lossless_mask = mask;
        q.pfc_mask = mask;
        q.pfc_enabled = mask != 0;
      }
    }
    if (auto dv = m->take("dscp_map")) read_dscp_map(*dv, q);
    if (auto hv = m->take("ecmp_hash"))
      if (auto h = r_.choice(*hv, {"l4", "l3"})) q.ecmp_hash = *h;
    if (auto gv = m->take("ecmp_groups"))
      if (auto g = r_.choice(*gv, {"plain", "resilient"})) q.ecmp_groups = *g;
    if (auto bv = m->take("ecmp_buckets"))
      if (auto b = r_.integer(*bv, 8, 32768)) q.ecmp_buckets = int(*b);
    if (auto ev = m->take("ecn")) {
      if (ev->node.IsScalar()) {
        if (auto b = r_.boolean(*ev)) q.ecn.enabled = *b;
      } else if (auto em = r_.map(*ev)) {
        q.ecn.enabled = true;
        if (auto pv = em->take("preset")) {
          if (auto p = r_.choice(*pv, {"nvidia", "paper"})) {
            q.ecn.preset = *p;
            if (*p == "paper") q.ecn = EcnConfig{true, "paper", Bytes{5 * 1024}, Bytes{200 * 1024}, 0.01};
          }
        }
        std::optional<Value> kminv = em->take("kmin"), kmaxv = em->take("kmax");
        if (kminv) if (auto b = r_.bytes(*kminv, Bytes{0}, Bytes{1ULL << 30})) q.ecn.kmin = *b, q.ecn.preset = "custom";
        if (kmaxv) if (auto b = r_.bytes(*kmaxv, Bytes{0}, Bytes{1ULL << 30})) q.ecn.kmax = *b, q.ecn.preset = "custom";
        if (auto pm = em->take("pmax")) if (auto d = r_.number(*pm, 0, 1)) q.ecn.pmax = *d, q.ecn.preset = "custom";
        if (auto mv = em->take("marking"))
          if (auto m = r_.choice(*mv, {"dequeue", "enqueue"})) q.ecn.at_dequeue = *m == "dequeue";
        if (q.ecn.kmin > q.ecn.kmax)
          r_.error(ErrorKind::kInconsistent, kminv ? kminv->pos : (kmaxv ? kmaxv->pos : ev->pos),
                   "qos.ecn: kmin " + format_bytes(q.ecn.kmin) + " is above kmax " + format_bytes(q.ecn.kmax));
        em->done();
      }
    }
    if (auto pv = m->take("pfc")) {
      if (auto pm = r_.map(*pv)) {
        std::optional<Value> xoffv = pm->take("xoff"), xonv = pm->take("xon");
        if (xoffv) if (auto b = r_.bytes(*xoffv, Bytes{1024}, Bytes{1ULL << 30})) q.pfc.xoff = *b;
        if (xonv) if (auto b = r_.bytes(*xonv, Bytes{0}, Bytes{1ULL << 30})) raw.xon = *b, q.pfc.xon = *b;
        if (auto qv = pm->take("quanta"))
          if (auto n = r_.integer(*qv, 1, 65535)) q.pfc.quanta = static_cast<uint32_t>(*n);
        if (auto tv = pm->take("trigger"))
          if (auto t = r_.choice(*tv, {"ingress", "egress"})) q.pfc.per_ingress = *t == "ingress";
        if (auto hv = pm->take("headroom")) {
          raw.headroom_pos = hv->pos;
          if (auto b = r_.bytes(*hv, Bytes{0}, Bytes{1ULL << 30})) q.pfc.headroom = *b;
        }
        if (auto wv = pm->take("watchdog")) read_watchdog(*wv, q.pfc.watchdog, raw);
        if (auto lv = pm->take("priorities")) {
          if (auto items = r_.list(*lv)) {
            uint8_t mask = 0;
            for (const auto& it : *items) {
              auto p = r_.integer(it, 0, 7);
              if (!p) continue;
              if (!((q.lossless_mask >> *p) & 1))
                r_.error(ErrorKind::kInconsistent, it,
                         it.path + ": priority " + std::to_string(*p) +
                             " is not lossless (qos.lossless); PFC pauses lossless priorities only");
              mask |= static_cast<uint8_t>(1u << *p);
            }
            q.pfc_mask = mask;
          }
        }
        if (raw.xon && *raw.xon >= q.pfc.xoff)
          r_.error(ErrorKind::kInconsistent, xonv->pos, "qos.pfc: xon " + format_bytes(*raw.xon) +
                                                             " must be below xoff " + format_bytes(q.pfc.xoff));
        pm->done();
      }
    }
    if (auto bv = m->take("buffer")) {
      if (auto bm = r_.map(*bv)) {
        if (auto sv = bm->take("size"))
          if (auto b = r_.bytes(*sv, Bytes{64 * 1024}, Bytes{1ULL << 30})) q.buffer.size = *b;
        if (auto dv = bm->take("dynamic_th"))
          if (auto n = r_.integer(*dv, -7, 7)) q.buffer.dynamic_th = static_cast<int>(*n);
        bm->done();
      }
    }
    m->done();
  }

  // hosts.dcqcn: {preset: nvidia, rate_timer: 100us, ...}: the preset, then each parameter
  // the scenario sets (physical units; the engine scales them by D).
  template <class M>
  void read_dcqcn(M& m, HostsConfig& h) {
    auto& o = h.dcqcn_set;
    if (auto v = m.take("preset"))
      if (auto d = r_.choice(*v, {"paper", "nvidia", "ns3", "off"})) h.dcqcn = *d;
    const Duration dmin{1}, dmax{3'600'000'000'000};
    const Rate rmin{1}, rmax{Rate{1'000'000'000'000'000}};
    if (auto v = m.take("cnp_interval")) o.cnp_interval = r_.duration(*v, Duration{0}, dmax);
    if (auto v = m.take("alpha_timer")) o.alpha_timer = r_.duration(*v, dmin, dmax);
    if (auto v = m.take("alpha_window")) o.alpha_window = r_.duration(*v, Duration{0}, dmax);
    if (auto v = m.take("rate_timer")) o.rate_timer = r_.duration(*v, dmin, dmax);
    if (auto v = m.take("reduce_period")) o.reduce_period = r_.duration(*v, Duration{0}, dmax);
    if (auto v = m.take("g")) o.g = r_.number(*v, 0, 1);
    if (auto v = m.take("initial_alpha")) o.initial_alpha = r_.number(*v, 0, 1);
    if (auto v = m.take("max_cut")) o.max_cut = r_.number(*v, 0, 1);
    if (auto v = m.take("byte_counter")) o.byte_counter = r_.bytes(*v, Bytes{0}, Bytes{1ULL << 40});
    if (auto v = m.take("threshold"))
      if (auto n = r_.integer(*v, 1, 1000)) o.threshold = int(*n);
    if (auto v = m.take("rate_ai")) o.rate_ai = r_.rate(*v, Rate{0}, rmax);
    if (auto v = m.take("rate_hai")) o.rate_hai = r_.rate(*v, Rate{0}, rmax);
    if (auto v = m.take("rate_min")) o.rate_min = r_.rate(*v, rmin, rmax);
    if (auto v = m.take("rate_on_first_cnp")) o.rate_on_first_cnp = r_.rate(*v, Rate{0}, rmax);
    if (auto v = m.take("clamp_target")) o.clamp_target = r_.boolean(*v);
    if (auto v = m.take("clamp_target_after_timer")) o.clamp_target_after_timer = r_.boolean(*v);
    if (auto v = m.take("notification_point")) o.notification_point = r_.boolean(*v);
    if (auto v = m.take("reaction_point")) o.reaction_point = r_.boolean(*v);
    read_mlx5_dcqcn(m, o);
    m.done();
  }

  // The same parameters under the names an mlx5 NIC gives them (/sys/class/net/IF/ecn/roce_np
  // and roce_rp, mlxreg), each in its unit there: a number as the NIC shows it, copied over.
  template <class M>
  void read_mlx5_dcqcn(M& m, DcqcnOverrides& o) {
    auto us = [&](const char* key, std::optional<Duration>& out, int64_t lo) {
      if (auto v = m.take(key)) {
        if (out) r_.error(ErrorKind::kInconsistent, *v, v->path + ": set twice (under its rocelab name and its mlx5 name)");
        else if (auto n = r_.integer(*v, lo, 1'000'000'000)) out = Duration{*n * 1000};
      }
    };
    auto mbps = [&](const char* key, std::optional<Rate>& out, int64_t lo) {
      if (auto v = m.take(key)) {
        if (out) r_.error(ErrorKind::kInconsistent, *v, v->path + ": set twice (under its rocelab name and its mlx5 name)");
        else if (auto n = r_.integer(*v, lo, 1'000'000'000)) out = Rate{uint64_t(*n) * 1'000'000};
      }
    };
    auto fixed = [&](const char* key, std::optional<double>& out, int64_t lo, int64_t hi, auto convert) {
      if (auto v = m.take(key)) {
        if (out) r_.error(ErrorKind::kInconsistent, *v, v->path + ": set twice (under its rocelab name and its mlx5 name)");
        else if (auto n = r_.integer(*v, lo, hi)) out = convert(double(*n));
      }
    };
    us("min_time_between_cnps", o.cnp_interval, 0);  // roce_np, microseconds
    us("dce_tcp_rtt", o.alpha_window, 1);             // roce_rp from here on
    us("rate_reduce_monitor_period", o.reduce_period, 0);
    us("rpg_time_reset", o.rate_timer, 1);
    mbps("rpg_ai_rate", o.rate_ai, 0);
    mbps("rpg_hai_rate", o.rate_hai, 0);
    mbps("rpg_min_rate", o.rate_min, 1);
    mbps("rate_to_set_on_first_cnp", o.rate_on_first_cnp, 0);
    // Fixed point: alpha in 1/1024ths; dce_tcp_g is the share of the old alpha kept, 1/1024ths.
    fixed("initial_alpha_value", o.initial_alpha, 0, 1023, [](double n) { return n / 1024; });
    fixed("dce_tcp_g", o.g, 0, 1023, [](double n) { return (1024 - n) / 1024; });
    fixed("rpg_min_dec_fac", o.max_cut, 1, 100, [](double n) { return 1 - n / 100; });  // percent of RC kept
    if (auto v = m.take("rpg_byte_reset")) {
      if (o.byte_counter) r_.error(ErrorKind::kInconsistent, *v, v->path + ": set twice (under its rocelab name and its mlx5 name)");
      else if (auto n = r_.integer(*v, 0, int64_t{1} << 40)) o.byte_counter = Bytes{uint64_t(*n)};
    }
    if (auto v = m.take("rpg_threshold")) {
      if (o.threshold) r_.error(ErrorKind::kInconsistent, *v, v->path + ": set twice (under its rocelab name and its mlx5 name)");
      else if (auto n = r_.integer(*v, 1, 1000)) o.threshold = int(*n);
    }
    if (auto v = m.take("rpg_gd"))
      if (auto n = r_.integer(*v, 0, 15)) o.rpg_gd = int(*n);  // cut = alpha / 2^(rpg_gd - 10)
    if (auto v = m.take("clamp_tgt_rate")) {
      if (auto n = r_.integer(*v, 0, 1)) o.clamp_target = *n == 1;
    }
    if (auto v = m.take("clamp_tgt_rate_after_time_inc")) {
      if (auto n = r_.integer(*v, 0, 1)) o.clamp_target_after_timer = *n == 1;
    }
    for (const char* unmodelled : {"rpg_max_rate", "cnp_dscp", "cnp_802p_prio", "enable", "dce_tcp_g_initial"})
      if (auto v = m.take(unmodelled))
        r_.error(ErrorKind::kBadValue, *v,
                 v->path + ": an mlx5 parameter rocelab does not model (the RP starts at line rate; CNPs go on "
                           "priority 6 with DSCP 48, as NVIDIA's defaults put them; DCQCN is on or off by hosts.dcqcn)");
  }

  // hosts.rc: a preset name (nccl: NCCL's timeout 20, retry_cnt 7) or {timeout, retry_cnt}.
  void read_rc(const Value& v, RcTimers& rc) {
    rc.fixed = true;
    if (v.node.IsScalar()) {
      if (auto p = r_.choice(v, {"nccl"})) {
        rc.preset = *p;
        rc.timeout = 20;
        rc.retry_cnt = 7;
      }
      return;
    }
    auto m = r_.map(v);
    if (!m) return;
    if (auto tv = m->take("timeout"))
      if (auto n = r_.integer(*tv, 0, 31)) rc.timeout = int(*n);
    if (auto cv = m->take("retry_cnt"))
      if (auto n = r_.integer(*cv, 0, 7)) rc.retry_cnt = int(*n);
    m->done();
  }

  void read_hosts(const Value& v, HostsConfig& h) {
    auto m = r_.map(v);
    if (!m) return;
    if (auto ev = m->take("engine"))
      if (auto e = r_.string(*ev)) {
        h.engine = *e;
        h.engine_pos = ev->pos;
      }
    if (auto dv = m->take("dcqcn")) {
      if (dv->node.IsScalar()) {
        if (auto d = r_.choice(*dv, {"paper", "nvidia", "ns3", "off"})) h.dcqcn = *d;
      } else if (auto dm = r_.map(*dv)) {
        read_dcqcn(*dm, h);
      }
    }
    if (auto rv = m->take("rc")) read_rc(*rv, h.rc);
    m->done();
  }

  // The keys present in a map, with their places (before any is taken).
  static KeysSet keys_set(const MapReader& m) {
    KeysSet k;
    for (const char* key : {"name", "type", "from", "to", "hosts", "message", "qps", "dscp", "ring", "iterations",
                            "start", "target", "at", "duration", "period", "probability", "priority", "count", "down",
                            "train", "fraction", "mtu", "vector", "quanta", "frame_rate"})
      if (m.has(key)) k[key] = m.key_pos(key);
    return k;
  }

  void read_workloads(const Value& v, std::vector<Workload>& out) {
    auto items = r_.list(v);
    if (!items) return;
    size_t i = 0;
    for (const auto& item : *items) {
      auto m = r_.map(item);
      ++i;
      if (!m) continue;
      Workload w;
      w.pos = item.pos;
      w.keys = keys_set(*m);
      if (auto tv = m->require("type"))
        if (auto t = r_.string(*tv)) {
          w.type = *t;
          w.type_pos = tv->pos;
        }
      w.name = w.type.empty() ? "workload" + std::to_string(i) : w.type + std::to_string(i);
      if (auto nv = m->take("name"))
        if (auto n = node_name(*nv)) w.name = *n;
      // Which of these a kind requires or takes is the kind's to say (checked above the model).
      if (auto fv = m->take("from")) rank_name(*fv, w.from, w.from_gpu);
      if (auto tv = m->take("to")) rank_name(*tv, w.to, w.to_gpu);
      if (auto hv = m->take("hosts")) {
        if (auto hs = r_.list_or_scalar(*hv)) {
          bool all = hs->size() == 1 && (*hs)[0].node.IsScalar() && (*hs)[0].node.Scalar() == "all";
          if (!all)
            for (const auto& h : *hs)
              if (auto n = node_name(h)) w.hosts.push_back(*n);
        }
      }
      if (auto mv = m->take("message")) if (auto b = r_.bytes(*mv, Bytes{1}, Bytes{1ULL << 36})) w.message = *b;
      if (auto qv = m->take("qps")) if (auto n = r_.integer(*qv, 1, 1024)) w.qps = static_cast<int>(*n);
      if (auto dv = m->take("dscp")) if (auto n = r_.integer(*dv, 0, 63)) w.dscp = static_cast<int>(*n);
      if (auto rv = m->take("ring"))
        if (auto c = r_.choice(*rv, {"by_leaf", "as_listed"})) w.ring_as_listed = *c == "as_listed";
      if (auto iv = m->take("iterations")) if (auto n = r_.integer(*iv, 1, 1000000)) w.iterations = static_cast<int>(*n);
      if (auto sv = m->take("start")) if (auto d = r_.duration(*sv, Duration{0}, Duration{3600LL * 1000000000})) w.start = *d;
      m->done();
      out.push_back(std::move(w));
    }
  }

  // qos.pfc.watchdog: on | off | {detection_time, restoration_time, poll_interval, action},
  // SONiC's ranges (sonic-utilities pfcwd): detection 100-5000 ms, restoration 100-60000 ms,
  // poll 100-3000 ms (checked against the others once the defaults are known).
  void read_watchdog(const Value& v, WatchdogConfig& w, RawScenario& raw) {
    raw.watchdog_pos = v.pos;
    if (v.node.IsScalar()) {
      if (auto c = r_.choice(v, {"on", "off"})) w.enabled = *c == "on";
      return;
    }
    auto m = r_.map(v);
    if (!m) return;
    w.enabled = true;
    const Duration ms{1000000};
    if (auto dv = m->take("detection_time")) w.detection = r_.duration(*dv, Duration{100 * ms.ns}, Duration{5000 * ms.ns});
    if (auto rv = m->take("restoration_time")) w.restoration = r_.duration(*rv, Duration{100 * ms.ns}, Duration{60000 * ms.ns});
    if (auto pv = m->take("poll_interval")) w.poll = r_.duration(*pv, Duration{100 * ms.ns}, Duration{3000 * ms.ns});
    if (auto av = m->take("action"))
      if (auto a = r_.choice(*av, {"drop", "forward", "alert"})) w.action = *wd_action_named(*a);
    if (auto pv = m->take("predicate"))
      if (auto p = r_.choice(*pv, {"mellanox", "broadcom"})) w.predicate = *p;
    m->done();
  }

  void read_faults(const Value& v, std::vector<Fault>& out) {
    auto items = r_.list(v);
    if (!items) return;
    const Duration kHour{3600LL * 1000000000};
    for (const auto& item : *items) {
      auto m = r_.map(item);
      if (!m) continue;
      Fault f;
      f.pos = item.pos;
      f.keys = keys_set(*m);
      if (auto tv = m->require("type"))
        if (auto t = r_.string(*tv)) {
          f.type = *t;
          f.type_pos = tv->pos;
        }
      if (auto tv = m->require("target"))
        if (auto t = r_.string(*tv)) f.target = *t;
      if (auto av = m->require("at")) if (auto d = r_.duration(*av, Duration{0}, kHour)) f.at = *d;
      if (auto dv = m->take("duration")) f.duration = r_.duration(*dv, Duration{1}, kHour);
      // Which parameters a kind requires or takes is the kind's to say (checked above the model).
      if (auto pv = m->take("period")) f.period = r_.duration(*pv, Duration{1}, kHour);
      if (auto pv = m->take("probability")) f.probability = r_.number(*pv, 0, 1);
      if (auto pv = m->take("priority"))
        if (auto n = r_.integer(*pv, 0, 7)) f.priority = static_cast<int>(*n);
      if (auto cv = m->take("count"))
        if (auto n = r_.integer(*cv, 1, 100000)) f.count = static_cast<int>(*n);
      if (auto dv = m->take("dscp"))
        if (auto n = r_.integer(*dv, 0, 63)) f.dscp = static_cast<int>(*n);
      if (auto fv = m->take("fraction")) f.fraction = r_.number(*fv, 0.001, 0.999);
      if (auto mv = m->take("mtu"))
        if (auto n = r_.integer(*mv, 576, 65535)) f.mtu = static_cast<int>(*n);
      if (auto vv = m->take("vector"))
        if (auto n = r_.integer(*vv, 1, 255)) f.vector = static_cast<int>(*n);
      if (auto qv = m->take("quanta"))
        if (auto n = r_.integer(*qv, 0, 65535)) f.quanta = static_cast<int>(*n);
      if (auto rv = m->take("frame_rate")) f.frame_rate = r_.number(*rv, 0.001, 1e9);
      if (auto dv = m->take("down")) f.down = r_.duration(*dv, Duration{1}, kHour);
      if (auto tv = m->take("train"))
        if (auto items = r_.list(*tv)) {
          if (items->size() > 100000) r_.error(ErrorKind::kOutOfRange, *tv, "a train of at most 100000 down/up times");
          else
            for (const auto& t : *items)
              if (auto d = r_.duration(t, Duration{1}, kHour)) f.train.push_back(*d);
        }
      m->done();
      out.push_back(std::move(f));
    }
  }

  // Column of `offset` inside the scalar at `v`, when the file text shows it verbatim.
  Position expr_position(const Value& v, const std::string& text, size_t offset) {
    Position p = v.pos;
    const YAML::Mark mk = v.node.Mark();
    if (mk.pos < 0 || static_cast<size_t>(mk.pos) >= text_.size()) return p;
    std::string_view at = text_.substr(static_cast<size_t>(mk.pos));
    size_t skip = (!at.empty() && (at[0] == '"' || at[0] == '\'')) ? 1 : 0;
    if (at.substr(skip, text.size()) == text) p.column += static_cast<int>(skip + offset);
    return p;
  }

  void read_expect(const Value& v, std::vector<Expectation>& out) {
    auto items = r_.list(v);
    if (!items) return;
    for (const auto& item : *items) {
      Expectation e;
      Value textv = item;
      if (item.node.IsMap()) {
        auto m = r_.map(item);
        auto ev = m->require("expr");
        if (auto nv = m->take("name"))
          if (auto n = r_.string(*nv)) e.name = *n;
        m->done();
        if (!ev) continue;
        textv = *ev;
      }
      auto t = r_.string(textv);
      if (!t) continue;
      e.text = *t;
      if (e.name.empty()) e.name = e.text;
      e.pos = textv.pos;
      auto parsed = parse_expression(e.text);
      if (parsed.error) {
        r_.error(parsed.error->unknown_metric ? ErrorKind::kUnknownMetric : ErrorKind::kBadExpression,
                 expr_position(textv, e.text, parsed.error->offset), textv.path + ": " + parsed.error->message);
        continue;
      }
      e.expr = std::move(parsed.root);
      out.push_back(std::move(e));
    }
  }

  void read_capture(const Value& v, Capture& c) {
    auto m = r_.map(v);
    if (!m) return;
    c.pos = v.pos;
    if (auto pv = m->take("ports"))
      if (auto items = r_.list_or_scalar(*pv))
        for (const auto& it : *items)
          if (auto s = r_.string(it)) c.ports.push_back(*s);
    if (auto sv = m->take("snaplen")) if (auto b = r_.bytes(*sv, Bytes{64}, Bytes{65535})) c.snaplen = *b;
    if (auto pv = m->take("packets")) if (auto n = r_.integer(*pv, 1, 1'000'000'000)) c.packets = uint64_t(*n);
    if (auto zv = m->take("size")) if (auto b = r_.bytes(*zv, Bytes{4096}, Bytes{uint64_t{1} << 40})) c.size = *b;
    m->done();
  }

  void read_telemetry(const Value& v, Telemetry& t) {
    auto m = r_.map(v);
    if (!m) return;
    t.pos = v.pos;
    if (auto sv = m->take("series"))
      if (auto c = r_.choice(*sv, {"on", "off"})) t.series = *c == "on";
    // Physical: 1 ns .. 1 s (the wall-clock floor is the sampler's, applied at run time).
    if (auto iv = m->take("interval")) t.interval = r_.duration(*iv, Duration{1}, Duration{1'000'000'000});
    m->done();
  }

  std::string_view text_;
  Reader r_;
};

}  // namespace

std::string default_instance_name(std::string_view path) {
  size_t slash = path.find_last_of('/');
  std::string_view stem = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (size_t dot = stem.find('.'); dot != std::string_view::npos) stem = stem.substr(0, dot);
  std::string out;
  for (char c : stem) {
    if (out.size() >= kInstanceNameMax) break;
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (ok) out += c;
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "scenario" : out;
}

namespace {

// Records where each document starts, and nothing else.
struct DocumentStarts : YAML::EventHandler {
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& m) override { starts.push_back(m); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

LoadResult load_scenario_text(std::string_view text, const std::string& file_label) {
  LoadResult res{std::nullopt, Diagnostics(file_label)};
  const std::string buf(text);
  YAML::Node root;
  try {
    // yaml-cpp 0.7's LoadAll never ends on a stray flow indicator at document level (",",
    // jbeder/yaml-cpp#1040): the parser yields an empty document without consuming the token,
    // forever, allocating each time. So count documents with a bounded parse, and treat a
    // document that starts where the previous one did as the parser being stuck.
    std::istringstream in(buf);
    YAML::Parser parser(in);
    DocumentStarts docs;
    while (docs.starts.size() < 2 && parser.HandleNextDocument(docs)) {
    }
    if (docs.starts.size() >= 2) {
      const YAML::Mark& second = docs.starts[1];
      if (second.pos == docs.starts[0].pos) {
        char c = second.pos >= 0 && static_cast<size_t>(second.pos) < buf.size() ? buf[second.pos] : '?';
        res.diags.add(ErrorKind::kSyntax, Reader::position_of(second),
                      std::string("syntax error: unexpected '") + c + "'");
      } else {
        res.diags.add(ErrorKind::kSyntax, Reader::position_of(second),
                      "syntax error: a scenario file holds one YAML document, found more");
      }
      return res;
    }
    if (docs.starts.empty()) {
      res.diags.add(ErrorKind::kWrongType, Position{1, 1}, "the document: expected a map, got nothing");
      return res;
    }
    root = YAML::Load(buf);
  } catch (const YAML::Exception& e) {
    res.diags.add(ErrorKind::kSyntax, Reader::position_of(e.mark), "syntax error: " + e.msg);
    return res;
  }
  Loader loader(text, res.diags);
  auto raw = loader.load(root);
  if (!raw || !res.diags.empty()) return res;
  raw->s.file = file_label;
  if (raw->s.name.empty()) raw->s.name = default_instance_name(file_label);
  res.scenario = build_scenario(std::move(*raw), res.diags);
  if (!res.diags.empty()) res.scenario.reset();
  return res;
}

std::optional<std::string> rescale(Scenario& s, double d) {
  if (!(d > 0) || !std::isfinite(d)) return "the scale factor D must be a positive number";
  const TimeScale scale(d);
  for (const auto& l : s.links)
    if (scale.emulate(l.rate) < kEmulatedRateMin)
      return "D = " + std::to_string(d) + " makes link " + s.nodes[l.a.node].name + "-" + s.nodes[l.b.node].name +
             " (" + format_rate(l.rate) + ") run at " + format_rate(scale.emulate(l.rate)) +
             " emulated, below the " + format_rate(kEmulatedRateMin) + " minimum";
  s.scale = scale;
  s.scale_auto = false;
  return std::nullopt;
}

std::optional<std::string> read_scenario_bytes(const std::string& path, std::string& why) {
  // Non-blocking, so a FIFO with no writer cannot hang us; only a regular file of bounded
  // size is read (a device such as /dev/zero never ends).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return why = std::strerror(errno), std::nullopt;
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0) return why = std::strerror(errno), std::nullopt;
  if (S_ISDIR(st.st_mode)) return why = "it is a directory", std::nullopt;
  if (!S_ISREG(st.st_mode)) return why = "not a regular file (a device, FIFO or socket)", std::nullopt;
  if (st.st_size > off_t(kMaxScenarioBytes)) {
    why = "it is " + std::to_string(st.st_size) + " bytes; a scenario is at most " + std::to_string(kMaxScenarioBytes) +
          " bytes";
    return std::nullopt;
  }
  std::string text(size_t(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return why = std::strerror(errno), std::nullopt;
    if (n == 0) break;  // shrank while we read
    got += size_t(n);
  }
  text.resize(got);
  return text;
}

LoadResult load_scenario_bytes(const std::string& text, const std::string& path, const std::vector<std::string>& sets) {
  LoadResult res{std::nullopt, Diagnostics(path)};
  if (sets.empty()) {
    res = load_scenario_text(text, path);
  } else {
    // --set: the file with the knobs changed, validated as a file; an error's line and
    // column are then those of that text, which the label says.
    std::string why;
    auto changed = apply_overrides(text, sets, why);
    if (!changed) {
      LoadResult bad{std::nullopt, Diagnostics(path)};
      bad.diags.add(ErrorKind::kBadValue, Position{}, why);
      return bad;
    }
    res = load_scenario_text(*changed, path + " with --set");
    if (res.scenario) res.scenario->sets = sets;
  }
  if (res.scenario) res.scenario->source = text;
  return res;
}

LoadResult load_scenario_file(const std::string& path, const std::vector<std::string>& sets) {
  std::string why;
  auto text = read_scenario_bytes(path, why);
  if (!text) {
    LoadResult res{std::nullopt, Diagnostics(path)};
    res.diags.add(ErrorKind::kIo, Position{}, "cannot read the file: " + why);
    return res;
  }
  return load_scenario_bytes(*text, path, sets);
}

}  // namespace rocelab::model
