// Splitting one scenario over several machines (docs/multi-machine.md): which machine
// ("part") holds each node, and which links are cut between parts. Pure: every machine that
// plans the same scenario with the same number of parts computes the same split.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "model/scenario.h"

namespace rocelab::model {

struct Partition {
  size_t parts = 1;
  std::vector<size_t> part_of;    // per node (Scenario::nodes order)
  std::vector<size_t> cut_links;  // links whose ends are in different parts, ascending
  std::vector<size_t> ports;      // per part: its nodes' ports (the bring-up cost)
};

// Hosts stay with the switches they hang from (a host's links, its NIC's PFC and its pacing
// never cross a cut): every group of hosts and the switches they connect to goes whole to
// one part, in the scenario's order, the parts taking equal shares of the ports (so a
// fat-tree splits by pods, a leaf-spine by runs of leaves). Then each remaining switch
// (spine, aggregation, core), nearest the groups first, joins the part that holds most of
// its links (the fewest ports on a tie). Refused when the scenario has fewer such groups
// than parts (`why` says so).
std::optional<Partition> partition(const Scenario& s, size_t parts, std::string& why);

}  // namespace rocelab::model
