// A SONiC switch's QoS configuration (CONFIG_DB's JSON, as `show runningconfiguration all` or
// config_db.json holds it) to a scenario's `qos:` block and back. rocelab's qos is one for the
// whole fabric, so an import takes what most ports say and names every port that says
// otherwise, and every field it cannot carry, with why.
//
// The reading (README, "Your switch's own words", says it for users):
//   PORT_QOS_MAP pfc_enable           -> qos.lossless and qos.pfc.priorities
//   DSCP_TO_TC_MAP (the port's)       -> qos.dscp_map (a DSCP the map leaves out: TC 0)
//   TC_TO_PRIORITY_GROUP_MAP          -> checked: a lossless TC must be its own PG
//   BUFFER_PG on a lossless priority  -> its BUFFER_PROFILE: xoff -> qos.pfc.xoff (where the
//                                        PG sends XOFF), xon -> qos.pfc.xon, size - xoff ->
//                                        qos.pfc.headroom (what the PG holds past XOFF)
//   BUFFER_QUEUE on a lossy queue     -> its profile's dynamic_th -> qos.buffer.dynamic_th
//   BUFFER_POOL ingress_lossless_pool -> qos.buffer.size (rocelab's switch has one pool)
//   QUEUE wred_profile on a lossless queue, or the one WRED_PROFILE
//                                     -> green_min/max_threshold -> qos.ecn.kmin/kmax,
//                                        green_drop_probability (%) -> qos.ecn.pmax, ecn
//   PFC_WD per port + GLOBAL POLL_INTERVAL -> qos.pfc.watchdog (ms)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/scenario.h"

namespace rocelab::model {

struct SonicImport {
  std::string yaml;                   // "qos:\n  ..." for a scenario file
  std::vector<std::string> unmapped;  // "TABLE|key field: why", in table order
};

// nullopt, with why (the table, key and field), for what is not CONFIG_DB's QoS: not JSON
// objects, a number that is not one, a reference to nothing, no PORT_QOS_MAP.
std::optional<SonicImport> import_sonic(const std::string& config_db_json, std::string& why);

// The tables for one switch's ports from a scenario's qos (its resolved values): BUFFER_POOL,
// BUFFER_PROFILE, BUFFER_PG, BUFFER_QUEUE, WRED_PROFILE, QUEUE, PORT_QOS_MAP, DSCP_TO_TC_MAP,
// TC_TO_PRIORITY_GROUP_MAP, PFC_WD; values as strings, as CONFIG_DB keeps them. `headroom`
// is the PG's bytes past XOFF (qos.pfc.headroom, or what the fabric computes).
std::string export_sonic(const Qos& q, const std::vector<std::string>& ports, uint64_t headroom);

}  // namespace rocelab::model
