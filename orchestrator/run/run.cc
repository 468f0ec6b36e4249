#include "run/run.h"

#include "run/autoscale.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <cstdlib>
#include <new>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <atomic>
#include <mutex>
#include <thread>

#include "bpf/headroom.h"
#include "fabric/connectivity.h"
#include "fabric/local_testbed.h"
#include "fault/timeline.h"
#include "model/ipv4.h"
#include "model/loader.h"
#include "model/partition.h"
#include "run/resolved.h"
#include "run/split.h"
#include "run/workloads.h"
#include "sys/files.h"
#include "sys/host_info.h"
#include "telemetry/sink.h"

namespace rocelab::run {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

// Everything the phases share. Each phase fills its own typed part and returns a Status:
// an error with kInvalidRun marks the run invalid and lets it go on; a testbed fault in a
// phase that measures (traffic, collect) sets the exit code and lets the run collect what
// was measured; any other error stops the phases after it (down still runs once the fabric
// is up).
struct RunContext {
  RunContext(const model::Scenario& sc, const RunOptions& o) : s(sc), opts(o) {}
  const model::Scenario& s;
  const RunOptions& opts;
  std::chrono::system_clock::time_point started = std::chrono::system_clock::now();
  // The run directory, held open (sys::HeldDir); `dir` is its descriptor's path, which every
  // file of the run is made under, and `held->path()` the name it was made as.
  std::shared_ptr<sys::HeldDir> held;
  fs::path dir;
  std::unique_ptr<EventLog> events;
  Capabilities caps;
  model::MetricSet metrics;
  ordered_json phases = ordered_json::array();
  std::vector<std::string> notes;
  std::unique_ptr<fabric::LocalTestbed> testbed;
  std::optional<fabric::Reachability> reach;
  std::optional<workload::WorkloadRun> workloads;
  std::map<std::string, std::unique_ptr<telemetry::Recorder>> recorders;  // by sink, while the traffic runs
  std::optional<WorkloadAnalysis> analysis;
  ordered_json faults;
  ordered_json link_delay;     // what the scenario's link delay became (null: it has none)
  int64_t traffic_t0_ns = 0;   // the Testbed clock when the traffic phase (its fault timeline) began
  std::optional<Error> error;  // what stopped the run (exit code from its code)
  std::string invalid;         // why the run cannot be trusted (exit 2)
  std::string steal;           // the hypervisor's steal past 5 %, for the collect phase to judge
  std::vector<AssertionOutcome> assertions;
  std::string table;
  // A split fabric: the other parts, and which part runs each node.
  std::unique_ptr<sys::Rendezvous> parts;
  std::vector<bool> faults_here;  // which of the scenario's faults this part applies

