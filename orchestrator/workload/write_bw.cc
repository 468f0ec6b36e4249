// `write_bw`: one GPU streams RDMA WRITEs to another (ib_write_bw), `qps` QPs.
#include "workload/kinds.h"

namespace rocelab::workload {

Kind write_bw_kind() {
  return {"write_bw", "RDMA WRITE stream from one GPU to another (ib_write_bw)", {"from", "to"}, {},
          [](const model::Workload&, const model::Scenario&) { return std::vector<std::string>{}; },
          [](const model::Workload& w, const Ranks& r, std::mt19937_64&) -> Result<JobSpec> {
            JobSpec j;
            j.flows.push_back({r.from(w), r.to(w), w.message.n, uint64_t(w.iterations), w.qps});
            return j;
          }};
}

}  // namespace rocelab::workload
