// PFC deadlock (FAULTS.md): a cyclic buffer dependency. A switch queue that is paused, holds
// packets and sends none waits for the node that paused it; a cycle in that wait-for graph
// whose every member has sent nothing for a pause time is a deadlock: nothing in it can move
// until something drops (the watchdog) or gives up (the RNICs' timeouts). Pure, as
// model/pfcwd.h: the agent feeds live counters, tests made-up ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace rocelab::model {

// One queue that may wait: on `node`, toward `peer` (the node at its link's other end).
struct WaitQueue {
  uint64_t key = 0;  // the caller's name for the queue (port x priority)
  size_t node = 0, peer = 0;
  uint32_t prio = 0;
  bool paused = false;    // a received XOFF holds it
  bool holds = false;     // it has packets to send
  uint64_t dequeued = 0;  // packets it has sent, ever
  int64_t hold = 0;       // how long it must send nothing to count as stuck (one pause time)
};

struct Deadlock {
  uint32_t prio = 0;
  std::vector<uint64_t> members;  // the cycle's queues in wait order: each waits for the next one's node
  int64_t since = 0;              // when its last member stopped sending (the cycle closed)
  int64_t detected = 0;
  int64_t ended = -1;             // when a member sent again or was released; -1 while it holds
};

class DeadlockWatch {
 public:
  // One look at every queue that may wait, at time `t` (any monotonic unit, as `hold`).
  // Queues not named are taken as not waiting. Returns how many deadlocks began or ended.
  size_t sample(int64_t t, const std::vector<WaitQueue>& queues);
  const std::vector<Deadlock>& deadlocks() const { return found_; }

 private:
  struct State {
    uint64_t dequeued = 0;
    int64_t since = -1;  // when it last sent, or was paused with packets; -1: not waiting
  };
  std::map<uint64_t, State> state_;
  std::vector<Deadlock> found_;
};

}  // namespace rocelab::model
