// `rocelab report RUN_DIR`: the run directory as one self-contained report.html (opens
// offline: Chart.js from Debian's libjs-chart.js is inlined), and, where gnuplot is
// installed, static SVG plots for CI artifacts. Reads only the run directory's files, so a
// run copied off another machine reports the same.
#pragma once

#include <string>
#include <vector>

#include "sys/error.h"

namespace rocelab::run {

struct ReportOptions {
  std::string run_dir;
  std::string out;      // default RUN_DIR/report.html
  bool plots = true;    // RUN_DIR/plots/*.svg through gnuplot, when it is installed
  std::string chartjs = "/usr/share/javascript/chart.js/chart.min.js";
  std::string gnuplot = "/usr/bin/gnuplot";
};

struct ReportFiles {
  std::string html;
  std::vector<std::string> plots;  // written
  std::vector<std::string> notes;  // what the report could not show, and why
};

Result<ReportFiles> write_report(const ReportOptions& o);

// `rocelab compare RUN_DIR...`: the runs side by side on one page - what differs in their
// resolved scenarios, every metric with its change (the last run against the first), and
// their queues, pauses and flow rates overlaid on one time axis (a dash style per run).
struct CompareOptions {
  std::vector<std::string> run_dirs;  // 2 to 8
  std::string out = "compare.html";
  std::string chartjs = "/usr/share/javascript/chart.js/chart.min.js";
};
struct MetricChange {
  std::string metric;          // name, "name (sum)" or "name (max)" over a series' samples
  std::vector<double> values;  // one per run (NaN: the run has none)
  double change = 0;           // (last - first) / |first|; infinite when first is 0 and last is not
};
struct CompareFiles {
  std::string html;
  std::vector<MetricChange> most_changed;  // up to 10: to or from 0 first, then by the factor either way
  size_t scenario_differences = 0;
};
Result<CompareFiles> write_compare(const CompareOptions& o);

// The frame every rocelab page shares (report, sweep): its style, `body`, `data_json`
// embedded for `script` to read from #data, Chart.js inlined, so it opens offline. A script
// reports what it drew in <body data-charts> and any error in #errors (for tests).
std::string html_page(const std::string& title, const std::string& body, const std::string& data_json,
                      const std::string& script, const std::string& chartjs);

}  // namespace rocelab::run
