// The scenario's workloads inside a fabric that is up: each kind (workload/kinds.h) plans its
// flows, the scenario's RDMA backend (workload/backend.h) carries them, each job starting at
// its `start`. Results per flow (goodput,
// FCT and its slowdown against line rate, retransmits, CNPs, rate trace, end-to-end digest)
// and per workload (nccl-tests algbw/busbw, iteration time, job completion time). Figures
// are emulated; the caller converts them to physical units with D.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include "fabric/kernel_plan.h"
#include "fabric/testbed.h"
#include "model/scenario.h"
#include "sys/rendezvous.h"

namespace rocelab::workload {

struct FlowResult {
  std::string workload, from, to;  // host names
  int qps = 0;
  uint64_t bytes = 0;        // message bytes acknowledged
  double start_s = 0;        // emulated, from the first workload's start
  double fct_s = 0;          // first post to last completion
  double ideal_s = 0;        // the same bytes on the wire at the slower NIC's line rate
  double slowdown = 0;       // fct / ideal
  double goodput_bps = 0;    // bytes × 8 / fct
  uint64_t retransmitted = 0, timeouts = 0, cnp_received = 0;
  // rxe's counter names (FAULTS.md): NAKs for a PSN gap received, out-of-sequence and
  // duplicate requests at the responder, QPs that ran out of retries.
  uint64_t rcvd_seq_err = 0, out_of_seq_request = 0, duplicate_request = 0, retry_exceeded_err = 0;
  bool failed = false;       // did not complete: a QP failed (or its collective stopped)
  bool unfinished = false;   // neither completed nor failed when the workloads were stopped
  double failed_at_s = -1;   // emulated, from the first workload's start: when the first QP failed
  std::string error;         // why (the QP's completion error)
  uint64_t cnp_sent = 0;  // by the responder's QPs: the CNPs this flow's marks caused
  bool digest_ok = true;     // the responder's CRC of what it applied = the CRC of what was sent
  bool streaming = false;    // posts back to back (write_bw, incast, permutation), not in lock step
  double rx_line_bps = 0;    // the receiving NIC's line rate
  uint64_t wire_bytes = 0;   // bytes on the wire for what was posted (headers included, once)
  struct TracePoint {
    double t_s;              // since the first workload's start
    double rate_bps;         // the QPs' DCQCN rates, summed
    uint64_t delivered = 0;  // payload bytes the responder has applied in order so far
    uint64_t cnp_received = 0;  // by the requester's QPs so far
  };
  std::vector<TracePoint> rate_trace;
};

struct WorkloadResult {
  std::string name, type;
  size_t hosts = 0;
  uint64_t message = 0;
  int iterations = 0;
  double jct_s = 0;          // start to the last completion
  double iteration_s = 0;    // collectives: mean time of one operation
  double algbw_bps = 0, busbw_bps = 0;  // nccl-tests definitions (bits/s here)
  double busbw_bound_bps = 0;  // collectives: the slowest edge's line rate × payload efficiency
  double busbw_bound_factor = 1;  // × this with several GPUs a host (their own links carry part)
  double goodput_bps = 0;    // point-to-point: all the flows' bytes over the job's time
  double rx_utilization = 0; // point-to-point: the busiest receiving NIC's wire bytes / (time × line rate)
  // latency, one way: over the probe's time, each ping weighted by the stretch of it that it
  // samples (half its round trip and half the one before: what a packet meets at any moment,
  // as the queue's series reads); per ping as perftest counts them, where a closed loop pings
  // most while the queue is empty.
  double latency_p50_s = 0, latency_p99_s = 0, latency_avg_s = 0;
  double per_ping_p50_s = 0, per_ping_p99_s = 0, per_ping_avg_s = 0;
  bool one_way_measured = false;  // ping post to its arrival (one clock); false: RTT / 2
  std::vector<size_t> flows;
};

struct WorkloadRun {
  std::vector<FlowResult> flows;
  std::vector<WorkloadResult> workloads;
  double seconds = 0;
  int64_t t0_ns = 0;  // the Testbed clock at the first workload's start (the flows' time 0)
  uint64_t bad_icrc = 0, cnp_sent = 0, cnp_received = 0, ce_marked = 0, retransmitted = 0;
  uint64_t rx_overflow = 0;       // datagrams lost in the hosts' full receive sockets
  uint64_t send_errors = 0;       // packets the kernel refused to send
  int last_send_error = 0;
  double worst_pacing_error = 0;  // the most negative: a pacer that fell behind
  std::string worst_paced_nic;    // its NIC, NODE:IF
  // The engine thread's share of the traffic phase on a CPU and runnable without one (other
  // work on the machine took it); negative when the kernel keeps no schedstat.
  double engine_cpu_busy = -1, engine_cpu_waiting = -1;  // the engine thread that waited most
  size_t engine_threads = 0;
  // The share of the machine's CPU time its hypervisor gave to others during the phase
  // (steal); negative when unknown. A VM's noisy neighbour slows the softirq data plane and
  // the agent as well as the engine.
  double machine_steal = -1;
  // Other programs' CPU time during the phase (user processes but this run and its agent;
  // not the kernel's threads, where the fabric's own softirq work runs), a share of the
  // machine's CPUs; negative when unknown. With steal, the evidence that contention, not
  // rocelab, made a run invalid (issue 48).
  double machine_other = -1;
  int machine_cpus = 0;  // the CPUs those shares are of (0: unknown)
  // Steal past 5 % of the phase, said so: the run is invalid unless the PFC agent's loop, the
  // finer probe, saw no freeze its shapers could not make up (telemetry::Collect::steal).
  std::string steal;
  std::string invalid;            // why the engine's figures cannot be trusted, or empty
  std::string fault;              // a fault of the testbed's own (the kernel refused packets), or empty
  // Why the workloads stopped before every flow completed or failed (the deadline, a cancel),
  // or empty. The figures are what was measured until then.
  std::string stopped;
  bool cancelled = false;         // stopped by the caller's cancel flag, not the deadline
  // A kernel RNIC's counters (rxe's hw_counters), summed over the hosts' NICs; empty for
  // the built-in engine, whose counters are per QP above.
  std::map<std::string, uint64_t> nic_counters;
};

struct RunnerOptions {
  std::function<void(const std::string&)> progress;
  // Instead of the once-a-second progress line, the share of bytes acknowledged and the
  // line, five times a second (a progress bar on a terminal).
  std::function<void(double, const std::string&)> meter;
  const std::atomic<bool>* cancel = nullptr;
  int64_t trace_every_ns = 10'000'000;  // each flow's rate trace, emulated (wall) ns between points
  // Called once, at the flows' time 0 (after every part of a split fabric is ready): the
  // fault timeline starts there.
  std::function<void()> at_start;
  // A fabric split over machines (the plan's part, docs/multi-machine.md): only the QP ends
  // of this machine's hosts run here. Every part plans every flow alike (QPNs, PSNs and ports
  // come from the seed), so a QP's two ends meet without an exchange; through `parts` the
  // machines agree on time 0, on the end of every lock-step round and of the traffic, and
  // trade each end's figures, so every part reports every flow.
  sys::Rendezvous* parts = nullptr;
  int64_t parts_timeout_ms = 120'000;  // how long the start and the figures may wait for a part
};

// What an engine's wait for a CPU (`engine_cpu_waiting` of `seconds`) had behind it, said
// after an invalid run's reason: "; meanwhile another program held the CPUs ...", "; meanwhile
// the hypervisor took ..." or "; neither another program ... nor the hypervisor ...".
std::string cpu_wait_cause(const WorkloadRun& r);

// `t` gives the hosts' namespaces (its nodes in the plan's order).
Result<WorkloadRun> run_workloads(const model::Scenario& s, const fabric::KernelPlan& plan, fabric::Testbed& t,
                                  const RunnerOptions& o);

}  // namespace rocelab::workload
