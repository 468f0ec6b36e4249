// `rocelab sweep`: one scenario over a grid of knob values and seeds (issue 35). This is the
// grid itself - the --set entries read as axes, the seed list, the points in run order -
// with no run in it (run/sweep.h runs them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rocelab::model {

struct SweepAxis {
  std::string key;                  // qos.ecn.kmin
  std::vector<std::string> values;  // 8KB, 16KB, ...: each as --set would read it
};

struct SweepGrid {
  std::vector<std::string> fixed;  // --set entries with one value: applied to every point
  std::vector<SweepAxis> axes;     // --set entries with several, in the order given
  std::vector<uint64_t> seeds;     // empty: the file's seed
};

// One run of the grid: a value of every axis (by index) and a seed.
struct SweepPoint {
  size_t index = 0;            // 0-based, in run order
  std::vector<size_t> values;  // axes[i].values[values[i]]
  std::optional<uint64_t> seed;
  std::vector<std::string> sets(const SweepGrid& g) const;  // fixed + KEY=VALUE of each axis
  std::string label(const SweepGrid& g) const;              // kmin=8KB seed 1
};

// A --set entry KEY=V1,V2,...: the values split at commas outside brackets, braces and
// quotes (qos.lossless=[3, 4] is one value). Nullopt and `why` when it is not KEY=VALUE or
// a value is empty.
std::optional<SweepAxis> parse_axis(const std::string& entry, std::string& why);
// Every --set entry into the grid: one value is fixed, several an axis; a key twice is an error.
std::optional<SweepGrid> parse_grid(const std::vector<std::string>& sets, std::string& why);
// "1-3", "1,2,5", "7": at most kMaxSeeds seeds, each 0 .. 2^63-1.
std::optional<std::vector<uint64_t>> parse_seeds(const std::string& text, std::string& why);
inline constexpr size_t kMaxSeeds = 100;
inline constexpr size_t kMaxSweepPoints = 10000;
// Every point: the last axis varies fastest, seeds innermost (a knob value's seeds run
// together, so a stopped sweep has whole groups).
std::vector<SweepPoint> sweep_points(const SweepGrid& g);

}  // namespace rocelab::model
