// Loading a scenario for this build: the model's validation, then everything named by a
// `type:` checked against what is built (workload kinds, fault kinds, RDMA backends; the
// capture section), each kind's own keys and rules, and a path for every flow the
// workloads will make. A kind that is not built is an error here (exit 3), never a
// surprise at run time.
#pragma once

#include <string>
#include <string_view>

#include "model/loader.h"

namespace rocelab::run {

// Adds what this build refuses in `s` to `d` (file:line of the offending key).
void check_kinds(const model::Scenario& s, model::Diagnostics& d);

model::LoadResult load_scenario_file(const std::string& path, const std::vector<std::string>& sets = {});
model::LoadResult load_scenario_text(std::string_view text, const std::string& file_label);
// Bytes already read from `path` (model::read_scenario_bytes), with --set: a sweep reads its
// file once and loads every point from those bytes.
model::LoadResult load_scenario_bytes(const std::string& text, const std::string& path,
                                      const std::vector<std::string>& sets = {});

}  // namespace rocelab::run
