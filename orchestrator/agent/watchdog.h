// The PFC watchdog (FAULTS.md) on every watched queue: model::WdQueue's state machine, each
// node's poll on its own timer (a switch polls on its own clock), and SONiC's PFC_WD
// counters of what a stormed queue sent, dropped and received. The samples and counts come
// from the caller, and so does what a storm does to the queue (drop, forward, the pause
// lifted): this needs no root and no fabric.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fabric/agent_protocol.h"
#include "model/pfcwd.h"

namespace rocelab::agent {

class Watchdog {
 public:
  // A queue's PFC_WD counts, cumulative: what it sent and dropped, what its port received on
  // its priority and dropped.
  struct Counts {
    uint64_t tx_ok = 0, tx_drop = 0, rx_ok = 0, rx_drop = 0;
    Counts operator-(const Counts& b) const { return {tx_ok - b.tx_ok, tx_drop - b.tx_drop, rx_ok - b.rx_ok, rx_drop - b.rx_drop}; }
    Counts operator+(const Counts& b) const { return {tx_ok + b.tx_ok, tx_drop + b.tx_drop, rx_ok + b.rx_ok, rx_drop + b.rx_drop}; }
  };

  // From the run's watchdog (times wall clock); `first_poll`: each node's first poll.
  static std::optional<Watchdog> make(const fabric::AgentWatchdog& w, std::vector<uint64_t> first_poll,
                                      std::string& why);

  void watch(uint32_t key, uint32_t node);
  bool empty() const { return queues_.empty(); }
  model::WdAction action() const { return action_; }
  // Stormed with drop or forward: PFC received on it is not honoured.
  bool ignoring(uint32_t key) const;

  // Polls the queues of each node whose poll is due by `now` (`sample(key)`: the queue as
  // this poll reads it) and calls `changed(key, detected)` for each storm detected or
  // restored; the caller acts, then says detected() or restored().
  void poll(uint64_t now, const std::function<model::WdSample(uint32_t key)>& sample,
            const std::function<void(uint32_t key, bool detected)>& changed);
  // A storm on `key` began (its counts now: the storm's are counted from them) / ended.
  void detected(uint32_t key, const Counts& now);
  void restored(uint32_t key, const Counts& now);

  std::vector<uint32_t> keys() const;
  bool stormed(uint32_t key) const;
  // The queue's record, all storms and the last (one in force counted up to `now`, its
  // counts as read now). Node and port names are the caller's.
  fabric::WatchdogQueueFigures figures(uint32_t key, const Counts& now) const;

 private:
  struct Queue {
    model::WdQueue q;
    uint32_t node = 0;
    bool stormed = false;   // between detected() and restored()
    bool ignoring = false;
    uint64_t detected = 0, restored = 0;
    Counts at_storm, total, last;
  };
  Watchdog(const fabric::AgentWatchdog& w, model::WdAction a, model::WdPredicate p, std::vector<uint64_t> first_poll)
      : timing_{w.detection_ns, w.restoration_ns, w.poll_ns}, action_(a), predicate_(p), next_(std::move(first_poll)) {}
  model::WdTiming timing_;
  model::WdAction action_;
  model::WdPredicate predicate_;
  std::vector<uint64_t> next_;  // per node: its next poll
  std::map<uint32_t, Queue> queues_;  // by rl_queue_key
};

}  // namespace rocelab::agent
