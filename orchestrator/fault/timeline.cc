#include "fault/timeline.h"

#include <algorithm>
#include <climits>
#include <utility>

#include "fault/registry.h"

namespace rocelab::fault {

Timeline::Timeline(const model::Scenario& s, fabric::Testbed& t, const std::vector<bool>& here)
    : s_(s), t_(t), active_(s.faults.size()) {
  for (size_t i = 0; i < s.faults.size(); ++i) {
    const auto& f = s.faults[i];
    if (!here.empty() && !here.at(i)) continue;
    const Kind* k = kinds().find(f.type);
    const std::vector<Piece> pieces = k && k->pieces ? k->pieces(f) : std::vector<Piece>{{model::Duration{0}, f.duration}};
    for (const Piece& p : pieces) {
      const sys::Nanos at = s.scale.emulate(model::Duration{f.at.ns + p.offset.ns}).ns;
      events_.push_back({at, i, true});
      if (p.length) events_.push_back({at + s.scale.emulate(*p.length).ns, i, false});
    }
  }
  // Ties: in scenario order, a start before an end of the same instant.
  std::stable_sort(events_.begin(), events_.end(), [](const Event& a, const Event& b) { return a.at < b.at; });
}

void Timeline::start(sys::Nanos now) { t0_ = now; }

sys::Nanos Timeline::next_due() const { return next_ < events_.size() ? t0_ + events_[next_].at : INT64_MAX; }

void Timeline::record(sys::Nanos now, size_t fault, bool begin, const Status& st) {
  const auto& f = s_.faults[fault];
  Happened h{double(now - t0_) / 1e9 / s_.scale.factor(), fault, f.type, f.target, begin, st.ok(), {}, {}};
  if (!st.ok()) h.error = st.error().what;
  if (begin && f.probability) h.probability = f.probability;
  happened_.push_back(std::move(h));
}

size_t Timeline::apply_due(sys::Nanos now) {
  size_t applied = 0;
  for (; next_ < events_.size() && t0_ + events_[next_].at <= now; ++next_, ++applied) {
    const Event& e = events_[next_];
    if (e.begin) {
      const Kind* k = kinds().find(s_.faults[e.fault].type);
      Result<fabric::Change> c = k ? k->start(t_, {s_.faults[e.fault], e.fault, s_.seed})
                                   : Result<fabric::Change>(error(Errc::kBadInput, "fault type '" + s_.faults[e.fault].type +
                                                                                   "' is not built (built: " + kinds().list() + ")"));
      if (c && test_failure("fault")) {  // tests: the kernel refused the fault (nothing stays applied)
        (void)c->undo();
        c = error(Errc::kTestbedFault, "the kernel refused the fault's change (ROCELAB_TEST_FAIL=fault)");
      }
      if (c) {
        active_[e.fault] = std::move(*c);
        started_order_.push_back(e.fault);
        record(now, e.fault, true, ok());
      } else {
        record(now, e.fault, true, c.error());
      }
    } else if (active_[e.fault]) {
      record(now, e.fault, false, active_[e.fault]->undo());
      active_[e.fault].reset();
    }
  }
  return applied;
}

void Timeline::finish(sys::Nanos now) {
  for (auto it = started_order_.rbegin(); it != started_order_.rend(); ++it)
    if (active_[*it] && active_[*it]->pending()) {
      record(now, *it, false, active_[*it]->undo());
      active_[*it].reset();
    }
  next_ = events_.size();
}

double Timeline::link_down_seconds() const {
  std::vector<double> since(s_.faults.size(), -1);
  double total = 0;
  for (const auto& h : happened_) {
    const auto& f = s_.faults[h.fault];
    double links = 0;
    if (f.type == "link_down" || f.type == "link_flap") links = 1;
    if (f.type == "node_crash")
      if (auto n = s_.find_node(f.target)) links = double(s_.nodes[*n].ports.size());
    if (links == 0 || !h.ok) continue;
    if (h.begin) since[h.fault] = h.t_s;
    else if (since[h.fault] >= 0) total += links * (h.t_s - std::exchange(since[h.fault], -1));
  }
  return total;
}

bool Timeline::failed() const {
  return std::any_of(happened_.begin(), happened_.end(), [](const Happened& h) { return !h.ok; });
}

nlohmann::ordered_json Timeline::to_json() const {
  auto out = nlohmann::ordered_json::array();
  for (const auto& h : happened_) {
    nlohmann::ordered_json r{{"t_s", h.t_s}, {"fault", h.fault}, {"type", h.type}, {"target", h.target},
                             {"action", h.begin ? "start" : "end"}, {"ok", h.ok}};
    if (h.probability) r["probability"] = *h.probability;
    const auto& f = s_.faults[h.fault];
    if (h.begin) {
      nlohmann::ordered_json p = nlohmann::ordered_json::object();
      if (f.duration) p["duration_s"] = double(f.duration->ns) / 1e9;
      if (f.period) p["period_s"] = double(f.period->ns) / 1e9;
      if (f.down) p["down_s"] = double(f.down->ns) / 1e9;
      if (f.count) p["count"] = *f.count;
      if (f.dscp) p["dscp"] = *f.dscp;
      if (f.fraction) p["fraction"] = *f.fraction;
      if (f.mtu) p["mtu"] = *f.mtu;
      if (f.priority) p["priority"] = *f.priority;
      if (f.vector) p["vector"] = *f.vector;
      if (f.quanta) p["quanta"] = *f.quanta;
      if (f.frame_rate) p["frame_rate"] = *f.frame_rate;
      if (!f.train.empty()) {
        auto t = nlohmann::ordered_json::array();
        for (const auto& d : f.train) t.push_back(double(d.ns) / 1e9);
        p["train_s"] = t;
      }
      if (!p.empty()) r["parameters"] = p;
    }
    if (!h.ok) r["error"] = h.error;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace rocelab::fault
