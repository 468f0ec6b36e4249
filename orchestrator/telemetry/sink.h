// Telemetry sinks: what a run reads off the running fabric into its metrics and results,
// registered by name (DESIGN.md §5), run in registration order when the traffic is done.
// A sink is one file plus one line in sinks() (sink.cc). Time series, capture and live
// metrics arrive as further sinks.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/kernel_plan.h"
#include "fabric/testbed.h"
#include "model/expect.h"
#include "model/scenario.h"
#include "sys/registry.h"

namespace rocelab::telemetry {

struct Collect {
  const model::Scenario& scenario;
  const fabric::KernelPlan& plan;
  fabric::Testbed& testbed;
  model::MetricSet& metrics;
  std::vector<std::string>& notes;  // what the run should say about itself
  std::string& invalid;             // set (if empty) when the figures show the machine did not keep up
  nlohmann::ordered_json& record;   // the sink's own section for the event log
  int64_t t0_ns = 0;                // the Testbed clock at the traffic phase's start (0: none)
  std::map<std::string, std::string>* files = nullptr;  // name -> text, written into the run directory
};

struct Sink {
  std::string type;
  std::string summary;
  std::function<Status(Collect&)> collect;
};

const Registry<Sink>& sinks();

Sink port_counters_sink();
Sink agent_sink();

}  // namespace rocelab::telemetry
