#include "agent/agent.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "agent/cpu_watch.h"
#include "agent/exporter.h"
#include "agent/pauses.h"
#include "agent/requests.h"
#include "agent/stalls.h"
#include "agent/storms.h"
#include "agent/watchdog.h"
#include "bpf/fabric_maps.h"
#include "bpf/headroom.h"
#include "bpf/pause_watch.h"
#include "fabric/agent_protocol.h"
#include "model/deadlock.h"
#include "model/percentile.h"
#include "model/pfcwd.h"
#include "netlink/batch.h"
#include "netlink/route_socket.h"
#include "rocelab_abi.h"
#include "sys/cpu.h"
#include "sys/host_info.h"
#include "sys/netns.h"

namespace rocelab::agent {

namespace {

using fabric::AgentConfig;
using fabric::AgentFigures;
using nlohmann::json;

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // bpf_ktime_get_ns()'s clock
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct Port {
  const fabric::AgentPort* cfg = nullptr;
  rl_port_info info{};
  rl_port_headroom headroom{};  // as `up` wrote it: the physical part (base) is kept
  netlink::PauseSpec pause(uint32_t prio, bool on) const {
    return {cfg->ifindex, RL_HTB_MAJOR, RL_CLASS_BASE, prio, on, cfg->rate_bps, cfg->mtu, cfg->limit[prio]};
  }
  bool pausable(uint32_t prio) const { return prio < RL_NUM_PRIO && ((cfg->pausable >> prio) & 1); }
};

struct Node {
  std::string name;
  sys::Fd netns;
  std::unique_ptr<netlink::RouteSocket> rtnl;  // opened inside the node's namespace
  std::vector<uint32_t> slots;
};

// Reads everything from `fd` until EOF (the handshake: `up` shuts its side after writing).
std::optional<std::string> read_all(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return out;
    out.append(buf, size_t(n));
  }
}

void say(int fd, const json& j) {
  const std::string line = j.dump() + "\n";
  (void)!send(fd, line.data(), line.size(), MSG_NOSIGNAL);
}

class Agent {
 public:
  Agent(AgentConfig cfg, const std::atomic<bool>* stop) : cfg_(std::move(cfg)), stop_(stop) {}

  bool setup(std::string& why) {
    if (cfg_.ports.empty()) return why = "the fabric has no ports", false;
    auto home = sys::open_thread_netns(why);
    if (!home) return false;
    home_ = std::move(*home);
    for (const auto& an : cfg_.nodes) {
      Node n;
      n.name = an.node;
      auto fd = sys::open_named_netns(an.netns, why);
      if (!fd) return false;
      n.netns = std::move(*fd);
      auto scope = in_node(n.netns, why);
      if (!scope) return false;
      netlink::Status st;
      n.rtnl = netlink::RouteSocket::open(st);
      if (!n.rtnl) return why = st.text, false;
      nodes_.push_back(std::move(n));
    }
    for (const auto& p : cfg_.ports) {
      ports_[p.slot].cfg = &p;
      nodes_[p.node].slots.push_back(p.slot);
    }
    {  // The maps: opened once, from any port.
      const auto& first = cfg_.ports.front();
      auto scope = in_node(nodes_[first.node].netns, why);
      if (!scope) return false;
      auto m = bpf::FabricMaps::open_attached(first.ifindex, why);
      if (!m) return false;
      maps_ = std::make_unique<bpf::FabricMaps>(std::move(*m));
    }
    if (!maps_->config(pfc_, why)) return false;
    for (auto& [slot, p] : ports_) {
      if (!maps_->port_info(slot, p.info, why) || !maps_->headroom(slot, p.headroom, why)) return false;
      budget_ns_ = std::max<uint64_t>(budget_ns_, uint64_t{p.headroom.budget_us} * 1000);
    }
    // The watcher holds the agent to account: what a paused port still sends is counted.
    // Ours, for who held the CPUs: this process and the one that started it (`rocelab run`,
    // whose engine threads are busy by design).
    watch_ = bpf::PauseWatch::start(maps_->port_info_fd(), {uint32_t(getpid()), uint32_t(getppid())}, why);
    if (!watch_) return why = "pause watcher: " + why, false;
    events_ = bpf::PfcEvents::open(*maps_, [this](const rl_pfc_event& e) { handle(e); }, why);
    if (!events_) return false;
    emitter_ = bpf::FrameEmitter::load(why);
    if (!emitter_) return false;
    if (!watch_watchdog(why)) return false;
    if (cfg_.metrics_port && !serve_metrics(why)) return false;
    requests_ = RequestServer::listen(cfg_.socket_path, [this](const std::string& l) { return answer(l); }, why);
    return requests_ != nullptr;
  }

