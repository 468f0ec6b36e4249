#include "workload/kinds.h"

#include <climits>
#include <map>

namespace rocelab::workload {

const Registry<Kind>& kinds() {
  // One line per kind.
  static const Registry<Kind> k({
      write_bw_kind(), latency_kind(), incast_kind(), permutation_kind(), alltoall_kind(), allreduce_kind(),
  });
  return k;
}

namespace {
// GPU i's NIC: the host's port named nicI (the validator's rule), else its i-th port.
size_t gpu_port(const fabric::NodePlan& n, size_t gpu) {
  for (size_t k = 0; k < n.ports.size(); ++k)
    if (n.ports[k].ifname == "nic" + std::to_string(gpu)) return k;
  return gpu;
}
}  // namespace

Ranks::Ranks(const fabric::KernelPlan& plan) : plan_(plan) {
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    if (!plan.nodes[i].host || plan.nodes[i].ports.empty()) continue;
    hosts_.push_back(i);
    for (size_t g = 0; g < plan.nodes[i].ports.size(); ++g) ranks_.push_back({i, gpu_port(plan.nodes[i], g), int(g)});
  }
}

size_t Ranks::of(size_t node, int gpu) const {
  for (size_t r = 0; r < ranks_.size(); ++r)
    if (ranks_[r].node == node && ranks_[r].gpu == gpu) return r;
  return SIZE_MAX;
}

size_t Ranks::node(const std::string& name) const {
  for (size_t i = 0; i < plan_.nodes.size(); ++i)
    if (plan_.nodes[i].node == name) return i;
  return SIZE_MAX;
}

std::vector<size_t> Ranks::hosts_of(const model::Workload& w) const {
  if (w.hosts.empty()) return hosts_;
  std::vector<size_t> out;
  for (const auto& h : w.hosts) out.push_back(node(h));
  return out;
}

std::vector<size_t> Ranks::members(const model::Workload& w) const {
  std::vector<size_t> out;
  for (size_t h : hosts_of(w))
    for (size_t g = 0; g < gpus(h); ++g) out.push_back(of(h, int(g)));
  return out;
}

std::string Ranks::label(size_t r) const {
  const auto& n = plan_.nodes[ranks_[r].node];
  return n.ports.size() > 1 ? n.node + ":gpu" + std::to_string(ranks_[r].gpu) : n.node;
}

Result<std::vector<JobSpec>> plan_jobs(const model::Scenario& s, const Ranks& ranks) {
  std::mt19937_64 rng(s.seed ^ 0x776f726bull);
  std::vector<JobSpec> jobs;
  for (const auto& w : s.workloads) {
    const Kind* k = kinds().find(w.type);
    if (!k) return error(Errc::kBadInput, "workload type '" + w.type + "' is not built (built: " + kinds().list() + ")");
    auto j = k->plan(w, ranks, rng);
    if (!j) return Error{j.error().code, "workload " + w.name + ": " + j.error().what};  // its class as raised
    jobs.push_back(std::move(*j));
  }
  return jobs;
}

std::vector<std::string> needs_two_hosts(const model::Workload& w, const model::Scenario& s) {
  const size_t participants = w.hosts.empty() ? s.count(model::NodeKind::kHost) : w.hosts.size();
  if (participants < 2) return {w.type + " needs at least 2 hosts"};
  return {};
}

}  // namespace rocelab::workload
