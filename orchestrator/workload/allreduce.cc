// `allreduce`: a ring all-reduce, 2(H-1) steps each moving size / H to the successor and
// waiting for the slowest. With k GPUs a host, k rings, one per rail (GPU r of every host,
// over NIC r), each reducing size / k: the hierarchical all-reduce (the steps inside a host
// are NVLink's, not emulated). busbw counts all N = H·k ranks (nccl-tests), so its bound is
// the edge rate × k·H(N-1) / ((H-1)·N), the edge rate for k = 1.
#include <algorithm>
#include <climits>

#include "workload/kinds.h"

namespace rocelab::workload {

namespace {
// The order of a ring: hosts grouped by the switch their GPU `gpu`'s NIC hangs off (the
// leaf, of that rail), so ring edges stay inside a leaf where they can.
std::vector<size_t> ring_order(const Ranks& r, const std::vector<size_t>& hosts, size_t gpu) {
  std::vector<size_t> order = hosts;
  auto leaf = [&](size_t n) { return r.nic(r.of(n, int(gpu))).peer_node; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return leaf(a) < leaf(b); });
  return order;
}
}  // namespace

Kind allreduce_kind() {
  return {"allreduce", "ring all-reduce over the GPUs (one ring per rail with several GPUs a host)", {},
          {"hosts", "ring"}, needs_two_hosts,
          [](const model::Workload& w, const Ranks& r, std::mt19937_64&) -> Result<JobSpec> {
            const auto hosts = r.hosts_of(w);
            size_t k = SIZE_MAX;
            for (size_t h : hosts) k = std::min(k, r.gpus(h));
            const double H = double(hosts.size()), N = H * double(k);
            JobSpec j;
            j.lockstep = true;
            j.steps_per_op = 2 * (hosts.size() - 1);
            j.rounds = j.steps_per_op * uint64_t(w.iterations);
            j.ranks = size_t(N);
            j.bound_factor = double(k) * H * (N - 1) / ((H - 1) * N);
            const uint64_t chunk = std::max<uint64_t>(1, w.message.n / k / hosts.size());
            for (size_t g = 0; g < k; ++g) {
              // By leaf, so no two ring edges share a link where the topology allows; or
              // exactly as `hosts:` lists them when the scenario says so (ring: as_listed).
              const auto ring = w.ring_as_listed ? hosts : ring_order(r, hosts, g);
              for (size_t i = 0; i < ring.size(); ++i)
                j.flows.push_back({r.of(ring[i], int(g)), r.of(ring[(i + 1) % ring.size()], int(g)),
                                   std::max<uint64_t>(1, chunk / uint64_t(w.qps)), 1, w.qps});
            }
            return j;
          }};
}

}  // namespace rocelab::workload
