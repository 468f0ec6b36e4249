// The CLI edge: parses arguments, calls the layers below, prints, and turns their error
// values into exit codes (0 pass, 1 assertion failed, 2 invalid run, 3 bad input,
// 4 environment, 5 testbed fault). The only place exceptions are caught.
#include "cli/commands.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <fmt/format.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <atomic>
#include <chrono>
#include <set>
#include <map>
#include <thread>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bpf/probe.h"
#include "agent/agent.h"
#include "fabric/local_testbed.h"
#include "fabric/realiser.h"
#include "model/hostlist.h"
#include "model/ipv4.h"
#include "model/loader.h"
#include "run/autoscale.h"
#include "run/capabilities.h"
#include "run/graph.h"
#include "run/inject.h"
#include "run/kinds.h"
#include "run/report.h"
#include "run/vm.h"
#include "cli/top.h"
#include "run/resolved.h"
#include "run/results.h"
#include "run/run.h"
#include "sys/host_info.h"
#include "fault/registry.h"
#include "telemetry/sink.h"
#include "workload/backend.h"
#include "workload/kinds.h"
#include "workload/perf.h"
#include "cli/perftest.h"
#include "rocelab_commit.h"  // generated: ROCELAB_COMMIT

namespace po = boost::program_options;

namespace rocelab::cli {

namespace {

using nlohmann::ordered_json;
using run::kExitBadInput;
using run::kExitEnvironment;

void add_instance_option(po::options_description& d) {
  d.add_options()("instance", po::value<std::string>(),
                  "instance name instead of the scenario's 'name:' (run two copies side by side)");
}

void add_metrics_option(po::options_description& d) {
  d.add_options()("metrics-port", po::value<int>(),
                  "serve Prometheus metrics on 127.0.0.1:PORT/metrics while the fabric is up (SONiC's SAI counter "
                  "names, node_exporter's node_infiniband_* for host NICs)");
}

void add_split_options(po::options_description& d, bool run) {
  d.add_options()("part", po::value<std::string>(),
                  run ? "I/M: run only part I of the scenario split over M machines (docs/multi-machine.md): its nodes, "
                        "its hosts' QP ends and the faults on its nodes; links to other parts are VXLAN ports (UDP 4789). "
                        "Start it on every machine: they meet at part 0's address (TCP 790), start the traffic together "
                        "and each reports the whole run. 'auto' inside a Slurm job step (srun -N M --ntasks-per-node=1) "
                        "or a pod of the Indexed Job 'rocelab k8s' writes: I, M and the machines from the launcher"
                      : "I/M: make only part I of the fabric split over M machines (docs/multi-machine.md): hosts stay "
                        "with their switches, links to other parts become point-to-point VXLAN ports (UDP 4789). 'auto' "
                        "inside a Slurm job step or a pod of 'rocelab k8s': I, M and the machines from the launcher")(
      "peers", po::value<std::string>(),
      "with --part: the machines' underlay IPv4 addresses, part 0 first, comma-separated (this machine's "
      "among them, on an interface whose MTU carries the links' + 50); with --part auto the launcher's "
      "names resolved, unless given");
  if (run)
    d.add_options()("part-wait", po::value<double>(),
                    "with --part: seconds to wait for the other parts to start and to come up (default 300)")(
        "run-key", po::value<std::string>(),
        "with --part: a file holding the run's secret (16 bytes or more, readable by its owner alone; "
        "or $ROCELAB_RUN_KEY): every part signs its rendezvous frames with it, and a connection that cannot "
        "is closed, whatever address it comes from. Make one with: head -c 32 /dev/urandom | base64 > key; "
        "chmod 600 key")(
        "insecure-no-key",
        "with --part: run without a key, the rendezvous trusting the --peers addresses alone (any local user "
        "of a part's machine could claim that part, forge its figures or stop the run); said in results.json "
        "and the JUnit properties");
}

// The user sudo ran this as (SUDO_UID, set by sudo itself), if any.
std::optional<uid_t> sudo_uid() {
  const char* v = std::getenv("SUDO_UID");
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const unsigned long id = std::strtoul(v, &end, 10);
  if (*end || id > 0xfffffffeUL) return std::nullopt;
  return uid_t(id);
}

// The split run's key: --run-key FILE, else $ROCELAB_RUN_KEY; empty when neither (the
// rendezvous then trusts addresses alone). nullopt after saying what is wrong with it.
std::optional<std::string> run_key(const po::variables_map& vm) {
  auto bad = [](const std::string& what) {
    std::cerr << "rocelab run: " << what << "\n";
    return std::nullopt;
  };
  std::string key;
  if (vm.count("run-key")) {
    const std::string path = vm["run-key"].as<std::string>();
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0) {
      if (fd >= 0) close(fd);
      return bad("--run-key " + path + ": " + std::strerror(errno));
    }
    std::string why;
    if (!S_ISREG(st.st_mode)) why = "not a regular file";
    else if (st.st_mode & 077) why = "readable or writable by others than its owner (chmod 600 it)";
    else if (st.st_uid != geteuid() && !(geteuid() == 0 && sudo_uid() == std::optional<uid_t>(st.st_uid)))
      why = "owned by another user (neither this one nor, under sudo, SUDO_UID)";
    else if (st.st_size > 4096) why = "larger than 4 KiB: a key, not a document";
    char buf[4097];
    const ssize_t n = why.empty() ? read(fd, buf, sizeof buf) : 0;
    close(fd);
    if (!why.empty()) return bad("--run-key " + path + ": " + why);
    if (n < 0) return bad("--run-key " + path + ": " + std::strerror(errno));
    key.assign(buf, size_t(n));
  } else if (const char* env = std::getenv("ROCELAB_RUN_KEY")) {
    key = env;
    unsetenv("ROCELAB_RUN_KEY");  // read once: no child of this run inherits the secret
  } else {
    return std::string();
  }
  while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();  // echo's newline
  const std::string what = vm.count("run-key") ? "--run-key" : "ROCELAB_RUN_KEY";
  if (key.size() < 16) return bad(what + ": a run key is 16 bytes or more");
  // 128 random bits cannot be checked, but a word repeated or a run of one letter can.
  if (std::set<char>(key.begin(), key.end()).size() < 8)
    return bad(what + ": fewer than 8 distinct characters: not a random key (head -c 32 /dev/urandom | base64 > run.key)");
  return key;
}

// The Slurm job this process runs in ("slurm:ID"), recorded in the state file so the job's
// epilog can take down what a killed part left (down --slurm-job). Empty outside a job.
std::string launcher_job() {
  const char* id = std::getenv("SLURM_JOB_ID");
  const std::string job = id ? std::string("slurm:") + id : "";
  return fabric::is_job_name(job) ? job : "";
}

// --part auto inside a Slurm job step (srun -N M --ntasks-per-node=1) or a pod of the Indexed
// Job 'rocelab k8s' writes: the part and the count from the launcher, the machines by name,
// each one's address through the resolver (or --peers, when the underlay is another network
// than the names'). A pod's peers may not be in DNS yet (their pods still starting): asked
// again each second for --part-wait. nullopt after saying why.
std::optional<fabric::UpOptions::Split> auto_split(const po::variables_map& vm, const char* cmd) {
  auto bad = [cmd](const std::string& what) {
    std::cerr << "rocelab " << cmd << ": --part auto: " << what << "\n";
    return std::nullopt;
  };
  std::map<std::string, std::string> env;
  for (const char* name : {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS", "SLURM_NODEID", "SLURM_STEP_NODELIST",
                           "SLURM_JOB_NODELIST", "JOB_COMPLETION_INDEX", "ROCELAB_PARTS", "ROCELAB_K8S_JOB",
                           "ROCELAB_K8S_SERVICE"})
    if (const char* v = std::getenv(name)) env[name] = v;
  const bool k8s = !env.count("SLURM_PROCID") && env.count("JOB_COMPLETION_INDEX");
  std::string why;
  auto step = k8s ? model::k8s_pod(env, why) : model::slurm_step(env, why);
  if (!step) return bad(why);
  fabric::UpOptions::Split sp;
  sp.index = step->part;
  sp.parts = step->parts;
  if (vm.count("peers")) {
    const std::string list = vm["peers"].as<std::string>();
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      auto a = model::parse_ipv4(list.substr(at, comma - at));
      if (!a) return bad("--peers: '" + list.substr(at, comma - at) + "' is not an IPv4 address");
      sp.underlay.push_back(*a);
      at = comma + 1;
    }
    if (sp.underlay.size() != sp.parts)
      return bad("--peers names " + std::to_string(sp.underlay.size()) + " addresses for the " +
                 std::to_string(sp.parts) + " parts");
  } else {
    const double wait = vm.count("part-wait") ? vm["part-wait"].as<double>() : 300;
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(k8s ? wait : 0);
    for (const auto& node : step->nodes) {
      auto a = sys::resolve_ipv4(node, why);
      for (bool said = false; !a && std::chrono::steady_clock::now() < until; a = sys::resolve_ipv4(node, why)) {
        if (!said) std::cerr << "rocelab " << cmd << ": --part auto: waiting for " << node << " in DNS\n";
        said = true;
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
      if (!a) return bad((k8s ? "the part " : "the step's node ") + why + " (give --peers ADDR0,... in part order)");
      sp.underlay.push_back(*a);
    }
  }
  std::cerr << "rocelab " << cmd << ": --part auto: part " << sp.index << " of " << sp.parts
            << (k8s ? " (Kubernetes Indexed Job of " : " (Slurm step on ") << step->nodes.size()
            << (k8s ? " pods; this one " : " nodes; this one ") << step->nodes[sp.index] << ", "
            << model::format_ipv4(sp.underlay[sp.index]) << ")\n";
  return sp;
}

// --part I/M with --peers ADDR0,ADDR1,...: one machine's share of a split fabric; nullopt
// after saying what is wrong with them.
std::optional<fabric::UpOptions::Split> split_option(const po::variables_map& vm, const char* cmd) {
  auto bad = [cmd](const std::string& what) {
    std::cerr << "rocelab " << cmd << ": " << what << "\n";
    return std::nullopt;
  };
  const std::string part = vm.count("part") ? vm["part"].as<std::string>() : "";
  if (part == "auto") return auto_split(vm, cmd);
  if (!vm.count("part") || !vm.count("peers")) return bad("--part I/M and --peers ADDR0,...,ADDR{M-1} go together");
  fabric::UpOptions::Split sp;
  const size_t slash = part.find('/');
  try {
    if (slash == std::string::npos) throw std::invalid_argument(part);
    size_t used = 0;
    sp.index = std::stoul(part.substr(0, slash), &used);
    if (used != slash) throw std::invalid_argument(part);
    sp.parts = std::stoul(part.substr(slash + 1), &used);
    if (used != part.size() - slash - 1) throw std::invalid_argument(part);
  } catch (const std::exception&) {
    return bad("--part " + part + ": expected I/M, this machine's part I of M (0 <= I < M), e.g. 0/2");
  }
  if (sp.parts < 2 || sp.parts > model::kMaxParts || sp.index >= sp.parts)
    return bad("--part " + part + ": M from 2 to " + std::to_string(model::kMaxParts) + " parts, and I below M");
  std::string list = vm["peers"].as<std::string>();
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string one = list.substr(at, comma - at);
    auto a = model::parse_ipv4(one);
    if (!a) return bad("--peers: '" + one + "' is not an IPv4 address (one per part, in part order, comma-separated)");
    sp.underlay.push_back(*a);
    at = comma + 1;
  }
  if (sp.underlay.size() != sp.parts)
    return bad("--peers names " + std::to_string(sp.underlay.size()) + " addresses for " + std::to_string(sp.parts) +
               " parts: one per part, this machine's at index " + std::to_string(sp.index));
  return sp;
}

// --metrics-port as a port (0: none); nullopt after saying why it is not one.
std::optional<uint16_t> metrics_port(const po::variables_map& vm, const char* cmd) {
  if (!vm.count("metrics-port")) return uint16_t{0};
  const int p = vm["metrics-port"].as<int>();
  if (p < 1 || p > 65535) {
    std::cerr << "rocelab " << cmd << ": --metrics-port " << p << ": a TCP port is 1-65535\n";
    return std::nullopt;
  }
  return uint16_t(p);
}

void add_scenario_arg(po::options_description& d) {
  d.add_options()("scenario", po::value<std::string>(), "scenario file (YAML)")(
      "set", po::value<std::vector<std::string>>()->composing(),
      "KEY=VALUE: change one setting of the file, KEY a dotted path (qos.ecn.kmin=64KB, "
      "hosts.dcqcn.rate_ai=40M, workloads.0.message=4MB); repeatable, validated like the file, "
      "recorded in resolved.json and results.json");
}

std::vector<std::string> sets_of(const po::variables_map& vm) {
  return vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
}

