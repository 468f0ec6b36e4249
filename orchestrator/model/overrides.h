// `--set KEY=VALUE`: one knob changed on the command line, as if the file said it. KEY is a
// dotted path into the scenario's YAML (qos.ecn.kmin, hosts.dcqcn.rate_ai, workloads.0.message:
// a list takes an index), VALUE is read as YAML would read it there (64KB, 0.1, [1, 2],
// {a: 1}); sections on the way are made when absent. The result is validated like any file,
// and the run records what was set (resolved.json, results.json).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rocelab::model {

// The scenario text with every `sets` entry applied in order, or nullopt and `why` (the entry
// and what is wrong with it). A text that does not parse is returned as it is: the loader
// reports its syntax error where it is.
std::optional<std::string> apply_overrides(std::string_view text, const std::vector<std::string>& sets, std::string& why);

}  // namespace rocelab::model
