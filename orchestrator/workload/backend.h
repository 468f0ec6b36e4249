// RDMA backends, registered by `hosts.engine`: what workloads post their verbs to. One
// interface — endpoints (a host NIC), RC QPs, post, poll, counters — so the runner never
// names a concrete engine. A backend is one file plus one line in backends() (backend.cc).
// Built: the built-in RoCEv2 engine, and rxe (the kernel's soft-RoCE through rdma-core's verbs).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "model/scenario.h"
#include "sys/clock.h"
#include "sys/host_info.h"
#include "sys/error.h"
#include "sys/registry.h"

namespace rocelab::workload {

struct EndpointSpec {
  std::string name;    // for reports, e.g. "host1:nic0"
  int netns_fd = -1;   // the host's namespace (the Testbed's; outlives the backend)
  uint32_t addr = 0;   // the NIC's IPv4 address, host order
  double line_bps = 0; // emulated line rate
  std::function<bool()> halted;  // the host is crashed (Testbed::node_halted)
  size_t host = 0, hosts = 1;    // the host's place among the fabric's hosts (threads split them in blocks)
};

struct QpSpec {
  uint32_t qpn = 0, remote_addr = 0, remote_qpn = 0;
  uint16_t sport = 0;  // UDP source port, 0xC000-0xFFFF
  uint32_t send_psn = 0, expect_psn = 0;
  engine::RcConfig rc;
  uint8_t tos = engine::kTosData;
  // The pause clock of the NIC's priority for `tos` (Testbed::pause_in_force; empty:
  // unknown). The built-in engine begins no data frame while it holds, as an RNIC does.
  std::function<sys::PauseReading()> paused;
};

using Buffer = engine::RcQp::Buffer;

// Counters every backend reports, in the built-in engine's terms (rxe maps its hw counters
// onto them).
using QpCounters = engine::QpReport;
using EndpointCounters = engine::EndpointStats;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Result<size_t> add_endpoint(const EndpointSpec& e) = 0;
  virtual Result<size_t> add_qp(size_t endpoint, const QpSpec& q) = 0;
  // Responder memory a peer may WRITE into (must outlive the backend).
  virtual void register_memory(size_t qp, uint32_t rkey, uint64_t va, std::span<uint8_t> memory) = 0;
  virtual void post_write(size_t qp, Buffer data, uint64_t remote_va, uint32_t rkey) = 0;
  virtual void post_send(size_t qp, Buffer data) = 0;
  virtual std::vector<engine::Completion> poll(size_t qp) = 0;
  // The next SEND message a QP received, in order.
  virtual std::optional<std::vector<uint8_t>> take_received(size_t qp) = 0;
  virtual bool failed(size_t qp) const = 0;
  virtual uint32_t mtu(size_t qp) const = 0;
  // Drives every endpoint until step() says done (true) or the deadline passes (false).
  // Input on a `wake` descriptor runs the step at once (a split run's rendezvous: the other
  // machines finished a round).
  virtual bool run(const std::function<bool()>& step, sys::Nanos deadline, const std::vector<int>& wake = {}) = 0;
  virtual QpCounters qp_counters(size_t qp) const = 0;
  virtual EndpointCounters endpoint_counters(size_t endpoint) const = 0;
  virtual size_t qp_count() const = 0;
  virtual const sys::Clock& clock() const = 0;
  // What each engine thread of the last run() spent on a CPU and waiting for one (schedstat
  // deltas; empty when the backend has no threads of its own to account: the caller's is it).
  virtual std::vector<sys::ThreadCpu> run_cpu() const { return {}; }
};

struct BackendKind {
  std::string type;  // hosts.engine
  std::string summary;
  // DCQCN and the rest from the scenario's `hosts:`.
  std::function<Result<std::unique_ptr<Backend>>(const model::Scenario& s, std::string_view dcqcn)> make;
};

const Registry<BackendKind>& backends();

BackendKind builtin_backend();
BackendKind rxe_backend();

}  // namespace rocelab::workload
