// Workload kinds, registered by the scenario's `type:` string: each is a pure generator
// (the fabric's GPUs and the workload in, the flows and how they run out) that also checks
// its own keys. A kind is one file plus one line in kinds() (kinds.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/kernel_plan.h"
#include "model/scenario.h"
#include "sys/error.h"
#include "sys/registry.h"

namespace rocelab::workload {

// A GPU: GPU i of a host uses the host's NIC i (DESIGN.md §1); workloads run between GPUs.
struct Rank {
  size_t node = 0, port = 0;  // plan node, and the index of the GPU's NIC among its ports
  int gpu = 0;
};

// The fabric's GPUs, as generators see them. Pure: computed from the kernel plan.
class Ranks {
 public:
  explicit Ranks(const fabric::KernelPlan& plan);
  const fabric::KernelPlan& plan() const { return plan_; }
  const std::vector<Rank>& all() const { return ranks_; }
  const Rank& operator[](size_t r) const { return ranks_[r]; }
  size_t of(size_t node, int gpu) const;           // SIZE_MAX when there is none
  size_t node(const std::string& name) const;      // SIZE_MAX when there is none
  const std::vector<size_t>& hosts() const { return hosts_; }  // host nodes with NICs
  size_t gpus(size_t node) const { return plan_.nodes[node].ports.size(); }
  const fabric::PortPlan& nic(size_t r) const { return plan_.nodes[ranks_[r].node].ports[ranks_[r].port]; }
  bool apart(size_t a, size_t b) const { return ranks_[a].node != ranks_[b].node; }
  // Every GPU of the workload's hosts (all hosts when it names none), host by host.
  std::vector<size_t> members(const model::Workload& w) const;
  std::vector<size_t> hosts_of(const model::Workload& w) const;
  size_t from(const model::Workload& w) const { return of(node(w.from), w.from_gpu); }
  size_t to(const model::Workload& w) const { return of(node(w.to), w.to_gpu); }
  // A flow's end as results name it: the host, with its GPU when it has several.
  std::string label(size_t r) const;

 private:
  const fabric::KernelPlan& plan_;
  std::vector<Rank> ranks_;
  std::vector<size_t> hosts_;
};

struct FlowSpec {
  size_t src = 0, dst = 0;  // ranks
  uint64_t message = 0;     // bytes per message on each QP
  uint64_t per_qp = 1;      // messages per QP (point to point; lock step posts one per round)
  int qps = 1;
};

// How a job runs: streaming flows (each QP keeps messages in flight until it has posted
// per_qp), lock-step rounds (every flow posts one message, all finish, then the next; a
// collective's steps), or a SEND ping-pong.
struct JobSpec {
  std::vector<FlowSpec> flows;
  bool lockstep = false, pingpong = false;
  uint64_t rounds = 0;        // lock step: steps x iterations
  uint64_t steps_per_op = 1;  // lock step: rounds per operation (one nccl-tests iteration)
  size_t ranks = 0;           // collectives: the GPUs taking part (nccl-tests' N)
  double bound_factor = 1;    // busbw's bound over the slowest edge's payload rate
};

struct Kind {
  std::string type;
  std::string summary;
  std::vector<std::string> required;  // keys it must have, beyond type
  std::vector<std::string> takes;     // keys it may have beyond kCommonKeys
  // Problems with this workload in this scenario, each a sentence (keys are checked apart).
  std::function<std::vector<std::string>(const model::Workload&, const model::Scenario&)> validate;
  std::function<Result<JobSpec>(const model::Workload&, const Ranks&, std::mt19937_64& rng)> plan;
};

// Keys every workload takes.
inline const std::vector<std::string> kCommonKeys = {"name", "type", "message", "qps", "dscp", "iterations", "start"};

const Registry<Kind>& kinds();

// The jobs of a scenario's workloads, in order, with the rng every run uses (the same
// seed gives the same permutation in `validate` and in `run`).
Result<std::vector<JobSpec>> plan_jobs(const model::Scenario& s, const Ranks& ranks);

// Shared checks.
std::vector<std::string> needs_two_hosts(const model::Workload& w, const model::Scenario& s);

Kind write_bw_kind();
Kind latency_kind();
Kind incast_kind();
Kind permutation_kind();
Kind alltoall_kind();
Kind allreduce_kind();

}  // namespace rocelab::workload