  bool loop() {
    if (!realtime()) cpu_.never_realtime();
    watch_->set_loop(uint32_t(gettid()));  // what keeps it waiting once woken is witnessed
    sys::Fd schedstat(open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC));
    uint64_t last_alive = now_ns(), last_sync = 0, last_budget = last_alive, last_cpu = 0;
    while (!(stop_ && stop_->load()) && !stopping_) {
      std::vector<pollfd> fds{{events_->fd(), POLLIN, 0}};
      requests_->add_fds(fds);
      const uint64_t asleep = now_ns();
      poll(fds.data(), fds.size(), int(kPollNs / 1'000'000));
      stalls_.woke(asleep, now_ns());  // before the work it may have delayed, which says so
      events_->consume();
      requests_->serve(fds, 1);
      const uint64_t now = now_ns();
      expire(now);
      run_storms(now);
      if (wd_) poll_watchdog(now);
      if (now - last_deadlock_look_ > kDeadlockLookNs) {
        look_for_deadlocks(now);
        last_deadlock_look_ = now;
      }
      // The paused ports' check at most every 200 us: it probes the node's queues that hold
      // anything, and received PFC (a pause to put in force) must not wait behind it.
      if (now - last_sync > 200'000) {
        send_xon_where_drained();
        last_sync = now;
      }
      if (now - last_cpu >= kCpuWatchNs) {
        watch_cpu(schedstat.get(), now);
        last_cpu = now;
      }
      if (now - last_budget > 1'000'000'000ull) {
        check_budget();
        last_budget = now;
      }
      if (now - last_alive > 100'000'000ull) {
        struct stat st {};
        if (stat(cfg_.state_path.c_str(), &st) != 0) break;  // the fabric was taken down
        last_alive = now;
      }
      stalls_.turn_done();
    }
    requests_->flush(200'000'000ull);  // the `stop` request's own reply: a little while at most
    requests_.reset();                 // the socket's path goes with it
    return true;
  }

 private:
  // The PFC loop runs at a real-time priority (this thread only): on a loaded machine a
  // time-shared thread waited behind the engine's for up to 6 ms of wall clock (a pause
  // arriving 18 frames late at D = 1000, measured by bench/pfc_reaction), where a switch
  // acts within a frame. It sleeps in poll between events, and the kernel's RT throttling
  // still keeps 5 % for everyone else. Without the privilege it stays as it was, said once.
  // On a core of its own (sys::agent_core, which the engine's threads keep off): beside a
  // time-shared thread it wakes every few microseconds and each wake preempts that thread.
  // True when the loop runs at a real-time priority.
  bool realtime() {
    if (const int core = sys::agent_core(); core >= 0 && !sys::pin_thread(core))
      std::fprintf(stderr, "rocelab agent: PFC loop not pinned to CPU %d: %s\n", core, std::strerror(errno));
    if (set_realtime(true)) return true;
    std::fprintf(stderr, "rocelab agent: PFC loop at normal priority (SCHED_FIFO: %s)\n", std::strerror(errno));
    return false;
  }
  static bool set_realtime(bool on) {
    sched_param sp{};
    sp.sched_priority = on ? kRealtimePriority : 0;
    return sched_setscheduler(0, on ? SCHED_FIFO : SCHED_OTHER, &sp) == 0;
  }
  static constexpr int kRealtimePriority = 10;

  // The loop's own CPU (agent/cpu_watch.h): every kCpuWatchNs, how long the scheduler kept it
  // waiting, and off real-time priority while it nears half the kernel's RT runtime.
  void watch_cpu(int fd, uint64_t now) {
    char buf[128];
    const ssize_t n = fd >= 0 ? pread(fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) return;
    buf[n] = 0;
    unsigned long long on_cpu = 0, waiting = 0;
    if (std::sscanf(buf, "%llu %llu", &on_cpu, &waiting) != 2) return;
    switch (cpu_.sample(now, on_cpu, waiting)) {
      case CpuWatch::Step::kDown: set_realtime(false); break;
      case CpuWatch::Step::kUp: set_realtime(true); break;
      case CpuWatch::Step::kNone: break;
    }
  }
  static constexpr uint64_t kCpuWatchNs = 5'000'000;

