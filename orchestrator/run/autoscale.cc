#include "run/autoscale.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "bpf/headroom.h"
#include "fabric/local_testbed.h"
#include "model/loader.h"
#include "sys/files.h"
#include "sys/host_info.h"
#include "workload/kinds.h"
#include "workload/runner.h"

namespace rocelab::run {
namespace {

using nlohmann::json;

// Links between two nodes on a shortest path (the plan's graph; ECMP paths are equal length).
std::vector<int> links_from(const fabric::KernelPlan& plan, size_t src) {
  std::vector<int> dist(plan.nodes.size(), -1);
  std::deque<size_t> q{src};
  dist[src] = 0;
  while (!q.empty()) {
    const size_t n = q.front();
    q.pop_front();
    for (const auto& p : plan.nodes[n].ports)
      if (dist[p.peer_node] < 0) {
        dist[p.peer_node] = dist[n] + 1;
        q.push_back(p.peer_node);
      }
  }
  return dist;
}

// One workload's load: each sending NIC at its line rate (what the engine must keep pacing
// while nothing pauses it), weighted by the links its flows cross; its shortest possible
// length, each sending NIC's bytes at line rate, places it on the timeline.
struct JobLoad {
  std::string name;
  double start_s = 0, end_s = 0;
  double bps = 0, link_bps = 0;
};

JobLoad job_load(const model::Scenario& s, const workload::Ranks& ranks, const workload::JobSpec& j,
                 const model::Workload& w) {
  JobLoad l{w.name, double(w.start.ns) / 1e9};
  std::map<size_t, std::pair<double, double>> nic;  // sending rank -> (bytes, bytes x links)
  std::map<size_t, std::vector<int>> dist;
  for (const auto& f : j.flows) {
    const size_t a = ranks[f.src].node, b = ranks[f.dst].node;
    if (!dist.count(a)) dist[a] = links_from(ranks.plan(), a);
    const double bytes = j.lockstep ? double(f.message) * double(std::max<uint64_t>(j.rounds, 1))
                                    : double(f.message) * double(f.per_qp) * f.qps;
    auto& [sent, weighted] = nic[f.src];
    sent += bytes;
    weighted += bytes * std::max(dist[a][b], 1);
  }
  double longest = 0;
  for (const auto& [r, v] : nic) {
    const double rate = double(s.links[ranks.nic(r).link].rate.bps);
    l.bps += rate;
    l.link_bps += v.first > 0 ? rate * v.second / v.first : 0;
    longest = std::max(longest, v.first * 8 / rate);
    if (j.pingpong) break;  // one message in flight at a time: one NIC's worth at most
  }
  l.end_s = l.start_s + longest;
  return l;
}

std::string machine_id() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string cpu = "cpu";
  if (auto info = sys::read_file("/proc/cpuinfo")) {
    const auto k = info->find("model name");
    if (k != std::string::npos) {
      const auto colon = info->find(':', k), eol = info->find('\n', k);
      if (colon != std::string::npos && colon + 2 <= eol) cpu = info->substr(colon + 2, eol - colon - 2);
    }
  }
  return fmt::format("{} / {} x {}", host, sysconf(_SC_NPROCESSORS_ONLN), cpu);
}

// D steps: 1, 1.5, 2, 3, 4, 5, 7 x 10^k (each within 1.5x of the next).
constexpr double kSteps[] = {1, 1.5, 2, 3, 4, 5, 7};

double step_at_least(double x) {
  double decade = std::pow(10.0, std::floor(std::log10(x)));
  for (;; decade *= 10)
    for (double m : kSteps)
      if (m * decade >= x * (1 - 1e-9)) return m * decade;
}

double step_below(double x) {
  double decade = std::pow(10.0, std::floor(std::log10(x)));
  for (;; decade /= 10)
    for (auto it = std::rbegin(kSteps); it != std::rend(kSteps); ++it)
      if (*it * decade < x * (1 - 1e-9)) return *it * decade;
}

// What the machine must keep up with in a run is many NICs each paced at its line rate / D,
// so the calibration is one: a ring all-reduce over 8 hosts on two leaves (2 and 4 links a
// flow), run at falling D until the pacing check fails. Each trial makes its own fabric
// (0.2 s): the shapers at the trial's rate are part of what the engine keeps up with.
constexpr const char* kCalibrationScenario = R"(
scale: 1000
defaults: {rate: 100G, mtu: 4200}
fabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 4}
qos: {profile: roce-lossless}
hosts: {dcqcn: off}
workloads:
  - {name: ring, type: allreduce, message: 1MB, iterations: 1}
)";
constexpr double kCalibrationFloorD = 10;      // the smallest D a calibration tries
constexpr double kCalibrationCeilingD = 1e5;   // beyond this the machine cannot run a fabric
constexpr double kTrialSeconds = 0.8;          // wall clock of the ring's transfer in a trial
constexpr double kTrialPacing = -0.10;         // a trial holds when no NIC fell further behind