// Loads and validates; prints every error. nullopt means exit 3.
std::optional<model::Scenario> load(const po::variables_map& vm, const Globals& g, bool quiet_ok = true) {
  if (!vm.count("scenario")) {
    std::cerr << "rocelab: missing SCENARIO (a YAML file; see scenarios/)\n";
    return std::nullopt;
  }
  const std::string path = vm["scenario"].as<std::string>();
  spdlog::debug("loading {}", path);
  auto res = run::load_scenario_file(path, sets_of(vm));
  if (res.ok()) {
    if (vm.count("instance")) {
      const std::string name = vm["instance"].as<std::string>();
      if (!model::is_instance_name(name)) {
        std::cerr << "rocelab: --instance: '" << name.substr(0, 64)
                  << "' is not an instance name (lower-case letters, digits and '-', at most "
                  << model::kInstanceNameMax << " characters)\n";
        return std::nullopt;
      }
      res.scenario->name = name;
    }
    return std::move(res.scenario);
  }
  auto diags = res.diags.sorted();
  if (g.json) {
    ordered_json errs = ordered_json::array();
    for (const auto& d : diags)
      errs.push_back({{"file", d.file}, {"line", d.pos.line}, {"column", d.pos.column},
                      {"kind", model::error_kind_name(d.kind)}, {"message", d.message}});
    std::cout << ordered_json{{"ok", false}, {"errors", errs}}.dump(2) << "\n";
  } else {
    for (const auto& d : diags) std::cerr << d.format() << "\n";
    std::cerr << diags.size() << (diags.size() == 1 ? " error" : " errors") << " in " << path << "\n";
  }
  (void)quiet_ok;
  return std::nullopt;
}

// `scale: auto`: D for this machine (run/autoscale.h), said before anything is built; the
// sentence is the run's first note. Model-only runs take a cached calibration or leave D
// at 1 (the model's figures do not depend on it).
Result<std::string> choose_auto_scale(model::Scenario& s, const po::variables_map& vm, const char* cmd, bool model_only) {
  if (model_only && !run::has_calibration()) {
    spdlog::warn("scale: auto: this machine is not calibrated yet; --model-only leaves D at 1 (no figure of the model depends on it)");
    return std::string();
  }
  auto ch = run::resolve_auto_scale(s, vm.count("recalibrate") > 0,
                                    [](const std::string& what) { spdlog::info("{}", what); });
  if (!ch) {
    std::cerr << "rocelab " << cmd << ": " << ch.error().what << "\n";
    return ch.error();
  }
  spdlog::info("scale: auto: {}", ch->why);
  return "scale: auto: " + ch->why;
}

std::string summary_line(const model::Scenario& s) {
  char scale[32];
  std::snprintf(scale, sizeof scale, "%g", s.scale.factor());
  if (s.scale_auto) std::snprintf(scale, sizeof scale, "auto");
  return std::string(model::fabric_type_name(s.fabric.type)) + ": " +
         std::to_string(s.count(model::NodeKind::kSwitch)) + " switches, " +
         std::to_string(s.count(model::NodeKind::kHost)) + " hosts, " + std::to_string(s.links.size()) +
         " links; D = " + scale + "; seed " + std::to_string(s.seed) + "; " + std::to_string(s.expect.size()) +
         (s.expect.size() == 1 ? " assertion" : " assertions");
}

int cmd_validate(const po::variables_map& vm, const Globals& g) {
  auto s = load(vm, g);
  if (!s) return kExitBadInput;
  if (vm.count("resolved")) {
    std::cout << run::resolved_json(*s).dump(2) << "\n";
  } else if (g.json) {
    std::cout << ordered_json{{"ok", true}, {"file", s->file}, {"summary", summary_line(*s)}}.dump(2) << "\n";
  } else {
    std::cout << s->file << ": ok (" << summary_line(*s) << ")\n";
    if (s->scale_auto) {
      // What run would choose, when this machine's calibration is cached (validate measures nothing).
      if (!run::has_calibration()) {
        std::cout << "scale: auto: this machine is not calibrated yet ('rocelab run' or 'up' calibrates it, ~10 s)\n";
      } else if (auto ch = run::resolve_auto_scale(*s, false, {})) {
        std::cout << "scale: auto: " << ch->why << "\n";
      } else {
        std::cout << "scale: auto: " << ch.error().what << "\n";
      }
    }
  }
  return 0;
}

int cmd_graph(const po::variables_map& vm, const Globals& g) {
  auto s = load(vm, g);
  if (!s) return kExitBadInput;
  std::string dot = run::fabric_dot(*s);
  if (vm.count("output")) {
    std::string out = vm["output"].as<std::string>();
    if (std::string why; !sys::write_file(out, dot, why)) {  // never through a link (root writes it)
      std::cerr << "rocelab graph: " << why << "\n";
      return kExitEnvironment;
    }
    std::cerr << "wrote " << out << " (render: dot -Tpng " << out << " -o fabric.png)\n";
  } else {
    std::cout << dot;
  }
  return 0;
}

const char* outcome_word(model::Evaluation::Outcome o) {
  switch (o) {
    case model::Evaluation::Outcome::kPass: return "PASS";
    case model::Evaluation::Outcome::kFail: return "FAIL";
    case model::Evaluation::Outcome::kError: return "ERROR";
  }
  return "ERROR";
}

// SIGINT/SIGTERM/SIGHUP during up or run: the realiser rolls back, the run tears down.
std::atomic<bool> g_cancel{false};
std::atomic<int> g_signal{0};  // which one, for the message: a launcher's SIGTERM reads otherwise as a bare "cancelled"
void on_signal(int sig) {
  g_signal.store(sig);
  g_cancel.store(true);
}

// "stopped by SIGTERM ..." when a signal ended the run, else empty.
std::string stopped_by(bool split) {
  const int sig = g_signal.load();
  if (sig == 0) return "";
  const char* abbrev = sigabbrev_np(sig);
  std::string out = "stopped by SIG" + std::string(abbrev ? abbrev : "?");
  if (split && sig == SIGTERM)
    out += " (under srun: the step is ending, as another part failed (srun names it) or the job was cancelled)";
  return out;
}


// `run --vm`: the scenario inside the project's VM image (run/vm.h); its output and run
// directory come back here, the report is written here.
int run_vm(const po::variables_map& vm, const model::Scenario& s) {
  if (vm.count("model-only") || vm.count("metrics-port")) {
    std::cerr << "rocelab run: --vm runs the scenario in a VM: --model-only and --metrics-port do not apply there\n";
    return kExitBadInput;
  }
  run::VmRunOptions o;
  o.scenario_path = vm["scenario"].as<std::string>();
  o.scenario_source = s.source;
  o.instance_name = s.name;
  if (vm.count("out")) o.out_dir = vm["out"].as<std::string>();
  if (vm.count("scale")) o.run_args.push_back("--scale=" + fmt::format("{}", vm["scale"].as<double>()));
  if (vm.count("seed")) o.run_args.push_back("--seed=" + std::to_string(vm["seed"].as<int64_t>()));
  if (vm.count("instance")) o.run_args.push_back("--instance=" + vm["instance"].as<std::string>());
  for (const auto& s : sets_of(vm)) o.run_args.push_back("--set=" + s);
  spdlog::info("run {} in the VM image (booting; under TCG this is slow)", s.name);
  auto r = run::run_in_vm(o);
  if (!r) {
    std::cerr << "rocelab run --vm: " << r.error().what << "\n";
    return r.error().exit_code();
  }
  if (!r->rebooted.empty())
    spdlog::warn("the guest was booted again: its first boot's kernel died of TCG's known code-patching fault ({})",
                 r->rebooted);
  std::cout << r->output;
  if (!r->run_dir.empty()) {
    if (!vm.count("no-report")) write_report_of(r->run_dir, nullptr);
    std::cout << "run directory: " << r->run_dir << "\n";
  }
  fmt::print("in the VM ({}, {:.1f} s from boot to power-off): exit {}\n", r->accel.rfind("kvm", 0) == 0 ? "KVM" : "TCG",
             r->seconds, r->exit_code);
  return r->exit_code;
}

// --retry-invalid, or ROCELAB_RETRY_INVALID=1 where it can apply: a split run's parts and a
// --vm run decide nothing alone here (asked for them outright, it is refused).
std::optional<bool> retry_invalid(const po::variables_map& vm) {
  const bool elsewhere = vm.count("part") || vm.count("peers") || vm.count("vm");
  if (vm.count("retry-invalid")) {
    if (elsewhere) {
      std::cerr << "rocelab run: --retry-invalid is not for "
                << (vm.count("vm") ? "--vm (the guest runs once; run it again with --scale 2 x D)"
                                   : "--part (a split run's parts cannot retry alone; run every part again with "
                                     "--scale 2 x D)")
                << "\n";
      return std::nullopt;
    }
    return true;
  }
  const char* env = std::getenv("ROCELAB_RETRY_INVALID");
  const std::string v = env ? env : "";
  if (v.empty() || v == "0") return false;
  if (v != "1") {
    std::cerr << "rocelab run: ROCELAB_RETRY_INVALID=" << v << ": 1 (retry an invalid run once at 2 x D) or 0\n";
    return std::nullopt;
  }
  return !elsewhere;
}

int cmd_run(const po::variables_map& vm, const Globals& g) {
  auto s = load(vm, g);
  if (!s) return kExitBadInput;
  if (vm.count("scale")) {
    if (auto err = model::rescale(*s, vm["scale"].as<double>())) {
      std::cerr << "rocelab run: --scale: " << *err << "\n";
      return kExitBadInput;
    }
  }
  if (vm.count("seed")) {
    // The file's own range (0 .. 2^63-1), so the resolved dump of this run loads back.
    const int64_t seed = vm["seed"].as<int64_t>();
    if (seed < 0) {
      std::cerr << "rocelab run: --seed " << seed << ": a seed is 0 or more\n";
      return kExitBadInput;
    }
    s->seed = uint64_t(seed);
  }
  const auto retry = retry_invalid(vm);
  if (!retry) return kExitBadInput;
  run::RunOptions opts;
  opts.job = launcher_job();
  if (vm.count("part") || vm.count("peers")) {
    if (vm.count("vm") || vm.count("model-only")) {
      std::cerr << "rocelab run: --part runs this machine's share of a split fabric; not with --vm or --model-only\n";
      return kExitBadInput;
    }
    auto split = split_option(vm, "run");
    if (!split) return kExitBadInput;
    opts.split = std::move(*split);
    if (vm.count("part-wait")) {
      const double w = vm["part-wait"].as<double>();
      if (!(w >= 1 && w <= 86400)) {
        std::cerr << "rocelab run: --part-wait " << w << ": seconds from 1 to 86400\n";
        return kExitBadInput;
      }
      opts.split_wait_ms = int64_t(w * 1000);
    }
    auto key = run_key(vm);
    if (!key) return kExitBadInput;
    opts.run_key = std::move(*key);
    opts.insecure_no_key = vm.count("insecure-no-key") > 0;
    if (opts.run_key.empty() && !opts.insecure_no_key) {
      // Without a key any local user of a part's machine could claim that part before the
      // real one, forge its figures or stop the run: refused unless asked for by name.
      std::cerr << "rocelab run: a split run needs a run key: give every part --run-key FILE or ROCELAB_RUN_KEY "
                   "(head -c 32 /dev/urandom | base64 > key; chmod 600 key; docs/multi-machine.md), or "
                   "--insecure-no-key to trust the --peers addresses alone\n";
      return kExitBadInput;
    }
    if (!opts.run_key.empty() && opts.insecure_no_key) {
      std::cerr << "rocelab run: --insecure-no-key with a run key: give one or the other\n";
      return kExitBadInput;
    }
    if (opts.insecure_no_key)
      std::cerr << "rocelab run: --insecure-no-key: the rendezvous trusts the --peers addresses alone (whoever sends "
                   "from one may join)\n";
  } else if (vm.count("part-wait") || vm.count("run-key") || vm.count("insecure-no-key")) {
    std::cerr << "rocelab run: "
              << (vm.count("part-wait") ? "--part-wait" : vm.count("run-key") ? "--run-key" : "--insecure-no-key")
              << " goes with --part\n";
    return kExitBadInput;
  }
  if (vm.count("vm")) return run_vm(vm, *s);  // the guest chooses its own D for `scale: auto`
  if (s->scale_auto) {
    auto ch = choose_auto_scale(*s, vm, "run", vm.count("model-only") > 0);
    if (!ch) return ch.error().exit_code();
    if (!ch->empty()) opts.notes.push_back(*ch);
  }
  const auto port = metrics_port(vm, "run");
  if (!port) return kExitBadInput;
  opts.metrics_port = *port;
  opts.scenario_path = vm["scenario"].as<std::string>();
  if (vm.count("out")) opts.out_dir = vm["out"].as<std::string>();
  opts.model_only = vm.count("model-only") > 0;
  if (vm.count("retry-of")) opts.retry_of = vm["retry-of"].as<std::string>();
  opts.cancel = &g_cancel;
  bool drew = false;
  if (!g.json) opts.meter = terminal_meter(drew);
  catch_signals();
  spdlog::info("run {}: {}", s->name, summary_line(*s));
  run::RunReport rep;
  if (*retry) {
    const std::string out = opts.out_dir;
    rep = run::run_scenario_retrying(
        *s, opts, [&](const run::RunReport&) { return out.empty() ? out : out + "-2xD"; },
        [&](const std::string& why) {
          if (drew) fmt::print(stderr, "\n");
          drew = false;
          spdlog::warn("{}", why);
        });
  } else {
    rep = run::run_scenario(*s, opts);
  }
  if (drew) fmt::print(stderr, "\n");
  if (g.json) {
    ordered_json j{{"run_dir", rep.run_dir}, {"outcome", rep.outcome}, {"exit_code", rep.exit_code}, {"class", class_name(rep.exit_code)},
                   {"assertions", run::assertions_json(rep.assertions)}};
    if (!rep.error.empty()) j["error"] = rep.error;
    if (g_signal.load()) j["signal"] = stopped_by(opts.split.has_value());
    std::cout << j.dump(2) << "\n";
    return rep.exit_code;
  }
  for (const auto& n : rep.notes) spdlog::warn("{}", n);
  if (!rep.table.empty()) std::cout << rep.table;
  if (!rep.assertions.empty()) {
    std::cout << "assertions\n";
    for (const auto& a : rep.assertions) {
      std::string obs = a.eval.outcome == model::Evaluation::Outcome::kError ? a.eval.error : run::observed_text(a.eval);
      fmt::print("  {:<5} {:<40} {}\n", outcome_word(a.eval.outcome), a.expect->name, obs);
    }
  }
  if (!rep.error.empty()) std::cerr << "rocelab run: " << rep.error << "\n";
  if (g_signal.load()) std::cerr << "rocelab run: " << stopped_by(opts.split.has_value()) << "\n";
  if (!rep.run_dir.empty() && !vm.count("no-report")) write_report_of(rep.run_dir, rep.held);
  if (!rep.run_dir.empty()) std::cout << "run directory: " << rep.run_dir << "\n";
  std::cout << "outcome: " << rep.outcome << " (exit " << rep.exit_code << ")\n";
  return rep.exit_code;
}

