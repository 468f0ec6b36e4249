#include "fault/registry.h"

namespace rocelab::fault {

const Registry<Kind>& kinds() {
  // One line per kind.
  static const Registry<Kind> k({
      loss_kind(),
      corruption_kind(),
      link_down_kind(),
      link_flap_kind(),
      node_crash_kind(),
      pfc_off_kind(),
      ecn_off_kind(),
      dscp_remap_kind(),
      slow_receiver_kind(),
      mtu_mismatch_kind(),
  });
  return k;
}

}  // namespace rocelab::fault

namespace rocelab::fault {

Kind per_packet_kind(std::string type, std::string summary,
                     Result<fabric::Change> (fabric::Testbed::*set)(const fabric::PortRef&, double, uint64_t),
                     uint64_t stream) {
  Kind k;
  k.type = type;
  k.summary = std::move(summary);
  k.required = {"probability"};
  k.validate = [type](const model::Fault& f, const model::Scenario& s) {
    std::vector<std::string> out;
    if (auto why = port_problem(type, f.target, s); !why.empty()) out.push_back(why);
    return out;
  };
  k.start = [set, stream](fabric::Testbed& t, const Start& s) -> Result<fabric::Change> {
    auto port = t.port(s.fault.target);
    if (!port) return port.error();
    // Each fault draws from its own stream: the scenario's seed, the kind and the fault's index.
    return (t.*set)(*port, s.fault.probability.value_or(0), s.seed ^ (stream * (s.index + 1)));
  };
  return k;
}

// Whether the target exists the model checks (with did-you-mean); the kinds check its shape.
std::string port_problem(const std::string& type, const std::string& target, const model::Scenario&) {
  if (target.find(':') == std::string::npos)
    return "a " + type + " fault's target is a port, NODE:PORT (e.g. leaf1:spine1), not '" + target + "'";
  return {};
}

std::string node_problem(const std::string& type, const std::string& target, const model::Scenario&) {
  if (target.find(':') != std::string::npos)
    return "a " + type + " fault's target is a node (e.g. host2), not the port '" + target + "'";
  return {};
}

}  // namespace rocelab::fault
