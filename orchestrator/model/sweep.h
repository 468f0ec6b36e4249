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
  // Runs of each point at each seed (--repeat). What moves between them is not the seed's
  // draw but real timing and the fabric's sensitivity to it: a spread to measure, not hide.
  size_t repeat = 1;
};

// One run of the grid: a value of every axis (by index) and a seed.
struct SweepPoint {
  size_t index = 0;            // 0-based, in run order
  std::vector<size_t> values;  // axes[i].values[values[i]]
  std::optional<uint64_t> seed;
  size_t repeat = 0;           // which run of this point at this seed, 0-based
  std::vector<std::string> sets(const SweepGrid& g) const;  // fixed + KEY=VALUE of each axis
  std::string label(const SweepGrid& g) const;              // kmin=8KB seed 1 (run 2 of 5)
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
inline constexpr size_t kMaxRepeat = 20;
// Every point: the last axis varies fastest, then seeds, then a seed's runs innermost (a
// knob value's seeds and runs go together, so a stopped sweep has whole groups).
std::vector<SweepPoint> sweep_points(const SweepGrid& g);

// How far one figure moved over a sweep, as (max - min) / |mean| of a group, the widest
// group's: run to run, over the runs of one knob combination at one seed; seed to seed,
// over the seeds' means of one knob combination. Nullopt where no group has two measured
// values (or a group's mean is 0 while its values differ).
struct FigureSpread {
  std::optional<double> run_to_run, seed_to_seed;
};
// `values[i]` is the figure of `points[i]`, nullopt where the run measured nothing.
FigureSpread figure_spread(const std::vector<SweepPoint>& points, const std::vector<std::optional<double>>& values);

}  // namespace rocelab::model
