// The scenario's fault timeline on a fabric that is up: each fault starts at its `at` and
// ends after its `duration` (physical times, × D on the wall clock), from the moment the
// timeline starts (with the workloads). Today: `loss` (fabric::set_port_loss); the other
// types are refused before anything is made (faults_not_built).
#pragma once

#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "model/scenario.h"

namespace rocelab::run {

// Why the scenario's faults cannot run yet, or empty.
std::string faults_not_built(const model::Scenario& s);

class FaultTimeline {
 public:
  FaultTimeline(const model::Scenario& s, const std::string& instance);
  ~FaultTimeline();  // stops and joins; faults still in force stay (the fabric goes down next)
  FaultTimeline(const FaultTimeline&) = delete;
  FaultTimeline& operator=(const FaultTimeline&) = delete;

  void start();
  // Waits until every event has happened (a run without workloads waits for its faults).
  void wait_all();
  void stop();
  // What happened, for results.json and events.jsonl: {t_s (physical), fault, action, ok, error}.
  nlohmann::ordered_json record() const;
  bool failed() const;

 private:
  struct Event {
    double wall_s;  // from start
    size_t fault;
    bool begin;
  };
  void loop();

  const model::Scenario& s_;
  std::string instance_;
  std::vector<Event> events_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  size_t done_ = 0;
  nlohmann::ordered_json record_ = nlohmann::ordered_json::array();
  bool failed_ = false;
};

}  // namespace rocelab::run