struct Trial {
  bool held = false;
  std::string why;
};

Result<Trial> trial(const model::Scenario& base, double d) {
  model::Scenario s = base;
  if (auto err = model::rescale(s, d)) return error(Errc::kEnvironment, "calibration: " + *err);
  // Each rank sends 2 (N - 1) / N of the message: ~1.75 x for 8 ranks.
  s.workloads[0].message = model::Bytes{uint64_t(100e9 / d / 8 * kTrialSeconds / 1.75)};
  fabric::UpOptions uo;
  uo.scenario_path = "<calibration>";
  auto t = fabric::LocalTestbed::up(s, uo);
  if (!t) return error(Errc::kEnvironment, "up: " + t.error().what);
  auto r = workload::run_workloads(s, fabric::plan_kernel(s), **t, {});
  auto down = (*t)->down();
  if (!r) return r.error();
  if (!down) return error(Errc::kEnvironment, "down: " + down.error().what);
  Trial tr;
  tr.held = r->invalid.empty() && r->worst_pacing_error > kTrialPacing;
  tr.why = !r->invalid.empty() ? r->invalid
                                : fmt::format("{} paced {:.0f} %", r->worst_paced_nic, r->worst_pacing_error * 100);
  return tr;
}

Result<Calibration> measure(const std::function<void(const std::string&)>& progress) {
  const std::string name = "calib-" + std::to_string(getpid());
  auto loaded = model::load_scenario_text(std::string("name: ") + name + "\n" + kCalibrationScenario, "<calibration>");
  if (!loaded.scenario) {
    const auto d = loaded.diags.sorted();
    return error(Errc::kEnvironment, "the calibration scenario does not load: " + (d.empty() ? std::string("?") : d.front().format()));
  }
  const model::Scenario& s = *loaded.scenario;
  auto say = [&](const std::string& what) {
    if (progress) progress(what);
  };
  say("calibrating this machine for scale: auto (a ring over 8 hosts at falling D, ~10 s; cached afterwards)");
  // Down from D = 1000 while trials hold, or up until one does: the smallest D that held.
  double d = 1000, held = 0;
  std::string last;
  for (int n = 0; n < 16 && d >= kCalibrationFloorD && d <= kCalibrationCeilingD; ++n) {
    auto tr = trial(s, d);
    if (!tr) return error(Errc::kEnvironment, "calibration: D = " + fmt::format("{:g}", d) + ": " + tr.error().what);
    say(fmt::format("calibration: D = {:g} {} ({})", d, tr->held ? "kept up" : "fell behind", tr->why));
    if (tr->held && !last.empty()) {  // came up from one that fell behind: the edge
      held = d;
      break;
    }
    if (tr->held) {
      held = d;
      d = step_below(d);
    } else if (held > 0) {
      break;
    } else {
      last = tr->why;
      d = step_at_least(d * 1.01);
    }
  }
  if (held == 0) return error(Errc::kEnvironment, "calibration: this machine did not keep up even at D = " +
                                                      fmt::format("{:g}", kCalibrationCeilingD) + " (" + last + ")");
  // The edge once more: a trial that held by luck would make every later choice too bold.
  // If it falls behind now, the next step up is what this machine holds.
  auto again = trial(s, held);
  if (!again) return error(Errc::kEnvironment, "calibration: D = " + fmt::format("{:g}", held) + ": " + again.error().what);
  if (!again->held) {
    say(fmt::format("calibration: D = {:g} fell behind on a second trial ({}); taking the next step up", held, again->why));
    held = step_at_least(held * 1.01);
  } else {
    say(fmt::format("calibration: D = {:g} kept up again", held));
  }
  // What held, in the load model's own terms.
  model::Scenario at = s;
  (void)model::rescale(at, held);
  const auto plan = fabric::plan_kernel(at);
  workload::Ranks ranks(plan);
  auto jobs = workload::plan_jobs(at, ranks);
  if (!jobs) return jobs.error();
  const JobLoad l = job_load(at, ranks, jobs->front(), at.workloads.front());
  Calibration c;
  c.held_d = held;
  c.link_bps = l.link_bps / held;
  c.measured_at = int64_t(std::time(nullptr));
  return c;
}

}  // namespace

