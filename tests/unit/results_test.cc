// The run contract: metrics, assertion outcomes, JUnit XML, the run directory, exit codes.
#include <gtest/gtest.h>

#include "sys/host_info.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "run/results.h"
#include "run/run.h"
#include "workload/runner.h"
#include "test_util.h"

using namespace rocelab;
namespace fs = std::filesystem;

namespace {

const char* kFabric = "scale: 1000\nfabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 2}\n";

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/rocelab-test-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<run::AssertionOutcome> outcomes(const model::Scenario& s) {
  auto m = run::topology_metrics(s);
  std::vector<run::AssertionOutcome> out;
  for (const auto& e : s.expect) out.push_back({&e, model::evaluate(*e.expr, m)});
  return out;
}

}  // namespace

TEST(Results, TopologyMetrics) {
  auto s = rocelab::testing::must_load(kFabric);
  auto m = run::topology_metrics(s);
  EXPECT_EQ(m.at("hosts").scalar, 4);
  EXPECT_EQ(m.at("switches").scalar, 4);
  EXPECT_EQ(m.at("links").scalar, 8);
  EXPECT_EQ(m.at("namespaces").scalar, 8);
  EXPECT_EQ(m.at("link_rate").samples.size(), 8u);
  EXPECT_EQ(m.at("oversubscription").scalar, 1);
}

TEST(Results, JUnitCarriesPassFailAndEscapes) {
  auto s = rocelab::testing::must_load(std::string(kFabric) +
                              "expect:\n  - hosts == 4\n  - {name: 'too <many> & more', expr: 'links > 100'}\n");
  auto a = outcomes(s);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].eval.outcome, model::Evaluation::Outcome::kPass);
  EXPECT_EQ(a[1].eval.outcome, model::Evaluation::Outcome::kFail);
  std::string x = run::junit_xml(s, a, 1.5, "2026-11-22T00:00:00");
  EXPECT_NE(x.find("tests=\"2\" failures=\"1\" errors=\"0\""), std::string::npos) << x;
  EXPECT_NE(x.find("name=\"hosts == 4\""), std::string::npos) << x;
  EXPECT_NE(x.find("name=\"too &lt;many&gt; &amp; more\""), std::string::npos) << x;
  EXPECT_NE(x.find("<failure type=\"assertion\" message=\"links &gt; 100 is false\">"), std::string::npos) << x;
  EXPECT_NE(x.find("observed: links = 8"), std::string::npos) << x;
  EXPECT_EQ(x.find("<>"), std::string::npos);
}

TEST(Results, UndecidedAssertionIsAnErrorNotAPass) {
  auto s = rocelab::testing::must_load(std::string(kFabric) + "expect:\n  - max(link_rate(tier=nothing)) > 0\n");
  auto a = outcomes(s);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].eval.outcome, model::Evaluation::Outcome::kError);
  std::string x = run::junit_xml(s, a, 0, "2026-11-22T00:00:00");
  EXPECT_NE(x.find("<error type=\"undecided\""), std::string::npos) << x;
}

TEST(Run, PassingRunWritesTheRunDirectoryAndExitsZero) {
  TempDir t;
  auto s = rocelab::testing::must_load(std::string(kFabric) + "expect:\n  - hosts == 4\n");
  auto rep = run::run_scenario(s, {.scenario_path = "", .out_dir = (t.path / "run").string(), .model_only = true});
  EXPECT_EQ(rep.exit_code, run::kExitPass) << rep.error;
  for (const char* f : {"resolved.json", "results.json", "events.jsonl", "junit.xml"})
    EXPECT_TRUE(fs::exists(t.path / "run" / f)) << f;
  auto res = nlohmann::json::parse(slurp(t.path / "run" / "results.json"));
  EXPECT_EQ(res["schema_version"], run::kResultsSchemaVersion);
  EXPECT_EQ(res["seed"], 1);
  EXPECT_EQ(res["scale"], 1000.0);
  EXPECT_EQ(res["outcome"], "pass");
  EXPECT_TRUE(res["kernel"].contains("release"));
  // The machine its figures are of (issue 48): what /proc and sysfs say here.
  EXPECT_EQ(res["machine"]["cpus"], sys::machine_id().cpus);
  EXPECT_EQ(res["machine"]["kernel"], res["kernel"]["release"]);
  EXPECT_TRUE(res["machine"].contains("clocksource") && res["machine"].contains("cpu_model"));
  EXPECT_TRUE(res["capabilities"].is_array() || res["capabilities"].is_object());
  EXPECT_EQ(res["assertions"].size(), 1u);
  // The resolved scenario in the run directory loads back.
  auto again = model::load_scenario_file((t.path / "run" / "resolved.json").string());
  EXPECT_TRUE(again.ok());
  // Every event line is JSON with a time and a name.
  std::stringstream ev(slurp(t.path / "run" / "events.jsonl"));
  size_t n = 0;
  for (std::string line; std::getline(ev, line); ++n) {
    auto j = nlohmann::json::parse(line);
    EXPECT_TRUE(j.contains("t") && j.contains("event")) << line;
  }
  EXPECT_GE(n, 4u);
}

