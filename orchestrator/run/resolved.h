// The resolved scenario as JSON: every generator expanded, every default and override
// applied, every address pinned. It is itself a valid (explicit) scenario: loading it gives
// the same model and dumping that gives the same JSON. `derived` is output only: the
// namespaces, interfaces, routes and emulated values, recomputed on every load.
#pragma once

#include <nlohmann/json.hpp>

#include "model/scenario.h"

namespace rocelab::run {

// with_derived = false leaves out the output-only section (it is recomputed on load anyway).
nlohmann::ordered_json resolved_json(const model::Scenario& s, bool with_derived = true);

}  // namespace rocelab::run
