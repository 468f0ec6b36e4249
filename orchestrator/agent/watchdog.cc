#include "agent/watchdog.h"

#include <algorithm>

namespace rocelab::agent {

std::optional<Watchdog> Watchdog::make(const fabric::AgentWatchdog& w, std::vector<uint64_t> first_poll,
                                       std::string& why) {
  auto action = model::wd_action_named(w.action);
  if (!action) return why = "unknown watchdog action '" + w.action + "'", std::nullopt;
  auto predicate = model::wd_predicate_named(w.predicate);
  if (!predicate) return why = "unknown watchdog predicate '" + w.predicate + "'", std::nullopt;
  return Watchdog(w, *action, *predicate, std::move(first_poll));
}

void Watchdog::watch(uint32_t key, uint32_t node) {
  if (node >= next_.size()) next_.resize(node + 1, 0);
  queues_.emplace(key, Queue{model::WdQueue(timing_, action_, predicate_), node, false, false, 0, 0, {}, {}, {}});
}

bool Watchdog::ignoring(uint32_t key) const {
  auto it = queues_.find(key);
  return it != queues_.end() && it->second.ignoring;
}

bool Watchdog::stormed(uint32_t key) const {
  auto it = queues_.find(key);
  return it != queues_.end() && it->second.stormed;
}

void Watchdog::poll(uint64_t now, const std::function<model::WdSample(uint32_t key)>& sample,
                    const std::function<void(uint32_t key, bool detected)>& changed) {
  std::vector<bool> due(next_.size(), false);
  bool any = false;
  for (size_t n = 0; n < next_.size(); ++n)
    if (now >= next_[n]) {
      due[n] = any = true;
      next_[n] = std::max(next_[n] + uint64_t(timing_.poll), now + 1);
    }
  if (!any) return;
  for (auto& [k, w] : queues_) {
    if (!due[w.node]) continue;
    model::WdSample s = sample(k);
    s.t = int64_t(now);
    const auto ev = w.q.poll(s);
    if (ev != model::WdQueue::Event::kNone) changed(k, ev == model::WdQueue::Event::kDetected);
  }
}

void Watchdog::detected(uint32_t key, const Counts& now) {
  Queue& w = queues_.at(key);
  ++w.detected;
  w.stormed = true;
  w.at_storm = now;
  w.ignoring = action_ != model::WdAction::kAlert;
}

void Watchdog::restored(uint32_t key, const Counts& now) {
  Queue& w = queues_.at(key);
  ++w.restored;
  w.stormed = false;
  w.last = now - w.at_storm;
  w.total = w.total + w.last;
  w.ignoring = false;
}

std::vector<uint32_t> Watchdog::keys() const {
  std::vector<uint32_t> out;
  for (const auto& [k, w] : queues_) out.push_back(k);
  return out;
}

fabric::WatchdogQueueFigures Watchdog::figures(uint32_t key, const Counts& now) const {
  const Queue& w = queues_.at(key);
  Counts total = w.total, last = w.last;
  if (w.stormed) {  // the storm in force, up to now
    last = now - w.at_storm;
    total = total + last;
  }
  fabric::WatchdogQueueFigures f;
  f.stormed = w.stormed, f.detected = w.detected, f.restored = w.restored;
  f.tx_ok = total.tx_ok, f.tx_drop = total.tx_drop, f.rx_ok = total.rx_ok, f.rx_drop = total.rx_drop;
  f.last_tx_ok = last.tx_ok, f.last_tx_drop = last.tx_drop, f.last_rx_ok = last.rx_ok, f.last_rx_drop = last.rx_drop;
  return f;
}

}  // namespace rocelab::agent