  void scalar(const char* name, double v) { metrics[name] = model::MetricValue{model::MetricKind::kScalar, v, {}}; }
  const fabric::KernelPlan& plan() const { return testbed->fabric()->plan(); }
};

struct Phase {
  const char* name;
  Status (*run)(RunContext&);
  bool measures = false;  // a testbed fault here still leaves figures for the phases after it
};

// Every file of the run directory goes through here: never through a link (sys/files.h).
bool write_text(const fs::path& p, const std::string& text, std::string& why) {
  return sys::write_file(p.string(), text, why);
}

// A fresh directory: the one asked for (absent, or empty and this user's alone: as root, a
// directory another user can write to would let them plant links to what root then
// overwrites), or a new timestamped one.
Status make_run_dir(RunContext& c) {
  std::error_code ec;
  if (!c.opts.out_dir.empty()) {
    c.dir = c.opts.out_dir;
  } else {
    fs::path base = fs::path("runs") / (c.s.name + "-" + utc_timestamp(c.started, true));
    c.dir = base;
    for (int i = 2; fs::exists(fs::symlink_status(c.dir, ec)); ++i) c.dir = base.string() + "-" + std::to_string(i);
  }
  auto held = sys::hold_private_dir(c.dir.string());
  if (!held) return held.error();
  c.held = std::move(*held);
  c.dir = c.held->at();
  c.events = std::make_unique<EventLog>((c.dir / "events.jsonl").string());
  return ok();
}

ordered_json versions_json() {
  ordered_json v;
  v["rocelab"] = ROCELAB_VERSION;
  v["yaml-cpp"] = ROCELAB_YAMLCPP_VERSION;
  v["libbpf"] = ROCELAB_LIBBPF_PKG_VERSION;
  v["spdlog"] = std::to_string(SPDLOG_VER_MAJOR) + "." + std::to_string(SPDLOG_VER_MINOR) + "." +
                std::to_string(SPDLOG_VER_PATCH);
  v["nlohmann_json"] = std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." + std::to_string(NLOHMANN_JSON_VERSION_MINOR) +
                       "." + std::to_string(NLOHMANN_JSON_VERSION_PATCH);
  v["compiler"] = __VERSION__;
  return v;
}

Status validate_phase(RunContext& c) {
  c.events->add("run_start", {{"scenario", c.s.file}, {"set", c.s.sets}, {"instance", c.s.name}, {"seed", c.s.seed},
                              {"scale", c.s.scale.factor()}});
  std::error_code ec;
  std::string why;
  // The bytes the loader read, never the path again: as root, a second open could meet a
  // link its owner swapped in (to a file only root reads) and copy that here.
  if (!c.s.source.empty() && !write_text(c.dir / "scenario.yaml", c.s.source, why)) spdlog::warn("{}", why);
  if (!write_text(c.dir / "resolved.json", resolved_json(c.s).dump(2) + "\n", why)) spdlog::warn("{}", why);
  c.metrics = topology_metrics(c.s);
  c.caps = detect_capabilities();
  c.events->add("capabilities", {{"all_required", c.caps.all_required()}});
  if (c.opts.model_only) {
    c.notes.push_back("--model-only: no fabric was made; only the model's metrics exist");
    if (!c.s.workloads.empty()) c.notes.push_back("--model-only: the scenario's workloads did not run (they need the fabric)");
  }
  return ok();
}

// A split run meets its other parts before anything is made: each must plan the same
// scenario at the same D over the same number of parts, and this part's faults must be ones
// a split can apply.
Status join_phase(RunContext& c) {
  const auto& sp = *c.opts.split;
  std::string why;
  const auto partition = model::partition(c.s, sp.parts, why);
  if (!partition) return error(Errc::kBadInput, why);
  for (size_t i = 0; i < c.s.faults.size(); ++i) {
    auto h = fault_here(c.s.faults[i], i, c.s, *partition, sp.index);
    if (!h) return h.error();
    c.faults_here.push_back(*h);
  }
  const std::string hub = model::format_ipv4(sp.underlay.at(0)) + ":" + std::to_string(sys::kRendezvousPort);
  auto r = sys::Rendezvous::open(sp.index, sp.parts, hub, sp.underlay, c.opts.run_key);
  if (!r) return r.error();
  c.parts = std::move(*r);
  spdlog::info("part {} of {}: meeting the other parts at {} (TCP, {})", sp.index, sp.parts, hub,
               c.opts.run_key.empty() ? "frames unsigned: no run key" : "frames signed with the run key");
  // The key guards the rendezvous, not the cut links: the kernel's VXLAN takes any sender's.
  spdlog::info("part {}: the cut links' VXLAN listens on UDP 4789 of {} and takes any sender's datagrams: filter it "
               "to the --peers addresses (docs/multi-machine.md)",
               sp.index, model::format_ipv4(sp.underlay.at(sp.index)));
  const std::string mine = split_fingerprint(c.s, sp.parts);
  auto all = c.parts->exchange("hello", mine, c.opts.split_wait_ms, c.opts.cancel);
  if (!all) return all.error();
  for (size_t p = 0; p < all->size(); ++p)
    if ((*all)[p] != mine)
      return error(Errc::kBadInput, "part " + std::to_string(p) + " plans another run (scenario " + (*all)[p] +
                                        ", this part's " + mine + "): every part needs the same file, --seed, --scale and M");
  c.events->add("split", {{"part", sp.index}, {"parts", sp.parts}, {"rendezvous", hub}});
  return ok();
}

void note_headroom_caps(RunContext& c) {
  for (auto& n : headroom_over_buffer(c.plan())) c.notes.push_back(std::move(n));
}

Status up_phase(RunContext& c) {
  fabric::UpOptions uo;
  uo.scenario_path = c.opts.scenario_path;
  uo.cancel = c.opts.cancel;
  uo.metrics_port = c.opts.metrics_port;
  uo.scenario_record = resolved_json(c.s, false).dump();  // `top` and `inject` attach with it (and recompute what is derived)
  uo.progress = [](const std::string& what) { spdlog::info("up: {}", what); };
  uo.split = c.opts.split;
  uo.job = c.opts.job;
  auto t = fabric::LocalTestbed::up(c.s, uo);
  if (!t) return Error{t.error().code, "up: " + t.error().what};  // its class as raised (exit_code() maps others to 4)
  c.testbed = std::move(*t);
  if (c.parts) {  // every part's share is up before any pings across the cut links
    spdlog::info("part {}: up; waiting for the other parts' shares", c.parts->index());
    auto all = c.parts->exchange("up", "", c.opts.split_wait_ms, c.opts.cancel);
    if (!all) return all.error();
  }
  for (const auto& n : c.testbed->fabric()->notes()) c.notes.push_back(n);
  if (const auto& d = c.testbed->fabric()->delay_summary(); !d.empty()) spdlog::info("{}", d);
  if (c.plan().max_link_delay_ns > 0)  // physical; applied only where the kernel has netem
    c.link_delay = {{"max_ns", c.plan().max_link_delay_ns},
                    {"applied", !c.plan().wire.netns.empty()},
                    {"links", c.plan().wire.links.size()}};
  if (c.s.hosts.engine == "rxe" && c.s.hosts.dcqcn != "off" && !c.s.workloads.empty())
    c.notes.push_back("hosts.dcqcn: " + c.s.hosts.dcqcn +
                      " does not apply: rxe reacts to no ECN mark (no DCQCN), so PFC alone holds the lossless classes");
  c.scalar("up_seconds", c.testbed->fabric()->up_seconds());
  note_headroom_caps(c);
  return ok();
}

Status connectivity_phase(RunContext& c) {
  std::string why;
  auto r = fabric::check_connectivity(*c.testbed->fabric(), why);
  if (!r) return error(Errc::kTestbedFault, "connectivity check could not run: " + why);
  if (test_failure("unreachable") && r->reached > 0) {  // tests: one connected pair did not answer
    --r->reached;
    r->unreachable.insert(r->unreachable.begin(), "a pair (ROCELAB_TEST_FAIL=unreachable)");
  }
  c.reach = r;
  c.scalar("host_pairs", double(r->pairs));
  c.scalar("reachable_pairs", double(r->reached));
  c.scalar("unreachable_pairs", double(r->pairs - r->reached));
  // Pairs the topology connects (the others are counted apart): one unreachable is a defect
  // of the realised fabric (a route or neighbour missing), not a slow machine.
  if (r->reached < r->pairs)
    return error(Errc::kTestbedFault, "connectivity check: " + std::to_string(r->pairs - r->reached) + " of " +
                                        std::to_string(r->pairs) + " host NIC pairs unreachable (first: " +
                                        r->unreachable.front() + ")");
  return ok();
}

// The fault timeline on the monotonic clock, in its own thread while the workloads run.
class TimelineThread {
 public:
  TimelineThread(fault::Timeline& tl, const sys::Clock& clock) : tl_(tl), clock_(clock) {
    tl_.start(clock_.now());
    // Faults at 0 are in force before the first packet: left to the thread, a busy machine
    // could schedule it after the traffic began (ecn-off's switch marked 2 packets at D = 200).
    tl_.apply_due(clock_.now());
    thread_ = std::thread([this] { loop(); });
  }
  ~TimelineThread() { stop(); }
  void wait_all() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return stop_ || !tl_.pending(); });
  }
  void stop() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    std::unique_lock lk(mu_);
    while (!stop_ && tl_.pending()) {
      const auto wait = std::chrono::nanoseconds(std::max<sys::Nanos>(0, tl_.next_due() - clock_.now()));
      if (cv_.wait_for(lk, wait, [&] { return stop_; })) break;
      tl_.apply_due(clock_.now());
      cv_.notify_all();
    }
    cv_.notify_all();
  }
  fault::Timeline& tl_;
  const sys::Clock& clock_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

