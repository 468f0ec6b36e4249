#include "agent/storms.h"

namespace rocelab::agent {

uint64_t StormSchedule::start(const fabric::StormSpec& spec, uint64_t now) {
  storms_[++last_id_] = {spec, now, 0};
  return last_id_;
}

uint64_t StormSchedule::stop(uint64_t id) {
  uint64_t frames = 0;
  for (auto it = storms_.begin(); it != storms_.end();) {
    if (id && it->first != id) {
      ++it;
      continue;
    }
    frames += it->second.sent;
    it = storms_.erase(it);
  }
  return frames;
}

uint64_t StormSchedule::run(uint64_t now, const Send& send) {
  uint64_t sent = 0;
  for (auto& [id, st] : storms_)
    for (int n = 0; st.next_ns <= now && (st.spec.frames == 0 || st.sent < st.spec.frames); ++n) {
      if (n == kCatchUp) {
        st.next_ns = now + st.spec.interval_ns;
        break;
      }
      if (!send(st.spec)) break;
      ++st.sent, ++sent;
      st.next_ns += st.spec.interval_ns;
    }
  return sent;
}

}  // namespace rocelab::agent
