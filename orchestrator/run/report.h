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

}  // namespace rocelab::run
