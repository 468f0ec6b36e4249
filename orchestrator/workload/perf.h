// perftest-style point-to-point runs over the built-in engine (ib_write_bw / ib_send_bw
// semantics): one requester host, one responder host, N RC QPs, a fixed message size, up to
// tx_depth messages outstanding per QP. Runs inside a fabric that is up.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "fabric/kernel_plan.h"
#include "fabric/testbed.h"
#include "model/scenario.h"

namespace rocelab::workload {

struct PerfOptions {
  std::string from, to;  // "host" or "host:nicN"
  bool write = true;     // RDMA WRITE (ib_write_bw) or SEND (ib_send_bw)
  uint32_t size = 65536;
  uint64_t iterations = 1000;  // messages per QP
  double seconds = 0;          // > 0: run for this long instead (iterations is then a cap)
  int qps = 1;
  uint32_t tx_depth = 128;
  uint32_t mtu = 0;  // 0: from the path (the smaller NIC MTU's IB class)
  std::string dcqcn;  // empty: the scenario's hosts.dcqcn
};

struct PerfResult {
  std::string from, to, verb, dcqcn;
  uint32_t size = 0, mtu = 0;
  int qps = 0;
  uint64_t messages = 0, bytes = 0;
  double seconds = 0;
  double avg_bps = 0, peak_bps = 0;  // goodput (message bytes), emulated
  double scale = 1;
  uint64_t errors = 0;
  std::vector<engine::QpReport> requester, responder;
  engine::EndpointStats from_stats, to_stats;
  uint64_t verified_bytes = 0;  // responder memory / messages checked against what was sent
};

// Deterministic message bytes from a seed: what every workload posts (and checks).
std::vector<uint8_t> message_pattern(size_t n, uint64_t seed);

// IB MTU class (256..4096) for a netdev MTU: RoCEv2 headers take 20 + 8 + 12 + 16 + 4 bytes.
uint32_t ib_mtu_for(uint32_t netdev_mtu);

// The RC settings every workload QP uses between two NICs: a 256-packet window, AckReq every
// 64 packets, and a timeout floor of physical 1.05 ms (IB local ACK timeout 8) × D but at
// least four times what a full window takes at the slower line rate (the host's own queue
// may hold the whole window); above the floor the QP follows measured round trips.
engine::RcConfig rc_config(uint32_t mtu, double slower_line_bps, const model::TimeScale& scale, const model::RcTimers& t);

// On a fabric that is up (`t`: its namespaces), over the scenario's RDMA backend.
Result<PerfResult> run_perf(const model::Scenario& s, const fabric::KernelPlan& plan, fabric::Testbed& t,
                            const PerfOptions& o);

}  // namespace rocelab::workload
