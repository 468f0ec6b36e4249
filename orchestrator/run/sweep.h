// `rocelab sweep`: a scenario over a grid of knob values and seeds, one run each, into one
// directory - sweep.json (the plan), points/NNNN/ (each run directory), sweep.csv (a row a
// run: the knobs, the seed, the exit code and each figure) and report.html (each figure
// against each knob, the seeds' spread drawn as a band, the table beside it). Resumable:
// the same command with the same --out runs only the points without a finished run
// (exit 0 or 1). With --repeat each point runs several times at each seed, and each figure's
// spread run to run is set beside its spread seed to seed. An invalid run (exit 2) is run again once at 2 x D, as every runner does.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/sweep.h"
#include "sys/error.h"

namespace rocelab::run {

struct SweepOptions {
  std::string scenario_path;
  model::SweepGrid grid;
  std::vector<std::string> figures;  // parse_value expressions: the columns and charts
  std::string out_dir;
  std::optional<double> scale;  // D for every point (else the file's)
  const std::atomic<bool>* cancel = nullptr;
  std::function<void(const std::string&)> say;  // one line per point started and finished
  std::string chartjs = "/usr/share/javascript/chart.js/chart.min.js";
};

struct SweepRow {
  model::SweepPoint point;
  std::string run_dir;
  int exit_code = -1;  // -1: not run (the sweep was stopped)
  bool reused = false, retried = false;
  std::vector<std::optional<double>> figures;
};

struct SweepResult {
  std::vector<SweepRow> rows;
  std::vector<model::FigureSpread> spreads;  // each figure's, in SweepOptions.figures order
  std::string csv, html;
  size_t ran = 0, reused = 0, retried = 0;
  bool stopped = false;
};

// The figures a sweep shows unless told: what tuning PFC, ECN and DCQCN moves.
const std::vector<std::string>& default_sweep_figures();

// Bad input (a point that does not validate, a figure that does not parse, --out holding
// another sweep) is an error before anything runs; a point's failing run is a row.
Result<SweepResult> run_sweep(const SweepOptions& o);

}  // namespace rocelab::run
