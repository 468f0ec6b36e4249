#include "fault/registry.h"

#include "model/port_target.h"

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
      pause_storm_kind(),
  });
  return k;
}

}  // namespace rocelab::fault

namespace rocelab::fault {

Kind per_packet_kind(std::string type, std::string summary,
                     Result<fabric::Change> (fabric::Testbed::*set)(const fabric::PortRef&, double, uint64_t),
                     uint64_t stream) {
  Kind k = port_kind(type, std::move(summary), [set, stream](fabric::Testbed& t, const fabric::PortRef& p, const Start& s) {
    // Each fault draws from its own stream: the scenario's seed, the kind and the fault's index.
    return (t.*set)(p, s.fault.probability.value_or(0), s.seed ^ (stream * (s.index + 1)));
  });
  k.required = {"probability"};
  return k;
}

Kind port_kind(std::string type, std::string summary, OnPort on) {
  Kind k;
  k.type = type;
  k.summary = std::move(summary);
  k.validate = [type](const model::Fault& f, const model::Scenario& s) {
    std::vector<std::string> out;
    if (auto why = port_problem(type, f.target, s); !why.empty()) out.push_back(why);
    return out;
  };
  k.start = [on = std::move(on)](fabric::Testbed& t, const Start& s) -> Result<fabric::Change> {
    auto port = t.port(s.fault.target);
    if (!port) return port.error();
    return on(t, *port, s);
  };
  return k;
}

Kind node_kind(std::string type, std::string summary, OnNode on) {
  Kind k;
  k.type = type;
  k.summary = std::move(summary);
  k.validate = [type](const model::Fault& f, const model::Scenario& s) {
    std::vector<std::string> out;
    if (auto why = node_problem(type, f.target, s); !why.empty()) out.push_back(why);
    return out;
  };
  k.start = [on = std::move(on)](fabric::Testbed& t, const Start& s) -> Result<fabric::Change> {
    const size_t n = t.node_index(s.fault.target);
    if (n == SIZE_MAX) return error(Errc::kBadInput, "instance " + t.instance() + " has no node '" + s.fault.target + "'");
    return on(t, n, s);
  };
  return k;
}

void also_validate(Kind& k, std::function<std::vector<std::string>(const model::Fault&, const model::Scenario&)> more) {
  k.validate = [first = k.validate, more = std::move(more)](const model::Fault& f, const model::Scenario& s) {
    auto out = first(f, s);
    if (out.empty()) out = more(f, s);
    return out;
  };
}

// Whether the target exists the model checks (with did-you-mean); the kinds check its shape.
std::string port_problem(const std::string& type, const std::string& target, const model::Scenario&) {
  if (!model::PortTarget::parse(target).is_port())
    return "a " + type + " fault's target is a port, NODE:PORT (e.g. leaf1:spine1), not '" + target + "'";
  return {};
}

std::string node_problem(const std::string& type, const std::string& target, const model::Scenario&) {
  if (model::PortTarget::parse(target).is_port())
    return "a " + type + " fault's target is a node (e.g. host2), not the port '" + target + "'";
  return {};
}

}  // namespace rocelab::fault
