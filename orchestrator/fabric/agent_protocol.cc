#include "fabric/agent_protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <chrono>
#include <cstring>

#include "sys/netns.h"
#include "sys/state_log.h"

namespace rocelab::fabric {

using nlohmann::json;
using nlohmann::ordered_json;

ordered_json to_json(const AgentConfig& c) {
  ordered_json nodes = ordered_json::array(), ports = ordered_json::array();
  for (const auto& n : c.nodes) nodes.push_back({{"node", n.node}, {"netns", n.netns}, {"wd_phase_ns", n.wd_phase_ns}});
  for (const auto& p : c.ports)
    ports.push_back({{"node", p.node}, {"slot", p.slot}, {"ifindex", p.ifindex}, {"name", p.name},
                     {"rate_bps", p.rate_bps}, {"mtu", p.mtu}, {"pausable", p.pausable}, {"limit", p.limit}, {"peer", p.peer}});
  const auto& w = c.watchdog;
  return {{"instance", c.instance}, {"state_path", c.state_path}, {"socket_path", c.socket_path},
          {"nodes", nodes}, {"ports", ports}, {"scale", c.scale}, {"metrics_port", c.metrics_port},
          {"watchdog", {{"enabled", w.enabled}, {"detection_ns", w.detection_ns}, {"restoration_ns", w.restoration_ns},
                        {"poll_ns", w.poll_ns}, {"action", w.action}, {"predicate", w.predicate}}}};
}

std::optional<AgentConfig> config_from_json(const json& j, std::string& why) {
  try {
    AgentConfig c;
    c.instance = j.at("instance").get<std::string>();
    c.state_path = j.at("state_path").get<std::string>();
    c.socket_path = j.at("socket_path").get<std::string>();
    c.scale = j.value("scale", 1.0);
    c.metrics_port = j.value("metrics_port", uint16_t{0});
    if (!(c.scale > 0)) throw std::out_of_range("scale must be above 0");
    for (const auto& n : j.at("nodes"))
      c.nodes.push_back({n.at("node").get<std::string>(), n.at("netns").get<std::string>(), n.at("wd_phase_ns").get<int64_t>()});
    for (const auto& p : j.at("ports")) {
      AgentPort a;
      a.node = p.at("node").get<uint32_t>();
      a.slot = p.at("slot").get<uint32_t>();
      a.ifindex = p.at("ifindex").get<int>();
      a.name = p.at("name").get<std::string>();
      a.rate_bps = p.at("rate_bps").get<uint64_t>();
      a.mtu = p.at("mtu").get<uint32_t>();
      a.pausable = p.at("pausable").get<uint8_t>();
      a.limit = p.at("limit").get<std::array<uint32_t, RL_NUM_PRIO>>();
      a.peer = p.at("peer").get<int32_t>();
      if (a.peer >= int32_t(c.nodes.size())) throw std::out_of_range("port " + a.name + " names no peer node");
      if (a.node >= c.nodes.size()) throw std::out_of_range("port " + a.name + " names no node");
      c.ports.push_back(std::move(a));
    }
    const auto& w = j.at("watchdog");
    c.watchdog.enabled = w.at("enabled").get<bool>();
    c.watchdog.detection_ns = w.at("detection_ns").get<int64_t>();
    c.watchdog.restoration_ns = w.at("restoration_ns").get<int64_t>();
    c.watchdog.poll_ns = w.at("poll_ns").get<int64_t>();
    c.watchdog.action = w.at("action").get<std::string>();
    c.watchdog.predicate = w.at("predicate").get<std::string>();
    if (c.watchdog.enabled && (c.watchdog.poll_ns <= 0 || c.watchdog.detection_ns <= 0 || c.watchdog.restoration_ns <= 0))
      throw std::out_of_range("watchdog times must be above 0");
    return c;
  } catch (const std::exception& e) {
    why = std::string("agent configuration: ") + e.what();
    return std::nullopt;
  }
}

namespace {

// A latency summary (reaction, transit, path) as the figures carry it.
ordered_json summary_json(const AgentFigures::Reaction& r) {
  ordered_json j{{"count", r.count}, {"p50", r.p50}, {"p99", r.p99}, {"max", r.max}};
  if (!r.quantiles.empty()) j["quantiles"] = r.quantiles;
  return j;
}

AgentFigures::Reaction summary_from(const json& r) {
  AgentFigures::Reaction out{r.at("count").get<uint64_t>(), r.at("p50").get<uint64_t>(), r.at("p99").get<uint64_t>(),
                             r.at("max").get<uint64_t>(), {}};
  if (auto q = r.find("quantiles"); q != r.end() && q->is_array())
    for (const auto& v : *q)
      if (v.is_number_unsigned()) out.quantiles.push_back(v.get<uint64_t>());
  return out;
}

}  // namespace

ordered_json to_json(const AgentFigures& f) {
  ordered_json leaks = ordered_json::array(), paused = ordered_json::array(), wd = ordered_json::array(),
               wde = ordered_json::array();
  for (const auto& q : f.watchdog)
    wd.push_back({{"node", q.node}, {"port", q.port}, {"prio", q.prio}, {"stormed", q.stormed},
                  {"detected", q.detected}, {"restored", q.restored}, {"tx_ok", q.tx_ok}, {"tx_drop", q.tx_drop},
                  {"rx_ok", q.rx_ok}, {"rx_drop", q.rx_drop}, {"last_tx_ok", q.last_tx_ok},
                  {"last_tx_drop", q.last_tx_drop}, {"last_rx_ok", q.last_rx_ok}, {"last_rx_drop", q.last_rx_drop}});
  for (const auto& e : f.wd_events)
    wde.push_back({{"t_ns", e.t_ns}, {"node", e.node}, {"port", e.port}, {"prio", e.prio}, {"detected", e.detected}});
  ordered_json plog = ordered_json::array();  // [t_ns, slot, prio, 1 pause | 0 resume]: compact
  for (const auto& e : f.pause_log) plog.push_back({e.t_ns, e.slot, e.prio, e.paused ? 1 : 0});
  ordered_json stalls = ordered_json::array();  // [t_ns, late_ns, delayed_ns]
  for (const auto& x : f.stalls) stalls.push_back({x.t_ns, x.late_ns, x.delayed_ns});
  ordered_json held = ordered_json::array(), steps = ordered_json::array();  // [t_ns, wait_ns, span_ns], [t_ns, up, used_ns]
  for (const auto& x : f.held) held.push_back({x.t_ns, x.wait_ns, x.span_ns});
  for (const auto& x : f.rt_steps) steps.push_back({x.t_ns, x.up ? 1 : 0, x.used_ns});
  ordered_json dl = ordered_json::array();
  for (const auto& d : f.deadlocks)
    dl.push_back({{"prio", d.prio}, {"members", d.members}, {"since_ns", d.since_ns}, {"detected_ns", d.detected_ns},
                  {"ended_ns", d.ended_ns}});
  for (const auto& l : f.leaks)
    leaks.push_back({{"node", l.node}, {"port", l.port}, {"prio", l.prio}, {"packets", l.packets}, {"bytes", l.bytes}});
  for (const auto& p : f.paused)
    paused.push_back({{"node", p.node}, {"port", p.port}, {"prio", p.prio}, {"pauses", p.pauses},
                      {"paused_ns", p.paused_ns}});
  ordered_json lines = ordered_json::array();
  for (const auto& l : f.lines)
    lines.push_back({{"node", l.node}, {"port", l.port}, {"lost_ns", l.lost_ns}, {"longest_ns", l.longest_ns},
                     {"runs", l.runs}, {"gap_ns", l.gap_ns}, {"gap_at_ns", l.gap_at_ns}});
  ordered_json holds = ordered_json::array();
  for (const auto& h : f.holds)
    holds.push_back({{"cpu", h.cpu}, {"pid", h.pid}, {"thread", h.thread}, {"start_ns", h.start_ns}, {"dur_ns", h.dur_ns},
                     {"steal_ns", h.steal_ns}, {"other", h.other}, {"softirq", h.softirq},
                     {"loop", h.loop}, {"kthread", h.kthread}, {"waited_ns", h.waited_ns}, {"work", h.work},
                     {"work_ns", h.work_ns}});
  return {{"events", f.events},
          {"ignored", f.ignored},
          {"pauses", f.pauses},
          {"refreshes", f.refreshes},
          {"resumes", f.resumes},
          {"expired", f.expired},
          {"paused_ns", f.paused_ns},
          {"xon_sent", f.xon_sent},
          {"xoff_refreshed", f.xoff_refreshed},
          {"kicks", f.kicks},
          {"reaction_ns", summary_json(f.reaction_ns)},
          {"transit_ns", summary_json(f.transit_ns)},
          {"path_ns", summary_json(f.path_ns)},
          {"path_worst",
           {{"at_ns", f.path_worst.at_ns}, {"transit_ns", f.path_worst.transit_ns}, {"reaction_ns", f.path_worst.reaction_ns}}},
          {"reaction_budget_ns", f.reaction_budget_ns},
          {"budget_raises", f.budget_raises},
          {"pause_tail_packets", f.pause_tail_packets},
          {"leaked_packets", f.leaked_packets},
          {"leaked_bytes", f.leaked_bytes},
          {"storm_frames", f.storm_frames},
          {"wd_ignored", f.wd_ignored},
          {"watchdog", wd},
          {"wd_events", wde},
          {"deadlocks", dl},
          {"stalls", stalls},
          {"stalls_dropped", f.stalls_dropped},
          {"held", held},
          {"held_dropped", f.held_dropped},
          {"rt_steps", steps},
          {"realtime", f.realtime},
          {"loop_cpu_ns", f.loop_cpu_ns},
          {"loop_wait_ns", f.loop_wait_ns},
          {"pause_log", plog},
          {"pause_log_dropped", f.pause_log_dropped},
          {"leaks", leaks},
          {"paused", paused},
          {"lines", lines},
          {"holds", holds}};
}

std::optional<AgentFigures> figures_from_json(const json& j, std::string& why) {
  try {
    AgentFigures f;
    auto u = [&](const char* k) { return j.at(k).get<uint64_t>(); };
    f.events = u("events");
    f.ignored = u("ignored");
    f.pauses = u("pauses");
    f.refreshes = u("refreshes");
    f.resumes = u("resumes");
    f.expired = u("expired");
    f.paused_ns = u("paused_ns");
    f.xon_sent = u("xon_sent");
    f.xoff_refreshed = u("xoff_refreshed");
    f.kicks = u("kicks");
    f.reaction_ns = summary_from(j.at("reaction_ns"));
    if (j.contains("transit_ns")) f.transit_ns = summary_from(j.at("transit_ns"));
    if (j.contains("path_ns")) f.path_ns = summary_from(j.at("path_ns"));
    if (j.contains("path_worst")) {
      const auto& w = j.at("path_worst");
      f.path_worst = {w.value("at_ns", uint64_t(0)), w.value("transit_ns", uint64_t(0)), w.value("reaction_ns", uint64_t(0))};
    }
    f.reaction_budget_ns = u("reaction_budget_ns");
    f.budget_raises = u("budget_raises");
    f.pause_tail_packets = u("pause_tail_packets");
    f.leaked_packets = u("leaked_packets");
    f.leaked_bytes = u("leaked_bytes");
    f.storm_frames = u("storm_frames");
    f.wd_ignored = u("wd_ignored");
    for (const auto& q : j.at("watchdog")) {
      WatchdogQueueFigures w;
      w.node = q.at("node").get<std::string>();
      w.port = q.at("port").get<std::string>();
      w.prio = q.at("prio").get<uint32_t>();
      w.stormed = q.at("stormed").get<bool>();
      auto n = [&](const char* k) { return q.at(k).get<uint64_t>(); };
      w.detected = n("detected");
      w.restored = n("restored");
      w.tx_ok = n("tx_ok");
      w.tx_drop = n("tx_drop");
      w.rx_ok = n("rx_ok");
      w.rx_drop = n("rx_drop");
      w.last_tx_ok = n("last_tx_ok");
      w.last_tx_drop = n("last_tx_drop");
      w.last_rx_ok = n("last_rx_ok");
      w.last_rx_drop = n("last_rx_drop");
      f.watchdog.push_back(std::move(w));
    }
    for (const auto& e : j.at("wd_events"))
      f.wd_events.push_back({e.at("t_ns").get<uint64_t>(), e.at("node").get<std::string>(), e.at("port").get<std::string>(),
                             e.at("prio").get<uint32_t>(), e.at("detected").get<bool>()});
    for (const auto& e : j.at("pause_log"))
      f.pause_log.push_back({e.at(0).get<uint64_t>(), e.at(1).get<uint32_t>(), e.at(2).get<uint32_t>(),
                             e.at(3).get<int>() != 0});
    f.pause_log_dropped = u("pause_log_dropped");
    for (const auto& x : j.at("stalls"))
      f.stalls.push_back({x.at(0).get<uint64_t>(), x.at(1).get<uint64_t>(), x.at(2).get<uint64_t>()});
    f.stalls_dropped = u("stalls_dropped");
    if (j.contains("held")) {  // an agent of before issue 48 has none
      for (const auto& x : j.at("held"))
        f.held.push_back({x.at(0).get<uint64_t>(), x.at(1).get<uint64_t>(), x.at(2).get<uint64_t>()});
      f.held_dropped = u("held_dropped");
      for (const auto& x : j.at("rt_steps"))
        f.rt_steps.push_back({x.at(0).get<uint64_t>(), x.at(1).get<int>() != 0, x.at(2).get<uint64_t>()});
      f.realtime = j.at("realtime").get<bool>();
      f.loop_cpu_ns = u("loop_cpu_ns");
      f.loop_wait_ns = u("loop_wait_ns");
    }
    for (const auto& d : j.at("deadlocks"))
      f.deadlocks.push_back({d.at("prio").get<uint32_t>(), d.at("members").get<std::vector<std::string>>(),
                             d.at("since_ns").get<uint64_t>(), d.at("detected_ns").get<uint64_t>(),
                             d.at("ended_ns").get<uint64_t>()});
    for (const auto& l : j.at("leaks"))
      f.leaks.push_back({l.at("node").get<std::string>(), l.at("port").get<std::string>(), l.at("prio").get<uint32_t>(),
                         l.at("packets").get<uint64_t>(), l.at("bytes").get<uint64_t>()});
    for (const auto& p : j.at("paused"))
      f.paused.push_back({p.at("node").get<std::string>(), p.at("port").get<std::string>(),
                          p.at("prio").get<uint32_t>(), p.at("pauses").get<uint64_t>(),
                          p.at("paused_ns").get<uint64_t>()});
    if (j.contains("lines"))
      for (const auto& l : j.at("lines"))
        f.lines.push_back({l.at("node").get<std::string>(), l.at("port").get<std::string>(),
                           l.at("lost_ns").get<uint64_t>(), l.at("longest_ns").get<uint64_t>(),
                           l.at("runs").get<uint64_t>(), l.value("gap_ns", uint64_t(0)),
                           l.value("gap_at_ns", uint64_t(0))});
    if (j.contains("holds"))
      for (const auto& h : j.at("holds"))
        f.holds.push_back({h.at("cpu").get<uint32_t>(), h.at("pid").get<uint32_t>(), h.at("thread").get<std::string>(),
                           h.at("start_ns").get<uint64_t>(), h.at("dur_ns").get<uint64_t>(),
                           h.value("steal_ns", uint64_t(0)), h.value("other", true), h.value("softirq", false),
                           h.value("loop", false), h.value("kthread", false), h.value("waited_ns", uint64_t(0)),
                           h.value("work", std::string()), h.value("work_ns", uint64_t(0))});
    return f;
  } catch (const std::exception& e) {
    why = std::string("the agent's figures: ") + e.what();
    return std::nullopt;
  }
}

std::string_view request_name(AgentRequest r) {
  switch (r) {
    case AgentRequest::kFigures: return "figures";
    case AgentRequest::kStop: return "stop";
    case AgentRequest::kStorm: return "storm";
    case AgentRequest::kStormStop: return "storm_stop";
    case AgentRequest::kPing: return "ping";
  }
  return "?";
}

std::optional<AgentRequest> request_named(std::string_view name) {
  for (AgentRequest r :
       {AgentRequest::kFigures, AgentRequest::kStop, AgentRequest::kStorm, AgentRequest::kStormStop, AgentRequest::kPing})
    if (request_name(r) == name) return r;
  return std::nullopt;
}

std::string agent_socket_path(const std::string& instance) {
  return std::string(sys::kStateDir) + "/" + instance + ".agent.sock";
}

ordered_json to_json(const StormSpec& s) {
  return {{"slot", s.slot}, {"vector", s.vector}, {"quanta", s.quanta}, {"interval_ns", s.interval_ns}, {"frames", s.frames}};
}

std::optional<StormSpec> storm_from_json(const json& j, std::string& why) {
  try {
    StormSpec s;
    s.slot = j.at("slot").get<uint32_t>();
    s.vector = j.at("vector").get<uint8_t>();
    s.quanta = j.at("quanta").get<uint16_t>();
    s.interval_ns = j.at("interval_ns").get<uint64_t>();
    s.frames = j.at("frames").get<uint64_t>();
    if (s.interval_ns == 0) throw std::out_of_range("a storm's interval must be above 0");
    return s;
  } catch (const std::exception& e) {
    why = std::string("storm request: ") + e.what();
    return std::nullopt;
  }
}

std::optional<json> agent_call(const std::string& socket_path, AgentRequest r, std::string& why, int timeout_ms) {
  return agent_call(socket_path, r, ordered_json::object(), why, timeout_ms);
}

std::optional<json> agent_call(const std::string& socket_path, AgentRequest r, ordered_json fields, std::string& why,
                               int timeout_ms) {
  sys::Fd s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof a.sun_path) return why = "socket path too long: " + socket_path, std::nullopt;
  std::memcpy(a.sun_path, socket_path.c_str(), socket_path.size() + 1);
  if (!s.valid() || connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return why = "no agent answers at " + socket_path + ": " + std::strerror(errno), std::nullopt;
  fields["request"] = request_name(r);
  const std::string line = fields.dump() + "\n";
  if (send(s.get(), line.data(), line.size(), MSG_NOSIGNAL) != ssize_t(line.size()))
    return why = std::string("write to the agent: ") + std::strerror(errno), std::nullopt;
  std::string reply;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[65536];
  while (reply.empty() || reply.back() != '\n') {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{s.get(), POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, int(left.count())) <= 0)
      return why = "the agent did not answer within " + std::to_string(timeout_ms) + " ms", std::nullopt;
    const ssize_t n = recv(s.get(), buf, sizeof buf, 0);
    if (n <= 0) return why = "the agent closed the connection without an answer", std::nullopt;
    reply.append(buf, size_t(n));
    if (reply.size() > (64u << 20)) return why = "the agent's answer is too long", std::nullopt;
  }
  auto j = json::parse(reply, nullptr, false);
  if (!j.is_object()) return why = "the agent's answer is not JSON", std::nullopt;
  if (!j.value("ok", false)) return why = "the agent: " + j.value("error", std::string("failed")), std::nullopt;
  return j;
}

std::optional<AgentFigures> agent_figures(const std::string& socket_path, std::string& why) {
  auto j = agent_call(socket_path, AgentRequest::kFigures, why);
  if (!j) return std::nullopt;
  if (!j->contains("figures")) return why = "the agent's answer has no figures", std::nullopt;
  return figures_from_json((*j)["figures"], why);
}

}  // namespace rocelab::fabric
