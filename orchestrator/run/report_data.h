// A run directory read as the pages that show it need it (report.html, compare.html):
// results.json and resolved.json, checked before parsing, and the series the charts draw.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "sys/error.h"

namespace rocelab::run {

struct RunDirFiles {
  nlohmann::json res;       // results.json
  nlohmann::json resolved;  // resolved.json, null when absent or unreadable
  nlohmann::json data;      // queues, pauses, buffers, flows, events, slowdown, collectives
  std::map<std::string, size_t> dropped;  // series left out of each chart (too many)
  bool series = false;                    // the run wrote time series
};

// Bad input when results.json is missing, not JSON, nested deeper than a run writes, or not
// of the shape a run writes.
Result<RunDirFiles> read_run_dir(const std::string& dir);

}  // namespace rocelab::run