int cmd_report(const po::variables_map& vm, const Globals&) {
  if (!vm.count("run_dir")) {
    std::cerr << "rocelab report: which run directory? (rocelab report RUN_DIR)\n";
    return kExitBadInput;
  }
  run::ReportOptions ro;
  ro.run_dir = vm["run_dir"].as<std::string>();
  if (vm.count("out")) ro.out = vm["out"].as<std::string>();
  ro.plots = !vm.count("no-plots");
  auto r = run::write_report(ro);
  if (!r) {
    std::cerr << "rocelab report: " << r.error().what << "\n";
    return r.error().exit_code();
  }
  for (const auto& n : r->notes) std::cerr << "rocelab report: " << n << "\n";
  std::cout << r->html << "\n";
  for (const auto& p : r->plots) std::cout << p << "\n";
  return 0;
}

int cmd_compare(const po::variables_map& vm, const Globals& g) {
  run::CompareOptions o;
  if (vm.count("run_dirs")) o.run_dirs = vm["run_dirs"].as<std::vector<std::string>>();
  if (vm.count("out")) o.out = vm["out"].as<std::string>();
  auto r = run::write_compare(o);
  if (!r) {
    std::cerr << "rocelab compare: " << r.error().what << "\n";
    return r.error().exit_code();
  }
  if (g.json) {
    ordered_json most = ordered_json::array();
    for (const auto& c : r->most_changed)
      most.push_back({{"metric", c.metric}, {"values", c.values}, {"change", std::isinf(c.change) ? ordered_json("from 0")
                                                                                                 : ordered_json(c.change)}});
    std::cout << ordered_json{{"page", r->html}, {"scenario_differences", r->scenario_differences}, {"most_changed", most}}.dump(2)
              << "\n";
    return 0;
  }
  fmt::print("{} settings differ in the resolved scenarios; the metrics that changed most (last run against the first):\n",
             r->scenario_differences);
  for (const auto& c : r->most_changed) {
    std::string vals;
    for (double v : c.values) vals += (vals.empty() ? "" : " -> ") + fmt::format("{:.4g}", v);
    fmt::print("  {:<44} {:>10}   {}\n", c.metric,
               std::isinf(c.change) ? std::string("from 0") : fmt::format("{:+.1f} %", c.change * 100), vals);
  }
  fmt::print("page: {}\n", r->html);
  return 0;
}

