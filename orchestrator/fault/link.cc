// Link faults (DESIGN.md §2, FAULTS.md): `link_down` takes a link away for `duration` (or to
// the end of the run), `link_flap` in a train of downs and ups, `node_crash` takes every link
// of a node away and halts it (its RDMA endpoints stop answering) until it recovers after
// `duration`. Each goes through Testbed::fail_link: carrier off at both ends and the routes
// reconverged around it; ending it brings the link back and reconverges again. On a split
// fabric every part applies them, each to the ends and routes it holds.
#include "fault/registry.h"

namespace rocelab::fault {

namespace {

// A link named by either end: on a split fabric the end may be another machine's, so it is
// resolved through the model (Testbed::fail_link_named), not this machine's ports.
Kind link_kind(std::string type, std::string summary) {
  Kind k = port_kind(std::move(type), std::move(summary), nullptr);
  k.start = [](fabric::Testbed& t, const Start& s) { return t.fail_link_named(s.fault.target); };
  return k;
}

// The downs of a flap: `train` (down, up, down, ... times), or `count` cycles of `period`
// (each down for `down`, half the period unless given), or as many cycles as fit `duration`.
std::vector<Piece> flap_pieces(const model::Fault& f) {
  std::vector<Piece> out;
  if (!f.train.empty()) {
    int64_t t = 0;
    for (size_t i = 0; i < f.train.size(); i += 2) {
      out.push_back({model::Duration{t}, f.train[i]});
      t += f.train[i].ns + (i + 1 < f.train.size() ? f.train[i + 1].ns : 0);
    }
    return out;
  }
  if (!f.period) return out;
  const int64_t period = f.period->ns, down = f.down ? f.down->ns : period / 2;
  const int64_t cycles = f.count ? *f.count : f.duration ? f.duration->ns / period : 0;
  for (int64_t i = 0; i < cycles; ++i) out.push_back({model::Duration{i * period}, model::Duration{down}});
  return out;
}

std::vector<std::string> flap_problems(const model::Fault& f, const model::Scenario&) {
  std::vector<std::string> out;
  if (!f.train.empty()) {
    if (f.period || f.count || f.down) out.push_back("a link_flap takes either train or period (with count or duration), not both");
  } else if (!f.period) {
    out.push_back("a link_flap needs period (with count or duration) or train: [down, up, ...]");
  } else {
    if (!f.count && !f.duration) out.push_back("a link_flap with a period needs count or duration");
    if (f.count && f.duration) out.push_back("a link_flap takes count or duration, not both");
    if (f.down && f.down->ns >= f.period->ns) out.push_back("a link_flap's down time must be shorter than its period");
    if (!f.count && f.duration && f.duration->ns < f.period->ns) out.push_back("a link_flap's duration holds no whole period");
  }
  return out;
}

}  // namespace

Kind link_down_kind() {
  return link_kind("link_down",
                   "a link fails at both ends, routes reconverge around it; back after duration (target: either end, NODE:PORT)");
}

Kind link_flap_kind() {
  Kind k = link_kind("link_flap",
                     "a link goes down and up: period with count or duration (down: period/2 unless given), or train: "
                     "[down, up, down, ...]");
  k.takes = {"period", "count", "down", "train"};
  also_validate(k, flap_problems);
  k.pieces = flap_pieces;
  return k;
}

Kind node_crash_kind() {
  Kind k = node_kind("node_crash",
                     "a node dies: every link down, its RDMA endpoints answer nothing; recovers after duration (target: NODE)",
                     nullptr);
  k.start = [](fabric::Testbed& t, const Start& s) { return t.crash_node_named(s.fault.target); };
  return k;
}

}  // namespace rocelab::fault
