// PFC headroom (DESIGN.md §2, §3): what a port may still receive after its XOFF went out,
// and from it what each lossless queue of a switch may hold. Pure arithmetic, shared by
// `up` (the budget before anything is measured) and the agent (which raises the budget to
// its measured p99 reaction time).
#pragma once

#include <cstdint>
#include <vector>

#include "rocelab_abi.h"

namespace rocelab::bpf {

// The agent's reaction budget before it has measured any: covers the p99 seen on a loaded
// 2-core machine (2-25 ms) with room to spare.
inline constexpr uint64_t kInitialReactionBudgetNs = 50'000'000;

// The reaction a run declares for its ports and is judged by (issue 48): a pause in force at
// most this long (physical) after its XOFF arrived, as a NIC's MAC takes. Its bytes at a port's
// rate, or one frame where that is more, join the port's physical headroom in what the run
// reports as pfc_headroom; a switch's PGs running past it make the run invalid
// (telemetry/agent.cc). The data plane's lossless limits keep kInitialReactionBudgetNs of wall
// clock besides, so that a run the machine held drops nothing it then cannot judge.
inline constexpr uint64_t kReactionAllowancePhysNs = 500;

struct HeadroomPort {
  uint64_t rate_bps = 0;  // emulated
  uint32_t base = 0;      // physical headroom: qos.pfc.headroom, or 2 x MTU
};

// One port's headroom: base + what its emulated rate carries during the budget.
uint32_t port_headroom(const HeadroomPort& p, uint64_t budget_ns);

// The entries of one node's ports (same order), their lossless_limit capped at `buffer`
// (0: no cap). Per ingress (PFC by priority group): what the port's PG may hold, XOFF + its
// own headroom. By egress occupancy: what each of its lossless queues may hold, XOFF + the
// headroom of every other port of the node (each may be sending into it at XOFF).
std::vector<rl_port_headroom> node_headroom(const std::vector<HeadroomPort>& ports, uint32_t xoff, uint32_t buffer,
                                            uint64_t budget_ns, bool per_ingress);

}  // namespace rocelab::bpf
