// `rocelab run`: validate → up → workloads and faults → collect → assertions → down, into a
// run directory (DESIGN.md §6). Stages whose issue has not landed yet are recorded as such.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fabric/realiser.h"
#include "model/scenario.h"
#include "run/capabilities.h"
#include "run/results.h"
#include "sys/files.h"

namespace rocelab::run {

struct RunOptions {
  std::string scenario_path;  // copied into the run directory
  std::string out_dir;        // empty: runs/NAME-YYYYMMDD-HHMMSS under the current directory
  bool model_only = false;    // evaluate the model's metrics without making a fabric
  const std::atomic<bool>* cancel = nullptr;  // a signal asked us to stop: tear down, report
  uint16_t metrics_port = 0;  // the agent serves Prometheus metrics here while the fabric is up
  std::function<void(double, const std::string&)> meter;  // the workloads' progress (a bar); unset: log lines
  std::vector<std::string> notes;  // the caller's, first in the run's notes (how `scale: auto` chose D)
  // One machine's part of a fabric split over several (`run --part I/M --peers ...`,
  // docs/multi-machine.md): its share of the fabric, faults and QP ends. The parts meet at a
  // rendezvous on part 0's underlay address, and each reports the whole run.
  std::optional<fabric::UpOptions::Split> split;
  int64_t split_wait_ms = 300'000;  // how long a part waits for the others to start, and to come up
  std::string run_key;              // the secret every part signs its rendezvous frames with (empty: none)
  bool insecure_no_key = false;     // a split run without a key, asked for by name (--insecure-no-key)
  std::string job;                  // the scheduler's job (UpOptions::job): in the state file
  // This run repeats an invalid one (exit 2) at another D, and why: results.json and the
  // JUnit carry it, so a CI report shows every retry.
  std::string retry_of;
};

struct RunReport {
  int exit_code = kExitPass;
  std::string run_dir;
  std::shared_ptr<sys::HeldDir> held;  // the run directory still held: the report goes in through it
  std::string outcome;  // pass, fail, invalid, error
  std::string error;    // why, when the run itself could not proceed
  std::vector<std::string> notes;  // what this run did not do, and why
  std::vector<AssertionOutcome> assertions;
  double seconds = 0;
  std::string table;  // the workloads' results, for the terminal
};

RunReport run_scenario(const model::Scenario& s, const RunOptions& opts);

// run_scenario, and an invalid run (exit 2: the machine did not keep up) once more at 2 x D,
// as DESIGN.md §3 asks of every runner: `s` is left at the D of the last run, the retry's
// options say retry_of, and retry_dir(first) names its run directory (empty: the default).
// say() hears why, before the retry. Not for a split run: its parts would each decide.
RunReport run_scenario_retrying(model::Scenario& s, RunOptions opts,
                                const std::function<std::string(const RunReport&)>& retry_dir,
                                const std::function<void(const std::string&)>& say);

}  // namespace rocelab::run
