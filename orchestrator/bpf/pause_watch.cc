#include "bpf/pause_watch.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "pause_watch.skel.h"

namespace rocelab::bpf {

std::unique_ptr<PauseWatch> PauseWatch::start(int port_info_fd, const std::vector<uint32_t>& ours, std::string& why) {
  auto fail = [&why](const std::string& what, int e) {
    why = what + ": " + std::strerror(e < 0 ? -e : e);
    return nullptr;
  };
  bpf_map_info info{};
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(port_info_fd, &info, &len) != 0) return fail("port_info map", errno);
  std::unique_ptr<PauseWatch> w(new PauseWatch());
  w->ports_ = std::max<uint32_t>(info.max_entries, 1);
  w->skel_ = pause_watch__open();
  if (!w->skel_) return fail("open pause_watch.bpf.o", errno);
  bpf_map__set_max_entries(w->skel_->maps.pause_state, static_cast<uint32_t>(w->ports_ * RL_NUM_PRIO));
  bpf_map__set_max_entries(w->skel_->maps.line_state, static_cast<uint32_t>(w->ports_));
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return fail("count the CPUs", cpus);
  w->cpus_ = size_t(cpus);
  bpf_map__set_max_entries(w->skel_->maps.cpu_holds, static_cast<uint32_t>(cpus));
  for (size_t i = 0; i < ours.size() && i < RL_HOLD_OURS; ++i) w->skel_->bss->ours[i] = ours[i];
  if (int e = bpf_map__reuse_fd(w->skel_->maps.port_info, port_info_fd)) return fail("share port_info", e);
  if (int e = pause_watch__load(w->skel_)) return fail("load pause_watch.bpf.o", e);
  w->length_ = (w->ports_ * RL_NUM_PRIO * sizeof(rl_pause_state) + 4095) / 4096 * 4096;
  void* m = mmap(nullptr, w->length_, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(w->skel_->maps.pause_state), 0);
  if (m == MAP_FAILED) return fail("map pause_state", errno);
  w->base_ = m;
  w->lines_length_ = (w->ports_ * sizeof(rl_line_state) + 4095) / 4096 * 4096;
  m = mmap(nullptr, w->lines_length_, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(w->skel_->maps.line_state), 0);
  if (m == MAP_FAILED) return fail("map line_state", errno);
  w->lines_ = m;
  w->holds_length_ = (w->cpus_ * sizeof(rl_cpu_holds) + 4095) / 4096 * 4096;
  m = mmap(nullptr, w->holds_length_, PROT_READ, MAP_SHARED, bpf_map__fd(w->skel_->maps.cpu_holds), 0);
  if (m == MAP_FAILED) return fail("map cpu_holds", errno);
  w->holds_ = m;
  if (int e = pause_watch__attach(w->skel_)) return fail("attach to tracepoints qdisc_dequeue, sched_switch, sched_waking and softirq_entry/exit", e);
  return w;
}

PauseWatch::~PauseWatch() {
  if (base_) munmap(base_, length_);
  if (lines_) munmap(lines_, lines_length_);
  if (holds_) munmap(holds_, holds_length_);
  if (skel_) pause_watch__destroy(skel_);
}

rl_pause_state* PauseWatch::entry(size_t slot, uint32_t prio) const {
  if (!base_ || slot >= ports_ || prio >= RL_NUM_PRIO) return nullptr;
  return static_cast<rl_pause_state*>(base_) + rl_queue_key(uint32_t(slot), prio);
}

bool PauseWatch::mark(size_t slot, uint32_t prio, uint64_t since_ns, uint32_t allowance) {
  rl_pause_state* e = entry(slot, prio);
  if (!e) return false;
  if (since_ns) __atomic_store_n(&e->allowance, static_cast<int64_t>(allowance), __ATOMIC_RELAXED);
  // Release: the program sees the pause only with its allowance.
  __atomic_store_n(&e->since_ns, since_ns, __ATOMIC_RELEASE);
  // The line's accounting: no run while a priority of the port is paused, none across a change.
  if (lines_ && slot < ports_) {
    auto* l = static_cast<rl_line_state*>(lines_) + slot;
    const uint64_t bit = uint64_t(1) << prio;
    if (since_ns) __atomic_fetch_or(&l->paused_mask, bit, __ATOMIC_RELEASE);
    else __atomic_fetch_and(&l->paused_mask, ~bit, __ATOMIC_RELEASE);
    __atomic_fetch_add(&l->pause_changes, 1, __ATOMIC_RELEASE);
  }
  return true;
}

rl_line_state PauseWatch::line(size_t slot) const {
  rl_line_state l{};
  if (!lines_ || slot >= ports_) return l;
  const auto* e = static_cast<const rl_line_state*>(lines_) + slot;
  l.lost_ns = __atomic_load_n(&e->lost_ns, __ATOMIC_RELAXED);
  l.runs = __atomic_load_n(&e->runs, __ATOMIC_RELAXED);
  l.longest_ns = __atomic_load_n(&e->longest_ns, __ATOMIC_RELAXED);
  l.gap_ns = __atomic_load_n(&e->gap_ns, __ATOMIC_RELAXED);
  l.gap_at_ns = __atomic_load_n(&e->gap_at_ns, __ATOMIC_RELAXED);
  return l;
}

rl_pause_state PauseWatch::read(size_t slot, uint32_t prio) const {
  rl_pause_state st{};
  if (const rl_pause_state* e = entry(slot, prio)) {
    st.since_ns = __atomic_load_n(&e->since_ns, __ATOMIC_RELAXED);
    st.allowance = __atomic_load_n(&e->allowance, __ATOMIC_RELAXED);
    st.tail_packets = __atomic_load_n(&e->tail_packets, __ATOMIC_RELAXED);
    st.leaked_packets = __atomic_load_n(&e->leaked_packets, __ATOMIC_RELAXED);
    st.leaked_bytes = __atomic_load_n(&e->leaked_bytes, __ATOMIC_RELAXED);
    st.dequeued = __atomic_load_n(&e->dequeued, __ATOMIC_RELAXED);
  }
  return st;
}

void PauseWatch::set_loop(uint32_t tid) {
  if (skel_ && skel_->bss) __atomic_store_n(&skel_->bss->loop_tid, tid, __ATOMIC_RELEASE);
}

std::vector<rl_cpu_hold> PauseWatch::holds() const {
  std::vector<rl_cpu_hold> out;
  for (size_t c = 0; holds_ && c < cpus_; ++c) {
    const auto* h = static_cast<const rl_cpu_holds*>(holds_) + c;
    const uint64_t next = __atomic_load_n(&h->next, __ATOMIC_ACQUIRE);
    // The ring's last RL_HOLD_RING (one the program overwrites meanwhile may read torn: a
    // figure of the evidence, never of the physics).
    for (uint64_t i = next > RL_HOLD_RING ? next - RL_HOLD_RING : 0; i < next; ++i) {
      rl_cpu_hold r{};
      std::memcpy(&r, &h->ring[i % RL_HOLD_RING], sizeof r);
      r.comm[sizeof r.comm - 1] = 0;
      if (r.dur_ns >= RL_HOLD_MIN_NS && r.start_ns) out.push_back(r);
    }
  }
  return out;
}

}  // namespace rocelab::bpf
