// Fault kinds, registered by the scenario's `type:` string (in the manner of containerlab's
// node registry): each kind checks its own parameters against the scenario and starts on a
// Testbed, handing back the Change that ends it. A kind is one file plus one line in
// builtin_kinds() (registry.cc).
#pragma once

#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/testbed.h"
#include "model/scenario.h"
#include "sys/registry.h"

namespace rocelab::fault {

struct Start {
  const model::Fault& fault;
  size_t index = 0;    // the fault's place in the scenario (seeds its own random stream)
  uint64_t seed = 0;   // the scenario's
};

// A stretch of time a fault is in force: from `at` + offset, for length (nullopt: to the end
// of the run). Physical times.
struct Piece {
  model::Duration offset{0};
  std::optional<model::Duration> length;
};

struct Kind {
  std::string type;
  std::string summary;  // for --help and the "built kinds" list
  std::vector<std::string> required;  // keys it must have beyond kCommonKeys
  std::vector<std::string> takes;     // keys it may have beyond kCommonKeys
  // Problems with a fault of this kind in this scenario, each a sentence (empty: fine).
  std::function<std::vector<std::string>(const model::Fault&, const model::Scenario&)> validate;
  // Applies the fault; the Change ends it (undo restores exactly what it replaced).
  std::function<Result<fabric::Change>(fabric::Testbed&, const Start&)> start;
  // When it is in force; unset: one piece, `duration` long (to the end without one).
  std::function<std::vector<Piece>(const model::Fault&)> pieces;
};

// Keys every fault has (type, target and at are required by the model already).
inline const std::vector<std::string> kCommonKeys = {"type", "target", "at", "duration"};

// Every built kind, in registration order.
const Registry<Kind>& kinds();

// A seeded per-packet fault on a port's egress (loss, corruption): a probability, a port
// target, and the Testbed setter; `stream` keeps each kind's draws apart from the others'.
Kind per_packet_kind(std::string type, std::string summary,
                     Result<fabric::Change> (fabric::Testbed::*set)(const fabric::PortRef&, double, uint64_t),
                     uint64_t stream);

// A kind whose target is a port (NODE:PORT) or a node: the target's shape checked (a kind
// adds its own checks after these), the target resolved on the Testbed, then `on` applies it.
using OnPort = std::function<Result<fabric::Change>(fabric::Testbed&, const fabric::PortRef&, const Start&)>;
using OnNode = std::function<Result<fabric::Change>(fabric::Testbed&, size_t node, const Start&)>;
Kind port_kind(std::string type, std::string summary, OnPort on);
Kind node_kind(std::string type, std::string summary, OnNode on);
// Adds a check to a kind's validation, run when the earlier ones found nothing.
void also_validate(Kind& k, std::function<std::vector<std::string>(const model::Fault&, const model::Scenario&)> more);

// Why `target` is not shaped as a port (NODE:PORT) or a node, or empty.
std::string port_problem(const std::string& type, const std::string& target, const model::Scenario& s);
std::string node_problem(const std::string& type, const std::string& target, const model::Scenario& s);

// The kinds' own definitions (one file each).
Kind loss_kind();
Kind corruption_kind();
Kind link_down_kind();
Kind link_flap_kind();
Kind node_crash_kind();
Kind pfc_off_kind();
Kind ecn_off_kind();
Kind dscp_remap_kind();
Kind slow_receiver_kind();
Kind mtu_mismatch_kind();
Kind pause_storm_kind();

}  // namespace rocelab::fault
