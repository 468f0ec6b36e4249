// `rocelab top`: a running fabric's queues, pauses and rates, redrawn in the terminal.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

namespace rocelab::cli {

// `count` frames (0: until `stop`), each after `interval_s`; on a terminal each frame
// replaces the last, otherwise frames follow one another. Returns the exit code.
int run_top(const std::string& instance, double interval_s, int count, size_t max_rows, const std::atomic<bool>& stop);

// D of the scenario the instance was brought up with (its NAME.scenario.json); 0 when unknown.
double recorded_scale(const std::string& instance);

}  // namespace rocelab::cli
