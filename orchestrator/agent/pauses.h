// The pauses in force, per queue (rl_queue_key): what a received PFC frame asks of its queue,
// when a pause's time runs out, and each queue's pauses and their time. The qdisc change that
// puts a pause in force is the caller's; this book records what took effect. No root.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace rocelab::agent {

struct PauseRecord {
  bool on = false;
  uint64_t until_ns = 0;             // when the pause's time runs out (the last XOFF's quanta)
  uint64_t since_ns = 0;             // when this pause took effect
  uint64_t count = 0, total_ns = 0;  // the queue's pauses, and their time once ended
  uint64_t paused_ns(uint64_t now) const { return total_ns + (on && now > since_ns ? now - since_ns : 0); }
};

class PauseBook {
 public:
  enum class Ask { kResume, kRefresh, kPause };
  // A PFC frame for queue `key` at `now`: quanta 0 (XON) asks to resume; otherwise the pause
  // runs quanta x 512 bit-times (`quantum_ps` each, the port's emulated rate) from now, and
  // a pause already in force is only refreshed.
  Ask frame(uint32_t key, uint32_t quanta, uint64_t quantum_ps, uint64_t now);
  // The pause asked for took effect at `at`.
  void took_hold(uint32_t key, uint64_t at);
  // The pause in force ended at `at` (XON, its time ran out, the watchdog lifted it): the
  // queue's paused time so far.
  uint64_t ended(uint32_t key, uint64_t at);

  bool on(uint32_t key) const;
  // Pauses in force whose time ran out by `now`: (key, when it ran out).
  std::vector<std::pair<uint32_t, uint64_t>> expired(uint64_t now) const;
  uint64_t paused_ns(uint32_t key, uint64_t now) const;
  const std::map<uint32_t, PauseRecord>& records() const { return book_; }

 private:
  std::map<uint32_t, PauseRecord> book_;
};

}  // namespace rocelab::agent
