// Misconfigurations (FAULTS.md), each a port setting the egress/ingress programs read:
// `pfc_off` — a port whose PFC is disabled: lossless traffic entering it gets no XOFF, so
// its PG runs past XOFF into its headroom and beyond it is dropped (reason headroom), and
// PFC it receives is ignored; `ecn_off` — a switch that marks nothing, so DCQCN never hears
// of congestion and PFC is left as the only backstop; `dscp_remap` — a host whose DSCP map
// is wrong: its NIC writes `dscp` (default 0) into what it sends, so its RoCE traffic lands
// in another (lossy) queue and only its flows lose packets.
#include "fault/registry.h"

namespace rocelab::fault {

namespace {

Kind port_setting(std::string type, std::string summary, fabric::Misconfig m) {
  Kind k;
  k.type = type;
  k.summary = std::move(summary);
  k.validate = [type](const model::Fault& f, const model::Scenario& s) {
    std::vector<std::string> out;
    if (auto why = port_problem(type, f.target, s); !why.empty()) out.push_back(why);
    return out;
  };
  k.start = [m](fabric::Testbed& t, const Start& s) -> Result<fabric::Change> {
    auto port = t.port(s.fault.target);
    if (!port) return port.error();
    return t.misconfigure(*port, m, uint32_t(s.fault.dscp.value_or(0)));
  };
  return k;
}

}  // namespace

Kind pfc_off_kind() {
  return port_setting("pfc_off", "PFC disabled on a port: no XOFF for what enters it, received PFC ignored (NODE:PORT)",
                      fabric::Misconfig::kPfcOff);
}

Kind dscp_remap_kind() {
  Kind k = port_setting("dscp_remap", "a wrong DSCP map: the port (a host NIC) sends its traffic with dscp (default 0)",
                        fabric::Misconfig::kDscp);
  k.takes = {"dscp"};
  return k;
}

Kind slow_receiver_kind() {
  Kind k;
  k.type = "slow_receiver";
  k.summary = "a host NIC drains what it receives at fraction of line rate and sends PFC as its RX buffer backs up (NODE:PORT)";
  k.required = {"fraction"};
  k.validate = [](const model::Fault& f, const model::Scenario& s) {
    std::vector<std::string> out;
    if (auto why = port_problem("slow_receiver", f.target, s); !why.empty()) out.push_back(why);
    else if (auto n = s.find_node(f.target.substr(0, f.target.find(':'))); n && s.nodes[*n].kind != model::NodeKind::kHost)
      out.push_back("a slow_receiver is a host NIC (e.g. host3:nic0), not a switch port");
    if (!s.qos.pfc_mask) out.push_back("a slow_receiver sends PFC: the fabric needs a PFC priority (qos.pfc)");
    return out;
  };
  k.start = [](fabric::Testbed& t, const Start& s) -> Result<fabric::Change> {
    auto port = t.port(s.fault.target);
    if (!port) return port.error();
    return t.slow_receiver(*port, s.fault.fraction.value_or(0.5));
  };
  return k;
}

Kind mtu_mismatch_kind() {
  Kind k;
  k.type = "mtu_mismatch";
  k.summary = "one end of a link gets a smaller MTU: frames the other end sends larger than it are dropped (reason mtu)";
  k.required = {"mtu"};
  k.validate = [](const model::Fault& f, const model::Scenario& s) {
    std::vector<std::string> out;
    if (auto why = port_problem("mtu_mismatch", f.target, s); !why.empty()) return std::vector<std::string>{why};
    const size_t colon = f.target.find(':');
    if (auto n = s.find_node(f.target.substr(0, colon)); n && f.mtu)
      for (size_t li : s.nodes[*n].ports)
        if (s.links[li].end(*n).ifname == f.target.substr(colon + 1) && uint32_t(*f.mtu) >= s.links[li].mtu)
          out.push_back("an mtu_mismatch's mtu (" + std::to_string(*f.mtu) + ") must be below the link's (" +
                        std::to_string(s.links[li].mtu) + "): only then are frames dropped");
    return out;
  };
  k.start = [](fabric::Testbed& t, const Start& s) -> Result<fabric::Change> {
    auto port = t.port(s.fault.target);
    if (!port) return port.error();
    return t.mtu_mismatch(*port, uint32_t(s.fault.mtu.value_or(1500)));
  };
  return k;
}

Kind ecn_off_kind() {
  Kind k;
  k.type = "ecn_off";
  k.summary = "ECN disabled on a switch: none of its ports CE-marks (target: NODE)";
  k.validate = [](const model::Fault& f, const model::Scenario& s) {
    std::vector<std::string> out;
    if (auto why = node_problem("ecn_off", f.target, s); !why.empty()) out.push_back(why);
    return out;
  };
  k.start = [](fabric::Testbed& t, const Start& s) -> Result<fabric::Change> {
    const size_t n = t.node_index(s.fault.target);
    if (n == SIZE_MAX) return error(Errc::kBadInput, "instance " + t.instance() + " has no node '" + s.fault.target + "'");
    std::vector<fabric::Change> ports;
    for (size_t p = 0; p < t.nodes()[n].ports.size(); ++p) {
      auto c = t.misconfigure({n, p, t.nodes()[n].ports[p].slot}, fabric::Misconfig::kEcnOff, 0);
      if (!c) {
        (void)fabric::combined("", std::move(ports)).undo();
        return c.error();
      }
      ports.push_back(std::move(*c));
    }
    return fabric::combined("ECN off on " + s.fault.target, std::move(ports));
  };
  return k;
}

}  // namespace rocelab::fault