  // PFC's work the stall this turn woke from delayed (agent/stalls.h). Idle, the loop
  // oversleeps past 1.2 ms a few times a run (~1-2 ms in all over ten
  // seconds); a run whose bottleneck lost 0.5 % of its time measured 40 ms in 36 stalls.
  void delayed_since(uint64_t due) { stalls_.delayed_since(due); }
  static constexpr uint64_t kPollNs = 1'000'000, kStallSlackNs = 200'000;

  bool serve_metrics(std::string& why) {
    std::vector<ExportedPort> out;
    std::map<uint32_t, uint32_t> index;  // node -> ports seen so far
    for (const auto& p : cfg_.ports)
      out.push_back({cfg_.nodes[p.node].node, p.name, p.slot, p.ifindex, nodes_[p.node].netns.get(),
                     bool(ports_.at(p.slot).info.flags & RL_PORT_HOST), ++index[p.node]});
    exporter_ = Exporter::start(cfg_.metrics_port, std::move(out), *maps_, cfg_.scale, why);
    if (!exporter_) return false;
    if (wd_)
      for (uint32_t k : wd_->keys()) exporter_->set_stormed(rl_queue_slot(k), rl_queue_prio(k), false);
    return true;
  }

  json answer(const std::string& line) {
    auto j = json::parse(line, nullptr, false);
    auto r = j.is_object() && j.contains("request") && j["request"].is_string()
                 ? fabric::request_named(j["request"].get<std::string>())
                 : std::nullopt;
    if (!r) return {{"ok", false}, {"error", "unknown request (figures, stop, storm, storm_stop, ping)"}};
    switch (*r) {
      case fabric::AgentRequest::kPing: return {{"ok", true}};
      case fabric::AgentRequest::kFigures: return {{"ok", true}, {"figures", fabric::to_json(figures())}};
      case fabric::AgentRequest::kStorm: return start_storm(j);
      case fabric::AgentRequest::kStormStop: return stop_storm(j);
      case fabric::AgentRequest::kStop: break;
    }
    stopping_ = true;
    return {{"ok", true}};
  }

  json start_storm(const json& j) {
    std::string why;
    auto spec = fabric::storm_from_json(j, why);
    if (!spec) return {{"ok", false}, {"error", why}};
    if (!ports_.count(spec->slot)) return {{"ok", false}, {"error", "no port in slot " + std::to_string(spec->slot)}};
    return {{"ok", true}, {"id", storms_.start(*spec, now_ns())}};
  }

  json stop_storm(const json& j) {
    const uint64_t id = j.contains("id") && j["id"].is_number_unsigned() ? j["id"].get<uint64_t>() : 0;
    return {{"ok", true}, {"frames", storms_.stop(id)}};
  }

  void run_storms(uint64_t now) {
    fig_.storm_frames += storms_.run(now, [this](const fabric::StormSpec& spec) {
      std::string why;
      const Port& p = ports_.at(spec.slot);
      auto scope = in_node(nodes_[p.cfg->node].netns, why);
      return scope && emitter_->send(p.cfg->ifindex, RL_MARK_PFC_STORM, why, RL_STORM_PRIORITY(spec.vector, spec.quanta));
    });
  }

  // The PFC watchdog (agent/watchdog.h) on every switch port x PFC priority.
  bool watch_watchdog(std::string& why) {
    const auto& w = cfg_.watchdog;
    if (!w.enabled) return true;
    const uint64_t t0 = now_ns();
    std::vector<uint64_t> first;
    for (const auto& n : cfg_.nodes) first.push_back(t0 + uint64_t(n.wd_phase_ns));
    wd_ = Watchdog::make(w, std::move(first), why);
    if (!wd_) return false;
    for (const auto& [slot, p] : ports_) {
      if (p.info.flags & RL_PORT_HOST) continue;  // SONiC's watchdog is the switch's
      for (uint32_t q = 0; q < RL_NUM_PRIO; ++q)
        if (p.pausable(q)) wd_->watch(rl_queue_key(slot, q), p.cfg->node);
    }
    if (wd_->empty()) wd_.reset();
    return true;
  }

