// `rocelab run --part I/M`: one machine's share of a run on a fabric split over several
// (docs/multi-machine.md). Each part runs its own nodes, faults and QP ends; they meet at
// named moments through a sys::Rendezvous, and at the end every part's figures become one
// run's, the same on every machine: what this file decides.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "model/expect.h"
#include "model/partition.h"
#include "model/scenario.h"
#include "sys/error.h"

namespace rocelab::run {

// What every part must agree on before anything is made: the whole scenario as resolved
// (seed and D included) and the number of parts. Parts that differ would plan different QPs.
std::string split_fingerprint(const model::Scenario& s, size_t parts);

// Whether this machine applies fault `f`: its target's node is here, or it is a link or node
// fault (every part applies those: each downs the ends it holds and reconverges its own
// switches' routes from the one model, at the same emulated time). An error for an MTU
// mismatch on a cut link, which acts on both machines' ends of one device pair.
// Link and node faults: every part applies them (fault_here), so each part's record of one
// is the same event.
inline bool applied_on_every_part(std::string_view type) {
  return type == "link_down" || type == "link_flap" || type == "node_crash";
}
Result<bool> fault_here(const model::Fault& f, size_t index, const model::Scenario& s, const model::Partition& p,
                        size_t part);

// A peer's fault record as this part's timeline writes one (fault::Timeline::to_json): each
// known field only if it has its type (results.json, the events series and the merge's sort
// read them without a check); the rest left out.
nlohmann::ordered_json typed_fault_record(const nlohmann::ordered_json& f);

// A metric set back from metrics_json (kinds from the registry; names it lacks are skipped).
model::MetricSet metrics_from_json(const nlohmann::ordered_json& j);

// Adds another part's metrics to this part's: samples whose labels this part lacks (its
// nodes' ports, queues and agent figures), and each scalar by its nature — counts and times
// summed over the parts, the rest (worst cases, the scenario's own figures) the largest.
void merge_metrics(model::MetricSet& mine, const model::MetricSet& far);

// The run directory's files that hold each part's own ports, switches and pauses (every flow
// is in every part's already): merged, one run's report shows the whole fabric.
inline constexpr const char* kPartFiles[] = {"series-ports.csv", "series-switches.csv", "pfc.txt", "qlen.txt"};

// Every part's text of one of kPartFiles (in part order; an empty text: that part had none)
// as one run's: a CSV's header once and the rows of all by time (its first column), pfc.txt's
// events by time, qlen.txt's one "time:" line (the latest) and every part's ports. Rows of
// one time keep part order. Text that does not have the file's form is an error naming the
// part.
Result<std::string> merge_part_file(const std::string& name, const std::vector<std::string>& parts);

}  // namespace rocelab::run
