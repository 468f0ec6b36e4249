// The scenario as written, after type checks and before generators and cross-references.
// Internal to the loader.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/scenario.h"
#include "model/yaml_reader.h"

namespace rocelab::model {

struct RawPort {
  std::optional<Rate> rate;
  std::optional<uint32_t> mtu;
  std::optional<Duration> delay;  // one-way propagation (cable length)
};

struct RawNode {
  std::string name;
  std::optional<NodeKind> kind;
  std::optional<std::string> role;
  RawPort port;
  std::optional<Ipv4Prefix> loopback;
  Position pos, loopback_pos;
};

struct RawEnd {
  std::string node;
  std::string ifname;  // empty: generated
  Position pos;
};

struct RawLink {
  RawEnd a, b;
  RawPort port;
  std::optional<Ipv4Prefix> subnet;
  Position pos, subnet_pos;
};

struct RawScenario {
  Scenario s;  // scalar sections already filled in
  Position scale_pos, fabric_pos, pool_pos, root_pos;
  bool has_fabric = false;
  bool generate = false;  // fabric.type names a generator (not explicit, not a dump)
  RawPort defaults;
  RawPort kind_switch, kind_host;
  std::vector<RawNode> nodes;
  std::vector<RawLink> links;
  std::optional<Bytes> xon;  // qos.pfc.xon as written
  Position headroom_pos;  // qos.pfc.headroom, when given
  Position watchdog_pos;  // qos.pfc.watchdog, when given
  Position qos_pos;
};

// Phase 2: generators, overrides, names, addresses, routes, references. Adds diagnostics;
// returns the finished scenario only when it added none.
std::optional<Scenario> build_scenario(RawScenario raw, Diagnostics& diags);

// Routes for every node: plan_routes (scenario.h) with every link up.
std::vector<NodeRoutes> plan_routes(const Scenario& s);

}  // namespace rocelab::model
