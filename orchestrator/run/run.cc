#include "run/run.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "bpf/headroom.h"
#include "fabric/connectivity.h"
#include "fabric/realiser.h"
#include "fabric/stats.h"
#include "run/resolved.h"
#include "run/faults.h"
#include "run/workloads.h"
#include "sys/host_info.h"

namespace rocelab::run {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

bool write_text(const fs::path& p, const std::string& text, std::string& why) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    why = "cannot write " + p.string();
    return false;
  }
  return true;
}

// A fresh directory: the one asked for (must be absent or empty), or a new timestamped one.
bool make_run_dir(const model::Scenario& s, const RunOptions& o, fs::path& dir, std::string& why) {
  std::error_code ec;
  if (!o.out_dir.empty()) {
    dir = o.out_dir;
    if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec))) {
      why = "run directory " + dir.string() + " already exists and is not empty (choose another --out)";
      return false;
    }
  } else {
    fs::path base = fs::path("runs") / (s.name + "-" + utc_timestamp(std::chrono::system_clock::now(), true));
    dir = base;
    for (int i = 2; fs::exists(dir, ec); ++i) dir = base.string() + "-" + std::to_string(i);
  }
  fs::create_directories(dir, ec);
  if (ec) {
    why = "cannot create run directory " + dir.string() + ": " + ec.message();
    return false;
  }
  return true;
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

}  // namespace

