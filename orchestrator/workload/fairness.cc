#include "workload/fairness.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace rocelab::workload {

double delivered_at(const FlowResult& f, double t) {
  const auto& tr = f.rate_trace;
  if (tr.empty() || t < tr.front().t_s) return 0;
  if (t > tr.back().t_s) return double(tr.back().delivered);
  auto it = std::lower_bound(tr.begin(), tr.end(), t, [](const FlowResult::TracePoint& p, double x) { return p.t_s < x; });
  if (it == tr.begin()) return double(it->delivered);
  const auto& b = *it;
  const auto& a = *(it - 1);
  const double span = b.t_s - a.t_s;
  return span > 0 ? double(a.delivered) + double(b.delivered - a.delivered) * (t - a.t_s) / span : double(b.delivered);
}

std::vector<FairnessGroup> fairness(const WorkloadRun& r, double window_s, double tolerance) {
  std::vector<FairnessGroup> out;
  if (!(window_s > 0)) return out;
  std::map<std::string, std::vector<size_t>> by_receiver;
  for (size_t i = 0; i < r.flows.size(); ++i)
    if (r.flows[i].streaming && r.flows[i].rate_trace.size() >= 2) by_receiver[r.flows[i].to].push_back(i);
  for (const auto& [to, members] : by_receiver) {
    if (members.size() < 2) continue;
    FairnessGroup g;
    g.to = to;
    g.window_s = window_s;
    g.flows = members;
    double start = 0, end = std::numeric_limits<double>::infinity(), line = 0, efficiency = 0;
    for (size_t i : members) {
      const FlowResult& f = r.flows[i];
      start = std::max(start, f.rate_trace.front().t_s);
      end = std::min(end, f.rate_trace.back().t_s);
      line = std::max(line, f.rx_line_bps);
      efficiency += f.wire_bytes > 0 ? double(f.bytes) / double(f.wire_bytes) : 0;
    }
    const size_t windows = end > start ? size_t((end - start) / window_s) : 0;
    if (windows < 2) continue;
    g.overlap_start_s = start;
    g.overlap_s = end - start;
    const double n = double(members.size());
    g.fair_share_bps = line * (efficiency / n) / n;
    if (!(g.fair_share_bps > 0)) continue;
    for (size_t w = 0; w < windows; ++w) {
      const double a = start + double(w) * window_s, b = a + window_s;
      std::vector<double> row;
      for (size_t i : members)
        row.push_back((delivered_at(r.flows[i], b) - delivered_at(r.flows[i], a)) * 8 / window_s);
      g.goodput.push_back(std::move(row));
    }
    // The first window after the last one that is out of tolerance.
    size_t settled = 0;
    for (size_t w = 0; w < windows; ++w)
      for (double x : g.goodput[w])
        if (std::abs(x / g.fair_share_bps - 1) > tolerance) settled = w + 1;
    g.converge_s = settled < windows ? double(settled) * window_s : std::numeric_limits<double>::infinity();
    const size_t from = settled < windows ? settled : windows / 2;
    for (size_t k = 0; k < members.size(); ++k) {
      double sum = 0;
      for (size_t w = from; w < windows; ++w) sum += g.goodput[w][k];
      g.share_ratio.push_back(sum / double(windows - from) / g.fair_share_bps);
    }
    out.push_back(std::move(g));
  }
  return out;
}

double utilization_while_all_send(const WorkloadRun& r, const WorkloadResult& w) {
  double start = std::numeric_limits<double>::infinity(), end = start;
  for (size_t i : w.flows) {
    const FlowResult& f = r.flows[i];
    if (!f.streaming || f.rate_trace.size() < 2) return 0;
    start = std::min(start, f.start_s);
    end = std::min(end, f.rate_trace.back().t_s);
  }
  if (!(end > start)) return 0;
  std::map<std::string, std::pair<double, double>> rx;  // receiver → (wire bits, line rate)
  for (size_t i : w.flows) {
    const FlowResult& f = r.flows[i];
    const double wire_per_byte = f.bytes > 0 ? double(f.wire_bytes) / double(f.bytes) : 1;
    auto& [bits, line] = rx[f.to];
    bits += (delivered_at(f, end) - delivered_at(f, start)) * wire_per_byte * 8;
    line = std::max(line, f.rx_line_bps);
  }
  double best = 0;
  for (const auto& [to, v] : rx)
    if (v.second > 0) best = std::max(best, v.first / (end - start) / v.second);
  return best;
}

}  // namespace rocelab::workload
