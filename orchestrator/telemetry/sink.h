// Telemetry sinks: what a run reads off the running fabric into its metrics and results,
// registered by name (DESIGN.md §5), run in registration order when the traffic is done.
// A sink is one file plus one line in sinks() (sink.cc). A sink that records while the
// traffic runs (time series) also has `start`: its Recorder runs from the traffic phase's
// start to its end, and its collect reads what the Recorder kept.
#pragma once

#include <functional>
#include <map>
#include <memory>
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

// What a recording sink is started with, as the traffic phase begins.
struct Start {
  const model::Scenario& scenario;
  const fabric::KernelPlan& plan;
  fabric::Testbed& testbed;
  std::string run_dir;  // where a recorder writes files too large to keep in memory (captures)
};

class Recorder {
 public:
  virtual ~Recorder() = default;
  virtual void stop() = 0;  // the traffic is done: a last sample, then no more (idempotent)
};

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
  Recorder* recorder = nullptr;  // the sink's own, when it has `start` and the traffic ran
  // The hypervisor's steal past 5 % of the phase (workload::WorkloadRun::steal), or empty. A
  // sink with a finer probe of the machine's freezes judges it (and says so in steal_judged);
  // unjudged, it makes the run invalid.
  std::string steal;
  bool steal_judged = false;
};

struct Sink {
  std::string type;
  std::string summary;
  std::function<Status(Collect&)> collect;
  std::function<std::unique_ptr<Recorder>(const Start&)> start;  // empty: nothing recorded while the traffic runs
};

const Registry<Sink>& sinks();

Sink port_counters_sink();
Sink agent_sink();
Sink series_sink();
Sink capture_sink();

// The wall-clock interval a run samples at (scenario `telemetry.interval` x D, or the
// default), and the physical interval that is.
struct SampleInterval {
  int64_t wall_ns = 0;
  double physical_s = 0;
};
SampleInterval sample_interval(const model::Scenario& s);

}  // namespace rocelab::telemetry
