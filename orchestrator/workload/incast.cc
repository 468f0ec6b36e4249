// `incast`: every GPU of the workload's hosts (but the receiver's host) streams to one GPU.
#include "workload/kinds.h"

namespace rocelab::workload {

Kind incast_kind() {
  return {"incast", "every GPU of `hosts` streams RDMA WRITEs to one GPU (`to`)", {"to"}, {"hosts"}, needs_two_hosts,
          [](const model::Workload& w, const Ranks& r, std::mt19937_64&) -> Result<JobSpec> {
            JobSpec j;
            const size_t dst = r.to(w);
            for (size_t src : r.members(w))
              if (r.apart(src, dst)) j.flows.push_back({src, dst, w.message.n, uint64_t(w.iterations), w.qps});
            return j;
          }};
}

}  // namespace rocelab::workload
