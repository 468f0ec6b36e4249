// `latency`: a SEND ping-pong between two GPUs on one QP, reported one way (RTT / 2).
#include "workload/kinds.h"

namespace rocelab::workload {

Kind latency_kind() {
  return {"latency", "SEND ping-pong between two GPUs, one way = RTT / 2 (ib_send_lat)", {"from", "to"}, {},
          [](const model::Workload&, const model::Scenario&) { return std::vector<std::string>{}; },
          [](const model::Workload& w, const Ranks& r, std::mt19937_64&) -> Result<JobSpec> {
            JobSpec j;
            j.pingpong = true;
            j.flows.push_back({r.from(w), r.to(w), w.message.n, uint64_t(w.iterations), 1});
            return j;
          }};
}

}  // namespace rocelab::workload
