// `rocelab graph`: the fabric as Graphviz DOT, hosts at the bottom, one rank per tier.
#pragma once

#include <string>

#include "model/scenario.h"

namespace rocelab::run {

std::string fabric_dot(const model::Scenario& s);

}  // namespace rocelab::run