RunReport run_scenario(const model::Scenario& s, const RunOptions& opts) {
  RunReport rep;
  const auto started = std::chrono::system_clock::now();
  fs::path dir;
  if (!make_run_dir(s, opts, dir, rep.error)) {
    rep.exit_code = kExitEnvironment;
    rep.outcome = "error";
    return rep;
  }
  rep.run_dir = dir.string();
  EventLog events((dir / "events.jsonl").string());
  events.add("run_start", {{"scenario", s.file}, {"instance", s.name}, {"seed", s.seed}, {"scale", s.scale.factor()}});

  std::error_code ec;
  if (!opts.scenario_path.empty()) fs::copy_file(opts.scenario_path, dir / "scenario.yaml", fs::copy_options::overwrite_existing, ec);
  std::string why;
  if (!write_text(dir / "resolved.json", resolved_json(s).dump(2) + "\n", why)) spdlog::warn("{}", why);
  events.add("validated", {{"nodes", s.nodes.size()}, {"links", s.links.size()}});

  Capabilities caps = detect_capabilities();
  events.add("capabilities", {{"all_required", caps.all_required()}});

  ordered_json phases = ordered_json::array();
  phases.push_back({{"name", "validate"}, {"status", "done"}});
  std::string blocker;
  if (blocker = faults_not_built(s); !blocker.empty()) {
  } else if (!s.capture.ports.empty()) blocker = "the scenario asks for packet capture, which is not built yet";

  model::MetricSet metrics = topology_metrics(s);
  auto scalar = [&](const char* name, double v) { metrics[name] = model::MetricValue{model::MetricKind::kScalar, v, {}}; };
  std::string invalid;  // why the run cannot be trusted (exit 2)
  double headroom_drops = 0;  // lossless packets beyond XOFF + headroom, every port
  ordered_json workloads_out;
  ordered_json faults_out;
  if (opts.model_only) {
    const std::string note = "--model-only: no fabric was made; only the model's metrics exist";
    rep.notes.push_back(note);
    if (!s.workloads.empty())
      rep.notes.push_back("--model-only: the scenario's workloads did not run (they need the fabric)");
    phases.push_back({{"name", "up"}, {"status", "skipped"}, {"why", note}});
  } else if (blocker.empty()) {
    fabric::UpOptions uo;
    uo.scenario_path = opts.scenario_path;
    uo.cancel = opts.cancel;
    uo.progress = [](const std::string& what) { spdlog::info("up: {}", what); };
    auto f = fabric::Fabric::up(s, uo, blocker);
    if (f) {
      for (const auto& n : f->notes()) rep.notes.push_back(n);
      scalar("up_seconds", f->up_seconds());
      phases.push_back({{"name", "up"}, {"status", "done"}, {"seconds", f->up_seconds()}});
      events.add("phase", {{"name", "up"}, {"status", "done"}, {"seconds", f->up_seconds()}});
      std::string why;
      for (const auto& np : f->plan().nodes) {
        if (np.host || !f->plan().port_config.buffer_size || !f->plan().port_config.pfc_mask) continue;
        uint64_t sum = 0;  // the largest limit the node's lossless queues would need, uncapped
        for (const auto& h : bpf::node_headroom(fabric::headroom_inputs(f->plan(), np), f->plan().port_config.pfc_xoff,
                                                0, bpf::kInitialReactionBudgetNs))
          sum = std::max<uint64_t>(sum, h.lossless_limit);
        if (sum > f->plan().port_config.buffer_size)
          rep.notes.push_back(np.node + ": XOFF + the headroom of its ports (" + std::to_string(sum) +
                              " B) exceed qos.buffer.size (" + std::to_string(f->plan().port_config.buffer_size) +
                              " B): its lossless queues stop at the buffer and may drop as `headroom`");
      }
      if (auto r = fabric::check_connectivity(*f, why)) {
        scalar("host_pairs", static_cast<double>(r->pairs));
        scalar("reachable_pairs", static_cast<double>(r->reached));
        scalar("unreachable_pairs", static_cast<double>(r->pairs - r->reached));
        ordered_json ph{{"name", "connectivity"}, {"status", "done"}, {"seconds", r->seconds},
                        {"pairs", r->pairs}, {"reached", r->reached}, {"not_connected_by_topology", r->disconnected}};
        if (!r->unreachable.empty()) ph["unreachable"] = r->unreachable;
        phases.push_back(ph);
        events.add("connectivity", ph);
        if (r->reached < r->pairs) {
          invalid = "connectivity check: " + std::to_string(r->pairs - r->reached) + " of " + std::to_string(r->pairs) +
                    " host NIC pairs unreachable (first: " + r->unreachable.front() + ")";
        }
      } else {
        invalid = "connectivity check could not run: " + why;
      }
      // The fault timeline's clock starts with the workloads'.
      FaultTimeline timeline(s, s.name);
      timeline.start();
      if (!s.workloads.empty() && blocker.empty()) {
        workload::RunnerOptions ro;
        ro.progress = [](const std::string& l) { spdlog::info("workloads: {}", l); };
        ro.cancel = opts.cancel;
        events.add("phase", {{"name", "workloads"}, {"status", "started"}});
        if (auto wr = workload::run_workloads(s, f->plan(), ro, why)) {
          const WorkloadAnalysis a = analyse_workloads(*wr, s.scale);
          add_workload_metrics(metrics, *wr, a, s.scale);
          workloads_out = workloads_json(*wr, a, s.scale);
          rep.table = workloads_table(*wr, a, s.scale);
          phases.push_back({{"name", "workloads"}, {"status", "done"}, {"seconds", wr->seconds}});
          events.add("phase", {{"name", "workloads"}, {"status", "done"}, {"seconds", wr->seconds}});
          if (!wr->invalid.empty() && invalid.empty()) invalid = wr->invalid;
        } else {
          blocker = "workloads: " + why;
          phases.push_back({{"name", "workloads"}, {"status", "failed"}, {"why", why}});
        }
      }
      if (s.workloads.empty()) timeline.wait_all();
      timeline.stop();
      faults_out = timeline.record();
      for (const auto& r : faults_out) events.add("fault", r);
      if (timeline.failed() && invalid.empty()) invalid = "a fault could not be applied (results.json faults)";
      std::vector<fabric::NodeRef> refs;
      for (size_t x = 0; x < f->plan().nodes.size(); ++x)
        refs.push_back({f->plan().nodes[x].node, f->plan().nodes[x].netns, f->netns_fd(x)});
      if (auto stats = fabric::read_stats(refs, "", why)) {
        add_port_metrics(metrics, *stats, s.qos.lossless_mask);
        for (const auto& ps : *stats)
          for (const auto& q : ps.prio) headroom_drops += static_cast<double>(q.c.drops[RL_DROP_HEADROOM]);
        events.add("collected", {{"ports", stats->size()}});
      } else {
        invalid = invalid.empty() ? "counters could not be read: " + why : invalid;
      }
      // The agent's figures (it rewrites them every half second: after traffic, wait for a
      // fresh copy so the pause time covers the end of the workloads).
      if (!s.workloads.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(600));
      if (std::ifstream af(fabric::agent_stats_path(s.name)); af) {
        try {
          auto a = nlohmann::json::parse(af);
          if (a.contains("error")) throw std::runtime_error(a["error"].get<std::string>());
          scalar("agent_pauses", a.at("pauses").get<double>());
          if (a.contains("paused_ns")) scalar("pause_time", a["paused_ns"].get<double>() / 1e9 / s.scale.factor());
          if (a.contains("paused")) {
            model::MetricValue per{model::MetricKind::kCounter, 0, {}};
            for (const auto& x : a["paused"])
              per.samples.push_back(model::Sample{{{"node", x.at("node").get<std::string>()},
                                            {"port", x.at("port").get<std::string>()},
                                            {"prio", std::to_string(x.at("prio").get<int>())}},
                                           x.at("paused_ns").get<double>() / 1e9 / s.scale.factor()});
            metrics["port_pause_time"] = per;
          }
          if (a.contains("leaked_packets")) {
            scalar("pfc_leaks", a["leaked_packets"].get<double>());
            scalar("pfc_pause_tail", a["pause_tail_packets"].get<double>());
          }
          if (a.at("reaction_ns").at("count").get<double>() > 0) {
            const double p99 = a["reaction_ns"]["p99"].get<double>() / 1e9;
            scalar("pfc_reaction_p50", a["reaction_ns"]["p50"].get<double>() / 1e9);
            scalar("pfc_reaction_p99", p99);
            // Headroom (DESIGN.md §2): each switch port's physical headroom + its emulated rate x
            // the agent's reaction budget, which the agent raised to its p99 whenever the p99
            // outgrew it. Reported for the fastest switch port, whose headroom the reaction
            // time weighs most on. Lossless queues that overflowed after the budget had to
            // grow mean the machine did not keep up (§3: invalid), not a configuration.
            const double p99_ns = a["reaction_ns"]["p99"].get<double>();
            const auto budget = a.value("reaction_budget_ns", bpf::kInitialReactionBudgetNs);
            const fabric::KernelPlan& kp = f->plan();
            bpf::HeadroomPort fastest{};
            for (const auto& np : kp.nodes)
              if (!np.host)
                for (const auto& hp : fabric::headroom_inputs(kp, np))
                  if (hp.rate_bps >= fastest.rate_bps) fastest = hp;
            scalar("pfc_reaction_budget", static_cast<double>(budget) / 1e9);
            scalar("pfc_headroom", bpf::port_headroom(fastest, budget));
            scalar("pfc_headroom_needed", bpf::port_headroom(fastest, static_cast<uint64_t>(p99_ns)));
            if (a.value("budget_raises", 0) > 0 && headroom_drops > 0 && invalid.empty())
              invalid = "the agent's reaction time outgrew its " +
                        std::to_string(bpf::kInitialReactionBudgetNs / 1'000'000) + " ms budget (raised to " +
                        std::to_string(static_cast<double>(budget) / 1e6) + " ms) and " +
                        std::to_string(static_cast<uint64_t>(headroom_drops)) +
                        " packets overflowed lossless headroom: the machine did not keep up";
          }
          events.add("agent", a);
        } catch (const nlohmann::json::exception&) {
          rep.notes.push_back("the agent's figures could not be read");
        } catch (const std::runtime_error& e) {
          if (invalid.empty()) invalid = std::string("the PFC agent failed, nothing honoured PFC: ") + e.what();
        }
      }
      const auto t_down = std::chrono::steady_clock::now();
      if (!f->down(why)) {
        blocker = "down failed: " + why + " (run 'rocelab down " + s.name + "')";
      } else {
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_down).count();
        scalar("down_seconds", secs);
        phases.push_back({{"name", "down"}, {"status", "done"}, {"seconds", secs}});
        events.add("phase", {{"name", "down"}, {"status", "done"}, {"seconds", secs}});
      }
    } else {
      blocker = "up: " + blocker;
    }
  }
  if (s.workloads.empty()) phases.push_back({{"name", "workloads"}, {"status", "none"}});
  phases.push_back({{"name", "faults"}, {"status", s.faults.empty() ? "none" : faults_out.empty() ? "not run" : "done"}});

  const auto finished = std::chrono::system_clock::now();
  rep.seconds = std::chrono::duration<double>(finished - started).count();
  scalar("run_seconds", rep.seconds);
  events.add("collected", {{"metrics", metrics.size()}});

  bool failed = false, undecided = false;
  for (const auto& e : s.expect) {
    AssertionOutcome o{&e, model::evaluate(*e.expr, metrics)};
    failed = failed || o.eval.outcome == model::Evaluation::Outcome::kFail;
    undecided = undecided || o.eval.outcome == model::Evaluation::Outcome::kError;
    events.add("assertion", {{"expr", e.text},
                             {"outcome", o.eval.outcome == model::Evaluation::Outcome::kPass ? "pass"
                                         : o.eval.outcome == model::Evaluation::Outcome::kFail ? "fail" : "error"}});
    rep.assertions.push_back(std::move(o));
  }
  if (!blocker.empty()) {
    rep.exit_code = kExitEnvironment;
    rep.outcome = "error";
    rep.error = blocker;
  } else if (!invalid.empty()) {
    rep.exit_code = kExitInvalid;
    rep.outcome = "invalid";
    rep.error = invalid;
  } else if (failed || undecided) {
    rep.exit_code = kExitAssertion;
    rep.outcome = "fail";
  } else {
    rep.outcome = "pass";
  }

  const sys::KernelInfo k = sys::kernel_info();
  ordered_json res;
  res["schema_version"] = kResultsSchemaVersion;
  res["rocelab_version"] = ROCELAB_VERSION;
  res["scenario"] = {{"file", s.file}, {"name", s.name}, {"description", s.description}};
  res["instance"] = s.name;
  res["seed"] = s.seed;
  res["scale"] = s.scale.factor();
  res["mode"] = opts.model_only ? "model-only" : "fabric";
  res["started_at"] = utc_timestamp(started);
  res["finished_at"] = utc_timestamp(finished);
  res["duration_s"] = rep.seconds;
  res["kernel"] = {{"release", k.release}, {"version", k.version}, {"machine", k.machine}};
  res["versions"] = versions_json();
  res["capabilities"] = caps.to_json();
  res["phases"] = phases;
  res["notes"] = rep.notes;
  res["metrics"] = metrics_json(metrics);
  if (!workloads_out.is_null()) res["workloads"] = workloads_out;
  if (!faults_out.is_null()) res["faults"] = faults_out;
  res["assertions"] = assertions_json(rep.assertions);
  res["outcome"] = rep.outcome;
  res["exit_code"] = rep.exit_code;
  if (!rep.error.empty()) res["error"] = rep.error;
  if (!write_text(dir / "results.json", res.dump(2) + "\n", why) ||
      !write_text(dir / "junit.xml", junit_xml(s, rep.assertions, rep.seconds, utc_timestamp(started), rep.error), why)) {
    rep.exit_code = kExitEnvironment;
    rep.outcome = "error";
    rep.error = why;
  }
  events.add("run_end", {{"outcome", rep.outcome}, {"exit_code", rep.exit_code}});
  return rep;
}

}  // namespace rocelab::run
