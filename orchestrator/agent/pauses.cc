#include "agent/pauses.h"

namespace rocelab::agent {

PauseBook::Ask PauseBook::frame(uint32_t key, uint32_t quanta, uint64_t quantum_ps, uint64_t now) {
  if (quanta == 0) return Ask::kResume;
  PauseRecord& r = book_[key];
  r.until_ns = now + uint64_t(quanta) * quantum_ps / 1000;
  return r.on ? Ask::kRefresh : Ask::kPause;
}

void PauseBook::took_hold(uint32_t key, uint64_t at) {
  PauseRecord& r = book_[key];
  if (r.on) return;
  r.on = true;
  r.since_ns = at;
  ++r.count;
}

uint64_t PauseBook::ended(uint32_t key, uint64_t at) {
  PauseRecord& r = book_[key];
  if (r.on) {
    r.on = false;
    r.total_ns += at > r.since_ns ? at - r.since_ns : 0;
  }
  return r.total_ns;
}

bool PauseBook::on(uint32_t key) const {
  auto it = book_.find(key);
  return it != book_.end() && it->second.on;
}

std::vector<std::pair<uint32_t, uint64_t>> PauseBook::expired(uint64_t now) const {
  std::vector<std::pair<uint32_t, uint64_t>> out;
  for (const auto& [k, r] : book_)
    if (r.on && now >= r.until_ns) out.emplace_back(k, r.until_ns);
  return out;
}

uint64_t PauseBook::paused_ns(uint32_t key, uint64_t now) const {
  auto it = book_.find(key);
  return it == book_.end() ? 0 : it->second.paused_ns(now);
}

}  // namespace rocelab::agent
