#include "fabric/port_config.h"

#include <algorithm>
#include <cmath>

namespace rocelab::fabric {

uint8_t ecn_priorities(const model::Qos& q) {
  if (!q.ecn.enabled) return 0;
  return q.lossless_mask ? q.lossless_mask : static_cast<uint8_t>(1u << 3);
}

uint32_t quantum_ps(uint64_t rate_bps) {
  if (rate_bps == 0) return 0;
  return static_cast<uint32_t>(std::min<uint64_t>(512'000'000'000'000ULL / rate_bps, UINT32_MAX));
}

uint32_t queue_limit(const model::Qos& q) {
  double alpha = std::ldexp(1.0, q.buffer.dynamic_th);
  double limit = alpha * static_cast<double>(q.buffer.size.n) / (1 + alpha);
  return static_cast<uint32_t>(std::min(limit, 4294967295.0));
}

rl_config make_port_config(const model::Qos& q) {
  rl_config c{};
  std::copy(q.dscp_to_prio.begin(), q.dscp_to_prio.end(), c.dscp_to_prio);
  c.lossless_mask = q.lossless_mask;
  c.pfc_mask = q.pfc_enabled ? q.pfc_mask : 0;
  c.pfc_quanta = static_cast<uint16_t>(q.pfc.quanta);
  c.pfc_trigger = q.pfc.per_ingress ? RL_PFC_TRIGGER_INGRESS : RL_PFC_TRIGGER_EGRESS;
  c.ecn_marking = q.ecn.at_dequeue ? RL_ECN_AT_DEQUEUE : RL_ECN_AT_ENQUEUE;
  // A row of pg_ring per PFC priority (the queues that hold priority groups).
  c.pg_rows = 0;
  for (uint32_t p = 0; p < RL_NUM_PRIO; ++p) c.pg_index[p] = (c.pfc_mask >> p) & 1 ? uint8_t(c.pg_rows++) : 0xff;
  c.pfc_xoff = static_cast<uint32_t>(std::min<uint64_t>(q.pfc.xoff.n, UINT32_MAX));
  c.pfc_xon = static_cast<uint32_t>(std::min<uint64_t>(q.pfc.xon.value_or(model::Bytes{0}).n, UINT32_MAX));
  c.buffer_size = static_cast<uint32_t>(std::min<uint64_t>(q.buffer.size.n, UINT32_MAX));
  c.dynamic_th = q.buffer.dynamic_th;
  const uint8_t ecn = ecn_priorities(q);
  const double pmax = std::clamp(q.ecn.pmax, 0.0, 1.0);
  for (int p = 0; p < RL_NUM_PRIO; ++p) {
    c.queue_limit[p] = queue_limit(q);
    if (!((ecn >> p) & 1)) continue;
    c.ecn[p].kmin = static_cast<uint32_t>(std::min<uint64_t>(q.ecn.kmin.n, UINT32_MAX));
    c.ecn[p].kmax = static_cast<uint32_t>(std::min<uint64_t>(q.ecn.kmax.n, UINT32_MAX));
    c.ecn[p].pmax = pmax >= 1.0 ? 0xffffffffu : static_cast<uint32_t>(pmax * 4294967296.0);
    c.ecn[p].enabled = 1;
  }
  return c;
}

}  // namespace rocelab::fabric
