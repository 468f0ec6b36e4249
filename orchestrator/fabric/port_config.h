// The settings every port program shares (ebpf/rocelab_abi.h rl_config), from the
// scenario's QoS profile. Bytes are physical = emulated (DESIGN.md §3).
#pragma once

#include "model/scenario.h"
#include "rocelab_abi.h"

namespace rocelab::fabric {

// Priorities ECN marks: the lossless ones, or priority 3 (RoCE data) when a profile has ECN
// but no lossless priority (ecn-only).
uint8_t ecn_priorities(const model::Qos& q);

// What one queue may hold before tail drop, until the shared buffer lands: the dynamic
// threshold's steady state for a single congested queue, q = alpha * (B - q), i.e.
// alpha * B / (1 + alpha) with alpha = 2^dynamic_th.
uint32_t queue_limit(const model::Qos& q);

rl_config make_port_config(const model::Qos& q);

// One PFC pause quantum (512 bit-times) at an emulated rate, in picoseconds.
uint32_t quantum_ps(uint64_t rate_bps);

}  // namespace rocelab::fabric
