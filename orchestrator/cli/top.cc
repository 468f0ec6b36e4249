// `rocelab top [--instance NAME]`: a running fabric's busiest queues, redrawn every
// interval: exact depth, rates over the interval, ECN marks, PFC and drops, paused or not.
// It reads what `stats` reads, cheaply (Testbed::sample), and leaves the run's own sampler
// its queue peaks.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <map>
#include <thread>

#include "cli/top.h"
#include "fabric/local_testbed.h"
#include "fabric/realiser.h"
#include "model/scenario.h"

namespace rocelab::cli {

namespace {

struct Row {
  std::string port;
  uint32_t prio = 0;
  uint64_t depth = 0;
  double tx_mbps = 0, rx_mbps = 0, ecn = 0, pfc_tx = 0, pfc_rx = 0, drops = 0;
  bool paused = false;
};

uint64_t drops_of(const rl_counters& c) {
  uint64_t n = 0;
  for (size_t r = 0; r < size_t(RL_DROP__USED); ++r) n += c.drops[r];
  return n;
}

std::vector<Row> rows_between(const std::vector<fabric::PortStats>& a, const std::vector<fabric::PortStats>& b, double dt_s) {
  std::map<std::string, const fabric::PortStats*> before;
  for (const auto& p : a) before[p.node + ":" + p.port] = &p;
  std::vector<Row> out;
  for (const auto& p : b) {
    auto it = before.find(p.node + ":" + p.port);
    if (it == before.end()) continue;
    for (uint32_t q = 0; q < RL_NUM_PRIO; ++q) {
      const rl_counters &x = it->second->prio[q].c, &y = p.prio[q].c;
      Row r{p.node + ":" + p.port, q, p.prio[q].depth_bytes};
      r.tx_mbps = double(y.tx_bytes - x.tx_bytes) * 8 / dt_s / 1e6;
      r.rx_mbps = double(y.rx_bytes - x.rx_bytes) * 8 / dt_s / 1e6;
      r.ecn = double(y.ecn_marked - x.ecn_marked) / dt_s;
      r.pfc_tx = double(y.pfc_tx - x.pfc_tx) / dt_s;
      r.pfc_rx = double(y.pfc_rx - x.pfc_rx) / dt_s;
      r.drops = double(drops_of(y) - drops_of(x)) / dt_s;
      r.paused = y.paused_since_ns != 0;
      if (r.depth || r.tx_mbps > 0 || r.rx_mbps > 0 || r.pfc_tx > 0 || r.pfc_rx > 0 || r.drops > 0 || r.paused)
        out.push_back(r);
    }
  }
  // The deepest queues first, then the busiest.
  std::stable_sort(out.begin(), out.end(), [](const Row& l, const Row& r) {
    return l.depth != r.depth ? l.depth > r.depth : l.tx_mbps > r.tx_mbps;
  });
  return out;
}

}  // namespace

double recorded_scale(const std::string& instance) {
  std::ifstream f(fabric::scenario_record_path(instance));
  const auto j = nlohmann::json::parse(f, nullptr, false);
  return j.is_object() && j.contains("scale") && j["scale"].is_number() ? j["scale"].get<double>() : 0;
}

int run_top(const std::string& instance, double interval_s, int count, size_t max_rows, const std::atomic<bool>& stop) {
  auto t = fabric::LocalTestbed::attach(instance);
  if (!t) {
    std::cerr << "rocelab top: " << t.error().what << "\n";
    return t.error().exit_code();
  }
  const bool tty = isatty(STDOUT_FILENO);
  const double d = recorded_scale(instance);
  auto prev = (*t)->sample(false);
  auto t_prev = std::chrono::steady_clock::now();
  for (int frame = 0; (count <= 0 || frame < count) && !stop.load(); ++frame) {
    for (double waited = 0; waited < interval_s && !stop.load(); waited += 0.05)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto now = (*t)->sample(false);
    const auto t_now = std::chrono::steady_clock::now();
    if (!prev || !now) {
      std::cerr << "rocelab top: " << (prev ? now : prev).error().what << " (is " << instance << " still up?)\n";
      return (prev ? now : prev).error().exit_code();
    }
    const double dt = std::chrono::duration<double>(t_now - t_prev).count();
    // Physical rates where D is known: emulated bytes over wall time, x D.
    const auto rows = rows_between(*prev, *now, d > 0 ? dt / d : dt);
    std::string out = tty ? "\x1b[H\x1b[2J" : "";
    out += d > 0 ? fmt::format("rocelab top: {} — {} active queues, every {:.1f} s; rates and counts per physical "
                               "second (D = {:g})\n", instance, rows.size(), interval_s, d)
                 : fmt::format("rocelab top: {} — {} active queues, every {:.1f} s; rates emulated (D unknown: "
                               "physical = x D)\n", instance, rows.size(), interval_s);
    out += fmt::format("{:<24} {:>4} {:>10} {:>10} {:>10} {:>9} {:>8} {:>8} {:>8} {:>6}\n", "port", "prio", "depth_KB",
                       "tx_Mbps", "rx_Mbps", "ecn/s", "pfc_tx/s", "pfc_rx/s", "drops/s", "paused");
    for (size_t i = 0; i < rows.size() && i < max_rows; ++i) {
      const Row& r = rows[i];
      out += fmt::format("{:<24} {:>4} {:>10.1f} {:>10.1f} {:>10.1f} {:>9.0f} {:>8.0f} {:>8.0f} {:>8.0f} {:>6}\n", r.port,
                         r.prio, double(r.depth) / 1e3, r.tx_mbps, r.rx_mbps, r.ecn, r.pfc_tx, r.pfc_rx, r.drops,
                         r.paused ? "yes" : "");
    }
    if (rows.size() > max_rows) out += fmt::format("... {} more\n", rows.size() - max_rows);
    if (!tty) out += "\n";
    std::cout << out << std::flush;
    prev = std::move(now);
    t_prev = t_now;
  }
  return 0;
}

}  // namespace rocelab::cli