TEST(Run, FailingAssertionExitsOne) {
  TempDir t;
  auto s = rocelab::testing::must_load(std::string(kFabric) + "expect:\n  - hosts == 4\n  - switches == 5\n");
  auto rep = run::run_scenario(s, {.scenario_path = "", .out_dir = (t.path / "run").string(), .model_only = true});
  EXPECT_EQ(rep.exit_code, run::kExitAssertion);
  EXPECT_EQ(rep.outcome, "fail");
}

TEST(Run, RefusesANonEmptyRunDirectory) {
  TempDir t;
  std::ofstream(t.path / "keep") << "x";
  auto s = rocelab::testing::must_load(kFabric);
  auto rep = run::run_scenario(s, {.scenario_path = "", .out_dir = t.path.string(), .model_only = true});
  EXPECT_EQ(rep.exit_code, run::kExitEnvironment);
  EXPECT_NE(rep.error.find("not empty"), std::string::npos) << rep.error;
  EXPECT_EQ(slurp(t.path / "keep"), "x");
}

TEST(Run, ModelOnlySkipsWorkloadsAndLeavesTheirAssertionsUndecided) {
  TempDir t;
  auto s = rocelab::testing::must_load(std::string(kFabric) +
                                       "workloads:\n  - {name: bw, type: write_bw, from: host1, to: host3}\n"
                                       "expect:\n  - min(flow_goodput) > 1G\n");
  auto rep = run::run_scenario(s, {.scenario_path = "", .out_dir = (t.path / "run").string(), .model_only = true});
  EXPECT_EQ(rep.exit_code, run::kExitAssertion);
  ASSERT_EQ(rep.assertions.size(), 1u);
  EXPECT_EQ(rep.assertions[0].eval.outcome, model::Evaluation::Outcome::kError);
  bool noted = false;
  for (const auto& n : rep.notes) noted = noted || n.find("workloads") != std::string::npos;
  EXPECT_TRUE(noted) << "the run says its workloads did not run";
}

// Issue 32: every exit code has one class, and the run's files say which (a CI runner decides
// on it: only "invalid run" may be retried).
TEST(Run, ResultsAndJunitCarryTheExitClassAndReason) {
  EXPECT_STREQ(class_name(0), "pass");
  EXPECT_STREQ(class_name(1), "assertion failed");
  EXPECT_STREQ(class_name(2), "invalid run");
  EXPECT_STREQ(class_name(3), "bad input");
  EXPECT_STREQ(class_name(4), "environment");
  EXPECT_STREQ(class_name(5), "testbed fault");
  EXPECT_EQ(make_error_code(Errc::kTestbedFault).message(), "testbed fault");
  TempDir t;
  auto s = rocelab::testing::must_load(std::string(kFabric) + "expect:\n  - switches == 5\n");
  auto rep = run::run_scenario(s, {.scenario_path = "", .out_dir = (t.path / "run").string(), .model_only = true,
                                   .retry_of = "the engine waited for a CPU"});
  EXPECT_EQ(rep.exit_code, run::kExitAssertion);
  auto res = nlohmann::json::parse(slurp(t.path / "run" / "results.json"));
  EXPECT_EQ(res["class"], "assertion failed");
  EXPECT_EQ(res["exit_code"], 1);
  EXPECT_EQ(res["retry_of"], "the engine waited for a CPU");
  const std::string junit = slurp(t.path / "run" / "junit.xml");
  EXPECT_NE(junit.find("<property name=\"class\" value=\"assertion failed\"/>"), std::string::npos) << junit;
  EXPECT_NE(junit.find("<property name=\"retry_of\" value=\"the engine waited for a CPU\"/>"), std::string::npos) << junit;
}

// Issue 48: exit 2 for an engine that waited for a CPU names the contention behind it, or
// says there was none (then the wait was rocelab's own, which the retry budget counts).
TEST(EngineWait, TheCauseIsNamedOnlyWhenItCameToHalfTheWait) {
  workload::WorkloadRun r;
  r.seconds = 4;
  r.machine_cpus = 2;
  r.engine_cpu_waiting = 0.25;  // 1 s waited
  r.machine_steal = 0.01;       // 0.08 s
  r.machine_other = 0.10;       // 0.8 s of CPU: a neighbour that ran most of the wait
  EXPECT_EQ(workload::cpu_wait_cause(r).rfind("; meanwhile another program held the CPUs (other programs ran 0.80 s", 0), 0u)
      << workload::cpu_wait_cause(r);
  r.machine_other = 0.05;  // 0.4 s: less than half
  EXPECT_EQ(workload::cpu_wait_cause(r).rfind("; neither another program (0.40 s of CPU time) nor the hypervisor (0.08 s", 0), 0u)
      << workload::cpu_wait_cause(r);
  r.machine_steal = 0.08;  // 0.64 s stolen
  EXPECT_EQ(workload::cpu_wait_cause(r).rfind("; meanwhile the hypervisor took 0.64 s", 0), 0u) << workload::cpu_wait_cause(r);
  r.machine_other = r.machine_steal = -1;  // unknown: nothing is claimed
  EXPECT_EQ(workload::cpu_wait_cause(r).rfind("; neither", 0), 0u) << workload::cpu_wait_cause(r);
}