// `rocelab --version`: what was built (version, commit) and what this kernel offers it, in
// one line; kvm is left out (proving it boots a guest takes seconds, `doctor` does it).
int print_version(bool json) {
  const run::Capabilities caps = run::detect_capabilities();
  struct utsname u {};
  uname(&u);
  if (json) {
    ordered_json have = ordered_json::object();
    for (const auto& c : caps.items)
      if (c.name != "kvm") have[c.name] = c.ok;
    std::cout << ordered_json{{"version", ROCELAB_VERSION}, {"commit", ROCELAB_COMMIT}, {"kernel", u.release},
                              {"features", have}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::string has, lacks;
  for (const auto& c : caps.items) {
    if (c.name == "kvm") continue;
    std::string& list = c.ok ? has : lacks;
    list += (list.empty() ? "" : " ") + c.name;
  }
  fmt::print("rocelab {} (commit {}) on Linux {}: has {}{}\n", ROCELAB_VERSION, ROCELAB_COMMIT, u.release, has,
             lacks.empty() ? "" : "; lacks " + lacks + (geteuid() ? " (not root: some probes need it)" : ""));
  return 0;
}

int cmd_doctor(const po::variables_map&, const Globals& g) {
  run::Capabilities caps = run::detect_capabilities();
  for (auto& c : caps.items)  // /dev/kvm opening proves nothing: a guest must run
    if (c.name == "kvm") {
      const run::KvmProbe k = run::probe_kvm();
      c.ok = k.ok;
      c.why = k.why;
    }
  if (g.json) {
    std::cout << ordered_json{{"ok", caps.all_required()}, {"capabilities", caps.to_json()}}.dump(2) << "\n";
  } else {
    for (const auto& c : caps.items)
      fmt::print("  {:<4} {:<13} {}{}\n", c.ok ? "yes" : "no", c.name, c.why, c.required && !c.ok ? "  [required]" : "");
    std::printf("%s\n", caps.all_required() ? "this machine can run rocelab fabrics"
                                            : "this machine lacks something rocelab fabrics need (see [required])");
    // What a missing part costs a user, where it changes what a run measures.
    if (caps.has("netem"))
      std::printf("link delay (a link's delay:): applied, each delayed link through netem in the fabric's wire "
                  "namespace; PFC headroom counts its round trip\n");
    else
      std::printf("link delay (a link's delay:): not applied, this kernel has no netem; PFC headroom, pause counts and "
                  "peak queues are those of links without propagation delay (`rocelab run --vm` applies it)\n");
  }
  return caps.all_required() ? 0 : kExitEnvironment;
}

int cmd_up(const po::variables_map& vm, const Globals& g) {
  auto s = load(vm, g);
  if (!s) return kExitBadInput;
  if (s->scale_auto)
    if (auto ch = choose_auto_scale(*s, vm, "up", false); !ch) return ch.error().exit_code();
  const auto port = metrics_port(vm, "up");
  if (!port) return kExitBadInput;
  catch_signals();
  fabric::UpOptions o;
  o.metrics_port = *port;
  o.job = launcher_job();
  if (vm.count("part") || vm.count("peers")) {
    auto split = split_option(vm, "up");
    if (!split) return kExitBadInput;
    o.split = std::move(*split);
  }
  o.scenario_path = vm["scenario"].as<std::string>();
  o.scenario_record = run::resolved_json(*s, false).dump();  // `inject` attaches with it (and recomputes what is derived)
  o.cancel = &g_cancel;
  o.progress = [](const std::string& what) { spdlog::info("up: {}", what); };
  auto t = fabric::LocalTestbed::up(*s, o);
  if (!t) {
    std::cerr << "rocelab up: " << t.error().what << "\n";
    return t.error().exit_code();
  }
  (*t)->keep_running();  // the fabric outlives this command: 'rocelab down' takes it away
  const fabric::Fabric& f = *(*t)->fabric();
  // What this machine holds: all of it, or its part of a split fabric.
  const auto& part = f.plan().part;
  size_t routes = 0, namespaces = 0, links = 0;
  for (size_t x = 0; x < f.plan().nodes.size(); ++x)
    if (part.has(x)) routes += f.plan().nodes[x].routes.size(), ++namespaces;
  for (const auto& v : f.plan().veths) links += part.has(v.a_node) || part.has(v.b_node);
  for (const auto& n : f.notes()) spdlog::warn("{}", n);
  if (!f.delay_summary().empty()) spdlog::info("{}", f.delay_summary());
  if (g.json) {
    ordered_json out{{"instance", s->name}, {"namespaces", namespaces}, {"links", links}, {"routes", routes},
                     {"seconds", f.up_seconds()}, {"agent_start_seconds", f.agent_seconds()},
                     {"state_file", fabric::state_path(s->name)}};
    if (part.split()) out["split"] = {{"part", part.index}, {"parts", part.parts}, {"cut_links", part.cuts.size()}};
    std::cout << out.dump(2) << "\n";
  } else {
    std::printf("%s is up: %zu namespaces, %zu links, %zu routes in %.3f s\n", s->name.c_str(), namespaces, links,
                routes, f.up_seconds());
    if (part.split())
      std::printf("  part %zu of %zu: %zu links cut to the other machines as VXLAN ports\n", part.index, part.parts,
                  part.cuts.size());
    std::printf("  rocelab status %s          # nodes, interfaces, addresses, counters\n", s->name.c_str());
    const fabric::NodePlan* shell = nullptr;  // this machine's first host, else its first node
    for (size_t x = 0; x < f.plan().nodes.size(); ++x)
      if (part.has(x) && (!shell || (!shell->host && f.plan().nodes[x].host))) shell = &f.plan().nodes[x];
    if (shell) std::printf("  ip netns exec %s bash   # a shell on a node\n", shell->netns.c_str());
    std::printf("  rocelab down %s            # take it away\n", s->name.c_str());
  }
  return 0;
}

// A running fabric's namespaces, state files and BPF maps belong to root: say so, rather
// than report a fabric we could not look at as not up.
bool require_root(const char* cmd) {
  if (sys::is_root()) return true;
  std::cerr << "rocelab " << cmd << ": permission denied: a running fabric's namespaces, state and BPF maps "
            << "belong to root (run it with sudo)\n";
  return false;
}

// down's NAME, or the only instance that is up; else nullopt, said: exit 0 when none is up
// (down is idempotent), 3 when several are (it must be told which).
std::optional<std::string> instance_arg(const po::variables_map& vm, const char* cmd, int& exit_code) {
  if (vm.count("name")) return vm["name"].as<std::string>();
  auto all = fabric::list_instances();
  if (all.size() == 1) return all.front();
  if (all.empty()) std::cerr << "rocelab " << cmd << ": no instance is up\n";
  else {
    std::cerr << "rocelab " << cmd << ": several instances are up; name one:";
    for (const auto& n : all) std::cerr << " " << n;
    std::cerr << "\n";
  }
  exit_code = all.empty() ? 0 : kExitBadInput;
  return std::nullopt;
}

// down --slurm-job ID: every instance brought up inside that job (a Slurm epilog's line).
constexpr double kJobLockWaitS = 30;
int down_job(const po::variables_map& vm, const Globals& g) {
  const std::string job = "slurm:" + vm["slurm-job"].as<std::string>();
  if (vm.count("name") || !fabric::is_job_name(job)) {
    std::cerr << "rocelab down: --slurm-job takes a Slurm job id (digits, $SLURM_JOB_ID in an epilog) and no NAME\n";
    return kExitBadInput;
  }
  // An epilog must never hang: one deadline for the job's every instance (a stuck holder is
  // named, and Slurm drains the node on the epilog's failure rather than waiting forever).
  const double wait_s = vm.count("lock-wait") ? vm["lock-wait"].as<double>() : kJobLockWaitS;
  if (!(wait_s >= 0 && wait_s <= 86400)) {
    std::cerr << "rocelab down: --lock-wait " << wait_s << ": seconds from 0 to 86400\n";
    return kExitBadInput;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(wait_s * 1000));
  ordered_json out = ordered_json::array();
  int rc = 0;
  for (const auto& name : fabric::instances_of_job(job)) {
    std::string why;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    auto rep = fabric::down_instance(name, why, std::max<int64_t>(left.count(), 0));
    if (!rep) {
      std::cerr << "rocelab down: " << name << ": " << why << "\n";
      rc = kExitEnvironment;
      continue;
    }
    out.push_back({{"instance", name}, {"was_up", rep->found}, {"namespaces_removed", rep->namespaces}});
    if (!g.json) std::printf("%s (%s) is down: %zu namespaces removed\n", name.c_str(), job.c_str(), rep->namespaces);
  }
  if (g.json) std::cout << out.dump(2) << "\n";
  else if (out.empty() && rc == 0) std::cout << "no instance of " << job << " is up: nothing to do\n";
  return rc;
}

int cmd_down(const po::variables_map& vm, const Globals& g) {
  if (vm.count("slurm-job")) return down_job(vm, g);
  int rc = 0;
  auto name = instance_arg(vm, "down", rc);
  if (!name) return rc;
  std::string why;
  int64_t wait_ms = -1;  // an `up` still running: wait for it, unless told how long
  if (vm.count("lock-wait")) {
    const double w = vm["lock-wait"].as<double>();
    if (!(w >= 0 && w <= 86400)) {
      std::cerr << "rocelab down: --lock-wait " << w << ": seconds from 0 to 86400\n";
      return kExitBadInput;
    }
    wait_ms = int64_t(w * 1000);
  }
  auto rep = fabric::down_instance(*name, why, wait_ms);
  if (!rep) {
    std::cerr << "rocelab down: " << why << "\n";
    return model::is_instance_name(*name) ? kExitEnvironment : kExitBadInput;
  }
  if (g.json)
    std::cout << ordered_json{{"instance", *name}, {"was_up", rep->found}, {"namespaces_removed", rep->namespaces},
                              {"seconds", rep->seconds}, {"agent_stop_seconds", rep->agent_seconds}}
                     .dump(2)
              << "\n";
  else if (!rep->found)
    std::cout << *name << " is not up: nothing to do\n";
  else
    std::printf("%s is down: %zu namespaces removed in %.3f s\n", name->c_str(), rep->namespaces, rep->seconds);
  return 0;
}

ordered_json status_json(const fabric::InstanceStatus& st) {
  ordered_json j{{"instance", st.instance}, {"state", st.state},     {"pid", st.pid},
                 {"started", st.started},   {"scenario", st.scenario}, {"links", st.links},
                 {"agent", {{"pid", st.agent_pid}, {"running", st.agent_running}}}};
  if (!st.job.empty()) j["job"] = st.job;
  ordered_json nodes = ordered_json::array();
  for (const auto& n : st.nodes) {
    ordered_json nj{{"node", n.node}, {"namespace", n.netns}, {"present", n.present}};
    if (!n.error.empty()) nj["error"] = n.error;
    ordered_json ifs = ordered_json::array();
    for (const auto& i : n.interfaces)
      ifs.push_back({{"name", i.name}, {"peer", i.peer}, {"mac", i.mac}, {"mtu", i.mtu}, {"state", i.state},
                     {"admin_up", i.admin_up}, {"carrier", i.carrier},
                     {"addresses", i.addresses},
                     {"counters", {{"rx_packets", i.rx_packets}, {"tx_packets", i.tx_packets},
                                   {"rx_bytes", i.rx_bytes}, {"tx_bytes", i.tx_bytes},
                                   {"rx_dropped", i.rx_dropped}, {"tx_dropped", i.tx_dropped}}}});
    nj["interfaces"] = ifs;
    nodes.push_back(nj);
  }
  j["nodes"] = nodes;
  return j;
}

// The instance named by --instance, or the only one up; else nullopt, said, with the exit code
// that means it in every command: 4 when none is up (nothing on this machine to act on), 3
// when several are (the command must name one).
std::optional<std::string> instance_option(const po::variables_map& vm, const char* cmd, int& exit_code) {
  if (vm.count("instance")) return vm["instance"].as<std::string>();
  auto all = fabric::list_instances();
  if (all.size() == 1) return all.front();
  std::cerr << "rocelab " << cmd << ": " << (all.empty() ? "no instance is up" : "several instances are up; name one with --instance")
            << "\n";
  exit_code = all.empty() ? kExitEnvironment : kExitBadInput;
  return std::nullopt;
}

ordered_json prio_json(uint32_t q, const fabric::PrioStats& s) {
  ordered_json drops = ordered_json::object();
  for (size_t r = 0; r < size_t(RL_DROP__USED); ++r) drops[rl_drop_names[r]] = s.c.drops[r];
  return {{"prio", q}, {"tx_packets", s.c.tx_packets}, {"tx_bytes", s.c.tx_bytes},
          {"rx_packets", s.c.rx_packets}, {"rx_bytes", s.c.rx_bytes}, {"ecn_marked", s.c.ecn_marked},
          {"depth_after", s.c.depth_after}, {"depth_max", s.c.depth_max}, {"pg_runs_full", s.c.pg_runs_full},
          {"pfc_tx", s.c.pfc_tx}, {"pfc_rx", s.c.pfc_rx}, {"pfc_refresh_tx", s.c.pfc_refresh_tx},
          {"pfc_xon_tx", s.c.pfc_xon_tx}, {"pfc_xon_rx", s.c.pfc_xon_rx}, {"corrupted", s.c.corrupted},
          {"drops", drops}, {"shaper", {{"tx_bytes", s.shaper_bytes}, {"tx_packets", s.shaper_packets},
                                        {"drops", s.shaper_drops}, {"backlog_bytes", s.backlog_bytes}}},
          {"depth_bytes", s.depth_bytes}};
}

void print_stats_table(const std::vector<fabric::PortStats>& stats) {
  // PFC frames: all of them, and of those the XONs (the rest are XOFFs).
  fmt::print("{:<18} {:>4} {:>12} {:>14} {:>12} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>14} {:>10}\n",
             "port", "prio", "tx_pkts", "tx_bytes", "rx_pkts", "ecn_mark", "qfull", "wred", "headroom", "buffer", "fault",
             "pfc_tx", "xon_tx", "pfc_rx", "xon_rx", "shaper_bytes", "backlog");
  for (const auto& p : stats)
    for (uint32_t q = 0; q < RL_NUM_PRIO; ++q) {
      const auto& s = p.prio[q];
      uint64_t dropped = 0;
      for (size_t r = 0; r < RL_DROP__USED; ++r) dropped += s.c.drops[r];
      if (!s.c.tx_packets && !s.c.rx_packets && !s.shaper_bytes && !dropped && !s.c.pfc_tx && !s.c.pfc_rx)
        continue;  // a quiet priority
      fmt::print("{:<18} {:>4} {:>12} {:>14} {:>12} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>14} {:>10}\n",
                 p.node + ":" + p.port, q, s.c.tx_packets, s.c.tx_bytes, s.c.rx_packets, s.c.ecn_marked,
                 s.c.drops[RL_DROP_QUEUE_FULL], s.c.drops[RL_DROP_WRED], s.c.drops[RL_DROP_HEADROOM],
                 s.c.drops[RL_DROP_BUFFER], s.c.drops[RL_DROP_FAULT], s.c.pfc_tx, s.c.pfc_xon_tx, s.c.pfc_rx,
                 s.c.pfc_xon_rx, s.shaper_bytes, s.backlog_bytes);
    }
}

// The agent's side of PFC: what it paused, how fast, and whether the pauses held.
void print_agent_line(const fabric::AgentFigures& a) {
  fmt::print("agent: {} pauses, {:.1f} ms paused in all, reaction p50 {:.0f} us p99 {:.0f} us; sent while paused: {} "
             "within one frame per pause, {} leaked\n",
             a.pauses, double(a.paused_ns) / 1e6, double(a.reaction_ns.p50) / 1e3, double(a.reaction_ns.p99) / 1e3,
             a.pause_tail_packets, a.leaked_packets);
  for (const auto& l : a.leaks)
    fmt::print("  leak: {}:{} priority {}, {} packets, {} bytes\n", l.node, l.port, l.prio, l.packets, l.bytes);
}

int cmd_stats(const po::variables_map& vm, const Globals& g) {
  int rc = 0;
  auto name = instance_option(vm, "stats", rc);
  if (!name) return rc;
  if (!model::is_instance_name(*name)) {
    std::cerr << "rocelab stats: '" << name->substr(0, 64) << "' is not an instance name\n";
    return kExitBadInput;
  }
  if (!require_root("stats")) return kExitEnvironment;
  const std::string only = vm.count("target") ? vm["target"].as<std::string>() : "";
  auto t = fabric::LocalTestbed::attach(*name);
  auto ports = t ? (*t)->select(only) : Result<std::vector<fabric::PortRef>>(t.error());
  auto stats = ports ? (*t)->counters(*ports) : Result<std::vector<fabric::PortStats>>(ports.error());
  if (!stats) {
    std::cerr << "rocelab stats: " << stats.error().what << "\n";
    return stats.error().exit_code();
  }
  auto agent = (*t)->agent_figures();
  if (g.json) {
    ordered_json out{{"instance", *name}, {"ports", ordered_json::array()}};
    for (const auto& p : *stats) {
      ordered_json prios = ordered_json::array();
      for (uint32_t q = 0; q < RL_NUM_PRIO; ++q) prios.push_back(prio_json(q, p.prio[q]));
      out["ports"].push_back({{"node", p.node}, {"port", p.port}, {"ifindex", p.ifindex}, {"priorities", prios}});
    }
    if (agent && *agent) out["agent"] = fabric::to_json(**agent);
    else if (!agent) out["agent"] = {{"error", agent.error().what}};
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  print_stats_table(*stats);
  if (!agent) fmt::print("agent: {}\n", agent.error().what);
  else if (*agent && only.empty()) print_agent_line(**agent);
  return 0;
}

int cmd_top(const po::variables_map& vm, const Globals&) {
  int rc = 0;
  auto name = vm.count("name") ? std::optional<std::string>(vm["name"].as<std::string>()) : instance_option(vm, "top", rc);
  if (!name) return rc;
  if (!model::is_instance_name(*name)) {
    std::cerr << "rocelab top: '" << name->substr(0, 64) << "' is not an instance name\n";
    return kExitBadInput;
  }
  const double interval = vm["interval"].as<double>();
  const int count = vm["count"].as<int>();
  const int rows = vm["rows"].as<int>();
  if (!(interval >= 0.1 && interval <= 3600) || count < 0 || rows < 1) {
    std::cerr << "rocelab top: --interval is 0.1-3600 s, --count 0 or more, --rows 1 or more\n";
    return kExitBadInput;
  }
  if (!require_root("top")) return kExitEnvironment;
  catch_signals();
  return run_top(*name, interval, count, size_t(rows), g_cancel);
}

int cmd_pause(const po::variables_map& vm, const Globals&) {
  int rc = 0;
  auto name = instance_option(vm, "pause", rc);
  if (!name) return rc;
  if (!model::is_instance_name(*name) || !vm.count("target") || !vm.count("prio")) {
    std::cerr << "rocelab pause: usage: rocelab pause [--instance NAME] [--resume] NODE:PORT --prio P\n";
    return kExitBadInput;
  }
  const bool resume = vm.count("resume") > 0;
  const int prio = vm["prio"].as<int>();
  if (prio < 0 || prio > 7) {
    std::cerr << "rocelab pause: priority must be 0..7\n";
    return kExitBadInput;
  }
  if (!require_root("pause")) return kExitEnvironment;
  auto t = fabric::LocalTestbed::attach(*name);
  auto port = t ? (*t)->port(vm["target"].as<std::string>()) : Result<fabric::PortRef>(t.error());
  // A manual pause stays: the Change is not undone (`pause --resume` is its undo).
  auto change = port ? (*t)->set_pause(*port, uint32_t(prio), !resume) : Result<fabric::Change>(port.error());
  if (!change) {
    std::cerr << "rocelab pause: " << change.error().what << "\n";
    return change.error().exit_code();
  }
  std::cout << vm["target"].as<std::string>() << " priority " << prio << (resume ? " resumed" : " paused") << "\n";
  return 0;
}

// SONiC's `pfcwd show stats`: every watched queue that saw a storm, its status and counts
// while stormed (all storms / the last one). -a (--all) shows every watched queue.
int cmd_pfcwd(const po::variables_map& vm, const Globals& g) {
  const auto what = vm.count("what") ? vm["what"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (what != std::vector<std::string>{"show", "stats"}) {
    std::cerr << "rocelab pfcwd: usage: rocelab pfcwd show stats [--all] [--instance NAME]\n";
    return kExitBadInput;
  }
  int rc = 0;
  auto name = instance_option(vm, "pfcwd", rc);
  if (!name) return rc;
  if (!model::is_instance_name(*name)) {
    std::cerr << "rocelab pfcwd: '" << name->substr(0, 64) << "' is not an instance name\n";
    return kExitBadInput;
  }
  if (!require_root("pfcwd")) return kExitEnvironment;
  auto t = fabric::LocalTestbed::attach(*name);
  auto agent = t ? (*t)->agent_figures() : Result<std::optional<fabric::AgentFigures>>(t.error());
  if (!agent) {
    std::cerr << "rocelab pfcwd: " << agent.error().what << "\n";
    return agent.error().exit_code();
  }
  if (!*agent || (*agent)->watchdog.empty()) {
    std::cerr << "rocelab pfcwd: instance " << *name << " runs no PFC watchdog (qos.pfc.watchdog)\n";
    return kExitBadInput;
  }
  const bool all = vm.count("all") > 0;
  if (g.json) {
    ordered_json out = fabric::to_json(**agent);
    std::cout << ordered_json{{"instance", *name}, {"queues", out["watchdog"]}, {"events", out["wd_events"]}}.dump(2) << "\n";
    return 0;
  }
  constexpr auto row = FMT_STRING("{:<20} {:<11} {:>23} {:>19} {:>19} {:>19} {:>19}\n");
  fmt::print(row, "QUEUE", "STATUS", "STORM DETECTED/RESTORED", "TX OK/DROP", "RX OK/DROP", "TX LAST OK/DROP",
             "RX LAST OK/DROP");
  for (const auto& q : (*agent)->watchdog) {
    if (!all && !q.detected) continue;
    auto pair = [](uint64_t a, uint64_t b) { return fmt::format("{}/{}", a, b); };
    fmt::print(row, fmt::format("{}:{}:{}", q.node, q.port, q.prio), q.stormed ? "stormed" : "operational",
               pair(q.detected, q.restored), pair(q.tx_ok, q.tx_drop), pair(q.rx_ok, q.rx_drop),
               pair(q.last_tx_ok, q.last_tx_drop), pair(q.last_rx_ok, q.last_rx_drop));
  }
  return 0;
}

int cmd_inject(const po::variables_map& vm, const Globals& g) {
  int rc = 0;
  auto name = instance_option(vm, "inject", rc);
  if (!name) return rc;
  if (vm.count("clear")) {
    if (vm.count("kind")) {
      std::cerr << "rocelab inject: --clear takes no fault (it puts back everything faults left in force)\n";
      return kExitBadInput;
    }
    if (!require_root("inject")) return kExitEnvironment;
    auto done = run::clear_faults(*name);
    if (!done) {
      std::cerr << "rocelab inject --clear: " << done.error().what << "\n";
      return done.error().exit_code();
    }
    if (g.json) std::cout << ordered_json{{"instance", *name}, {"cleared", *done}}.dump(2) << "\n";
    else if (done->empty()) std::cout << *name << ": no fault was in force\n";
    else
      for (const auto& d : *done) std::cout << *name << ": " << d << "\n";
    return 0;
  }
  if (!vm.count("kind") || !vm.count("target")) {
    std::cerr << "rocelab inject: usage: rocelab inject [--instance NAME] KIND TARGET [KEY=VALUE ...] | --clear\n"
                 "(kinds: " << fault::kinds().list() << "; see rocelab help kinds)\n";
    return kExitBadInput;
  }
  run::InjectRequest r{*name, vm["kind"].as<std::string>(), vm["target"].as<std::string>(), {}};
  if (vm.count("param"))
    for (const auto& p : vm["param"].as<std::vector<std::string>>()) {
      const size_t eq = p.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::cerr << "rocelab inject: expected KEY=VALUE, got '" << p.substr(0, 64) << "'\n";
        return kExitBadInput;
      }
      r.params.emplace_back(p.substr(0, eq), p.substr(eq + 1));
    }
  if (!require_root("inject")) return kExitEnvironment;
  catch_signals();
  auto rep = run::inject(r, [](const std::string& l) { spdlog::info("inject: {}", l); }, &g_cancel);
  if (!rep) {
    std::cerr << "rocelab inject: " << rep.error().what << "\n";
    return rep.error().exit_code();
  }
  if (g.json) {
    ordered_json ev = ordered_json::array();
    for (const auto& h : rep->happened)
      ev.push_back({{"t_s", h.t_s}, {"type", h.type}, {"target", h.target}, {"action", h.begin ? "start" : "end"}, {"ok", h.ok}});
    std::cout << ordered_json{{"instance", *name}, {"events", ev}, {"in_force", rep->left_in_force}}.dump(2) << "\n";
  } else {
    std::cout << r.kind << " on " << r.target << ": "
              << (rep->left_in_force ? "in force; 'rocelab inject --clear" + std::string(vm.count("instance") ? " --instance " + *name : "") + "' ends it"
                                     : "started and ended (" + std::to_string(rep->happened.size()) + " events)")
              << "\n";
  }
  return 0;
}

int cmd_agent(const po::variables_map& vm, const Globals&) {
  if (!vm.count("go-fd")) {
    std::cerr << "rocelab agent: started by 'rocelab up' only (it hands the agent the fabric)\n";
    return kExitBadInput;
  }
  catch_signals();
  std::string why;
  agent::Options o{vm["go-fd"].as<int>(), &g_cancel};
  if (!agent::run(o, why)) {
    std::cerr << "rocelab agent: " << why << "\n";
    return kExitEnvironment;
  }
  return 0;
}

int cmd_status(const po::variables_map& vm, const Globals& g) {
  std::vector<std::string> names;
  if (vm.count("name")) names.push_back(vm["name"].as<std::string>());
  else names = fabric::list_instances();
  if (std::all_of(names.begin(), names.end(), model::is_instance_name) && !names.empty() && !require_root("status"))
    return kExitEnvironment;
  const bool detail = vm.count("name") > 0;
  ordered_json all = ordered_json::array();
  for (const auto& name : names) {
    std::string why;
    auto st = fabric::instance_status(name, detail, why);
    if (!st) {
      std::cerr << "rocelab status: " << why << "\n";
      return model::is_instance_name(name) ? kExitEnvironment : kExitBadInput;
    }
    if (g.json) {
      all.push_back(status_json(*st));
      continue;
    }
    size_t present = 0;
    for (const auto& n : st->nodes) present += n.present;
    std::printf("%s: %s, %zu/%zu namespaces, %zu links, started %s by pid %d from %s\n", st->instance.c_str(),
                st->state.c_str(), present, st->nodes.size(), st->links, st->started.c_str(), st->pid,
                st->scenario.c_str());
    if (!st->job.empty()) std::printf("  inside %s ('rocelab down --slurm-job' in its epilog takes it away)\n", st->job.c_str());
    if (st->state != "up") std::printf("  (an 'up' is running, or was killed: 'rocelab down %s' cleans up)\n", name.c_str());
    if (st->agent_pid)
      std::printf("  agent: pid %d, %s\n", st->agent_pid,
                  st->agent_running ? "running" : "NOT running: PFC is not acted on ('rocelab down' and up again)");
    for (const auto& n : st->nodes) {
      if (!detail) break;
      fmt::print("  {:<12} {}{}\n", n.node, n.netns, n.present ? "" : "  (missing)");
      if (!n.error.empty()) fmt::print("    error: {}\n", n.error);
      for (const auto& i : n.interfaces) {
        std::string addrs;
        for (const auto& a : i.addresses) addrs += (addrs.empty() ? "" : ",") + a;
        fmt::print("    {:<10} {:<5} mtu {:<5} {:<17} {:<20} -> {:<16} rx {} tx {} pkts\n", i.name, i.state, i.mtu, i.mac,
                   addrs, i.peer.empty() ? "-" : i.peer, i.rx_packets, i.tx_packets);
      }
    }
  }
  if (g.json) std::cout << (detail && all.size() == 1 ? all[0] : all).dump(2) << "\n";
  else if (names.empty()) std::cout << "no instance is up\n";
  return 0;
}

}  // namespace

ordered_json qp_json(const engine::QpReport& q) {
  return {{"qpn", q.qpn}, {"udp_sport", q.sport}, {"tx_packets", q.rc.tx_packets}, {"retransmitted", q.rc.retransmitted},
          {"timeouts", q.rc.timeouts}, {"naks_sent", q.rc.naks_sent}, {"naks_received", q.rc.naks_received},
          {"acks_sent", q.rc.acks_sent}, {"duplicates", q.rc.duplicates}, {"out_of_sequence", q.rc.out_of_sequence},
          {"rate_bps", q.rate_bps}, {"alpha", q.alpha}, {"dcqcn_cuts", q.cuts}, {"pacing_error", q.pacing_error}};
}

ordered_json endpoint_json(const engine::EndpointStats& e) {
  return {{"rx_packets", e.rx_packets}, {"bad_icrc", e.bad_icrc}, {"malformed", e.malformed},
          {"unknown_qp", e.unknown_qp}, {"ce_marked", e.ce_marked}, {"cnp_sent", e.cnp_sent},
          {"cnp_received", e.cnp_received}, {"send_blocked", e.send_blocked}};
}

int cmd_perf(const po::variables_map& vm, const Globals& g) {
  auto s = load(vm, g);
  if (!s) return kExitBadInput;
  if (!vm.count("from") || !vm.count("to")) {
    std::cerr << "rocelab perf: name both ends: --from HOST[:NIC] --to HOST[:NIC]\n";
    return kExitBadInput;
  }
  workload::PerfOptions o;
  o.from = vm["from"].as<std::string>();
  o.to = vm["to"].as<std::string>();
  const std::string verb = vm["verb"].as<std::string>();
  if (verb != "write" && verb != "send") {
    std::cerr << "rocelab perf: --verb is write or send\n";
    return kExitBadInput;
  }
  o.write = verb == "write";
  auto size = model::parse_bytes(vm["size"].as<std::string>());
  if (!size || size.value->n == 0 || size.value->n > (1u << 30)) {
    std::cerr << "rocelab perf: --size: " << (size ? "between 1 B and 1 GiB" : size.error) << "\n";
    return kExitBadInput;
  }
  o.size = uint32_t(size.value->n);
  o.iterations = vm["iters"].as<uint64_t>();
  o.seconds = vm.count("seconds") ? vm["seconds"].as<double>() : 0;
  if (o.seconds > 0 && vm["iters"].defaulted()) o.iterations = 0;  // --seconds alone: no cap
  o.qps = vm["qps"].as<int>();
  o.tx_depth = vm["tx-depth"].as<uint32_t>();
  o.mtu = vm.count("mtu") ? vm["mtu"].as<uint32_t>() : 0;
  if (vm.count("dcqcn")) o.dcqcn = vm["dcqcn"].as<std::string>();
  const std::string engine = vm.count("engine") ? vm["engine"].as<std::string>() : s->hosts.engine;
  if (engine != "builtin" && engine != "rxe") {
    std::cerr << "rocelab perf: --engine is builtin or rxe\n";
    return kExitBadInput;
  }
  if (geteuid() != 0) {
    std::cerr << "rocelab perf: needs root (its sockets live in the fabric's namespaces)\n";
    return kExitEnvironment;
  }
  auto t = fabric::LocalTestbed::attach(s->name);
  if (!t) {
    std::cerr << "rocelab perf: " << t.error().what << " (bring it up first: rocelab up " << s->file << ")\n";
    return t.error().exit_code();
  }
  if (s->scale_auto) {  // the D `up` chose, from the scenario it recorded
    const double d = recorded_scale(s->name);
    if (auto err = d > 0 ? model::rescale(*s, d) : std::optional<std::string>("no D recorded for " + s->name)) {
      std::cerr << "rocelab perf: scale: auto: " << *err << "\n";
      return kExitEnvironment;
    }
  }
  if (engine == "rxe")
    // --seconds, or by default 4 s (perftest's -D); --iters given alone: that many messages (-n).
    return run_perftest(*s, **t, {o.from, o.to, o.size, o.seconds > 0 ? o.seconds : 4,
                                  o.seconds > 0 || vm["iters"].defaulted() ? 0 : o.iterations, o.qps, g.json});
  if (s->hosts.engine == "rxe") {
    std::cerr << "rocelab perf: this fabric's hosts are rxe's (hosts.engine: rxe): --engine rxe\n";
    return kExitBadInput;
  }
  const auto plan = fabric::plan_kernel(*s);
  auto r = workload::run_perf(*s, plan, **t, o);
  if (!r) {
    std::cerr << "rocelab perf: " << r.error().what << "\n";
    return r.error().exit_code();
  }
  const double retrans = [&] {
    uint64_t n = 0;
    for (const auto& q : r->requester) n += q.rc.retransmitted;
    return double(n);
  }();
  if (g.json) {
    ordered_json req = ordered_json::array(), resp = ordered_json::array();
    for (const auto& q : r->requester) req.push_back(qp_json(q));
    for (const auto& q : r->responder) resp.push_back(qp_json(q));
    std::cout << ordered_json{{"test", r->verb + " BW"}, {"engine", "builtin"}, {"from", r->from}, {"to", r->to},
                              {"bytes", r->size}, {"iterations", r->messages}, {"qps", r->qps}, {"mtu", r->mtu},
                              {"dcqcn", r->dcqcn}, {"scale", r->scale}, {"seconds", r->seconds},
                              {"bw_peak_gbps", r->peak_bps / 1e9}, {"bw_average_gbps", r->avg_bps / 1e9},
                              {"bw_average_physical_gbps", r->avg_bps * r->scale / 1e9},
                              {"msg_rate_mpps", r->seconds > 0 ? double(r->messages) / r->seconds / 1e6 : 0},
                              {"errors", r->errors}, {"verified_bytes", r->verified_bytes},
                              {"requester", {{"endpoint", endpoint_json(r->from_stats)}, {"qps", req}}},
                              {"responder", {{"endpoint", endpoint_json(r->to_stats)}, {"qps", resp}}}}
                     .dump(2)
              << "\n";
  } else {
    const char* rule = "---------------------------------------------------------------------------------------\n";
    fmt::print("{}                    {} BW Test (rocelab, backend {})\n", rule, r->verb, s->hosts.engine);
    fmt::print(" {} -> {}\n Number of qps   : {}\t\tTransport type : RoCEv2 (UDP 4791)\n", r->from, r->to, r->qps);
    fmt::print(" Connection type : RC\t\tMtu            : {}[B]\n CC              : DCQCN {}\tScale D        : {:g}\n{}",
               r->mtu, r->dcqcn, r->scale, rule);
    fmt::print(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n");
    fmt::print(" {:<10} {:<14} {:<18.6f} {:<20.6f} {:.6f}\n{}", r->size, r->messages, r->peak_bps / 1e9,
               r->avg_bps / 1e9, r->seconds > 0 ? double(r->messages) / r->seconds / 1e6 : 0, rule);
    fmt::print(" emulated figures; physical = x D: {:.2f} Gb/s average. retransmitted {:.0f}, CNPs {}, bad ICRC {}, "
               "verified {} B\n",
               r->avg_bps * r->scale / 1e9, retrans, r->to_stats.cnp_sent, r->from_stats.bad_icrc + r->to_stats.bad_icrc,
               r->verified_bytes);
  }
  return r->errors ? run::kExitInvalid : 0;
}

void write_report_of(const std::string& run_dir, const std::shared_ptr<sys::HeldDir>& held) {
  run::ReportOptions ro;
  ro.run_dir = held ? held->at() : run_dir;  // through the directory the run held, not its name again
  if (auto r = run::write_report(ro)) {
    for (const auto& n : r->notes) spdlog::warn("report: {}", n);
    std::cout << "report: " << (held ? run_dir + "/report.html" : r->html) << "\n";
  } else {
    spdlog::warn("report: {}", r.error().what);  // the run's outcome stands; `rocelab report` can retry
  }
}

bool positional_option(const std::string& n) {
  static const char* kPositional[] = {"scenario", "name", "target", "kind", "param", "what", "run_dir",
                                      "run_dirs", "action", "lab", "n", "shell", "format", "file"};
  return std::find(std::begin(kPositional), std::end(kPositional), n) != std::end(kPositional);
}

void catch_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

const std::atomic<bool>* cancel_flag() { return &g_cancel; }

std::function<void(double, const std::string&)> terminal_meter(bool& drew) {
  if (!isatty(STDERR_FILENO)) return {};  // log lines when piped or in CI
  return [&drew](double done, const std::string& line) {
    const int w = 30, n = std::clamp(int(done * w + 0.5), 0, w);
    fmt::print(stderr, "\r[{}{}] {:3.0f}% {}\x1b[K", std::string(size_t(n), '#'), std::string(size_t(w - n), '.'),
               done * 100, line);
    std::fflush(stderr);
    drew = true;
  };
}

const std::vector<Command>& commands() {
  static const std::vector<Command> kCommands = {
      {"validate", "SCENARIO", "check a scenario file; print every error as file:line:column: reason",
       "Parses the file, expands its fabric generator, applies defaults and overrides\n"
       "(defaults -> kinds -> fabric -> nodes -> links), plans addresses and ECMP routes, and\n"
       "checks every reference and expect: assertion. Nothing on the machine changes.\n"
       "With --resolved, prints the resolved scenario as JSON: every node, link, address and\n"
       "route, physical and emulated values; that JSON is itself a scenario file.",
       "rocelab validate scenarios/quickstart.yaml\n  rocelab validate --resolved -j scenarios/quickstart.yaml > resolved.json",
       [](po::options_description& d) {
         d.add_options()("resolved", "print the resolved scenario as JSON");
         add_scenario_arg(d);
       },
       cmd_validate},
      {"graph", "SCENARIO", "draw the fabric as Graphviz DOT",
       "Prints the fabric with one rank per tier (hosts at the bottom), link rates and port names.",
       "rocelab graph scenarios/quickstart.yaml | dot -Tsvg > fabric.svg",
       [](po::options_description& d) {
         d.add_options()("output,o", po::value<std::string>(), "write to FILE instead of standard output");
         add_scenario_arg(d);
       },
       cmd_graph},
      {"run", "SCENARIO", "run a scenario end to end and write a run directory",
       "validate -> up -> workloads and faults -> collect -> assertions -> down. Writes\n"
       "RUN_DIR/{scenario.yaml, resolved.json, results.json, events.jsonl, junit.xml, report.html,\n"
       "series-*.csv, pfc.txt, fct.txt, qlen.txt} (README \"Time series\").\n"
       "Exit codes: 0 pass, 1 an expect: assertion failed, 2 invalid run (the machine did not\n"
       "keep up: the only one worth a retry, at 2 x D), 3 bad input, 4 environment (missing\n"
       "capability, not root, not built), 5 testbed fault (the agent died, a fault was not\n"
       "applied, a connected pair unreachable, the kernel refused packets, workloads stalled\n"
       "past their deadline, an internal error: a defect to report, never retried).\n"
       "results.json says the class and the reason (\"class\", \"reason\").",
       "rocelab run scenarios/quickstart.yaml\n  rocelab run --out runs/r1 scenarios/quickstart.yaml && cat runs/r1/junit.xml\n"
       "  rocelab run --scale 2000 scenarios/incast-dcqcn.yaml   # half the emulated rates\n"
       "  rocelab run --retry-invalid scenarios/quickstart.yaml   # in CI: a slow machine gets a second run at 2 x D\n"
       "  sudo rocelab run --part 1/2 --peers 10.9.0.1,10.9.0.2 --run-key run.key scenarios/quickstart.yaml   # machine 1 of 2",
       [](po::options_description& d) {
         d.add_options()("out", po::value<std::string>(), "run directory (default runs/NAME-TIMESTAMP)")(
             "model-only", "make no fabric: evaluate the model's metrics and assertions only (no root needed)")(
             "scale", po::value<double>(),
             "time scale D instead of the file's 'scale:' (emulated rates = physical / D); a larger D "
             "gives a slow machine room after an invalid run (exit 2)")(
             "seed", po::value<int64_t>(), "seed instead of the file's 'seed:' (repeat a run with other random choices)")(
             "retry-of", po::value<std::string>(),
             "this run retries an invalid one (exit 2) and why: results.json and junit.xml record it, so a CI "
             "report counts every retry")(
             "retry-invalid",
             "an invalid run (exit 2) runs once more at 2 x D, as a retry (--out DIR: into DIR-2xD); the exit code "
             "is the second run's. ROCELAB_RETRY_INVALID=1 sets it too (a CI job's environment)")(
             "recalibrate", "with scale: auto, measure this machine again instead of using its cached calibration")(
             "no-report", "do not write RUN_DIR/report.html (rocelab report RUN_DIR writes it later)")(
             "vm", "run it inside the project's VM image (images/build.sh --rocelab): a kernel with rdma_rxe and "
                   "netem; the run directory comes back here");
         add_split_options(d, true);
         add_metrics_option(d);
         add_instance_option(d);
         add_scenario_arg(d);
       },
       cmd_run},
      {"report", "RUN_DIR", "write a run directory's report.html (and plots/*.svg)",
       "One self-contained HTML file that opens offline: the assertions, the fabric, queue\n"
       "depth and PFC pause timelines per port, each flow's DCQCN and delivered rate, the\n"
       "shared buffer, the FCT slowdown CDF, collectives' busbw against their bound, with fault\n"
       "and watchdog markers on every timeline. `run` writes it already; this writes it again\n"
       "(from a copied run directory, say). With gnuplot installed, static SVG plots too.",
       "rocelab report runs/r1\n  rocelab report --out runs/r1/copy.html --no-plots runs/r1",
       [](po::options_description& d) {
         d.add_options()("out", po::value<std::string>(), "write the report here (default RUN_DIR/report.html)")(
             "no-plots", "skip RUN_DIR/plots/*.svg")("run_dir", po::value<std::string>(), "the run directory");
       },
       cmd_report},
      {"up", "SCENARIO", "bring a fabric up and leave it running",
       "Creates, through netlink, one network namespace per node (/run/netns/rl-NAME.NODE, so\n"
       "'ip netns exec' works), the veth pairs straight into their namespaces, addresses, ECMP\n"
       "routes, permanent neighbours and per-namespace sysctls, and turns offloads off. Every\n"
       "namespace and link is written to /run/rocelab/NAME.state before it is made; an error\n"
       "or Ctrl-C rolls back, and 'rocelab down' cleans up after anything, even a kill -9.\n"
       "NAME is the scenario's 'name:' (default: from the file name), or --instance. Needs root.",
       "sudo rocelab up scenarios/quickstart.yaml && sudo ip netns exec rl-quickstart.host1 ip route\n"
       "  sudo rocelab up --instance qs2 scenarios/quickstart.yaml   # a second copy beside the first\n"
       "  sudo rocelab up --part 1/2 --peers 10.9.0.1,10.9.0.2 scenarios/quickstart.yaml   # machine 1 of 2",
       [](po::options_description& d) {
         d.add_options()("recalibrate", "with scale: auto, measure this machine again instead of using its cached calibration");
         add_split_options(d, false);
         add_metrics_option(d);
         add_instance_option(d);
         add_scenario_arg(d);
       },
       cmd_up},
      {"down", "[NAME]", "tear down a running fabric, exactly as its state file recorded it",
       "Replays instance NAME's state file, removing what it records and nothing else, then the\n"
       "state file. Idempotent: an instance that is not up is not an error. Without NAME, the\n"
       "only instance that is up. Waits for an 'up' or 'run' of the same instance that is still\n"
       "running (it holds the instance's lock): as long as it takes, or --lock-wait seconds, then\n"
       "exit 4 naming the process that holds it, with nothing touched.\n"
       "--slurm-job ID: every instance an 'up' or 'run' made inside Slurm job ID (its state file\n"
       "records SLURM_JOB_ID), for the cluster's Epilog: a part killed outright (SIGKILL, a\n"
       "node's OOM killer) leaves its share up, and the epilog takes it away; other jobs'\n"
       "fabrics stay (docs/multi-machine.md). An epilog must not hang: --lock-wait is 30 s\n"
       "there unless given, for all of the job's instances together.",
       "sudo rocelab down quickstart\n"
       "  rocelab down --slurm-job \"$SLURM_JOB_ID\"   # in slurm.conf's Epilog script (runs as root)",
       [](po::options_description& d) {
         d.add_options()("slurm-job", po::value<std::string>(), "every instance made inside this Slurm job")(
             "lock-wait", po::value<double>(), "seconds to wait for a running up/run's lock (30 with --slurm-job)")(
             "name", po::value<std::string>(), "instance name");
       },
       cmd_down},
      {"status", "[NAME]", "show running fabrics, their nodes and interfaces",
       "Without NAME, one line per instance that is up. With NAME, every node with its namespace\n"
       "and every interface with its peer, MAC, MTU, state, addresses and counters, read from\n"
       "the kernel. -j prints the same as JSON.",
       "sudo rocelab status -j quickstart | jq '.nodes[0].interfaces'",
       [](po::options_description& d) { d.add_options()("name", po::value<std::string>(), "instance name"); },
       cmd_status},
      {"stats", "[NODE[:PORT]]", "counters per port and priority of a running fabric",
       "What the port programs counted (admitted to the egress queue, received, ECN-marked,\n"
       "dropped by reason: queue_full, wred, headroom) beside what each priority's HTB class\n"
       "sent and holds now (the shaper's own count). Without NODE, every port; quiet\n"
       "priorities are left out of the table, never out of -j.",
       "sudo rocelab stats leaf1:host1\n  sudo rocelab stats -j --instance quickstart | jq '.ports[0].priorities[3]'",
       [](po::options_description& d) {
         d.add_options()("instance", po::value<std::string>(), "instance (default: the only one up)")(
             "target", po::value<std::string>(), "NODE or NODE:PORT");
       },
       cmd_stats},
      {"top", "[NAME]", "watch a running fabric's queues, pauses and rates, redrawn every second",
       "The busiest queues of every port, deepest first: the exact backlog (the egress program's\n"
       "probe), tx and rx rates over the interval, ECN marks, PFC frames sent and received,\n"
       "drops, and whether a received XOFF holds the queue. Rates and counts are per physical\n"
       "second (x D), where the instance's scenario says D. NAME or --instance: the instance.\n"
       "On a terminal each frame replaces the last (Ctrl-C ends it); piped, frames follow one\n"
       "another. Reads what `stats` reads and leaves a run's time series undisturbed.",
       "sudo rocelab top --instance quickstart --count 3 --interval 0.5\n  sudo rocelab top --count 1 | tee top.txt",
       [](po::options_description& d) {
         d.add_options()("instance", po::value<std::string>(), "instance (default: the only one up)")(
             "name", po::value<std::string>(), "instance")(
             "interval", po::value<double>()->default_value(1.0), "seconds between frames")(
             "count", po::value<int>()->default_value(0), "frames to show, then exit (0: until Ctrl-C)")(
             "rows", po::value<int>()->default_value(30), "queues a frame shows at most");
       },
       cmd_top},
      {"pause", "NODE:PORT", "pause (or --resume) one priority on a port's egress, as PFC does",
       "What a received PFC XOFF does to a port, by hand: priority P stops leaving NODE:PORT,\n"
       "packets already queued stay queued, every other priority keeps flowing. --resume is the\n"
       "XON. Only PFC priorities pause (their queue is a TBF under the HTB class). A learning\n"
       "and fault-injection tool; in a running fabric the agent does this on received frames.",
       "sudo rocelab pause leaf1:host1 --prio 3 && sudo rocelab stats leaf1:host1\n"
       "  sudo rocelab pause --resume leaf1:host1 --prio 3",
       [](po::options_description& d) {
         d.add_options()("instance", po::value<std::string>(), "instance (default: the only one up)")(
             "prio", po::value<int>(), "priority 0..7")("resume", "resume instead of pausing")(
             "target", po::value<std::string>(), "NODE:PORT");
       },
       cmd_pause},
      {"inject", "KIND TARGET [KEY=VALUE ...]", "inject a fault into a running fabric (or --clear them all)",
       "Applies one fault, checked as a scenario's would be against the instance's own scenario,\n"
       "to a fabric 'rocelab up' left running. KEY=VALUE are the kind's parameters as in a\n"
       "scenario's faults: (times physical, x D on the clock; a train as 1ms,300us,500us). A\n"
       "fault with an end (duration, a flap's count or train) runs to it, then is undone, and\n"
       "the command returns; one without stays in force until 'rocelab inject --clear', which\n"
       "puts back everything faults left: loss and corruption off, every link up, the routes of\n"
       "a whole fabric. Ctrl-C during a fault undoes it. Kinds: rocelab help kinds.",
       "sudo rocelab up scenarios/quickstart.yaml\n"
       "  sudo rocelab inject link_down leaf1:spine1            # stays down, routes go around it\n"
       "  sudo rocelab inject link_flap leaf1:spine2 period=2ms count=3\n"
       "  sudo rocelab inject loss leaf1:host1 probability=0.01\n"
       "  sudo rocelab inject --clear",
       [](po::options_description& d) {
         d.add_options()("instance", po::value<std::string>(), "instance (default: the only one up)")(
             "clear", "put back everything faults left in force")("kind", po::value<std::string>(), "fault kind")(
             "target", po::value<std::string>(), "NODE:PORT or NODE")(
             "param", po::value<std::vector<std::string>>(), "KEY=VALUE");
       },
       cmd_inject},
      {"pfcwd", "show stats", "the PFC watchdog's per-queue counts, as SONiC's 'pfcwd show stats'",
       "For a fabric 'rocelab up' left running with qos.pfc.watchdog: every switch queue (NODE:PORT:\n"
       "PRIORITY) that saw a storm, whether it is stormed now, its storms detected and restored,\n"
       "and the packets it sent and dropped (TX) and its port received and dropped on its\n"
       "priority (RX) while stormed, for all storms and the last one. --all lists every watched\n"
       "queue; -j prints the queues and the watchdog's events as JSON.",
       "sudo rocelab up scenarios/pfc-watchdog.yaml\n"
       "  sudo rocelab inject pause_storm host3:nic0 priority=3   # no traffic: nothing queued, no storm\n"
       "  sudo rocelab pfcwd show stats --all",
       [](po::options_description& d) {
         d.add_options()("instance", po::value<std::string>(), "instance (default: the only one up)")(
             "all,a", "every watched queue, not only those that saw a storm")(
             "what", po::value<std::vector<std::string>>(), "show stats");
       },
       cmd_pfcwd},
      {"agent", "", "the instance's agent (started by up, stopped by down)",
       "Acts on received PFC frames (pauses that priority on that port until the pause time\n"
       "runs out or XON arrives), sends XON for ports this switch paused once their queues\n"
       "drained, measures its reaction time, and answers on /run/rocelab/NAME.agent.sock\n"
       "('rocelab stats' shows its figures). 'rocelab up' starts it, hands it the fabric and\n"
       "records it in the state file; it is not started by hand.",
       "sudo rocelab up scenarios/incast-lossless.yaml && sudo rocelab stats --instance incast-lossless",
       [](po::options_description& d) {
         d.add_options()("instance", po::value<std::string>(), "instance")(
             "go-fd", po::value<int>(), "handshake socket from up (internal)");
       },
       cmd_agent},
      {"perf", "SCENARIO", "perftest between two hosts: the built-in engine's, or the real ib_write_bw over rxe",
       "Like ib_write_bw / ib_send_bw, over the fabric that is up: RC queue pairs from --from to\n"
       "--to, --size byte messages, up to --tx-depth in flight per QP, paced by DCQCN at the\n"
       "host's emulated line rate. Prints the perftest table (emulated Gb/s; x D for the\n"
       "physical figure) and what the engine counted: retransmissions, CNPs, bad ICRCs. The\n"
       "packets are real RoCEv2 on UDP 4791: capture them with tcpdump in a host namespace.\n"
       "With --engine rxe (a fabric up with hosts.engine: rxe), runs perftest's own ib_write_bw\n"
       "between the two hosts' rxe devices for --seconds (default 4), or --iters messages, and\n"
       "prints its table, then what the switch port toward the responder carried over the\n"
       "window ib_write_bw measures, as wire and WRITE payload Gb/s, and their ratio to\n"
       "ib_write_bw's average; with --iters also every byte the messages put on the wire.",
       "sudo rocelab up scenarios/quickstart.yaml\n"
       "  sudo rocelab perf scenarios/quickstart.yaml --from host1 --to host2 --size 64KiB --iters 500\n"
       "  sudo rocelab perf scenarios/quickstart.yaml --from host1 --to host2 --verb send --qps 4 --seconds 3 -j",
       [](po::options_description& d) {
         d.add_options()("from", po::value<std::string>(), "requester HOST or HOST:NIC")(
             "to", po::value<std::string>(), "responder HOST or HOST:NIC")(
             "verb", po::value<std::string>()->default_value("write"), "write (RDMA WRITE) or send")(
             "size", po::value<std::string>()->default_value("64KiB"), "message size (B, KiB, MiB)")(
             "iters", po::value<uint64_t>()->default_value(1000), "messages per QP")(
             "seconds", po::value<double>(), "run this long instead of --iters messages")(
             "qps", po::value<int>()->default_value(1), "queue pairs")(
             "tx-depth", po::value<uint32_t>()->default_value(128), "messages in flight per QP")(
             "mtu", po::value<uint32_t>(), "IB MTU (256..4096; default: from the NICs' MTU)")(
             "dcqcn", po::value<std::string>(), "paper, nvidia, ns3 or off (default: the scenario's hosts.dcqcn)")(
             "engine", po::value<std::string>(), "builtin or rxe (real ib_write_bw; default: the scenario's hosts.engine)");
         add_instance_option(d);
         add_scenario_arg(d);
       },
       cmd_perf},
      {"compare", "RUN_DIR RUN_DIR...", "put runs side by side: scenario differences, metric changes, series overlaid",
       "One self-contained HTML page (opens offline) for 2 to 8 run directories: what differs in\n"
       "their resolved scenarios, every metric with its change (the last run against the first;\n"
       "a series or counter by the sum and the largest of its samples), and their deepest\n"
       "queues, most paused lanes and fastest flows overlaid on one time axis, a dash style\n"
       "per run. Prints the metrics that changed most.",
       "rocelab compare runs/on runs/off\n  rocelab compare --out ecn.html runs/a runs/b runs/c",
       [](po::options_description& d) {
         d.add_options()("out", po::value<std::string>(), "write the page here (default compare.html)")(
             "run_dirs", po::value<std::vector<std::string>>(), "the run directories");
       },
       cmd_compare},
      {"sweep", "SCENARIO", "run a scenario over a grid of knob values and seeds; a table and a report",
       "One run per point of the grid: every combination of the --set axes (KEY=V1,V2,...), each at\n"
       "every --seeds seed, --repeat times. Writes OUT/{sweep.json (the plan), points/NNNN/ (each\n"
       "run directory), sweep.csv (a row a run: the knobs, the seed, the run, the exit code, each\n"
       "figure), report.html (each figure against each knob: the runs' mean as a line, their\n"
       "min-max as a band; each figure's spread run to run and seed to seed; the table)}. The\n"
       "same seed need not give the same figures: what moves between runs at one seed is real\n"
       "timing, and --repeat measures it (a knob's effect smaller than it is not shown). An\n"
       "invalid run (exit 2) runs again once at 2 x D; Ctrl-C stops after the current run, and\n"
       "the same command with the same --out resumes where it stopped. Exit 0 when every run\n"
       "was measured (its own assertions may fail: that is a figure), 5 when one could not be,\n"
       "2 when stopped.",
       "sudo rocelab sweep scenarios/incast-dcqcn.yaml --set qos.ecn.kmin=8KB,16KB,32KB,64KB,128KB --seeds 1-3\n"
       "  sudo rocelab sweep --out runs/s1 --set qos.pfc.xoff=32KB,64KB,128KB --figure 'max(queue_max)' "
       "scenarios/incast-lossless.yaml\n"
       "  sudo rocelab sweep --repeat 5 --figure 'max(busbw)' --figure 'max(jct)' scenarios/allreduce-ring.yaml",
       add_sweep_options, cmd_sweep},
      {"lab", "ACTION [LAB]", "the RoCE tuning track: exercises graded on real runs",
       "Labs teach tuning a RoCE fabric one knob at a time: each gives you a scenario that\n"
       "misbehaves, a brief (the situation, what to change, the objectives) and a check that\n"
       "runs your copy with the lab's objectives as its assertions, grading each with the\n"
       "figure it measured. ACTION is one of:\n"
       "  list             the track: number, id, title, topic, level, minutes, done or started\n"
       "  start LAB        copy the lab's scenario.yaml into DIR/NN-id/ and print the brief\n"
       "  check LAB        run your copy (root) and grade it; exit 0 when every objective is met,\n"
       "                   1 when one is not, else the run's own code (an invalid run is tried\n"
       "                   once more at 2 x D, as every runner does)\n"
       "  hint LAB [N]     the next hint (or hint N)\n"
       "  solution LAB     the answer and the reasoning, as --set changes (--write applies them)\n"
       "  reset LAB        your copy back to the starting file\n"
       "LAB is a number (3) or an id (ecn-thresholds). DIR/NN-id/ keeps your scenario.yaml,\n"
       "BRIEF.md, answer.txt (labs that ask a question), grade.json and runs/ with each check's\n"
       "run directory and report. With -j, list, hint, solution and check print JSON; --junit\n"
       "FILE writes a check's grade for an instructor's CI.",
       "rocelab lab list\n  rocelab lab start 1   # then edit rocelab-labs/01-lossless-incast/scenario.yaml\n"
       "  sudo rocelab lab check 1\n  rocelab lab hint 1\n"
       "  sudo rocelab lab check 3 --set qos.ecn.kmin=32KB   # try a knob without editing",
       add_lab_options, cmd_lab},
      {"plan", "SCENARIO", "how a split run divides the fabric over M machines",
       "The split every part of `run --part I/M` computes (docs/multi-machine.md), shown before\n"
       "any machine is asked: hosts stay with the switches they hang from, the parts take equal\n"
       "shares of the ports, and the remaining switches join the part holding most of their\n"
       "links. Prints each part's nodes and ports, the links cut between parts (each a VXLAN\n"
       "tunnel, UDP 4789 between the machines) and the most the cut carries on the machines'\n"
       "network at the scenario's D. Refused when the fabric has fewer host groups than parts.",
       "rocelab plan scenarios/quickstart.yaml --parts 2\n"
       "  rocelab plan -j scenarios/fat-tree-k4.yaml --parts 4 | jq '.cut_links | length'",
       add_plan_options, cmd_plan},
      {"k8s", "SCENARIO", "the Kubernetes manifests that run a scenario split over M pods",
       "Prints, for kubectl apply -f: a Secret with a fresh run key, a ConfigMap with the\n"
       "scenario, a headless Service (TCP 790 for the parts' rendezvous, UDP 4789 for the VXLAN\n"
       "cut links; its DNS names publish before the pods are ready) and an Indexed Job of --parts\n"
       "privileged pods, pod I running 'rocelab run --part auto': its part from the index the\n"
       "Job gives it, its peers JOB-0.SERVICE ... by DNS, the key from the Secret. The Job fails\n"
       "on the first failed pod (backoffLimit 0), which ends the others; the parts' own\n"
       "rendezvous stops every part with the reason first. Run directories are in each pod's\n"
       "/runs (an emptyDir: mount a volume there to keep them); kubectl logs shows the outcome.\n"
       "docs/multi-machine.md lists every field and what the nodes need.",
       "rocelab k8s scenarios/quickstart.yaml --parts 2 --image registry.example/rocelab:0.1.0 > qs.yaml\n"
       "  kubectl apply -f qs.yaml && kubectl logs -f -l rocelab.io/run=rocelab-quickstart --prefix",
       add_k8s_options, cmd_k8s},
      {"import", "FORMAT CONFIG_DB", "a switch's QoS configuration as a scenario's qos: block (FORMAT: sonic)",
       "Reads a SONiC switch's CONFIG_DB (config_db.json, or 'show runningconfiguration all')\n"
       "and prints the qos: block it makes, checked as a scenario would be: PORT_QOS_MAP's\n"
       "pfc_enable -> qos.lossless and qos.pfc.priorities; the ports' DSCP_TO_TC_MAP ->\n"
       "qos.dscp_map; the lossless PGs' BUFFER_PROFILE xoff/xon -> qos.pfc.xoff/xon and its size\n"
       "beyond xoff -> qos.pfc.headroom; the lossy queues' dynamic_th and ingress_lossless_pool's\n"
       "size -> qos.buffer; the lossless queues' WRED_PROFILE green thresholds and probability\n"
       "(%) -> qos.ecn kmin/kmax/pmax; PFC_WD -> qos.pfc.watchdog. rocelab's qos is one for the\n"
       "whole fabric: what most ports say is taken, and each port that says otherwise, each\n"
       "field and table it cannot carry, is named ('not mapped: ...', also as comments in the\n"
       "output). With --into SCENARIO, prints that scenario with its qos: replaced.",
       "rocelab import sonic config_db.json > qos.yaml\n"
       "  rocelab import sonic config_db.json --into scenarios/incast-dcqcn.yaml -o mine.yaml && sudo rocelab run mine.yaml",
       add_sonic_options, cmd_import},
      {"export", "FORMAT SCENARIO", "a scenario's qos as a switch's configuration (FORMAT: sonic)",
       "Prints CONFIG_DB tables (JSON, values as strings as CONFIG_DB keeps them) for one switch\n"
       "of the scenario with its resolved qos: BUFFER_POOL, BUFFER_PROFILE, BUFFER_PG (the lossless\n"
       "priorities: xoff, xon, size = xoff + headroom), BUFFER_QUEUE, WRED_PROFILE and QUEUE (the\n"
       "lossless queues' ECN curve), PORT_QOS_MAP (pfc_enable, the maps), DSCP_TO_TC_MAP (all 64),\n"
       "TC_TO_PRIORITY_GROUP_MAP and PFC_WD. 'rocelab import sonic' reads it back to the same\n"
       "qos. The ports are the switch's own (--node, default the first switch) or --ports.",
       "rocelab export sonic scenarios/incast-dcqcn.yaml --ports Ethernet0,Ethernet4,Ethernet8 > config_db.json",
       add_sonic_options, cmd_export},
      {"completion", "[SHELL]", "print the bash completion script",
       "Completes commands, their options, scenario files (*.yaml, *.yml, *.json), run\n"
       "directories, instance names (from /run/rocelab) and lab ids. Generated from the same\n"
       "command table as --help. Load it in the shell, or install it where bash-completion\n"
       "looks (/usr/share/bash-completion/completions/rocelab).",
       "source <(rocelab completion bash)",
       [](po::options_description& d) { d.add_options()("shell", po::value<std::string>(), "bash"); }, cmd_completion},
      {"doctor", "", "say what this kernel and machine can and cannot do",
       "Tries each capability for real, inside a private network namespace that vanishes\n"
       "afterwards: netns, veth, HTB/TBF/clsact and optional qdiscs (netem, fq, ...), BPF with\n"
       "BTF, rxe and rxe-in-namespace, KVM. Exit 0 when everything required is there, else 4.",
       "sudo rocelab doctor\n  rocelab doctor -j | jq .capabilities.netem",
       [](po::options_description&) {}, cmd_doctor},
  };
  return kCommands;
}

namespace {

// `rocelab help metrics`: every metric expect: may name, as the README's table.
void metrics_help(std::ostream& out) {
  out << "| metric | kind | unit | labels | meaning |\n|---|---|---|---|---|\n";
  const char* kinds[] = {"scalar", "series", "counter"};
  for (const auto& m : model::metric_registry()) {
    std::string labels;
    for (const auto& l : m.labels) labels += std::string(labels.empty() ? "" : ", ") + std::string(l);
    out << "| `" << m.name << "` | " << kinds[int(m.kind)] << " | " << m.unit << " | " << labels << " | " << m.help
        << " |\n";
  }
}

// `rocelab help kinds`: what a scenario may name by `type:` in this build.
void kinds_help(std::ostream& out) {
  out << "workloads (workloads: - {type: ...}):\n";
  for (const auto& k : workload::kinds().all()) out << fmt::format("  {:<12} {}\n", k.type, k.summary);
  out << "faults (faults: - {type: ...}):\n";
  for (const auto& k : fault::kinds().all()) out << fmt::format("  {:<12} {}\n", k.type, k.summary);
  out << "RDMA backends (hosts: {engine: ...}):\n";
  for (const auto& b : workload::backends().all()) out << fmt::format("  {:<12} {}\n", b.type, b.summary);
  out << "links (chosen per link by the realiser):\n";
  for (const auto& k : fabric::Fabric::link_kinds()) out << fmt::format("  {:<12} {}\n", k.type, k.summary);
  out << "telemetry sinks (every run):\n";
  for (const auto& t : telemetry::sinks().all()) out << fmt::format("  {:<14} {}\n", t.type, t.summary);
}

void general_help(std::ostream& out) {
  out << "rocelab — lossless-fabric (RoCEv2) emulation testbed\n\n"
         "usage: rocelab [-v] [-j] COMMAND [ARGS]\n\ncommands:\n";
  for (const auto& c : commands()) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-9s %-19s %s\n", c.name.c_str(), c.args.c_str(), c.summary.c_str());
    out << line;
  }
  out << "\nglobal options:\n  -v, --verbose  debug logs\n  -j, --json     JSON output\n  -h, --help     help "
         "(rocelab COMMAND --help for one command)\n  --version      the version, the commit and this kernel's features\n\n"
         "  rocelab help metrics  every metric an expect: assertion may name\n"
         "  rocelab help man [COMMAND]  the man page (roff), rocelab(1) or rocelab-COMMAND(1)\n"
         "  rocelab help kinds    the workload, fault and backend types this build has\n\n"
         "exit codes: 0 pass, 1 an assertion failed, 2 invalid run (the machine did not keep up: the only\n"
         "one worth a retry, at 2 x D), 3 bad input, 4 environment, 5 testbed fault (a defect: never retried)\n\n"
         "start with: rocelab validate scenarios/quickstart.yaml && sudo rocelab run scenarios/quickstart.yaml\n"
         "security: 'sudo rocelab' is root (grant it as root); sudo -E passes ROCELAB_* (README, Security)\n";
}

po::options_description global_options() {
  po::options_description d("global options");
  d.add_options()("verbose,v", "debug logs")("json,j", "JSON output")("help,h", "show help");
  return d;
}

void command_help(const Command& c, std::ostream& out) {
  po::options_description own(c.name + " options");
  c.options(own);
  out << "usage: rocelab " << c.name << " [options] " << c.args << "\n\n" << c.summary << ".\n\n" << c.details
      << "\n\n";
  // Hide the positional argument from the option list; it is in the usage line.
  po::options_description shown(c.name + " options");
  for (const auto& o : own.options())
    if (!positional_option(o->long_name())) shown.add(o);
  if (!shown.options().empty()) out << shown << "\n";
  out << global_options() << "\nexample:\n  " << c.example << "\n";
}

}  // namespace

int main_entry(int argc, char** argv) {
  auto logger = spdlog::stderr_color_mt("rocelab");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%^%l%$: %v");
  spdlog::set_level(spdlog::level::info);
  bpf::route_libbpf_logs();

  std::vector<std::string> args(argv + 1, argv + argc);
  if (std::find(args.begin(), args.end(), "--version") != args.end())
    return print_version(std::find(args.begin(), args.end(), "-j") != args.end() ||
                         std::find(args.begin(), args.end(), "--json") != args.end());
  // The command is the first word that is not an option.
  const Command* cmd = nullptr;
  size_t cmd_at = args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].empty() && args[i][0] == '-') continue;
    if (args[i] == "help") {
      if (i + 1 < args.size() && args[i + 1] == "metrics") return metrics_help(std::cout), 0;
      if (i + 1 < args.size() && args[i + 1] == "man") {
        if (i + 2 == args.size()) return std::cout << man_page(nullptr), 0;
        for (const auto& c : commands())
          if (c.name == args[i + 2]) return std::cout << man_page(&c), 0;
        std::cerr << "rocelab help man: no command '" << args[i + 2].substr(0, 32) << "'\n";
        return kExitBadInput;
      }
      if (i + 1 < args.size() && args[i + 1] == "kinds") return kinds_help(std::cout), 0;
      if (i + 1 < args.size())
        for (const auto& c : commands())
          if (c.name == args[i + 1]) {
            command_help(c, std::cout);
            return 0;
          }
      general_help(std::cout);
      return 0;
    }
    for (const auto& c : commands())
      if (c.name == args[i]) cmd = &c;
    if (!cmd) {
      std::cerr << "rocelab: unknown command '" << args[i] << "'\n\n";
      general_help(std::cerr);
      return kExitBadInput;
    }
    cmd_at = i;
    break;
  }
  if (!cmd) {
    bool help = false;
    for (const auto& a : args) help = help || a == "-h" || a == "--help";
    general_help(help ? std::cout : std::cerr);
    return help ? 0 : kExitBadInput;
  }
  args.erase(args.begin() + static_cast<std::ptrdiff_t>(cmd_at));

  po::options_description all;
  po::options_description own;
  cmd->options(own);
  all.add(global_options()).add(own);
  po::positional_options_description pos;
  if (cmd->args.rfind("KIND", 0) == 0) pos.add("kind", 1).add("target", 1).add("param", -1);
  else if (cmd->args.rfind("FORMAT", 0) == 0)
    pos.add("format", 1).add(cmd->args.find("SCENARIO") != std::string::npos ? "scenario" : "file", 1);
  else if (cmd->args.rfind("ACTION", 0) == 0) pos.add("action", 1).add("lab", 1).add("n", 1);
  else if (cmd->args == "[SHELL]") pos.add("shell", 1);
  else if (cmd->args.rfind("show", 0) == 0) pos.add("what", -1);
  else if (cmd->args.find("SCENARIO") != std::string::npos) pos.add("scenario", 1);
  else if (cmd->args.rfind("RUN_DIR RUN_DIR", 0) == 0) pos.add("run_dirs", -1);
  else if (cmd->args.find("RUN_DIR") != std::string::npos) pos.add("run_dir", 1);
  else if (cmd->args.find("NAME") != std::string::npos) pos.add("name", 1);
  else if (cmd->args.find("NODE") != std::string::npos) pos.add("target", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "rocelab " << cmd->name << ": " << e.what() << "\n(see: rocelab " << cmd->name << " --help)\n";
    return kExitBadInput;
  }
  if (vm.count("help")) {
    command_help(*cmd, std::cout);
    return 0;
  }
  Globals g{vm.count("verbose") > 0, vm.count("json") > 0};
  if (g.verbose) spdlog::set_level(spdlog::level::debug);
  try {
    return cmd->run(vm, g);
  } catch (const std::exception& e) {
    std::cerr << "rocelab " << cmd->name << ": internal error: " << e.what() << "\n";
    return kExitEnvironment;
  }
}

}  // namespace rocelab::cli
