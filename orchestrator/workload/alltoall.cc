// `alltoall` (nccl-tests): each rank sends size / N to every other rank, per operation, in
// lock step (to the GPUs of its own host over its own links: not emulated).
#include <algorithm>

#include "workload/kinds.h"

namespace rocelab::workload {

Kind alltoall_kind() {
  return {"alltoall", "nccl-tests all-to-all: size / N from every GPU to every other, in lock step", {}, {"hosts"},
          needs_two_hosts, [](const model::Workload& w, const Ranks& r, std::mt19937_64&) -> Result<JobSpec> {
            const auto members = r.members(w);
            const size_t hosts = r.hosts_of(w).size();
            JobSpec j;
            j.lockstep = true;
            j.steps_per_op = 1;
            j.rounds = uint64_t(w.iterations);
            j.ranks = members.size();
            // A NIC carries (N - k) / N of the size for k GPUs a host: busbw's bound rises by
            // (N - 1) / (N - k).
            const double n = double(members.size()), k = n / double(hosts);
            j.bound_factor = n > k ? (n - 1) / (n - k) : 1;
            const uint64_t part = std::max<uint64_t>(1, w.message.n / members.size());
            for (size_t a : members)
              for (size_t b : members)
                if (r.apart(a, b)) j.flows.push_back({a, b, std::max<uint64_t>(1, part / uint64_t(w.qps)), 1, w.qps});
            return j;
          }};
}

}  // namespace rocelab::workload
