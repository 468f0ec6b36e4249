// Fairness of flows that share a receiver: each flow's goodput in fixed windows (from the
// responder's in-order delivered bytes, not from completions, which come a message at a
// time) against the fair share = the receiver's line rate × payload efficiency / flows.
// Windows start when the last flow of the group starts and end when the first finishes.
// Pure: works on the runner's traces, in the engine's (emulated) seconds.
#pragma once

#include <string>
#include <vector>

#include "workload/runner.h"

namespace rocelab::workload {

inline constexpr double kFairTolerance = 0.10;  // ±10 % of the fair share

struct FairnessGroup {
  std::string to;               // the receiving host
  double window_s = 0;          // emulated
  std::vector<size_t> flows;    // indices into WorkloadRun::flows
  double overlap_start_s = 0, overlap_s = 0;
  double fair_share_bps = 0;
  // goodput[w][i]: flow i's goodput in window w
  std::vector<std::vector<double>> goodput;
  // From the last flow's start until every later window of every flow is within the
  // tolerance; infinity when the last window is not.
  double converge_s = 0;
  // Per flow: mean goodput over the windows from convergence on (the later half of the
  // overlap when it never converged) / fair share.
  std::vector<double> share_ratio;
};

// One group per receiver with two or more streaming flows that overlap for at least two
// windows of `window_s`.
// A flow's in-order delivered bytes at `t` (emulated s from the first workload's start),
// linear between its trace samples; 0 before the trace, the last sample's after it.
double delivered_at(const FlowResult& f, double t);

std::vector<FairnessGroup> fairness(const WorkloadRun& r, double window_s, double tolerance = kFairTolerance);

// A streaming workload's busiest receiver while every one of its senders still sends (from
// the workload's first start to its first flow's end): wire bytes / (time × line rate).
// An incast's bottleneck during the incast proper, without the tail where one flow is left
// alone to climb back by additive increase. 0 when the workload has no streaming flows.
double utilization_while_all_send(const WorkloadRun& r, const WorkloadResult& w);

}  // namespace rocelab::workload
