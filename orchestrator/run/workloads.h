// Workload results for the run contract: metrics (physical units), results.json, and the
// terminal table in the style of perftest and nccl-tests.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "fault/timeline.h"
#include "model/expect.h"
#include "model/scenario.h"
#include "workload/fairness.h"
#include "workload/runner.h"

namespace rocelab::run {

// What the metrics, the JSON and the table share, computed once per run.
struct WorkloadAnalysis {
  std::vector<double> bottleneck;  // per workload: utilization while every sender sends
  struct Fair {
    const char* window;  // the `window` label: 100us, 200us, 500us, 1ms, 2ms (physical)
    std::vector<workload::FairnessGroup> groups;
  };
  std::vector<Fair> fairness;
};
WorkloadAnalysis analyse_workloads(const workload::WorkloadRun& r, const model::TimeScale& scale);

void add_workload_metrics(model::MetricSet& m, const workload::WorkloadRun& r, const WorkloadAnalysis& a,
                          const model::TimeScale& scale);
// flow_goodput_in_fault: each flow's goodput while each fault was in force (the fault's
// pieces as they happened, clipped to the flow's life), from its delivered-bytes trace.
void add_fault_goodput(model::MetricSet& m, const workload::WorkloadRun& r, const std::vector<fault::Happened>& happened,
                       int64_t timeline_t0_ns, const model::TimeScale& scale);
nlohmann::ordered_json workloads_json(const workload::WorkloadRun& r, const WorkloadAnalysis& a,
                                      const model::TimeScale& scale);
// The flows' files in the run directory (README "Time series"), times physical from the
// traffic's start (`traffic_t0_ns`, the Testbed clock): series-flows.csv, each flow's DCQCN
// rate, delivered bytes and CNPs over time; fct.txt, the HPCC simulator's line per flow
// (sip dip sport dport size start_ns fct_ns standalone_fct_ns; hex addresses, sport the
// flow's index, dport 4791, standalone = the bytes at line rate: no link delay here).
std::string flows_csv(const workload::WorkloadRun& r, int64_t traffic_t0_ns, const model::TimeScale& scale);
std::string fct_txt(const workload::WorkloadRun& r, const fabric::KernelPlan& plan, int64_t traffic_t0_ns,
                    const model::TimeScale& scale);

std::string workloads_table(const workload::WorkloadRun& r, const WorkloadAnalysis& a, const model::TimeScale& scale);

// Latency figures no physical fabric could give: a one-way p50 below the probe frame's own
// time on the wire at its NIC's rate, twice (the NIC, the switch toward the receiver). There
// the emulation's software floor (tens of microseconds of wall clock, not scaled by D) is
// what was measured; each such workload gets a note saying so.
std::vector<std::string> latency_below_wire(const workload::WorkloadRun& r, const model::TimeScale& scale);

}  // namespace rocelab::run
