// The pause watcher (ebpf/pause_watch.bpf.c): an observer of the pause mechanism, attached
// to the qdisc_dequeue tracepoint for as long as this object lives. Whoever actuates pauses
// records them here (mark); the watcher counts every data packet a paused port-priority
// still transmits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rocelab_abi.h"

struct pause_watch;

namespace rocelab::bpf {

class PauseWatch {
 public:
  // Loads and attaches the watcher over the fabric's port_info map (its fd: the ports it
  // may recognise), with a pause record per port slot x priority.
  // `ours`: the processes whose holds of a CPU are not another program's (rl_cpu_holds).
  static std::unique_ptr<PauseWatch> start(int port_info_fd, const std::vector<uint32_t>& ours, std::string& why);
  ~PauseWatch();
  PauseWatch(const PauseWatch&) = delete;
  PauseWatch& operator=(const PauseWatch&) = delete;

  // `since_ns` (bpf_ktime_get_ns() clock): the pause of (slot, prio) is in effect from then
  // on, and may let `allowance` bytes out (one max-size frame); 0: it is not (write it
  // before resuming, so the drain is not counted).
  bool mark(size_t slot, uint32_t prio, uint64_t since_ns, uint32_t allowance = 0);
  rl_pause_state read(size_t slot, uint32_t prio) const;
  // The port's line against its rate (rl_line_state): what it lost with packets waiting.
  rl_line_state line(size_t slot) const;
  size_t ports() const { return ports_; }
  // The PFC loop's thread (gettid): what keeps it waiting once woken is kept (RL_HOLD_LOOP).
  void set_loop(uint32_t tid);
  // Every CPU's kept stretches of another program's (rl_cpu_holds), oldest first per CPU.
  std::vector<rl_cpu_hold> holds() const;

 private:
  PauseWatch() = default;
  rl_pause_state* entry(size_t slot, uint32_t prio) const;
  pause_watch* skel_ = nullptr;
  size_t ports_ = 0;
  void* base_ = nullptr;  // the pause_state array, mapped
  size_t length_ = 0;
  void* lines_ = nullptr;  // the line_state array, mapped
  size_t lines_length_ = 0;
  void* holds_ = nullptr;  // the cpu_holds array, mapped
  size_t holds_length_ = 0, cpus_ = 0;
};

}  // namespace rocelab::bpf
