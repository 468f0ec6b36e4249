// `permutation`: a seeded permutation of the GPUs, every GPU sending to one GPU of another
// host and receiving from one.
#include <algorithm>
#include <map>

#include "workload/kinds.h"

namespace rocelab::workload {

namespace {

// Uniform by rejection; when that is unlikely to end (many GPUs on few hosts), GPUs grouped
// by host in a shuffled order, each sending to the one a largest group ahead.
Result<JobSpec> plan(const model::Workload& w, const Ranks& r, std::mt19937_64& rng) {
  std::vector<size_t> members = r.members(w);
  std::map<size_t, size_t> per_host;
  for (size_t m : members) ++per_host[r[m].node];
  size_t largest = 0;
  for (const auto& [h, c] : per_host) largest = std::max(largest, c);
  if (2 * largest > members.size())
    return error(Errc::kBadInput, "a host holds more than half its GPUs, so some must send to their own host");
  std::vector<size_t> perm = members;
  bool found = false;
  for (int tries = 0; tries < 10000 && !found; ++tries) {
    std::shuffle(perm.begin(), perm.end(), rng);
    found = true;
    for (size_t i = 0; i < members.size() && found; ++i) found = r.apart(perm[i], members[i]);
  }
  if (!found) {
    std::vector<size_t> order;
    for (const auto& [h, c] : per_host) order.push_back(h);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<size_t> grouped;
    for (size_t h : order)
      for (size_t m : members)
        if (r[m].node == h) grouped.push_back(m);
    members = grouped;
    for (size_t i = 0; i < members.size(); ++i) perm[i] = members[(i + largest) % members.size()];
  }
  JobSpec j;
  for (size_t i = 0; i < members.size(); ++i)
    j.flows.push_back({members[i], perm[i], w.message.n, uint64_t(w.iterations), w.qps});
  return j;
}

}  // namespace

Kind permutation_kind() {
  return {"permutation", "a seeded permutation: every GPU streams to one GPU of another host", {}, {"hosts"},
          needs_two_hosts, plan};
}

}  // namespace rocelab::workload