std::string calibration_cache_path() {
  const char* dir = std::getenv("ROCELAB_CACHE_DIR");
  return std::string(dir && *dir ? dir : "/var/cache/rocelab") + "/calibration.json";
}

namespace {

// The engine's threads change what the machine carries (ROCELAB_ENGINE_THREADS).
std::string cache_key() {
  const char* t = std::getenv("ROCELAB_ENGINE_THREADS");
  return machine_id() + " | " + sys::kernel_info().release + (t && *t ? std::string(" | engine threads ") + t : "");
}

json read_cache() {
  json cache = json::object();
  if (auto text = sys::read_file(calibration_cache_path())) {
    cache = json::parse(*text, nullptr, false);
    if (!cache.is_object()) cache = json::object();  // unreadable: measured again and rewritten
  }
  return cache;
}

std::optional<Calibration> cached(const json& cache) {
  const std::string key = cache_key();
  if (!cache.contains(key) || !cache[key].is_object()) return std::nullopt;
  const json& e = cache[key];
  Calibration c;
  // A hand-edited entry of the wrong type reads as none.
  c.link_bps = e.value("link_bps", 0.0);
  c.held_d = e.value("held_d", 0.0);
  c.measured_at = e.value("measured_at", int64_t(0));
  if (!(c.link_bps > 0) || !std::isfinite(c.link_bps)) return std::nullopt;
  c.cached = true;
  return c;
}

}  // namespace

bool has_calibration() {
  try {
    return cached(read_cache()).has_value();
  } catch (const json::exception&) {
    return false;
  }
}

Result<Calibration> calibrate(bool refresh, const std::function<void(const std::string&)>& progress) {
  const std::string path = calibration_cache_path(), key = cache_key();
  json cache = read_cache();
  try {
    if (auto c = cached(cache); c && !refresh) return *c;
  } catch (const json::exception&) {
  }
  if (!sys::is_root()) return error(Errc::kEnvironment, "scale: auto needs a calibration of this machine, which needs root");
  auto c = measure(progress);
  if (!c) return c;
  cache[key] = {{"link_bps", c->link_bps}, {"held_d", c->held_d}, {"measured_at", c->measured_at}};
  // A cache that cannot be written costs only a calibration next time.
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  std::string why;  // never through a link left at the temporary name (root writes it)
  if (sys::write_file(tmp, cache.dump(2) + "\n", why)) std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
  return c;
}

std::vector<std::string> headroom_over_buffer(const fabric::KernelPlan& kp) {
  std::vector<std::string> out;
  for (const auto& np : kp.nodes) {
    if (np.host || !kp.port_config.buffer_size || !kp.port_config.pfc_mask) continue;
    uint64_t need = 0;  // the largest limit the node's lossless queues would need, uncapped
    for (const auto& h : bpf::node_headroom(fabric::headroom_inputs(kp, np), kp.port_config.pfc_xoff, 0,
                                            bpf::kInitialReactionBudgetNs,
                                            kp.port_config.pfc_trigger == RL_PFC_TRIGGER_INGRESS))
      need = std::max<uint64_t>(need, h.lossless_limit);
    if (need > kp.port_config.buffer_size)
      out.push_back(np.node + ": XOFF + the headroom of its ports (" + std::to_string(need) +
                    " B) exceed qos.buffer.size (" + std::to_string(kp.port_config.buffer_size) +
                    " B): its lossless queues stop at the buffer and may drop as `headroom`");
  }
  return out;
}

