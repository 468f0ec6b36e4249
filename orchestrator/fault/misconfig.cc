// Misconfigurations (FAULTS.md), each a port setting the egress/ingress programs read:
// `pfc_off` — a port whose PFC is disabled: lossless traffic entering it gets no XOFF, so
// its PG runs past XOFF into its headroom and beyond it is dropped (reason headroom), and
// PFC it receives is ignored; `ecn_off` — a switch that marks nothing, so DCQCN never hears
// of congestion and PFC is left as the only backstop; `dscp_remap` — a host whose DSCP map
// is wrong: its NIC writes `dscp` (default 0) into what it sends, so its RoCE traffic lands
// in another (lossy) queue and only its flows lose packets.
#include "fault/registry.h"
#include "model/port_target.h"

namespace rocelab::fault {

namespace {

OnPort misconfigure(fabric::Misconfig m) {
  return [m](fabric::Testbed& t, const fabric::PortRef& p, const Start& s) {
    return t.misconfigure(p, m, uint32_t(s.fault.dscp.value_or(0)));
  };
}

// The link `f.target` is an end of, in the scenario (nullptr: none).
const model::Link* link_at(const model::Fault& f, const model::Scenario& s) {
  const auto t = model::PortTarget::parse(f.target);
  auto n = s.find_node(t.node);
  if (!n || !t.port) return nullptr;
  for (size_t li : s.nodes[*n].ports)
    if (s.links[li].end(*n).ifname == *t.port) return &s.links[li];
  return nullptr;
}

}  // namespace

Kind pfc_off_kind() {
  return port_kind("pfc_off", "PFC disabled on a port: no XOFF for what enters it, received PFC ignored (NODE:PORT)",
                   misconfigure(fabric::Misconfig::kPfcOff));
}

Kind dscp_remap_kind() {
  Kind k = port_kind("dscp_remap", "a wrong DSCP map: the port (a host NIC) sends its traffic with dscp (default 0)",
                     misconfigure(fabric::Misconfig::kDscp));
  k.takes = {"dscp"};
  return k;
}

Kind slow_receiver_kind() {
  Kind k = port_kind("slow_receiver",
                     "a host NIC drains what it receives at fraction of line rate and sends PFC as its RX buffer backs up (NODE:PORT)",
                     [](fabric::Testbed& t, const fabric::PortRef& p, const Start& s) {
                       return t.slow_receiver(p, s.fault.fraction.value_or(0.5));
                     });
  k.required = {"fraction"};
  also_validate(k, [](const model::Fault& f, const model::Scenario& s) {
    std::vector<std::string> out;
    if (auto n = s.find_node(model::PortTarget::parse(f.target).node); n && s.nodes[*n].kind != model::NodeKind::kHost)
      out.push_back("a slow_receiver is a host NIC (e.g. host3:nic0), not a switch port");
    if (!s.qos.pfc_mask) out.push_back("a slow_receiver sends PFC: the fabric needs a PFC priority (qos.pfc)");
    return out;
  });
  return k;
}

Kind mtu_mismatch_kind() {
  Kind k = port_kind("mtu_mismatch",
                     "one end of a link gets a smaller MTU: frames the other end sends larger than it are dropped (reason mtu)",
                     [](fabric::Testbed& t, const fabric::PortRef& p, const Start& s) {
                       return t.mtu_mismatch(p, uint32_t(s.fault.mtu.value_or(1500)));
                     });
  k.required = {"mtu"};
  also_validate(k, [](const model::Fault& f, const model::Scenario& s) {
    std::vector<std::string> out;
    const model::Link* l = link_at(f, s);
    if (l && f.mtu && uint32_t(*f.mtu) >= l->mtu)
      out.push_back("an mtu_mismatch's mtu (" + std::to_string(*f.mtu) + ") must be below the link's (" +
                    std::to_string(l->mtu) + "): only then are frames dropped");
    return out;
  });
  return k;
}

Kind ecn_off_kind() {
  return node_kind("ecn_off", "ECN disabled on a switch: none of its ports CE-marks (target: NODE)",
                   [](fabric::Testbed& t, size_t n, const Start&) -> Result<fabric::Change> {
                     std::vector<fabric::Change> ports;
                     for (size_t p = 0; p < t.nodes()[n].ports.size(); ++p) {
                       auto c = t.misconfigure({n, p, t.nodes()[n].ports[p].slot}, fabric::Misconfig::kEcnOff, 0);
                       if (!c) {
                         (void)fabric::combined("", std::move(ports)).undo();
                         return c.error();
                       }
                       ports.push_back(std::move(*c));
                     }
                     return fabric::combined("ECN off on " + t.nodes()[n].name, std::move(ports));
                   });
}

}  // namespace rocelab::fault
