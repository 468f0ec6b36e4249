#include "run/run.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>

#include "run/resolved.h"
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
  // Stages that later issues build. A run must not pretend they happened.
  const std::string fabric_note = "fabric realisation (namespaces, veth, routes) arrives with Foundation II; "
                                  "this run evaluated the model only";
  phases.push_back({{"name", "up"}, {"status", "not built"}, {"why", fabric_note}});
  rep.notes.push_back(fabric_note);
  events.add("phase", {{"name", "up"}, {"status", "not built"}});
  std::string blocker;
  if (!s.workloads.empty()) blocker = "the scenario has workloads, and the RoCEv2 engine that runs them is not built yet";
  else if (!s.faults.empty()) blocker = "the scenario has faults, and the fault timeline is not built yet";
  else if (!s.capture.ports.empty()) blocker = "the scenario asks for packet capture, which needs the fabric (not built yet)";
  phases.push_back({{"name", "workloads"}, {"status", s.workloads.empty() ? "none" : "not built"}});
  phases.push_back({{"name", "faults"}, {"status", s.faults.empty() ? "none" : "not built"}});

  model::MetricSet metrics = topology_metrics(s);
  const auto finished = std::chrono::system_clock::now();
  rep.seconds = std::chrono::duration<double>(finished - started).count();
  metrics["run_seconds"] = model::MetricValue{model::MetricKind::kScalar, rep.seconds, {}};
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
  phases.push_back({{"name", "down"}, {"status", "not built"}});

  if (!blocker.empty()) {
    rep.exit_code = kExitEnvironment;
    rep.outcome = "error";
    rep.error = blocker;
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
  res["mode"] = "model-only";
  res["started_at"] = utc_timestamp(started);
  res["finished_at"] = utc_timestamp(finished);
  res["duration_s"] = rep.seconds;
  res["kernel"] = {{"release", k.release}, {"version", k.version}, {"machine", k.machine}};
  res["versions"] = versions_json();
  res["capabilities"] = caps.to_json();
  res["phases"] = phases;
  res["notes"] = rep.notes;
  res["metrics"] = metrics_json(metrics);
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