Result<ScaleChoice> choose_scale(const model::Scenario& s, const fabric::KernelPlan& plan, const Calibration& c) {
  if (!(c.link_bps > 0)) return error(Errc::kEnvironment, "scale: auto: no calibration of this machine");
  workload::Ranks ranks(plan);
  auto jobs = workload::plan_jobs(s, ranks);
  if (!jobs) return jobs.error();
  std::vector<JobLoad> loads;
  for (size_t i = 0; i < jobs->size(); ++i) loads.push_back(job_load(s, ranks, (*jobs)[i], s.workloads[i]));
  // The busiest moment: at some workload's start, every workload running then.
  ScaleChoice ch;
  for (const auto& at : loads) {
    double bps = 0, link_bps = 0;
    std::string names;
    for (const auto& l : loads)
      if (l.start_s <= at.start_s && at.start_s < std::max(l.end_s, l.start_s + 1e-12)) {
        bps += l.bps;
        link_bps += l.link_bps;
        names += (names.empty() ? "" : " + ") + l.name;
      }
    if (link_bps > ch.peak_link_bps) {
      ch.peak_bps = bps;
      ch.peak_link_bps = link_bps;
      ch.busiest = names;
    }
  }
  uint64_t slowest = UINT64_MAX, fastest = 0;
  for (const auto& l : s.links) {
    slowest = std::min(slowest, l.rate.bps);
    fastest = std::max(fastest, l.rate.bps);
  }
  const double d_max = slowest == UINT64_MAX ? 1e6 : double(slowest) / double(model::kEmulatedRateMin.bps);
  // At least one packet stream at the fastest link's line rate, workloads or not.
  const double raw = std::max(ch.peak_link_bps, double(fastest)) / (c.link_bps * kAutoMargin);
  ch.d = step_at_least(std::max(raw, 1.0));
  if (ch.d > d_max) {
    if (raw > d_max)
      return error(Errc::kEnvironment,
                   fmt::format("scale: auto: this machine carries {} (calibrated), and this scenario's busiest moment "
                               "({}) needs D = {:.0f} to fit in {:.0f} % of it, past the largest D its slowest link "
                               "allows ({:.0f}: {} emulated at least): set a smaller load or faster links",
                               model::human_rate(c.link_bps), ch.busiest, raw, kAutoMargin * 100, d_max,
                               model::format_rate(model::kEmulatedRateMin)));
    ch.d = std::floor(d_max);
  }
  // Lossless queues must hold what arrives while the agent reacts: raise D until they do,
  // unless they never would (a buffer the scenario made small on purpose).
  std::string raised;
  auto over = [&](double d) {
    model::Scenario at = s;
    return model::rescale(at, d) ? true : !headroom_over_buffer(fabric::plan_kernel(at)).empty();
  };
  if (over(ch.d) && !over(std::floor(d_max))) {
    const double load_d = ch.d;
    while (over(ch.d)) ch.d = std::min(step_at_least(ch.d * 1.01), std::floor(d_max));
    raised = fmt::format(" (the load alone allows D = {:g}; lossless headroom at that rate would exceed the buffer)", load_d);
  }
  if (loads.empty())
    ch.why = fmt::format("D = {:g}: no workload; the fastest link ({}) at its line rate takes at most {:.0f} % of the "
                         "{} x links this machine kept up with{}",
                         ch.d, model::human_rate(double(fastest)), kAutoMargin * 100, model::human_rate(c.link_bps), raised);
  else
    ch.why = fmt::format(
        "D = {:g}: the busiest moment ({}) sends {} physical, {:.2g} links a packet; at D = {:g} that is {} x links "
        "of wall clock, {:.0f} % of the {} x links this machine kept up with ({}, ring held at D = {:g}; {}); at most "
        "{:.0f} % is allowed",
        ch.d, ch.busiest, model::human_rate(ch.peak_bps), ch.peak_link_bps / ch.peak_bps, ch.d,
        model::human_rate(ch.peak_link_bps / ch.d), 100 * ch.peak_link_bps / ch.d / c.link_bps,
        model::human_rate(c.link_bps), c.cached ? "calibrated before" : "calibrated now", c.held_d,
        calibration_cache_path(), kAutoMargin * 100) + raised;
  return ch;
}

Result<ScaleChoice> resolve_auto_scale(model::Scenario& s, bool refresh,
                                       const std::function<void(const std::string&)>& progress) {
  auto c = calibrate(refresh, progress);
  if (!c) return c.error();
  auto ch = choose_scale(s, fabric::plan_kernel(s), *c);
  if (!ch) return ch;
  if (auto err = model::rescale(s, ch->d)) return error(Errc::kBadInput, "scale: auto: " + *err);
  return ch;
}

}  // namespace rocelab::run
