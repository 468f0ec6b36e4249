// Scenario files in, a validated Scenario or every error of the file out.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/diagnostics.h"
#include "model/scenario.h"

namespace rocelab::model {

// The schema tag of a resolved dump (validate --resolved -j), which loads back as a scenario.
inline constexpr std::string_view kResolvedSchema = "rocelab.resolved/1";

struct LoadResult {
  std::optional<Scenario> scenario;
  Diagnostics diags;
  bool ok() const { return scenario.has_value(); }
};

// A scenario, or a resolved dump of a large fabric, is far smaller; a file beyond this is
// refused before it is read.
inline constexpr size_t kMaxScenarioBytes = 16u << 20;

// Reads only a regular file (not a device or FIFO) of at most kMaxScenarioBytes.
// `sets`: --set KEY=VALUE entries applied over the file first (model/overrides.h).
LoadResult load_scenario_file(const std::string& path, const std::vector<std::string>& sets = {});
// The file's bytes as the loader reads them (a regular file of bounded size, never blocking
// on a FIFO), or nullopt and why. A run keeps these bytes (Scenario::source) and never
// reads the path again: as root, a second read could meet another file put in its place.
std::optional<std::string> read_scenario_bytes(const std::string& path, std::string& why);
// A scenario from bytes already read from `path`, with --set applied: what
// load_scenario_file does after its read.
LoadResult load_scenario_bytes(const std::string& text, const std::string& path, const std::vector<std::string>& sets = {});
// `file_label` is what diagnostics name as the file.
LoadResult load_scenario_text(std::string_view text, const std::string& file_label);

// The instance name a file gets when it sets none: its stem, made safe.
std::string default_instance_name(std::string_view path);

// Replaces the scale factor D of a loaded scenario (rocelab run --scale: a retry at 2×D
// after an invalid run). The error says why D does not fit (not positive, or a link would
// run below the emulated minimum); the scenario is unchanged then.
std::optional<std::string> rescale(Scenario& s, double d);

}  // namespace rocelab::model
