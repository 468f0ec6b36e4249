// `loss`: each data packet leaving the target port is lost with `probability`, drawn at the
// port's egress before it takes any buffer (drop reason fault_loss); PFC frames never are.
#include "fault/registry.h"

namespace rocelab::fault {

Kind loss_kind() {
  Kind k;
  k.type = "loss";
  k.summary = "seeded per-packet loss on a port's egress (probability)";
  k.required = {"probability"};
  k.validate = [](const model::Fault& f, const model::Scenario&) {
    std::vector<std::string> out;
    if (f.target.find(':') == std::string::npos)
      out.push_back("a loss fault's target is a port, NODE:PORT (e.g. leaf1:host1), not '" + f.target + "'");
    return out;
  };
  k.start = [](fabric::Testbed& t, const Start& s) -> Result<fabric::Change> {
    auto port = t.port(s.fault.target);
    if (!port) return port.error();
    // Each fault draws from its own stream: the scenario's seed and the fault's index.
    return t.set_loss(*port, s.fault.probability.value_or(0), s.seed ^ (0x6c6f7373ull * (s.index + 1)));
  };
  return k;
}

}  // namespace rocelab::fault