  // The queue's counts as SONiC's PFC_WD stats read them.
  Watchdog::Counts wd_counts(uint32_t slot, uint32_t prio) const {
    const rl_counters c = maps_->counters().read(slot, prio);
    const uint64_t rx_drop = c.drops[RL_DROP_PFCWD_RX];
    return {watch_->read(slot, prio).dequeued, c.drops[RL_DROP_PFCWD], c.rx_packets - std::min<uint64_t>(c.rx_packets, rx_drop),
            rx_drop};
  }

  void poll_watchdog(uint64_t now) {
    auto sample = [&](uint32_t k) {
      const uint32_t slot = rl_queue_slot(k), prio = rl_queue_prio(k);
      model::WdSample s;
      const rl_counters c = maps_->counters().read(slot, prio);
      s.tx_packets = watch_->read(slot, prio).dequeued;
      s.pfc_rx = c.pfc_rx;
      s.pfc_xon_rx = c.pfc_xon_rx;
      s.paused = int64_t(pauses_.paused_ns(k, now));
      s.paused_now = pauses_.on(k);
      s.holds_packets = c.depth_after && holds_packets(ports_.at(slot), prio);
      return s;
    };
    wd_->poll(now, sample, [&](uint32_t k, bool detected) {
      Port& p = ports_.at(rl_queue_slot(k));
      if (detected) storm_detected(p, rl_queue_prio(k), now);
      else storm_restored(p, rl_queue_prio(k), now);
    });
  }

  // Whether the queue holds packets now, by the egress program's probe (which also syncs its
  // PG runs). Callers skip queues whose last packet or probe left them empty (depth_after 0).
  bool holds_packets(const Port& p, uint32_t prio) {
    std::string why;
    auto scope = in_node(nodes_[p.cfg->node].netns, why);
    auto d = scope ? bpf::probe_depth(maps_->egress_program(), p.cfg->ifindex, prio, why) : std::nullopt;
    return d && *d > 0;
  }

  // The wait-for graph (model/deadlock.h) of switch queues toward switches: paused, holding
  // packets (the probe says, for a queue that has not moved since the last look) and sending
  // none for one pause time at the port's rate.
  void look_for_deadlocks(uint64_t now) {
    std::vector<model::WaitQueue> qs;
    for (const auto& [slot, p] : ports_) {
      if (p.cfg->peer < 0) continue;
      for (uint32_t prio = 0; prio < RL_NUM_PRIO; ++prio) {
        if (!p.pausable(prio)) continue;
        const uint32_t k = rl_queue_key(slot, prio);
        const bool paused = pauses_.on(k);
        const uint64_t dequeued = watch_->read(slot, prio).dequeued;
        uint64_t& seen = dequeued_seen_[k];
        const bool holds =
            paused && dequeued == seen && maps_->counters().read(slot, prio).depth_after && holds_packets(p, prio);
        seen = dequeued;
        const int64_t pause_ns = int64_t(uint64_t(pfc_.pfc_quanta) * p.info.quantum_ps / 1000);
        qs.push_back({k, p.cfg->node, size_t(p.cfg->peer), prio, paused, holds, dequeued, pause_ns});
      }
    }
    if (!qs.empty()) deadlocks_.sample(int64_t(now), qs);
  }

  void storm_detected(Port& p, uint32_t prio, uint64_t now) {
    const uint32_t k = rl_queue_key(p.cfg->slot, prio);
    wd_->detected(k, wd_counts(p.cfg->slot, prio));
    if (exporter_) exporter_->set_stormed(p.cfg->slot, prio, true);
    wd_events_.push_back({now, nodes_[p.cfg->node].name, p.cfg->name, prio, true});
    if (wd_->action() == model::WdAction::kAlert) return;
    if (wd_->action() == model::WdAction::kDrop) maps_->set_wd_drop(p.cfg->slot, prio, true);
    resume(p, prio, now_ns());  // the queue sends (forward) or drains into the drop
  }

  void storm_restored(Port& p, uint32_t prio, uint64_t now) {
    wd_->restored(rl_queue_key(p.cfg->slot, prio), wd_counts(p.cfg->slot, prio));
    if (exporter_) exporter_->set_stormed(p.cfg->slot, prio, false);
    wd_events_.push_back({now, nodes_[p.cfg->node].name, p.cfg->name, prio, false});
    if (wd_->action() == model::WdAction::kDrop) maps_->set_wd_drop(p.cfg->slot, prio, false);
  }

