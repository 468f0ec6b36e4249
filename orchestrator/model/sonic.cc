#include "model/sonic.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "model/pfcwd.h"
#include "model/units.h"

namespace rocelab::model {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr int kMaxDepth = 64;  // CONFIG_DB nests three deep; anything past this is not one

// A field's number: CONFIG_DB writes every value as a string ("131072"); JSON numbers pass too.
struct Bad : std::runtime_error {
  using std::runtime_error::runtime_error;
};

int64_t number(const json& v, const std::string& where, int64_t lo, int64_t hi) {
  int64_t n = 0;
  if (v.is_number_integer()) {
    n = v.get<int64_t>();
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    size_t used = 0;
    try {
      n = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != s.size()) throw Bad(where + ": " + v.dump() + " is not a whole number");
  } else {
    throw Bad(where + ": " + v.dump() + " is not a whole number");
  }
  if (n < lo || n > hi) throw Bad(fmt::format("{}: {} is outside {}..{}", where, n, lo, hi));
  return n;
}

// "[BUFFER_PROFILE|name]" (releases before 202012) or "name".
std::string reference(const json& v, const std::string& where) {
  if (!v.is_string()) throw Bad(where + ": " + v.dump() + " is not a name");
  std::string s = v.get<std::string>();
  if (s.size() > 2 && s.front() == '[' && s.back() == ']') {
    const size_t bar = s.find('|');
    s = bar == std::string::npos ? s.substr(1, s.size() - 2) : s.substr(bar + 1, s.size() - bar - 2);
  }
  return s;
}

uint64_t field(const json& e, const char* f, const std::string& where);

const json& table(const json& db, const char* name) {
  static const json empty = json::object();
  auto it = db.find(name);
  if (it == db.end()) return empty;
  if (!it->is_object()) throw Bad(std::string(name) + " is not a table (a JSON object)");
  return *it;
}

const json& entry(const json& t, const std::string& tname, const std::string& key) {
  auto it = t.find(key);
  if (it == t.end()) throw Bad(tname + ": no entry " + key);
  if (!it->is_object()) throw Bad(tname + "|" + key + " is not an entry (a JSON object)");
  return *it;
}

// "3-4" or "3" (BUFFER_PG / BUFFER_QUEUE key's second part) -> the priorities.
std::vector<int> priority_range(const std::string& key, const std::string& where) {
  const size_t dash = key.find('-');
  const int lo = int(number(json(key.substr(0, dash)), where, 0, 7));
  const int hi = dash == std::string::npos ? lo : int(number(json(key.substr(dash + 1)), where, 0, 7));
  if (hi < lo) throw Bad(where + ": " + key + " is not a range");
  std::vector<int> out;
  for (int p = lo; p <= hi; ++p) out.push_back(p);
  return out;
}

// What most ports say, and a note naming the ports that say otherwise.
template <class T>
struct Vote {
  std::map<T, std::vector<std::string>> by;
  void add(const T& v, const std::string& port) { by[v].push_back(port); }
  bool empty() const { return by.empty(); }
  const T& winner(std::vector<std::string>& unmapped, const std::string& what,
                  const std::function<std::string(const T&)>& show) const {
    auto best = std::max_element(by.begin(), by.end(),
                                 [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    for (const auto& [v, ports] : by)
      if (v != best->first)
        unmapped.push_back(fmt::format("{} of {} ({}): rocelab's qos is one for the fabric; took {} from {} port(s)",
                                       what, fmt::join(ports, ", "), show(v), show(best->first), best->second.size()));
    return best->first;
  }
};

std::string port_of(const std::string& key) { return key.substr(0, key.find('|')); }

struct Reading {
  const json& db;
  std::vector<std::string>& unmapped;
  std::set<int> lossless;
  std::string dscp_map_name, tc_pg_map_name;
  std::string lossless_pg_profile;  // BUFFER_PG's for the lossless priorities, once read
};

void read_port_qos_map(Reading& r) {
  const json& t = table(r.db, "PORT_QOS_MAP");
  if (t.empty()) throw Bad("no PORT_QOS_MAP: nothing says which priorities are lossless");
  Vote<std::set<int>> pfc;
  Vote<std::string> dscp, tcpg;
  for (const auto& [port, e] : t.items()) {
    if (port == "global") continue;
    const std::string where = "PORT_QOS_MAP|" + port;
    std::set<int> prios;
    if (auto it = e.find("pfc_enable"); it != e.end() && !(it->is_string() && it->get<std::string>().empty())) {
      const std::string s = it->is_string() ? it->get<std::string>() : it->dump();
      for (size_t at = 0; at <= s.size();) {
        const size_t comma = std::min(s.find(',', at), s.size());
        prios.insert(int(number(json(s.substr(at, comma - at)), where + " pfc_enable", 0, 7)));
        at = comma + 1;
      }
    }
    pfc.add(prios, port);
    if (auto it = e.find("dscp_to_tc_map"); it != e.end()) dscp.add(reference(*it, where + " dscp_to_tc_map"), port);
    if (auto it = e.find("tc_to_pg_map"); it != e.end()) tcpg.add(reference(*it, where + " tc_to_pg_map"), port);
  }
  if (pfc.empty()) throw Bad("PORT_QOS_MAP names no port");
  auto show_set = [](const std::set<int>& s) { return s.empty() ? std::string("none") : fmt::format("{}", fmt::join(s, ",")); };
  auto show_name = [](const std::string& s) { return s; };
  r.lossless = pfc.winner(r.unmapped, "pfc_enable", show_set);
  if (!dscp.empty()) r.dscp_map_name = dscp.winner(r.unmapped, "dscp_to_tc_map", show_name);
  if (!tcpg.empty()) r.tc_pg_map_name = tcpg.winner(r.unmapped, "tc_to_pg_map", show_name);
}

// The DSCP -> TC map as dscp_map ranges; a DSCP the map leaves out goes to TC 0.
std::array<int, 64> read_dscp(Reading& r) {
  std::array<int, 64> m{};
  const json& t = table(r.db, "DSCP_TO_TC_MAP");
  std::string name = r.dscp_map_name;
  if (name.empty()) {
    if (t.size() != 1) {
      r.unmapped.push_back("DSCP_TO_TC_MAP: no port names a map (dscp_to_tc_map); every DSCP taken to TC 0");
      return m;
    }
    name = t.begin().key();
  }
  const json& e = entry(t, "DSCP_TO_TC_MAP", name);
  for (const auto& [d, tc] : e.items()) {
    const std::string where = "DSCP_TO_TC_MAP|" + name + " " + d;
    m[size_t(number(json(d), where, 0, 63))] = int(number(tc, where, 0, 7));
  }
  return m;
}

// rocelab's queue is the priority, and it reserves no buffer per PG or queue: a map that is
// not the identity, and a reservation, are named.
void check_left(Reading& r) {
  for (const auto& [name, m] : table(r.db, "TC_TO_QUEUE_MAP").items())
    for (const auto& [tc, q] : m.items())
      if (number(json(tc), "TC_TO_QUEUE_MAP|" + name, 0, 7) != number(q, "TC_TO_QUEUE_MAP|" + name + " " + tc, 0, 7))
        r.unmapped.push_back(fmt::format("TC_TO_QUEUE_MAP|{} {}: {}: rocelab's queue is the priority", name, tc, q.dump()));
  std::set<std::string> reserving;
  for (const char* t : {"BUFFER_PG", "BUFFER_QUEUE"})
    for (const auto& [key, e] : table(r.db, t).items())
      if (e.is_object() && e.contains("profile")) {
        const std::string p = reference(e.at("profile"), std::string(t) + "|" + key + " profile");
        const json& prof = table(r.db, "BUFFER_PROFILE");
        const bool lossless_pg = std::string(t) == "BUFFER_PG" && p == r.lossless_pg_profile;  // read as XOFF + headroom
        if (!lossless_pg && prof.contains(p) && prof.at(p).contains("size") &&
            field(prof.at(p), "size", "BUFFER_PROFILE|" + p) > 0)
          reserving.insert(p);
      }
  for (const auto& p : reserving)
    r.unmapped.push_back("BUFFER_PROFILE|" + p + " size: rocelab reserves no buffer per PG or queue beyond the lossless PGs'");
}

void check_tc_to_pg(Reading& r) {
  if (r.tc_pg_map_name.empty()) return;
  const json& e = entry(table(r.db, "TC_TO_PRIORITY_GROUP_MAP"), "TC_TO_PRIORITY_GROUP_MAP", r.tc_pg_map_name);
  for (const auto& [tc, pg] : e.items()) {
    const std::string where = "TC_TO_PRIORITY_GROUP_MAP|" + r.tc_pg_map_name + " " + tc;
    const int t = int(number(json(tc), where, 0, 7)), g = int(number(pg, where, 0, 7));
    if (r.lossless.count(t) && t != g)
      r.unmapped.push_back(fmt::format("{}: lossless TC {} in PG {}: rocelab's priority group is the priority itself", where, t, g));
  }
}

// Profile names BUFFER_PG (lossless priorities) or BUFFER_QUEUE (`lossless` false: lossy
// queues) gives, by vote over the ports.
std::string profile_for(Reading& r, const char* tname, bool lossless) {
  Vote<std::string> v;
  for (const auto& [key, e] : table(r.db, tname).items()) {
    const size_t bar = key.find('|');
    if (bar == std::string::npos) throw Bad(std::string(tname) + "|" + key + ": not PORT|PRIORITIES");
    const std::string where = std::string(tname) + "|" + key;
    bool match = false;
    for (int p : priority_range(key.substr(bar + 1), where)) match = match || bool(r.lossless.count(p)) == lossless;
    if (!match || !e.is_object() || !e.contains("profile")) continue;
    v.add(reference(e.at("profile"), where + " profile"), port_of(key));
  }
  if (v.empty()) return {};
  return v.winner(r.unmapped, std::string(tname) + (lossless ? " lossless profile" : " lossy profile"),
                  [](const std::string& s) { return s; });
}

uint64_t field(const json& e, const char* f, const std::string& where) {
  auto it = e.find(f);
  if (it == e.end()) throw Bad(where + ": no " + f);
  return uint64_t(number(*it, where + " " + f, 0, int64_t{1} << 40));
}

void read_buffers(Reading& r, std::vector<std::string>& pfc, std::vector<std::string>& buffer) {
  const json& profiles = table(r.db, "BUFFER_PROFILE");
  r.lossless_pg_profile = profile_for(r, "BUFFER_PG", true);
  if (const std::string& pg = r.lossless_pg_profile; !pg.empty()) {
    const std::string where = "BUFFER_PROFILE|" + pg;
    const json& e = entry(profiles, "BUFFER_PROFILE", pg);
    const uint64_t xoff = field(e, "xoff", where);
    pfc.push_back(fmt::format("xoff: {}B", xoff));
    if (e.contains("xon")) pfc.push_back(fmt::format("xon: {}B", field(e, "xon", where)));
    if (e.contains("size")) {
      const uint64_t size = field(e, "size", where);
      if (size > xoff) pfc.push_back(fmt::format("headroom: {}B", size - xoff));
      else r.unmapped.push_back(fmt::format("{} size {}: not above xoff, so no headroom past it", where, size));
    }
    for (const char* f : {"dynamic_th", "static_th", "xon_offset"})
      if (e.contains(f))
        r.unmapped.push_back(fmt::format("{} {} {}: rocelab's lossless XOFF is the fixed xoff", where, f, e.at(f).dump()));
  } else if (!r.lossless.empty()) {
    r.unmapped.push_back("BUFFER_PG: no profile for the lossless priorities; qos.pfc keeps rocelab's thresholds");
  }
  if (const std::string q = profile_for(r, "BUFFER_QUEUE", false); !q.empty()) {
    const json& e = entry(profiles, "BUFFER_PROFILE", q);
    if (e.contains("dynamic_th"))
      buffer.push_back(fmt::format("dynamic_th: {}", number(e.at("dynamic_th"), "BUFFER_PROFILE|" + q + " dynamic_th", -7, 7)));
  }
  const json& pools = table(r.db, "BUFFER_POOL");
  if (!pools.contains("ingress_lossless_pool")) return;
  const uint64_t size = field(entry(pools, "BUFFER_POOL", "ingress_lossless_pool"), "size", "BUFFER_POOL|ingress_lossless_pool");
  buffer.insert(buffer.begin(), fmt::format("size: {}B", size));
  for (const auto& [name, e] : pools.items())
    if (name != "ingress_lossless_pool" && e.is_object() && e.contains("size") &&
        field(e, "size", "BUFFER_POOL|" + name) != size)
      r.unmapped.push_back(fmt::format("BUFFER_POOL|{} size {}: rocelab's switch has one pool, ingress_lossless_pool's {}",
                                       name, field(e, "size", "BUFFER_POOL|" + name), size));
}

std::string read_wred(Reading& r) {
  const json& t = table(r.db, "WRED_PROFILE");
  Vote<std::string> v;
  for (const auto& [key, e] : table(r.db, "QUEUE").items()) {
    const size_t bar = key.find('|');
    if (bar == std::string::npos || !e.is_object() || !e.contains("wred_profile")) continue;
    for (int p : priority_range(key.substr(bar + 1), "QUEUE|" + key))
      if (r.lossless.count(p)) v.add(reference(e.at("wred_profile"), "QUEUE|" + key + " wred_profile"), port_of(key));
  }
  std::string name;
  if (!v.empty()) {
    name = v.winner(r.unmapped, "QUEUE wred_profile", [](const std::string& s) { return s; });
  } else if (t.size() == 1) {
    name = t.begin().key();
  } else {
    if (!t.empty()) r.unmapped.push_back("WRED_PROFILE: no QUEUE names one for a lossless queue; ECN as rocelab's default");
    return "";
  }
  const std::string where = "WRED_PROFILE|" + name;
  const json& e = entry(t, "WRED_PROFILE", name);
  const std::string ecn = e.value("ecn", std::string("ecn_none"));
  if (ecn == "ecn_none" || e.value("wred_green_enable", std::string("true")) == "false") return "false";
  for (const auto& [f, val] : e.items())
    if (f.rfind("yellow", 0) == 0 || f.rfind("red", 0) == 0 || f.rfind("wred_yellow", 0) == 0 || f.rfind("wred_red", 0) == 0)
      r.unmapped.push_back(fmt::format("{} {} {}: rocelab marks by one (green) curve", where, f, val.dump()));
  const uint64_t kmin = field(e, "green_min_threshold", where), kmax = field(e, "green_max_threshold", where);
  const int64_t p = number(e.at("green_drop_probability"), where + " green_drop_probability", 0, 100);
  return fmt::format("{{kmin: {}B, kmax: {}B, pmax: {}}}", kmin, kmax, double(p) / 100);
}

std::string read_pfcwd(Reading& r) {
  const json& t = table(r.db, "PFC_WD");
  Vote<std::string> v;
  for (const auto& [port, e] : t.items()) {
    if (port == "GLOBAL" || !e.is_object()) continue;
    const std::string where = "PFC_WD|" + port;
    const std::string action = e.value("action", std::string("drop"));
    if (!wd_action_named(action)) throw Bad(where + " action: " + action + " is not drop, forward or alert");
    v.add(fmt::format("detection_time: {}ms, restoration_time: {}ms, action: {}",
                      number(e.at("detection_time"), where + " detection_time", 1, 1 << 30),
                      number(e.at("restoration_time"), where + " restoration_time", 1, 1 << 30), action),
          port);
  }
  if (v.empty()) return "off";
  std::string w = v.winner(r.unmapped, "PFC_WD", [](const std::string& s) { return "{" + s + "}"; });
  if (t.contains("GLOBAL") && t.at("GLOBAL").contains("POLL_INTERVAL"))
    w += fmt::format(", poll_interval: {}ms", number(t.at("GLOBAL").at("POLL_INTERVAL"), "PFC_WD|GLOBAL POLL_INTERVAL", 1, 1 << 30));
  return "{" + w + "}";
}

std::string dscp_yaml(const std::array<int, 64>& m) {
  std::vector<std::string> parts;
  for (size_t d = 0; d < 64;) {
    size_t e = d;
    while (e + 1 < 64 && m[e + 1] == m[d]) ++e;
    parts.push_back(d == e ? fmt::format("\"{}\": {}", d, m[d]) : fmt::format("\"{}-{}\": {}", d, e, m[d]));
    d = e + 1;
  }
  return "{" + fmt::format("{}", fmt::join(parts, ", ")) + "}";
}

std::string qos_yaml(Reading& r) {
  const std::array<int, 64> dscp = read_dscp(r);
  check_tc_to_pg(r);
  std::vector<std::string> pfc, buffer;
  read_buffers(r, pfc, buffer);
  const std::string ecn = read_wred(r), wd = read_pfcwd(r);
  check_left(r);
  const bool pfc_on = !r.lossless.empty(), ecn_on = !ecn.empty() && ecn != "false";
  std::string y = "qos:\n";
  y += fmt::format("  profile: {}\n", pfc_on ? (ecn_on ? "roce-lossless" : "pfc-only") : (ecn_on ? "ecn-only" : "lossy"));
  if (pfc_on) y += fmt::format("  lossless: [{}]\n", fmt::join(r.lossless, ", "));
  y += "  dscp_map: " + dscp_yaml(dscp) + "\n";
  if (!ecn.empty()) y += "  ecn: " + ecn + "\n";
  if (pfc_on) {
    y += "  pfc:\n";
    for (const auto& p : pfc) y += "    " + p + "\n";
    y += fmt::format("    priorities: [{}]\n", fmt::join(r.lossless, ", "));
    y += "    watchdog: " + wd + "\n";
  }
  if (!buffer.empty()) y += "  buffer: {" + fmt::format("{}", fmt::join(buffer, ", ")) + "}\n";
  return y;
}

const std::set<std::string> kRead = {"PORT_QOS_MAP", "DSCP_TO_TC_MAP", "TC_TO_PRIORITY_GROUP_MAP", "BUFFER_PG",
                                     "BUFFER_QUEUE", "BUFFER_PROFILE", "BUFFER_POOL", "WRED_PROFILE", "QUEUE", "PFC_WD"};
// Tables of QoS meaning that rocelab leaves: named, the rest of CONFIG_DB is not QoS.
const std::map<std::string, std::string> kQosLeft = {
    {"SCHEDULER", "rocelab's queues share a port by strict priority, not by a scheduler's weights"},
    {"MAP_PFC_PRIORITY_TO_QUEUE", "rocelab's pause holds the priority's own queue"},
    {"DOT1P_TO_TC_MAP", "rocelab classifies by DSCP alone"},
    {"CABLE_LENGTH", "rocelab takes a link's delay from links: delay"},
    {"BUFFER_PORT_INGRESS_PROFILE_LIST", "rocelab reserves nothing per port"},
    {"BUFFER_PORT_EGRESS_PROFILE_LIST", "rocelab reserves nothing per port"}};

}  // namespace

std::optional<SonicImport> import_sonic(const std::string& text, std::string& why) {
  json db;
  try {
    db = json::parse(text, [](int depth, json::parse_event_t, json&) {
      if (depth > kMaxDepth) throw Bad(fmt::format("nested past {} levels: not CONFIG_DB", kMaxDepth));
      return true;
    });
  } catch (const Bad& e) {
    return why = e.what(), std::nullopt;
  } catch (const std::exception& e) {
    return why = std::string("not JSON: ") + e.what(), std::nullopt;
  }
  if (!db.is_object()) return why = "not CONFIG_DB: its tables make one JSON object", std::nullopt;
  SonicImport out;
  try {
    Reading r{db, out.unmapped, {}, {}, {}, {}};
    read_port_qos_map(r);
    out.yaml = qos_yaml(r);
  } catch (const Bad& e) {
    return why = e.what(), std::nullopt;
  } catch (const json::exception& e) {
    return why = std::string("CONFIG_DB: ") + e.what(), std::nullopt;
  }
  for (const auto& [name, reason] : kQosLeft)
    if (db.contains(name)) out.unmapped.push_back(name + ": " + reason);
  return out;
}

namespace {

std::string ranges(const std::vector<int>& prios) {
  std::vector<std::string> out;
  for (size_t i = 0; i < prios.size();) {
    size_t j = i;
    while (j + 1 < prios.size() && prios[j + 1] == prios[j] + 1) ++j;
    out.push_back(i == j ? std::to_string(prios[i]) : fmt::format("{}-{}", prios[i], prios[j]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(out, ","));
}

// Consecutive runs as BUFFER_PG/BUFFER_QUEUE keys write them ("3-4", "0-2", "5-7").
std::vector<std::string> runs(const std::vector<int>& prios) {
  std::vector<std::string> out;
  const std::string r = ranges(prios);
  for (size_t at = 0; at < r.size();) {
    const size_t comma = std::min(r.find(',', at), r.size());
    out.push_back(r.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

}  // namespace

std::string export_sonic(const Qos& q, const std::vector<std::string>& ports, uint64_t headroom) {
  std::vector<int> lossless, lossy;
  for (int p = 0; p < 8; ++p) (((q.pfc_mask >> p) & 1) && q.pfc_enabled ? lossless : lossy).push_back(p);
  auto s = [](auto v) { return std::to_string(v); };
  const uint64_t xoff = q.pfc.xoff.n, xon = q.pfc.xon ? q.pfc.xon->n : 0;
  ordered_json db;
  db["BUFFER_POOL"]["ingress_lossless_pool"] = {{"size", s(q.buffer.size.n)}, {"type", "ingress"}, {"mode", "dynamic"}};
  db["BUFFER_POOL"]["egress_lossy_pool"] = {{"size", s(q.buffer.size.n)}, {"type", "egress"}, {"mode", "dynamic"}};
  db["BUFFER_PROFILE"]["egress_lossy_profile"] = {{"pool", "egress_lossy_pool"}, {"size", "0"},
                                                  {"dynamic_th", s(q.buffer.dynamic_th)}};
  if (!lossless.empty())
    db["BUFFER_PROFILE"]["pg_lossless_rocelab_profile"] = {
        {"pool", "ingress_lossless_pool"}, {"xon", s(xon)}, {"xoff", s(xoff)}, {"size", s(xoff + headroom)}};
  ordered_json dscp = ordered_json::object(), tcpg = ordered_json::object();
  for (size_t d = 0; d < 64; ++d) dscp[s(d)] = s(int(q.dscp_to_prio[d]));
  for (int t = 0; t < 8; ++t) tcpg[s(t)] = s(t);
  const WatchdogConfig& w = q.pfc.watchdog;
  const int64_t ms = 1'000'000, det = w.detection ? w.detection->ns / ms : 200;
  for (const auto& port : ports) {
    for (const auto& run : runs(lossless)) db["BUFFER_PG"][port + "|" + run] = {{"profile", "pg_lossless_rocelab_profile"}};
    for (const auto& run : runs(lossy)) db["BUFFER_QUEUE"][port + "|" + run] = {{"profile", "egress_lossy_profile"}};
    if (q.ecn.enabled)
      for (int p : lossless) db["QUEUE"][port + "|" + s(p)] = {{"wred_profile", "ROCELAB_LOSSLESS"}};
    ordered_json m{{"dscp_to_tc_map", "ROCELAB"}, {"tc_to_pg_map", "ROCELAB"}};
    if (!lossless.empty()) m["pfc_enable"] = fmt::format("{}", fmt::join(lossless, ","));
    db["PORT_QOS_MAP"][port] = m;
    if (w.enabled && !lossless.empty())
      db["PFC_WD"][port] = {{"action", std::string(wd_action_name(w.action))},
                            {"detection_time", s(det)},
                            {"restoration_time", s(w.restoration ? w.restoration->ns / ms : 2 * det)}};
  }
  if (w.enabled && !lossless.empty()) db["PFC_WD"]["GLOBAL"] = {{"POLL_INTERVAL", s(w.poll ? w.poll->ns / ms : 200)}};
  if (q.ecn.enabled)
    db["WRED_PROFILE"]["ROCELAB_LOSSLESS"] = {{"wred_green_enable", "true"},
                                              {"ecn", "ecn_all"},
                                              {"green_min_threshold", s(q.ecn.kmin.n)},
                                              {"green_max_threshold", s(q.ecn.kmax.n)},
                                              {"green_drop_probability", s(int64_t(q.ecn.pmax * 100 + 0.5))}};
  db["DSCP_TO_TC_MAP"]["ROCELAB"] = dscp;
  db["TC_TO_PRIORITY_GROUP_MAP"]["ROCELAB"] = tcpg;
  return db.dump(4) + "\n";
}

}  // namespace rocelab::model
