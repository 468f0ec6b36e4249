#include "bpf/headroom.h"

#include <algorithm>

namespace rocelab::bpf {

uint32_t port_headroom(const HeadroomPort& p, uint64_t budget_ns) {
  const double in_flight = static_cast<double>(p.rate_bps) / 8 * static_cast<double>(budget_ns) / 1e9;
  return static_cast<uint32_t>(std::min(p.base + in_flight, 4294967295.0));
}

std::vector<rl_port_headroom> node_headroom(const std::vector<HeadroomPort>& ports, uint32_t xoff, uint32_t buffer,
                                            uint64_t budget_ns, bool per_ingress) {
  std::vector<rl_port_headroom> out(ports.size());
  uint64_t sum = 0;
  for (size_t i = 0; i < ports.size(); ++i) {
    out[i].base = ports[i].base;
    out[i].headroom = port_headroom(ports[i], budget_ns);
    out[i].budget_us = static_cast<uint32_t>(std::min<uint64_t>(budget_ns / 1000, UINT32_MAX));
    sum += out[i].headroom;
  }
  for (auto& h : out) {
    // Per ingress: the PG holds XOFF, then what its own port still delivers. By egress
    // occupancy: every other port may still be sending into a queue when it reaches XOFF
    // (a port's own packets never return through it; a node of one port has only its own).
    const uint64_t others = ports.size() > 1 ? sum - h.headroom : h.headroom;
    uint64_t limit = static_cast<uint64_t>(xoff) + (per_ingress ? h.headroom : others);
    if (buffer) limit = std::min<uint64_t>(limit, buffer);
    h.lossless_limit = static_cast<uint32_t>(std::min<uint64_t>(limit, UINT32_MAX));
  }
  return out;
}

}  // namespace rocelab::bpf