  bool set_pause(Port& p, uint32_t prio, bool on) {
    Node& n = nodes_[p.cfg->node];
    // Unmarked before a resume, so the drain is not taken for a leak; marked once the
    // pause is acknowledged, so anything sent from then on is one.
    if (!on) watch_->mark(p.cfg->slot, prio, 0);
    netlink::Batch b(*n.rtnl);  // the socket lives in the node's namespace already
    b.set_pause(p.pause(prio, on));
    if (!b.flush().ok()) return false;
    if (on) watch_->mark(p.cfg->slot, prio, now_ns(), p.cfg->mtu + 14 + netlink::kPauseBucketMargin);  // TBF's bucket
    else kick(p);
    return true;
  }

  // What the witness kept, a kworker's work item by its function's name (not in the loop: once,
  // for the figures).
  void holds(AgentFigures& f) const {
    const std::vector<rl_cpu_hold> kept = watch_->holds();
    std::set<uint64_t> fns;
    for (const rl_cpu_hold& h : kept)
      if (h.work_fn) fns.insert(h.work_fn);
    const auto names = sys::kernel_symbols(fns);
    for (const rl_cpu_hold& h : kept) {
      fabric::CpuHoldFigures x{h.cpu, h.tgid, h.comm, h.start_ns, h.dur_ns, h.steal_ns, h.kind == RL_HOLD_OTHER,
                               h.kind == RL_HOLD_SOFTIRQ, h.kind == RL_HOLD_LOOP, (h.flags & RL_HOLD_F_KTHREAD) != 0,
                               h.waited_ns};
      if (h.work_fn) {
        const auto it = names.find(h.work_fn);
        char addr[24];
        std::snprintf(addr, sizeof addr, "%#llx", static_cast<unsigned long long>(h.work_fn));
        x.work = it != names.end() ? it->second : addr;
        x.work_ns = h.work_ns;
      }
      f.holds.push_back(std::move(x));
    }
  }

  // The loop in a node's namespace until the scope ends (frames are sent and queues probed
  // from there), back to the agent's own held open.
  std::optional<sys::NetnsScope> in_node(const sys::Fd& netns, std::string& why) const {
    return sys::NetnsScope::enter(netns.get(), home_.get(), why);
  }

  // Sends an agent frame out of a port; the calling thread must be in its node's namespace.
  bool emit(const Port& p, uint32_t mark) {
    std::string why;
    return emitter_->send(p.cfg->ifindex, mark, why);
  }

  // After a resume HTB may not look at the class again until something is enqueued, and the
  // paused senders are blocked on full socket buffers: a MAC-control frame naming no
  // priority goes out through the direct queue, which runs the dequeue. The peer consumes
  // it; no counter counts it.
  void kick(Port& p) {
    std::string why;
    auto scope = in_node(nodes_[p.cfg->node].netns, why);
    if (scope && emit(p, RL_MARK_PFC_KICK)) ++fig_.kicks;
  }

  void handle(const rl_pfc_event& e) {
    ++fig_.events;
    auto it = ports_.find(e.slot);
    if (it == ports_.end() || !it->second.pausable(e.prio)) {
      ++fig_.ignored;  // a priority this port does not pause (not a PFC priority here)
      return;
    }
    const uint32_t k = rl_queue_key(e.slot, e.prio);
    if (wd_ && wd_->ignoring(k)) {
      ++fig_.wd_ignored;  // the watchdog stormed this queue (drop, forward): PFC on it is ignored
      return;
    }
    Port& p = it->second;
    switch (pauses_.frame(k, e.quanta, p.info.quantum_ps, now_ns())) {
      case PauseBook::Ask::kResume:
        if (resume(p, e.prio, now_ns())) ++fig_.resumes, delayed_since(e.ts_ns);
        return;
      case PauseBook::Ask::kRefresh: ++fig_.refreshes; return;
      case PauseBook::Ask::kPause: break;
    }
    if (!set_pause(p, e.prio, true)) return;
    const uint64_t done = now_ns();
    pauses_.took_hold(k, done);
    delayed_since(e.ts_ns);
    ++fig_.pauses;
    maps_->set_pause_clock(e.slot, e.prio, done, pauses_.records().at(k).total_ns, e.ts_ns);
    log_pause(done, e.slot, e.prio, true);
    if (done > e.ts_ns) latencies_.add(done - e.ts_ns);
    // The frame's way from the XOFF decision at the link's other end: a decision within a
    // second before arrival is this frame's (a refresh Q/2 later would be a later one).
    if (e.decided_ns && e.decided_ns <= e.ts_ns && e.ts_ns - e.decided_ns < 1'000'000'000) {
      transits_.add(e.ts_ns - e.decided_ns);
      paths_.add(done - e.decided_ns);
      auto& w = fig_.path_worst;
      if (done - e.decided_ns > w.transit_ns + w.reaction_ns) w = {e.decided_ns, e.ts_ns - e.decided_ns, done - e.ts_ns};
    }
  }