// Stops the workloads when a signal asks (the run's own flag) or when the PFC agent stops
// answering: without it no received pause is put in force or resumed, a lossless incast
// stalls, and what would be measured is not PFC. Asks the agent every 250 ms.
class AgentWatch {
 public:
  AgentWatch(fabric::Testbed& tb, const std::atomic<bool>* signal) : tb_(tb), signal_(signal) {
    thread_ = std::thread([this] { loop(); });
  }
  ~AgentWatch() {
    {
      std::lock_guard lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  const std::atomic<bool>* flag() const { return &stop_; }
  // Why the agent was given up on; empty while it answered.
  std::string dead() {
    std::lock_guard lk(mu_);
    return dead_;
  }

 private:
  void loop() {
    std::unique_lock lk(mu_);
    for (int tick = 0; !done_; ++tick) {
      if (cv_.wait_for(lk, std::chrono::milliseconds(50), [&] { return done_; })) break;
      if (signal_ && signal_->load()) stop_ = true;
      if (tick % 5 != 4) continue;
      lk.unlock();
      auto f = tb_.agent_alive();
      lk.lock();
      if (!f && dead_.empty()) {
        dead_ = f.error().what;
        stop_ = true;
      }
    }
  }
  fabric::Testbed& tb_;
  const std::atomic<bool>* signal_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string dead_;
};

// What a stopped run was still waiting for: the flows neither done nor failed (a few named).
std::string stalled_flows(const workload::WorkloadRun& w) {
  std::string names;
  size_t n = 0;
  for (const auto& f : w.flows)
    if (f.unfinished && ++n <= 4) names += (names.empty() ? "" : ", ") + f.workload + " " + f.from + ">" + f.to;
  if (n == 0) return {};
  return "; " + std::to_string(n) + " flow" + (n == 1 ? "" : "s") + " still waiting (" + names + (n > 4 ? ", ..." : "") + ")";
}

// Flows that failed or stalled in a fabric with PFC may have died in a deadlock: the agent
// names one only after its cycle sent nothing for a pause time (model/deadlock.h), which at
// 1G is 34 ms, longer than an RNIC's retry chain at timeout 10 (3 x 4.2 ms). The fabric is
// still up and still stuck, so give the agent that long to look before collecting: the run
// then says why its flows failed.
void await_deadlock_verdict(RunContext& c) {
  if (!c.workloads || !c.s.qos.pfc_mask || c.parts) return;
  if (std::none_of(c.workloads->flows.begin(), c.workloads->flows.end(),
                   [](const auto& f) { return f.failed || f.unfinished; }))
    return;
  int64_t pause_ns = 0;  // the longest pause time of a switch port, emulated (wall)
  for (const auto& n : c.plan().nodes)
    for (const auto& p : n.ports)
      if (!n.host && p.rate_bps > 0)
        pause_ns = std::max<int64_t>(pause_ns, int64_t(double(c.s.qos.pfc.quanta) * 512 * 1e9 / double(p.rate_bps)));
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(pause_ns) + std::chrono::milliseconds(100);
  while (std::chrono::steady_clock::now() < until && !(c.opts.cancel && c.opts.cancel->load())) {
    auto f = c.testbed->agent_figures();
    if (!f || !*f || !(*f)->deadlocks.empty()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Status traffic_phase(RunContext& c) {
  // The fault timeline's clock starts at the workloads' time 0 (when every part of a split
  // fabric is ready); each part applies the faults on its own nodes, and every link and node
  // fault (fault_here).
  fault::Timeline timeline(c.s, *c.testbed, c.faults_here);
  Status st = ok();
  for (const auto& sink : telemetry::sinks().all())
    if (sink.start)
      if (auto r = sink.start({c.s, c.plan(), *c.testbed, c.dir.string()})) c.recorders[sink.type] = std::move(r);
  {
    std::optional<TimelineThread> tt;
    if (!c.s.workloads.empty()) {
      AgentWatch watch(*c.testbed, c.opts.cancel);
      workload::RunnerOptions ro;
      ro.at_start = [&] { tt.emplace(timeline, c.testbed->clock()); };
      ro.parts = c.parts.get();
      ro.parts_timeout_ms = c.opts.split_wait_ms;
      // Flow rates on the ports' time base, never coarser than the fairness figures need.
      ro.trace_every_ns = std::min<int64_t>(telemetry::sample_interval(c.s).wall_ns, ro.trace_every_ns);
      ro.progress = [](const std::string& l) { spdlog::info("workloads: {}", l); };
      ro.meter = c.opts.meter;
      ro.cancel = watch.flag();
      c.events->add("phase", {{"name", "workloads"}, {"status", "started"}});
      if (auto wr = workload::run_workloads(c.s, c.plan(), *c.testbed, ro)) {
        c.workloads = std::move(*wr);
        if (!c.workloads->invalid.empty() && c.invalid.empty()) c.invalid = c.workloads->invalid;
        c.steal = c.workloads->steal;  // judged after the traffic, with the agent's probe
        if (!c.workloads->fault.empty()) st = error(Errc::kTestbedFault, "workloads: " + c.workloads->fault);
        if (!c.workloads->stopped.empty() && !c.workloads->cancelled)
          st = error(Errc::kTestbedFault, "workloads: " + c.workloads->stopped + stalled_flows(*c.workloads));
        else if (c.workloads->cancelled && watch.dead().empty())
          st = error(Errc::kEnvironment, "workloads: cancelled" + stalled_flows(*c.workloads));
      } else {
        st = Error{wr.error().code, "workloads: " + wr.error().what};  // its class as raised
      }
      // A dead agent is a defect of the testbed, never a slow machine: no runner retries it.
      if (const std::string why = watch.dead(); !why.empty())
        st = error(Errc::kTestbedFault, "the PFC agent stopped during the run (" + why +
                                            "): received pauses were no longer put in force, so nothing measured after "
                                            "that is PFC's" + (c.workloads ? stalled_flows(*c.workloads) : std::string()));
    } else {
      if (c.parts)
        if (auto all = c.parts->exchange("traffic-start", "", c.opts.split_wait_ms, c.opts.cancel); !all) return all.error();
      tt.emplace(timeline, c.testbed->clock());
      tt->wait_all();
      if (c.parts)
        if (auto all = c.parts->exchange("traffic-end", "", c.opts.split_wait_ms, c.opts.cancel); !all) st = all.error();
    }
  }
  await_deadlock_verdict(c);
  for (auto& [type, r] : c.recorders) r->stop();
  if (!timeline.started_at()) timeline.start(c.testbed->clock().now());  // the workloads stopped before time 0
  c.traffic_t0_ns = timeline.started_at();
  timeline.finish(c.testbed->clock().now());
  c.faults = timeline.to_json();
  if (!c.s.faults.empty()) {
    c.metrics["link_down_time"] = model::MetricValue{model::MetricKind::kScalar, timeline.link_down_seconds(), {}};
    c.metrics["path_changes"] = model::MetricValue{model::MetricKind::kScalar, double(c.testbed->path_changes()), {}};
    auto& ld = c.metrics["link_downed"];
    ld.kind = model::MetricKind::kCounter;
    const auto& nodes = c.testbed->nodes();
    for (size_t n = 0; n < nodes.size(); ++n)
      for (size_t p = 0; p < nodes[n].ports.size() && nodes[n].host; ++p)
        ld.samples.push_back({{{"node", nodes[n].name}, {"port", nodes[n].ports[p].name}},
                              double(c.testbed->link_downed({n, p, nodes[n].ports[p].slot}))});
  }
  for (const auto& r : c.faults) c.events->add("fault", r);
  if (timeline.failed() && st) st = error(Errc::kTestbedFault, "a fault could not be applied (results.json faults)");
  if (c.workloads) {
    c.analysis = analyse_workloads(*c.workloads, c.s.scale);
    add_workload_metrics(c.metrics, *c.workloads, *c.analysis, c.s.scale);
    if (!c.s.faults.empty()) add_fault_goodput(c.metrics, *c.workloads, timeline.happened(), timeline.started_at(), c.s.scale);
    c.table = workloads_table(*c.workloads, *c.analysis, c.s.scale);
    for (auto& n : latency_below_wire(*c.workloads, c.s.scale)) c.notes.push_back(std::move(n));
  }
  return st;
}

// series-events.csv: what the timelines mark (README "Time series"): faults starting and
// ending, the watchdog's storms detected and restored, PFC deadlocks seen; physical seconds
// from the traffic's start.
std::string events_csv(const RunContext& c) {
  std::vector<std::pair<double, std::string>> rows;
  auto csv = [](std::string v) {
    if (v.find_first_of(",\"\n") == std::string::npos) return v;
    std::string q = "\"";
    for (char ch : v) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  if (c.faults.is_array())
    for (const auto& f : c.faults)
      rows.push_back({f.value("t_s", 0.0), fmt::format("fault_{},{},{}", f.value("action", ""),
                                                       csv(f.value("target", "")), csv(f.value("type", "")))});
  auto from_metric = [&](const char* metric, const char* event) {
    auto it = c.metrics.find(metric);
    if (it == c.metrics.end()) return;
    for (const auto& smp : it->second.samples) {
      auto label = [&](const char* k) {
        auto l = smp.labels.find(k);
        return l == smp.labels.end() ? std::string() : l->second;
      };
      const std::string target = label("cycle").empty() ? label("node") + ":" + label("port") : label("cycle");
      rows.push_back({smp.value, fmt::format("{},{},priority {}", event, csv(target), label("prio"))});
    }
  };
  from_metric("pfcwd_detected_at", "pfcwd_storm_detected");
  from_metric("pfcwd_restored_at", "pfcwd_storm_restored");
  from_metric("pfc_deadlock_at", "pfc_deadlock");
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out = "t_s,event,target,detail\n";
  for (const auto& [t, rest] : rows) out += fmt::format("{:.9f},{}\n", t, rest);
  return out;
}

Status collect_phase(RunContext& c) {
  Status first = ok();  // every sink collects what it can; the first failure is the phase's
  bool steal_judged = false;
  for (const auto& sink : telemetry::sinks().all()) {
    ordered_json record = ordered_json::object();
    std::map<std::string, std::string> files;
    telemetry::Collect col{c.s, c.plan(), *c.testbed, c.metrics, c.notes, c.invalid, record, c.traffic_t0_ns, &files};
    if (auto it = c.recorders.find(sink.type); it != c.recorders.end()) col.recorder = it->second.get();
    col.steal = c.steal;
    const Status st = sink.collect(col);
    steal_judged = steal_judged || col.steal_judged;
    if (!st) {
      if (first) first = st;
      continue;
    }
    std::string why;
    for (const auto& [name, text] : files)
      if (!write_text(c.dir / name, text, why)) return error(Errc::kEnvironment, why);
    c.events->add("collected", {{"sink", sink.type}, {"record", record}});
  }
  if (!c.steal.empty() && !steal_judged && c.invalid.empty()) c.invalid = c.steal + ": the machine did not keep up";
  std::map<std::string, std::string> files{{"series-events.csv", events_csv(c)}};
  if (c.workloads) {
    files["series-flows.csv"] = flows_csv(*c.workloads, c.traffic_t0_ns, c.s.scale);
    files["fct.txt"] = fct_txt(*c.workloads, c.plan(), c.traffic_t0_ns, c.s.scale);
  }
  std::string why;
  for (const auto& [name, text] : files)
    if (!write_text(c.dir / name, text, why)) return error(Errc::kEnvironment, why);
  return first;
}

// The part files a part sends (kPartFiles, read back from its run directory): past this
// much together they stay on their machine, and the merged run says so.
constexpr size_t kPartFilesMax = 96u << 20;

ordered_json part_files(RunContext& c) {
  ordered_json files = ordered_json::object();
  size_t total = 0;
  for (const char* name : kPartFiles) {
    std::string why;
    auto text = sys::read_file((c.dir / name).string(), kPartFilesMax, why);
    if (!text) continue;  // none written (no series sink, no traffic)
    total += text->size();
    files[name] = std::move(*text);
  }
  if (total > kPartFilesMax) return ordered_json::object();
  return files;
}

// Every part's series, pauses and queue histograms into this part's run directory, and the
// events series again from the merged faults and metrics.
void merge_files(RunContext& c, const std::vector<ordered_json>& far_files, const ordered_json& own) {
  std::string why;
  for (const char* name : kPartFiles) {
    std::vector<std::string> texts(far_files.size());
    for (size_t p = 0; p < far_files.size(); ++p) {
      const ordered_json& f = p == c.parts->index() ? own : far_files[p];
      if (f.contains(name) && f[name].is_string()) texts[p] = f[name].get<std::string>();
    }
    if (std::all_of(texts.begin(), texts.end(), [](const auto& t) { return t.empty(); })) continue;
    auto merged = merge_part_file(name, texts);
    if (!merged) {
      c.notes.push_back(name + std::string(" was not merged: ") + merged.error().what);
      continue;
    }
    if (!write_text(c.dir / name, *merged, why)) c.notes.push_back(why);
  }
  if (!write_text(c.dir / "series-events.csv", events_csv(c), why)) c.notes.push_back(why);
}

// A split run: every part's figures become one run's on every part (merge_metrics says
// how), its faults on one timeline, the first reason any part was invalid, and its ports'
// series and pauses one run's files, so one report shows the whole fabric.
Status merge_phase(RunContext& c) {
  const ordered_json own_files = part_files(c);
  const ordered_json mine{{"metrics", metrics_json(c.metrics)}, {"invalid", c.invalid}, {"faults", c.faults},
                          {"notes", c.notes}, {"files", own_files}};
  auto all = c.parts->exchange("run-figures", mine.dump(), c.opts.split_wait_ms, c.opts.cancel);
  if (c.parts->strays())
    c.notes.push_back("the rendezvous closed " + std::to_string(c.parts->strays()) +
                      " connections that were not a part's (last: " + c.parts->last_stray() + ")");
  if (!all) return all.error();
  std::set<std::string> notes(c.notes.begin(), c.notes.end());
  std::vector<ordered_json> far_files(all->size(), ordered_json::object());
  // A link or node fault is applied on every part (fault_here): one record of each start
  // and end, this part's, unless another part could not apply it (its record says so).
  // A peer's record is read field by field, each of its type or left out (never a throw).
  const auto text = [](const ordered_json& o, const char* k) {
    const auto it = o.find(k);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  using FaultKey = std::pair<int64_t, std::string>;  // the fault's index, start or end
  const auto key_of = [&](const ordered_json& o) {
    const auto it = o.find("fault");
    return FaultKey{it != o.end() && it->is_number_integer() ? it->get<int64_t>() : -1, text(o, "action")};
  };
  std::map<FaultKey, size_t> mine_of;
  if (c.faults.is_array())
    for (const auto& f : c.faults)
      if (applied_on_every_part(text(f, "type"))) ++mine_of[key_of(f)];
  for (size_t p = 0; p < all->size(); ++p) {
    if (p == c.parts->index()) continue;
    // A peer's text: bounded in depth before it is parsed (copies and printing recurse).
    const auto far = sys::json_depth((*all)[p]) > sys::kMaxJsonDepth ? ordered_json(ordered_json::value_t::discarded)
                                                                     : ordered_json::parse((*all)[p], nullptr, false);
    if (far.is_discarded() || !far.is_object() || !far.contains("metrics"))
      return error(Errc::kEnvironment, "part " + std::to_string(p) + " sent figures this machine cannot read");
    merge_metrics(c.metrics, metrics_from_json(far["metrics"]));
    const std::string part = "part " + std::to_string(p) + ": ";
    if (c.invalid.empty() && !text(far, "invalid").empty()) c.invalid = part + text(far, "invalid");
    if (far.contains("faults") && far["faults"].is_array()) {
      if (!c.faults.is_array()) c.faults = ordered_json::array();
      std::map<FaultKey, size_t> seen;
      for (const auto& record : far["faults"]) {
        if (!record.is_object()) continue;
        ordered_json f = typed_fault_record(record);
        if (applied_on_every_part(text(f, "type"))) {
          const FaultKey key = key_of(f);
          const auto ok = f.find("ok");
          if (++seen[key] <= mine_of[key] && ok != f.end() && ok->is_boolean() && ok->get<bool>()) continue;
          if (!text(f, "error").empty()) f["error"] = part + text(f, "error");
        }
        c.faults.push_back(std::move(f));
      }
    }
    if (far.contains("notes") && far["notes"].is_array())
      for (const auto& n : far["notes"])
        if (n.is_string() && notes.insert(n.get<std::string>()).second) c.notes.push_back(part + n.get<std::string>());
    if (far.contains("files") && far["files"].is_object()) far_files[p] = far["files"];
    if (far_files[p].empty() && !own_files.empty())
      c.notes.push_back(fmt::format("{}its series and pause files stayed on its machine (past {} MB): the merged ones lack "
                                    "its ports", part, kPartFilesMax >> 20));
  }
  if (c.faults.is_array())
    std::stable_sort(c.faults.begin(), c.faults.end(),
                     [](const ordered_json& a, const ordered_json& b) {
                       const auto t = [](const ordered_json& o) {  // a peer's: a number or 0
                         const auto it = o.find("t_s");
                         return it != o.end() && it->is_number() ? it->get<double>() : 0.0;
                       };
                       return t(a) < t(b);
                     });
  merge_files(c, far_files, own_files);
  c.events->add("merged", {{"parts", all->size()}});
  return ok();
}

Status down_phase(RunContext& c) {
  for (auto& [type, r] : c.recorders) r->stop();  // none may read a fabric that is going (a phase that threw left them on)
  const auto t0 = std::chrono::steady_clock::now();
  if (auto st = c.testbed->down(); !st) return error(Errc::kEnvironment, "down failed: " + st.error().what);
  c.testbed.reset();
  c.scalar("down_seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return ok();
}

// A phase's exception (an allocation that failed, a bug) ends the run as an environment
// error naming the phase, and the phases after it still run: down takes the fabric away,
// the report is written. ROCELAB_TEST_THROW_IN=PHASE makes that phase throw std::bad_alloc
// before it starts (tests/integration/crash_test.py; no effect on runs without it).
Status guarded(RunContext& c, const Phase& p) {
  try {
    if (const char* at = std::getenv("ROCELAB_TEST_THROW_IN"); at && std::string_view(at) == p.name && from_build_tree())
      throw std::bad_alloc();
    return p.run(c);
  } catch (const std::bad_alloc&) {
    return error(Errc::kEnvironment, std::string(p.name) + ": out of memory (an allocation failed)");
  } catch (const std::exception& e) {
    return error(Errc::kTestbedFault, std::string(p.name) + ": internal error: " + e.what());
  }
}

// Runs a phase and records it; false when the run must stop.
bool run_phase(RunContext& c, const Phase& p) {
  const auto t0 = std::chrono::steady_clock::now();
  Status st = guarded(c, p);
  ordered_json rec{{"name", p.name},
                   {"status", st ? "done" : "failed"},
                   {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}};
  if (!st) rec["why"] = st.error().what;
  // The other parts of a split run stop too, told why (an invalid run goes on everywhere).
  if (!st && c.parts && st.error().code != make_error_code(Errc::kInvalidRun)) c.parts->abort(st.error().what);
  if (std::string_view(p.name) == "connectivity" && c.reach)
    rec.update({{"pairs", c.reach->pairs}, {"reached", c.reach->reached}, {"not_connected_by_topology", c.reach->disconnected}});
  c.phases.push_back(rec);
  c.events->add("phase", rec);
  if (st) return true;
  if (st.error().code == make_error_code(Errc::kInvalidRun)) {
    if (c.invalid.empty()) c.invalid = st.error().what;
    return true;
  }
  if (!c.error) c.error = st.error();
  return p.measures && st.error().code == make_error_code(Errc::kTestbedFault);
}

// Built-in check: a workload that delivered less than it posted, or other bytes, is never
// a pass, whatever the scenario's own assertions say. A flow that failed (its QP ran out of
// retries) delivered what it could: that fails the run unless an assertion expects failures.
void check_delivery(RunContext& c) {
  if (!c.workloads) return;
  const bool failures_expected = std::any_of(c.s.expect.begin(), c.s.expect.end(), [](const model::Expectation& e) {
    return e.text.find("flows_failed") != std::string::npos || e.text.find("retry_exceeded_err") != std::string::npos;
  });
  for (const auto& f : c.workloads->flows)
    if (f.failed) {
      c.notes.push_back("workload " + f.workload + ": " + f.from + " -> " + f.to +
                        (f.failed_at_s >= 0 ? " failed at " + fmt::format("{:.6f}", f.failed_at_s / c.s.scale.factor()) + " s"
                                            : " did not complete") + ": " + f.error);
      if (!failures_expected && !c.error)
        c.error = error(Errc::kAssertionFailed, "a flow failed (see notes; assert on flows_failed when a fault is meant to cause it)");
    }
  for (const auto& f : c.workloads->flows)
    if (!f.digest_ok) {
      c.notes.push_back("workload " + f.workload + ": " + f.from + " -> " + f.to +
                        " did not deliver every byte it posted intact (digest BAD)");
      if (!c.error) c.error = error(Errc::kAssertionFailed, "a workload did not deliver every byte intact (see notes)");
      return;
    }
}

void assert_phase(RunContext& c) {
  for (const auto& e : c.s.expect) {
    AssertionOutcome o{&e, model::evaluate(*e.expr, c.metrics)};
    c.events->add("assertion", {{"expr", e.text},
                                {"outcome", o.eval.outcome == model::Evaluation::Outcome::kPass   ? "pass"
                                            : o.eval.outcome == model::Evaluation::Outcome::kFail ? "fail"
                                                                                                    : "error"}});
    c.assertions.push_back(std::move(o));
  }
}

RunReport report(RunContext& c) {
  RunReport rep;
  if (c.events && c.held) {
    rep.run_dir = c.held->path();
    rep.held = c.held;
    if (!c.held->still_named()) {
      // Renamed, or a link put in its place, by whoever owns a parent directory: nothing
      // followed the name, and the files are where the directory went.
      c.notes.push_back("the run directory " + rep.run_dir + " was renamed or replaced during the run: every file " +
                        "went into the directory made at the start, wherever it is now; nothing followed the name");
      spdlog::warn("{}", c.notes.back());
    }
  }
  rep.notes = c.notes;
  rep.assertions = std::move(c.assertions);
  rep.table = c.table;
  const auto finished = std::chrono::system_clock::now();
  rep.seconds = std::chrono::duration<double>(finished - c.started).count();
  bool failed = false;
  for (const auto& a : rep.assertions) failed = failed || a.eval.outcome != model::Evaluation::Outcome::kPass;
  if (c.error && c.error->exit_code() != kExitAssertion) {
    rep.exit_code = c.error->exit_code();
    rep.outcome = rep.exit_code == kExitInvalid ? "invalid" : rep.exit_code == kExitTestbedFault ? "testbed-fault" : "error";
    rep.error = c.error->what;
  } else if (!c.invalid.empty()) {
    rep.exit_code = kExitInvalid;
    rep.outcome = "invalid";
    rep.error = c.invalid;
  } else if (failed || c.error) {
    rep.exit_code = kExitAssertion;
    rep.outcome = "fail";
    if (c.error) rep.error = c.error->what;
  } else {
    rep.outcome = "pass";
  }
  if (c.events) {  // the run directory exists
    c.scalar("run_seconds", rep.seconds);
    const sys::KernelInfo k = sys::kernel_info();
    ordered_json res;
    res["schema_version"] = kResultsSchemaVersion;
    res["rocelab_version"] = ROCELAB_VERSION;
    res["scenario"] = {{"file", c.s.file}, {"name", c.s.name}, {"description", c.s.description}};
    if (!c.s.sets.empty()) res["scenario"]["set"] = c.s.sets;  // --set over the file (resolved.json has the values)
    res["instance"] = c.s.name;
    res["seed"] = c.s.seed;
    res["scale"] = c.s.scale.factor();
    res["mode"] = c.opts.model_only ? "model-only" : "fabric";
    res["started_at"] = utc_timestamp(c.started);
    res["finished_at"] = utc_timestamp(finished);
    res["duration_s"] = rep.seconds;
    res["kernel"] = {{"release", k.release}, {"version", k.version}, {"machine", k.machine}};
    {  // The machine its figures are of (issue 48): they move with the host; and what else ran.
      const sys::MachineId m = sys::machine_id();
      res["machine"] = {{"cpu_model", m.cpu_model}, {"cpus", m.cpus}, {"clocksource", m.clocksource}, {"kernel", m.kernel}};
      if (c.workloads) {
        res["machine"]["steal"] = c.workloads->machine_steal;
        res["machine"]["other_programs_cpu"] = c.workloads->machine_other;
      }
    }
    res["versions"] = versions_json();
    res["capabilities"] = c.caps.to_json();
    if (!c.link_delay.is_null()) res["link_delay"] = c.link_delay;
    if (c.opts.split)
      res["split"] = {{"part", c.opts.split->index}, {"parts", c.opts.split->parts},
                      {"rendezvous", model::format_ipv4(c.opts.split->underlay.at(0)) + ":" + std::to_string(sys::kRendezvousPort)},
                      {"signed", !c.opts.run_key.empty()},
                      {"strays", c.parts ? c.parts->strays() : 0},
                      {"last_stray", c.parts ? c.parts->last_stray() : ""}};
    res["phases"] = c.phases;
    res["notes"] = rep.notes;
    res["metrics"] = metrics_json(c.metrics);
    if (c.workloads) res["workloads"] = workloads_json(*c.workloads, *c.analysis, c.s.scale);
    if (!c.faults.is_null()) res["faults"] = c.faults;
    res["assertions"] = assertions_json(rep.assertions);
    res["outcome"] = rep.outcome;
    res["exit_code"] = rep.exit_code;
    // The class a runner decides on (only "invalid run" may be retried, at 2 x D) and why.
    res["class"] = class_name(rep.exit_code);
    res["reason"] = rep.error;
    if (!rep.error.empty()) res["error"] = rep.error;
    std::vector<std::pair<std::string, std::string>> props{{"class", class_name(rep.exit_code)}};
    if (c.opts.split && c.opts.run_key.empty()) {
      res["split"]["insecure_no_key"] = true;  // a CI report shows a run any local user could have joined
      props.push_back({"insecure_no_key", "true"});
    }
    if (!c.opts.retry_of.empty()) {
      res["retry_of"] = c.opts.retry_of;
      props.push_back({"retry_of", c.opts.retry_of});
    }
    std::string why;
    if (!write_text(c.dir / "results.json", res.dump(2) + "\n", why) ||
        !write_text(c.dir / "junit.xml", junit_xml(c.s, rep.assertions, rep.seconds, utc_timestamp(c.started), rep.error, props), why)) {
      rep.exit_code = kExitEnvironment;
      rep.outcome = "error";
      rep.error = why;
    }
    c.events->add("run_end", {{"outcome", rep.outcome}, {"exit_code", rep.exit_code}});
  }
  return rep;
}

}  // namespace

RunReport run_scenario(const model::Scenario& s, const RunOptions& opts) {
  RunContext c(s, opts);
  c.notes = opts.notes;
  if (auto st = make_run_dir(c); !st) {
    c.error = st.error();
    return report(c);
  }
  static constexpr Phase kValidate{"validate", validate_phase}, kJoin{"join", join_phase}, kMerge{"merge", merge_phase},
      kDown{"down", down_phase};
  static constexpr Phase kOnFabric[] = {
      {"up", up_phase}, {"connectivity", connectivity_phase}, {"traffic", traffic_phase, true}, {"collect", collect_phase, true}};
  bool go = run_phase(c, kValidate) && !opts.model_only;
  if (opts.split) go = go && run_phase(c, kJoin);  // a split run meets its other parts first, and merges last
  for (const Phase& p : kOnFabric) go = go && run_phase(c, p);
  if (c.testbed) run_phase(c, kDown);  // whatever happened after up, and before a peer's figures are read
  if (opts.split) go = go && run_phase(c, kMerge);
  check_delivery(c);
  assert_phase(c);
  return report(c);
}

RunReport run_scenario_retrying(model::Scenario& s, RunOptions opts,
                                const std::function<std::string(const RunReport&)>& retry_dir,
                                const std::function<void(const std::string&)>& say) {
  RunReport rep = run_scenario(s, opts);
  if (rep.exit_code != kExitInvalid || opts.split || (opts.cancel && opts.cancel->load())) return rep;
  if (model::rescale(s, 2 * s.scale.factor())) return rep;  // D past what the file allows: the verdict stands
  if (say) say(fmt::format("the run was invalid ({}): once more at D = {:g}", rep.error, s.scale.factor()));
  opts.retry_of = rep.error;
  opts.out_dir = retry_dir ? retry_dir(rep) : std::string();
  return run_scenario(s, opts);
}

}  // namespace rocelab::run
