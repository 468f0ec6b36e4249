// Workload results for the run contract: metrics (physical units), results.json, and the
// terminal table in the style of perftest and nccl-tests.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/expect.h"
#include "model/scenario.h"
#include "workload/runner.h"

namespace rocelab::run {

void add_workload_metrics(model::MetricSet& m, const workload::WorkloadRun& r, const model::TimeScale& scale);
nlohmann::ordered_json workloads_json(const workload::WorkloadRun& r, const model::TimeScale& scale);
std::string workloads_table(const workload::WorkloadRun& r, const model::TimeScale& scale);

}  // namespace rocelab::run