  void expire(uint64_t now) {
    for (const auto& [k, until] : pauses_.expired(now)) {
      auto it = ports_.find(rl_queue_slot(k));
      if (it != ports_.end() && resume(it->second, rl_queue_prio(k), now)) ++fig_.expired, delayed_since(until);
    }
  }

  // Ends a pause in force (XON, its time ran out, the watchdog released it): the priority
  // sends again and the pause's time joins the port-priority's total. False: none in force,
  // or the qdisc change failed.
  bool resume(Port& p, uint32_t prio, uint64_t now) {
    const uint32_t k = rl_queue_key(p.cfg->slot, prio);
    if (!pauses_.on(k) || !set_pause(p, prio, false)) return false;
    maps_->set_pause_clock(p.cfg->slot, prio, 0, pauses_.ended(k, now));
    log_pause(now, p.cfg->slot, prio, false);
    return true;
  }

  void log_pause(uint64_t t, uint32_t slot, uint32_t prio, bool paused) {
    if (fig_.pause_log.size() < fabric::kPauseLogMax) fig_.pause_log.push_back({t, slot, prio, paused});
    else ++fig_.pause_log_dropped;
  }

  // For every ingress port this switch paused (a paused port sends nothing, so no packet of
  // its would trigger XON or the refresh in BPF): per ingress (the default), sync every queue
  // of that priority on the node — the egress program takes what left them off the PGs and
  // sends XON itself when the port's PG fell below XON — then XON if it is below XON anyway,
  // else a refreshed XOFF every Q/2. By egress occupancy: XON once every queue of that
  // priority is below XON.
  void send_xon_where_drained() {
    std::string why;
    if (!maps_->tx_states(keys_, states_, why)) return;
    // The paused ports by (node, priority): each node's queues of a priority are probed once.
    std::map<std::pair<uint32_t, uint32_t>, std::vector<size_t>> groups;
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (!states_[i].paused) continue;
      auto it = ports_.find(rl_queue_slot(keys_[i]));
      if (it != ports_.end()) groups[{it->second.cfg->node, rl_queue_prio(keys_[i])}].push_back(i);
    }
    for (const auto& [np, members] : groups) {
      Node& node = nodes_[np.first];
      auto scope = in_node(node.netns, why);
      if (!scope) continue;
      // Per ingress, the probe syncs each queue (and the program sends XON for a PG that fell
      // below XON); by egress occupancy, every queue must be below XON.
      bool all_below = true;
      for (uint32_t s : node.slots) {
        // A queue its last packet (or probe) left empty holds no PG's bytes: not probed.
        if (maps_->counters().read(s, np.second).depth_after == 0) continue;
        auto d = bpf::probe_depth(maps_->egress_program(), ports_.at(s).cfg->ifindex, np.second, why);
        all_below = all_below && d && *d < pfc_.pfc_xon;
      }
      for (size_t i : members) resolve_pause(i, np.second, all_below);
    }
  }

  // A port this switch paused, after its node's queues were synced: XON once drained, else a
  // refreshed XOFF every Q/2 (a paused port sends nothing that could trigger it in BPF).
  void resolve_pause(size_t i, uint32_t prio, bool all_below) {
    std::string why;
    Port& port = ports_.at(rl_queue_slot(keys_[i]));
    rl_pfc_tx_state st = states_[i];
    bool drained = all_below;
    if (pfc_.pfc_trigger == RL_PFC_TRIGGER_INGRESS) {
      if (!maps_->tx_state(keys_[i], st, why)) return;
      if (!st.paused) return delayed_since(0);  // the sync sent XON
      drained = maps_->pg_bytes(keys_[i]) < int64_t(pfc_.pfc_xon);
    }
    const uint64_t now = now_ns();
    const uint64_t refresh_ns = static_cast<uint64_t>(port.info.quantum_ps) * pfc_.pfc_quanta / 2000;
    if (!drained && now - st.last_sent_ns < refresh_ns) return;
    if (!emit(port, drained ? RL_MARK_PFC(0, prio) : RL_MARK_PFC_REFRESH | prio)) return;
    rl_pfc_tx_state next = st;
    next.paused = drained ? 0 : 1;
    if (drained) next.congested = 0, next.refill = 1, next.xon_ns = 0;  // every queue below XON; its sender refills next
    else next.last_sent_ns = now;
    maps_->set_tx_state(keys_[i], next, why);
    ++(drained ? fig_.xon_sent : fig_.xoff_refreshed);
    if (drained) delayed_since(0);
  }


  AgentFigures figures() {
    auto summary = [](const model::LogHistogram& h) {
      return AgentFigures::Reaction{h.count(), h.percentile(50), h.percentile(99), h.max()};
    };
    AgentFigures f = fig_;
    f.stalls = stalls_.stalls();
    f.stalls_dropped = stalls_.dropped();
    f.held = cpu_.held();
    f.held_dropped = cpu_.held_dropped();
    f.rt_steps = cpu_.steps();
    f.realtime = cpu_.realtime();
    f.loop_cpu_ns = cpu_.on_cpu_ns();
    f.loop_wait_ns = cpu_.waiting_ns();
    f.reaction_ns = summary(latencies_);
    if (latencies_.count())
      for (double q : fabric::kReactionQuantiles) f.reaction_ns.quantiles.push_back(latencies_.percentile(q));
    raise_budget(f.reaction_ns.p99);
    f.transit_ns = summary(transits_);
    f.path_ns = summary(paths_);
    f.reaction_budget_ns = budget_ns_;
    f.budget_raises = budget_raises_;
    // What paused port-priorities still sent: within the one-frame allowance (the tail), and
    // beyond it (leaks: totals, and each port-priority that leaked).
    for (const auto& [slot, p] : ports_)
      for (uint32_t q = 0; q < RL_NUM_PRIO; ++q) {
        if (!p.pausable(q)) continue;
        const rl_pause_state st = watch_->read(slot, q);
        f.leaked_packets += st.leaked_packets;
        f.pause_tail_packets += st.tail_packets;
        f.leaked_bytes += st.leaked_bytes;
        if (st.leaked_packets)
          f.leaks.push_back({nodes_[p.cfg->node].name, p.cfg->name, q, st.leaked_packets, st.leaked_bytes});
      }
    for (const auto& [slot, p] : ports_)
      if (const rl_line_state l = watch_->line(slot); l.lost_ns)
        f.lines.push_back({nodes_[p.cfg->node].name, p.cfg->name, l.lost_ns, l.longest_ns, l.runs, l.gap_ns,
                           l.gap_at_ns});
    holds(f);
    if (wd_)
      for (uint32_t k : wd_->keys()) {
        const Port& p = ports_.at(rl_queue_slot(k));
        fabric::WatchdogQueueFigures q = wd_->figures(k, wd_counts(p.cfg->slot, rl_queue_prio(k)));
        q.node = nodes_[p.cfg->node].name, q.port = p.cfg->name, q.prio = rl_queue_prio(k);
        f.watchdog.push_back(std::move(q));
      }
    f.wd_events = wd_events_;
    for (const auto& d : deadlocks_.deadlocks()) {
      fabric::DeadlockFigures x{d.prio, {}, uint64_t(d.since), uint64_t(d.detected), d.ended < 0 ? 0 : uint64_t(d.ended)};
      for (uint64_t k : d.members) {  // our rl_queue_key, widened by the model
        const Port& p = ports_.at(rl_queue_slot(uint32_t(k)));
        x.members.push_back(nodes_[p.cfg->node].name + ":" + p.cfg->name);
      }
      f.deadlocks.push_back(std::move(x));
    }
    // Per port and priority: its pauses and their time, a pause still in force included.
    const uint64_t now = now_ns();
    for (const auto& [k, st] : pauses_.records()) {
      auto it = ports_.find(rl_queue_slot(k));
      const uint64_t t = st.paused_ns(now);
      f.paused_ns += t;
      if (it == ports_.end() || !st.count) continue;
      f.paused.push_back({nodes_[it->second.cfg->node].name, it->second.cfg->name, rl_queue_prio(k), st.count, t});
    }
    return f;
  }

  // The measured reaction time fed into the headroom (DESIGN.md §2): once the p99 outgrows
  // the budget the switches' headroom and lossless limits were computed for, recompute them
  // for the p99. Hosts never drop their own lossless traffic: nothing to change there.
  // Once a second from the loop: headroom follows the reaction p99 while the run goes on.
  void check_budget() {
    if (latencies_.count() == checked_) return;
    checked_ = latencies_.count();
    raise_budget(latencies_.percentile(99));
  }
  uint64_t checked_ = 0;

  void raise_budget(uint64_t p99_ns) {
    if (p99_ns <= budget_ns_) return;
    budget_ns_ = p99_ns;
    ++budget_raises_;
    std::string why;
    for (const Node& n : nodes_) {
      if (n.slots.empty() || (ports_.at(n.slots.front()).info.flags & RL_PORT_HOST)) continue;
      std::vector<bpf::HeadroomPort> in;
      for (uint32_t s : n.slots) in.push_back({ports_.at(s).cfg->rate_bps, ports_.at(s).headroom.base});
      auto h = bpf::node_headroom(in, pfc_.pfc_xoff, pfc_.buffer_size, budget_ns_,
                                  pfc_.pfc_trigger == RL_PFC_TRIGGER_INGRESS);
      for (size_t i = 0; i < n.slots.size(); ++i)
        if (maps_->set_headroom(n.slots[i], h[i], why)) ports_.at(n.slots[i]).headroom = h[i];
    }
  }

  const AgentConfig cfg_;
  const std::atomic<bool>* stop_;
  bool stopping_ = false;
  std::vector<Node> nodes_;
  std::map<uint32_t, Port> ports_;
  PauseBook pauses_;  // by rl_queue_key
  StallLog stalls_{kPollNs, kStallSlackNs, fabric::kStallLogMax};
  // A wait of the scheduler's past 200 us between two readings is logged.
  CpuWatch cpu_{sys::rt_bandwidth().period_ns, sys::rt_bandwidth().runtime_ns, 200'000, fabric::kStallLogMax};
  StormSchedule storms_;
  std::optional<Watchdog> wd_;  // none: no watchdog, or no queue it watches
  std::vector<fabric::WatchdogEvent> wd_events_;
  static constexpr uint64_t kDeadlockLookNs = 10'000'000;  // wall clock; 65535 quanta at an emulated 1 Gbit/s: 34 ms
  uint64_t last_deadlock_look_ = 0;
  std::map<uint32_t, uint64_t> dequeued_seen_;  // by rl_queue_key
  model::DeadlockWatch deadlocks_;
  sys::Fd home_;  // the agent's own network namespace, where each NetnsScope returns
  std::unique_ptr<bpf::FabricMaps> maps_;
  rl_config pfc_{};
  std::unique_ptr<bpf::PauseWatch> watch_;
  std::unique_ptr<bpf::PfcEvents> events_;
  std::unique_ptr<bpf::FrameEmitter> emitter_;
  std::unique_ptr<Exporter> exporter_;  // declared after maps_: destroyed (no scrape running) before them
  std::unique_ptr<RequestServer> requests_;
  std::vector<uint32_t> keys_;
  std::vector<rl_pfc_tx_state> states_;
  // Every pause's, in bounded space (a percentile within 1.6 % above the sample's): the
  // copy and selection of up to a million samples each second held the PFC loop.
  model::LogHistogram latencies_;  // BPF arrival -> this pause in force
  model::LogHistogram transits_;   // the XOFF decision -> the frame's arrival here
  model::LogHistogram paths_;      // the XOFF decision -> this pause in force (transit + reaction)
  AgentFigures fig_;
  uint64_t budget_ns_ = 0, budget_raises_ = 0;
};

}  // namespace

bool run(const Options& o, std::string& why) {
  sys::Fd hs(o.handshake_fd);
  auto text = read_all(hs.get());
  if (!text || text->empty()) return true;  // `up` died before handing us the fabric: nothing to do
  auto cfg = fabric::config_from_json(json::parse(*text, nullptr, false), why);
  std::optional<Agent> a;
  if (cfg) a.emplace(std::move(*cfg), o.stop);
  if (!a || !a->setup(why)) {
    say(hs.get(), {{"ok", false}, {"error", why}});
    return false;
  }
  say(hs.get(), {{"ok", true}});
  hs = sys::Fd();
  return a->loop();
}

}  // namespace rocelab::agent
