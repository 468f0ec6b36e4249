// A scenario's faults on a running Testbed: each starts at its `at` and, with a `duration`,
// ends that much later (physical times, × D on the clock), counted from start(). The
// timeline does not sleep: apply_due(now) does what is due by `now` and next_due() says
// when to call again, so the run drives it on the monotonic clock and tests on a fake one.
// Whatever is still in force at finish() is undone then, so a fabric is left as it was.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fabric/testbed.h"
#include "model/scenario.h"

namespace rocelab::fault {

struct Happened {
  double t_s = 0;       // physical seconds since start
  size_t fault = 0;
  std::string type, target;
  bool begin = true;
  bool ok = true;
  std::string error;
  std::optional<double> probability;
};

class Timeline {
 public:
  // `here[i]`: whether this machine applies fault i (a split fabric's other parts apply
  // theirs); empty: every fault.
  Timeline(const model::Scenario& s, fabric::Testbed& t, const std::vector<bool>& here = {});
  void start(sys::Nanos now);
  // Applies every event due by `now`, in time order; returns how many it applied.
  size_t apply_due(sys::Nanos now);
  // When the next event is due (INT64_MAX when none is left).
  sys::Nanos next_due() const;
  bool pending() const { return next_ < events_.size(); }
  // Ends every fault still in force (their Changes undone), in reverse order of starting.
  void finish(sys::Nanos now);

  const std::vector<Happened>& happened() const { return happened_; }
  sys::Nanos started_at() const { return t0_; }  // the clock at start(): happened()'s time 0
  bool failed() const;
  // Physical seconds links were down, summed over links (link_down, link_flap; a node_crash
  // counts each of its node's links).
  double link_down_seconds() const;
  nlohmann::ordered_json to_json() const;

 private:
  struct Event {
    sys::Nanos at;  // emulated, from start
    size_t fault;
    bool begin;
  };
  void record(sys::Nanos now, size_t fault, bool begin, const Status& st);

  const model::Scenario& s_;
  fabric::Testbed& t_;
  std::vector<Event> events_;
  size_t next_ = 0;
  sys::Nanos t0_ = 0;
  std::vector<std::optional<fabric::Change>> active_;  // per fault
  std::vector<size_t> started_order_;
  std::vector<Happened> happened_;
};

}  // namespace rocelab::fault
