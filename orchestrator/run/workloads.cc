#include "run/workloads.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "model/units.h"
#include "workload/fairness.h"

namespace rocelab::run {

using model::MetricKind;
using model::MetricValue;
using model::Sample;
using nlohmann::ordered_json;

WorkloadAnalysis analyse_workloads(const workload::WorkloadRun& r, const model::TimeScale& scale) {
  struct Window {
    const char* label;
    double seconds;  // physical
  };
  constexpr Window kWindows[] = {{"100us", 100e-6}, {"200us", 200e-6}, {"500us", 500e-6}, {"1ms", 1e-3},
                                 {"2ms", 2e-3}};
  WorkloadAnalysis a;
  for (const auto& w : r.workloads) a.bottleneck.push_back(workload::utilization_while_all_send(r, w));
  for (const auto& w : kWindows) a.fairness.push_back({w.label, workload::fairness(r, w.seconds * scale.factor())});
  return a;
}

void add_workload_metrics(model::MetricSet& m, const workload::WorkloadRun& r, const WorkloadAnalysis& a,
                          const model::TimeScale& scale) {
  const double d = scale.factor();
  auto series = [&](const char* name) -> MetricValue& {
    auto& v = m[name];
    v.kind = MetricKind::kSeries;
    return v;
  };
  auto& fg = series("flow_goodput");
  auto& ff = series("flow_fct");
  auto& fs = series("flow_slowdown");
  auto& fr = m["flow_retransmits"];
  fr.kind = MetricKind::kCounter;
  double digest_errors = 0;
  for (const auto& f : r.flows) {
    const std::map<std::string, std::string> l{{"workload", f.workload}, {"from", f.from}, {"to", f.to}};
    fg.samples.push_back(Sample{l, f.goodput_bps * d});
    ff.samples.push_back(Sample{l, f.fct_s / d});
    fs.samples.push_back(Sample{l, f.slowdown});
    fr.samples.push_back(Sample{l, double(f.retransmitted)});
    // A failed flow's digest covers what it was told is acknowledged, not what it posted.
    digest_errors += f.digest_ok ? 0 : 1;
  }
  auto& wg = series("workload_goodput");
  auto& ru = series("rx_utilization");
  auto& bu = series("bottleneck_utilization");
  auto& ab = series("algbw");
  auto& bb = series("busbw");
  auto& bbe = series("busbw_efficiency");
  auto& it = series("iteration_time");
  auto& jc = series("jct");
  auto& l50 = series("latency_p50");
  auto& l99 = series("latency_p99");
  for (size_t wi = 0; wi < r.workloads.size(); ++wi) {
    const auto& w = r.workloads[wi];
    const std::map<std::string, std::string> l{{"workload", w.name}};
    jc.samples.push_back(Sample{l, w.jct_s / d});
    if (w.type == "allreduce" || w.type == "alltoall") {
      ab.samples.push_back(Sample{l, w.algbw_bps * d});
      bb.samples.push_back(Sample{l, w.busbw_bps * d});
      if (w.busbw_bound_bps > 0) bbe.samples.push_back(Sample{l, w.busbw_bps / w.busbw_bound_bps});
      it.samples.push_back(Sample{l, w.iteration_s / d});
    } else if (w.type == "latency") {
      l50.samples.push_back(Sample{l, w.latency_p50_s / d});
      l99.samples.push_back(Sample{l, w.latency_p99_s / d});
    } else {
      wg.samples.push_back(Sample{l, w.goodput_bps * d});
      ru.samples.push_back(Sample{l, w.rx_utilization});
      bu.samples.push_back(Sample{l, a.bottleneck[wi]});
      // How evenly its flows were served: slowest FCT over fastest, Jain's index of goodputs.
      double lo = 1e300, hi = 0, sum = 0, sq = 0;
      for (size_t fi : w.flows) {
        const auto& f = r.flows[fi];
        lo = std::min(lo, f.fct_s);
        hi = std::max(hi, f.fct_s);
        sum += f.goodput_bps;
        sq += f.goodput_bps * f.goodput_bps;
      }
      if (!w.flows.empty() && lo > 0) series("fct_spread").samples.push_back(Sample{l, hi / lo});
      if (sq > 0) series("jain_index").samples.push_back(Sample{l, sum * sum / (double(w.flows.size()) * sq)});
    }
  }
  double timeouts = 0;
  for (const auto& f : r.flows) timeouts += double(f.timeouts);
  m["rc_timeouts"] = MetricValue{MetricKind::kScalar, timeouts, {}};
  auto& ft = series("fairness_time");
  auto& fsr = series("fair_share_ratio");
  for (const auto& w : a.fairness)
    for (const auto& g : w.groups) {
      ft.samples.push_back(Sample{{{"to", g.to}, {"window", w.window}}, g.converge_s / d});
      for (size_t k = 0; k < g.flows.size(); ++k) {
        const auto& f = r.flows[g.flows[k]];
        fsr.samples.push_back(
            Sample{{{"workload", f.workload}, {"from", f.from}, {"to", f.to}, {"window", w.window}}, g.share_ratio[k]});
      }
    }
  m["retransmits"] = MetricValue{MetricKind::kScalar, double(r.retransmitted), {}};
  m["cnp_sent"] = MetricValue{MetricKind::kScalar, double(r.cnp_sent), {}};
  m["cnp_received"] = MetricValue{MetricKind::kScalar, double(r.cnp_received), {}};
  m["bad_icrc"] = MetricValue{MetricKind::kScalar, double(r.bad_icrc), {}};
  m["host_rx_overflow"] = MetricValue{MetricKind::kScalar, double(r.rx_overflow), {}};
  m["digest_errors"] = MetricValue{MetricKind::kScalar, digest_errors, {}};
  // rxe's counter names, summed over QPs (FAULTS.md), and the flows that did not complete.
  double failed = 0, unfinished = 0, seq = 0, oos = 0, dup = 0, exceeded = 0, retries = 0;
  for (const auto& f : r.flows) {
    failed += f.failed;
    unfinished += f.unfinished;
    seq += double(f.rcvd_seq_err);
    oos += double(f.out_of_seq_request);
    dup += double(f.duplicate_request);
    exceeded += double(f.retry_exceeded_err);
    retries += double(f.timeouts);
  }
  m["flows_failed"] = MetricValue{MetricKind::kScalar, failed, {}};
  m["flows_unfinished"] = MetricValue{MetricKind::kScalar, unfinished, {}};
  auto& fa = series("flow_failed_at");
  for (const auto& f : r.flows)
    if (f.failed_at_s >= 0) fa.samples.push_back(Sample{{{"workload", f.workload}, {"from", f.from}, {"to", f.to}}, f.failed_at_s / d});
  m["retry_exceeded_err"] = MetricValue{MetricKind::kScalar, exceeded, {}};
  m["completer_retry_err"] = MetricValue{MetricKind::kScalar, retries, {}};
  m["rcvd_seq_err"] = MetricValue{MetricKind::kScalar, seq, {}};
  m["out_of_seq_request"] = MetricValue{MetricKind::kScalar, oos, {}};
  m["duplicate_request"] = MetricValue{MetricKind::kScalar, dup, {}};
  // rxe counts per device, not per QP: its own counters stand in for the QPs' sums.
  for (const char* name : {"retry_exceeded_err", "completer_retry_err", "rcvd_seq_err", "out_of_seq_request", "duplicate_request"})
    if (auto it = r.nic_counters.find(name); it != r.nic_counters.end())
      m[name] = MetricValue{MetricKind::kScalar, double(it->second), {}};
}

void add_fault_goodput(model::MetricSet& m, const workload::WorkloadRun& r, const std::vector<fault::Happened>& happened,
                       int64_t timeline_t0_ns, const model::TimeScale& scale) {
  const double d = scale.factor();
  // Each fault's stretches in force, in the flows' time (emulated s from the first
  // workload's start); one still open at the end runs to infinity (clipped below).
  const double offset = double(timeline_t0_ns - r.t0_ns) / 1e9;
  std::map<size_t, std::vector<std::pair<double, double>>> windows;
  std::map<size_t, double> open;
  for (const auto& h : happened) {
    const double t = offset + h.t_s * d;
    if (h.begin && h.ok) open[h.fault] = t;
    else if (!h.begin && open.count(h.fault)) {
      windows[h.fault].push_back({open[h.fault], t});
      open.erase(h.fault);
    }
  }
  for (const auto& [i, t] : open) windows[i].push_back({t, INFINITY});
  auto& s = m["flow_goodput_in_fault"];
  s.kind = MetricKind::kSeries;
  for (const auto& f : r.flows) {
    if (f.rate_trace.size() < 2) continue;
    const double from = std::max(f.start_s, f.rate_trace.front().t_s), to = f.rate_trace.back().t_s;
    for (const auto& [i, ws] : windows) {
      double bytes = 0, seconds = 0;
      for (const auto& [a, b] : ws) {
        const double lo = std::max(a, from), hi = std::min(b, to);
        if (hi <= lo) continue;
        bytes += workload::delivered_at(f, hi) - workload::delivered_at(f, lo);
        seconds += hi - lo;
      }
      if (seconds > 0)
        s.samples.push_back(Sample{{{"workload", f.workload}, {"from", f.from}, {"to", f.to}, {"fault", std::to_string(i)}},
                                   bytes * 8 / seconds * d});
    }
  }
}

ordered_json workloads_json(const workload::WorkloadRun& r, const WorkloadAnalysis& a, const model::TimeScale& scale) {
  const double d = scale.factor();
  ordered_json flows = ordered_json::array();
  for (const auto& f : r.flows) {
    ordered_json trace = ordered_json::array();
    for (const auto& p : f.rate_trace) trace.push_back({p.t_s / d, p.rate_bps * d, p.delivered});
    flows.push_back({{"workload", f.workload}, {"from", f.from}, {"to", f.to}, {"qps", f.qps}, {"bytes", f.bytes},
                     {"start_s", f.start_s / d}, {"fct_s", f.fct_s / d}, {"ideal_fct_s", f.ideal_s / d},
                     {"fct_slowdown", f.slowdown}, {"goodput_bps", f.goodput_bps * d},
                     {"retransmitted", f.retransmitted}, {"timeouts", f.timeouts}, {"cnp_sent", f.cnp_sent}, {"cnp_received", f.cnp_received},
                     {"digest_ok", f.digest_ok}, {"failed", f.failed}, {"unfinished", f.unfinished},
                     {"failed_at_s", f.failed_at_s >= 0 ? ordered_json(f.failed_at_s / d) : ordered_json()},
                     {"error", f.error}, {"rcvd_seq_err", f.rcvd_seq_err}, {"out_of_seq_request", f.out_of_seq_request},
                     {"duplicate_request", f.duplicate_request}, {"retry_exceeded_err", f.retry_exceeded_err}, {"rate_trace", {{"columns", {"t_s", "rate_bps", "delivered_bytes"}}, {"rows", trace}}}});
  }
  ordered_json wls = ordered_json::array();
  for (size_t wi = 0; wi < r.workloads.size(); ++wi) {
    const auto& w = r.workloads[wi];
    ordered_json j{{"name", w.name}, {"type", w.type}, {"hosts", w.hosts}, {"message_bytes", w.message},
                   {"iterations", w.iterations}, {"jct_s", w.jct_s / d}};
    if (w.type == "allreduce" || w.type == "alltoall") {
      j["iteration_s"] = w.iteration_s / d;
      j["algbw_GBps"] = w.algbw_bps * d / 8e9;
      j["busbw_GBps"] = w.busbw_bps * d / 8e9;
      j["busbw_bound_GBps"] = w.busbw_bound_bps * d / 8e9;
    } else if (w.type == "latency") {
      j["latency_one_way_s"] = {{"p50", w.latency_p50_s / d}, {"p99", w.latency_p99_s / d}, {"avg", w.latency_avg_s / d},
                                {"method", w.one_way_measured ? "ping sent to ping received" : "rtt/2"},
                                {"weighting", "time: each ping for half its round trip and half the one before"},
                                {"per_ping", {{"p50", w.per_ping_p50_s / d}, {"p99", w.per_ping_p99_s / d},
                                              {"avg", w.per_ping_avg_s / d}}}};
    } else {
      j["goodput_bps"] = w.goodput_bps * d;
      j["rx_utilization"] = w.rx_utilization;
      j["bottleneck_utilization"] = a.bottleneck[wi];
    }
    wls.push_back(j);
  }
  ordered_json fair = ordered_json::array();
  for (const auto& w : a.fairness)
    for (const auto& g : w.groups) {
      ordered_json names = ordered_json::array(), ratios = ordered_json::array(), rows = ordered_json::array();
      for (size_t k = 0; k < g.flows.size(); ++k) {
        const auto& f = r.flows[g.flows[k]];
        names.push_back(f.workload + " " + f.from + ">" + f.to);
        ratios.push_back(g.share_ratio[k]);
      }
      for (const auto& row : g.goodput) {
        ordered_json x = ordered_json::array();
        for (double v : row) x.push_back(v * d);
        rows.push_back(x);
      }
      fair.push_back({{"to", g.to}, {"window", w.window}, {"tolerance", workload::kFairTolerance},
                      {"overlap_start_s", g.overlap_start_s / d}, {"overlap_s", g.overlap_s / d},
                      {"fair_share_bps", g.fair_share_bps * d},
                      {"converge_s", std::isfinite(g.converge_s) ? ordered_json(g.converge_s / d) : ordered_json()},
                      {"flows", names}, {"share_ratio", ratios}, {"goodput_bps", rows}});
    }
  return {{"units", "physical (emulated rates x D, emulated times / D)"},
          {"engine", {{"retransmitted", r.retransmitted}, {"cnp_sent", r.cnp_sent}, {"cnp_received", r.cnp_received},
                      {"ce_marked", r.ce_marked}, {"bad_icrc", r.bad_icrc}, {"rx_overflow", r.rx_overflow},
                      {"worst_pacing_error", r.worst_pacing_error}, {"worst_paced_nic", r.worst_paced_nic}, {"engine_cpu_busy", r.engine_cpu_busy},
                      {"engine_cpu_waiting", r.engine_cpu_waiting}, {"engine_threads", r.engine_threads}, {"machine_steal", r.machine_steal},
                      {"machine_other", r.machine_other}, {"wall_seconds", r.seconds}}},
          {"nic_counters", r.nic_counters},
          {"workloads", wls},
          {"flows", flows},
          {"fairness", fair}};
}

namespace {

// nccl-tests' table for a collective, and its bound.
std::string collective_rows(const workload::WorkloadResult& w, double d) {
  std::string out = fmt::format(
      "{} ({}, {} ranks)\n#       size    count   type   redop    time   algbw   busbw\n"
      "#        (B) (elements)                 (us)  (GB/s)  (GB/s)\n"
      "{:>12} {:>10}  uint8    {} {:>9.1f} {:>7.2f} {:>7.2f}\n",
      w.name, w.type, w.hosts, w.message, w.message, w.type == "allreduce" ? " sum" : "none", w.iteration_s / d * 1e6,
      w.algbw_bps * d / 8e9, w.busbw_bps * d / 8e9);
  if (w.busbw_bound_bps > 0) {
    const std::string factor = std::abs(w.busbw_bound_factor - 1) > 1e-9
                                   ? fmt::format(" x {:.3g}, several GPUs a host", w.busbw_bound_factor)
                                   : "";
    out += fmt::format("# busbw bound {:.2f} GB/s (slowest edge x payload efficiency{}): {:.1f} %\n",
                       w.busbw_bound_bps * d / 8e9, factor, w.busbw_bps / w.busbw_bound_bps * 100);
  }
  return out;
}

// perftest's latency table.
// perftest's latency table (per ping), then the same over the probe's time (each ping for the
// time it samples): a closed loop pings most while the queue is empty, so the two part under load.
std::string latency_rows(const workload::WorkloadResult& w, double d) {
  return fmt::format(
      "{} (latency, one way, {})\n #bytes  #iterations  t_typical[usec]  t_99%[usec]  t_avg[usec]\n"
      " {:<7} {:<12} {:<16.3f} {:<12.3f} {:.3f}\n"
      " over the probe's time (each ping for the time it samples): p50 {:.3f}, p99 {:.3f}, avg {:.3f} usec\n"
      " (emulated: {:.1f} / {:.1f} / {:.1f} usec; the emulation's software floor, tens of usec, is\n"
      "  not scaled by D, so physical latency below that floor / D means nothing)\n",
      w.name, w.one_way_measured ? "ping sent to ping received" : "RTT / 2", w.message, w.iterations,
      w.per_ping_p50_s / d * 1e6, w.per_ping_p99_s / d * 1e6, w.per_ping_avg_s / d * 1e6, w.latency_p50_s / d * 1e6,
      w.latency_p99_s / d * 1e6, w.latency_avg_s / d * 1e6, w.per_ping_p50_s * 1e6, w.per_ping_p99_s * 1e6,
      w.per_ping_avg_s * 1e6);
}


// One row per flow (the first 40). CNPs: received by the sender (its cuts' cause) / sent by
// the responder for this flow.
std::string flow_rows(const workload::WorkloadRun& r, double d) {
  std::string out = " flow                          goodput       FCT      slowdown  retrans  CNP rx/tx  digest\n";
  size_t shown = 0;
  for (const auto& f : r.flows) {
    if (++shown > 40) return out + fmt::format(" ... ({} more in results.json)\n", r.flows.size() - 40);
    const std::string name = (f.workload + " " + f.from + ">" + f.to).substr(0, 28);
    out += fmt::format(" {:<28} {:>12} {:>9.3f} ms {:>7.2f} {:>8} {:>5}/{:<4}  {}\n", name,
                       model::human_rate(f.goodput_bps * d), f.fct_s / d * 1e3, f.slowdown, f.retransmitted,
                       f.cnp_received, f.cnp_sent, !f.digest_ok ? "BAD" : f.failed ? "failed" : f.unfinished ? "waiting" : "ok");
  }
  return out;
}

// One line per shared receiver: the 1 ms and 2 ms windows, the ones scenarios assert on.
std::string fairness_rows(const WorkloadAnalysis& a, double d) {
  std::map<std::string, std::string> lines;
  for (const auto& w : a.fairness) {
    const std::string_view label = w.window;
    if (label != "1ms" && label != "2ms") continue;
    for (const auto& g : w.groups) {
      std::string& text = lines[g.to];
      if (text.empty())
        text = fmt::format("fairness into {}: {} flows over {:.2f} ms, fair share {} (±{:.0f} %):", g.to, g.flows.size(),
                           g.overlap_s / d * 1e3, model::human_rate(g.fair_share_bps * d), workload::kFairTolerance * 100);
      std::string shares;
      for (double x : g.share_ratio) shares += fmt::format("{}{:.2f}", shares.empty() ? "" : "/", x);
      const std::string when = std::isfinite(g.converge_s) ? fmt::format("within after {:.2f} ms", g.converge_s / d * 1e3)
                                                           : "NOT within by the end";
      text += fmt::format("{}every {} window {}, mean share {}", text.back() == ':' ? " " : "; ", label, when, shares);
    }
  }
  std::string out;
  for (const auto& [to, text] : lines) out += text + "\n";
  return out;
}

}  // namespace

std::string workloads_table(const workload::WorkloadRun& r, const WorkloadAnalysis& a, const model::TimeScale& scale) {
  const double d = scale.factor();
  std::string out;
  for (size_t wi = 0; wi < r.workloads.size(); ++wi) {
    const auto& w = r.workloads[wi];
    if (w.type == "allreduce" || w.type == "alltoall") out += collective_rows(w, d);
    else if (w.type == "latency") out += latency_rows(w, d);
    else
      out += fmt::format("{} ({}): {} total, job {:.3f} ms, busiest receiver {:.1f} % busy ({:.1f} % while all send)\n",
                         w.name, w.type, model::human_rate(w.goodput_bps * d), w.jct_s / d * 1e3,
                         w.rx_utilization * 100, a.bottleneck[wi] * 100);
  }
  out += flow_rows(r, d) + fairness_rows(a, d);
  out += fmt::format("engine: {} retransmitted, {} CNPs sent, {} received, {} bad ICRC; figures physical (D = {:g})\n",
                     r.retransmitted, r.cnp_sent, r.cnp_received, r.bad_icrc, d);
  return out;
}

std::string flows_csv(const workload::WorkloadRun& r, int64_t traffic_t0_ns, const model::TimeScale& scale) {
  const double d = scale.factor();
  const double base = double(r.t0_ns - traffic_t0_ns) / 1e9;  // the flows' time 0 on the traffic's clock (wall)
  std::string out = "t_s,flow,workload,from,to,rate_gbps,delivered_bytes,cnp_received\n";
  for (size_t i = 0; i < r.flows.size(); ++i) {
    const auto& f = r.flows[i];
    for (const auto& p : f.rate_trace)
      out += fmt::format("{:.9f},{},{},{},{},{:.4f},{},{}\n", (base + p.t_s) / d, i, f.workload, f.from, f.to,
                         p.rate_bps * d / 1e9, p.delivered, p.cnp_received);
  }
  return out;
}

std::string fct_txt(const workload::WorkloadRun& r, const fabric::KernelPlan& plan, int64_t traffic_t0_ns,
                    const model::TimeScale& scale) {
  const double d = scale.factor();
  auto addr = [&](const std::string& host) -> uint32_t {
    for (const auto& n : plan.nodes)
      if (n.node == host) return n.ports.empty() ? n.loopback : n.ports.front().addr;
    return 0;
  };
  const double base = double(r.t0_ns - traffic_t0_ns) / 1e9;
  std::string out;
  for (size_t i = 0; i < r.flows.size(); ++i) {
    const auto& f = r.flows[i];
    if (f.failed) continue;  // HPCC writes a line when a flow finishes
    out += fmt::format("{:08x} {:08x} {} 4791 {} {} {} {}\n", addr(f.from), addr(f.to), i, f.bytes,
                       uint64_t(std::max(0.0, (base + f.start_s) / d * 1e9)), uint64_t(f.fct_s / d * 1e9),
                       uint64_t(f.ideal_s / d * 1e9));
  }
  return out;
}

std::vector<std::string> latency_below_wire(const workload::WorkloadRun& r, const model::TimeScale& scale) {
  const double d = scale.factor();
  std::vector<std::string> notes;
  for (const auto& w : r.workloads) {
    if (w.type != "latency" || w.flows.empty() || w.latency_p50_s <= 0) continue;
    const auto& f = r.flows.at(w.flows.front());
    // Ethernet, IPv4, UDP, BTH, ICRC, FCS around the payload; physical rate = emulated x D.
    const double frame_bits = double(w.message + 14 + 20 + 8 + 12 + 4 + 4) * 8;
    const double wire_s = 2 * frame_bits / (f.rx_line_bps * d);
    if (w.latency_p50_s / d < wire_s)
      notes.push_back(fmt::format("latency {}: one-way p50 {:.1f} ns is below its frame's own time on the wire ({:.1f} ns, "
                                  "two store-and-forward hops): not a physical figure but the emulation's software floor "
                                  "({:.1f} us of wall clock, not scaled by D) / D; a smaller D shows more of it",
                                  w.name, w.latency_p50_s / d * 1e9, wire_s * 1e9, w.latency_p50_s * 1e6));
  }
  return notes;
}

}  // namespace rocelab::run
