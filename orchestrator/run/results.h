// What a run leaves behind: results.json, junit.xml, events.jsonl (DESIGN.md §6).
#pragma once

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sys/netns.h"
#include "model/expect.h"
#include "model/scenario.h"

namespace rocelab::run {

inline constexpr int kResultsSchemaVersion = 1;

// Exit codes of `rocelab run` (and the other commands where they apply).
enum ExitCode : int {
  kExitPass = 0, kExitAssertion = 1, kExitInvalid = 2, kExitBadInput = 3, kExitEnvironment = 4, kExitTestbedFault = 5
};

struct AssertionOutcome {
  const model::Expectation* expect = nullptr;
  model::Evaluation eval;
};

// The metrics a finished run exposes to expect: and results.json.
model::MetricSet topology_metrics(const model::Scenario& s);
nlohmann::ordered_json metrics_json(const model::MetricSet& m);
nlohmann::ordered_json assertions_json(const std::vector<AssertionOutcome>& a);

// JUnit XML: one testsuite per run, one testcase per expect: assertion.
// `properties` join the suite's (the run's class, a retry's reason).
std::string junit_xml(const model::Scenario& s, const std::vector<AssertionOutcome>& a, double seconds,
                      const std::string& timestamp, const std::string& extra_failure = {},
                      const std::vector<std::pair<std::string, std::string>>& properties = {});

// An append-only JSON-lines event log with times relative to the run's start.
class EventLog {
 public:
  explicit EventLog(const std::string& path);
  void add(const std::string& event, nlohmann::ordered_json fields = nlohmann::ordered_json::object());
  double elapsed() const;

 private:
  sys::Fd fd_;  // opened without following links (sys/files.h): -1 when it could not be
  std::chrono::steady_clock::time_point start_;
};

std::string utc_timestamp(std::chrono::system_clock::time_point t, bool compact = false);
// Text for XML or HTML (attribute values included); control characters but tab and
// newlines become '?'.
std::string xml_escape(const std::string& s);
std::string observed_text(const model::Evaluation& e);

}  // namespace rocelab::run
