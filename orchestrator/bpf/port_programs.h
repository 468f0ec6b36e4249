// The port programs (ebpf/egress.bpf.c, ebpf/ingress.bpf.c): loaded once per fabric with
// one set of maps, attached to every port in its own namespace, and found again later from
// an attached port (bpf/fabric_maps.h; the kernel keeps programs and maps alive while
// filters hold them, so nothing is pinned and nothing outlives the fabric's namespaces).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rocelab_abi.h"
#include "sys/clock.h"

struct egress;
struct ingress;
struct wire;

namespace rocelab::bpf {

// A read-only view of the counter array, by rl_queue_key(slot, prio).
class Counters {
 public:
  Counters(int map_fd, size_t entries, bool writable = false);
  ~Counters();
  Counters(const Counters&) = delete;
  Counters& operator=(const Counters&) = delete;
  bool ok() const { return base_ != nullptr; }
  size_t ports() const { return entries_ / RL_NUM_PRIO; }
  // A consistent-enough copy: each 64-bit field is read atomically.
  rl_counters read(size_t slot, uint32_t prio) const;
  // The pause clock (rl_counters.paused_*): `write` maps the array writable for the agent.
  bool set_pause_clock(size_t slot, uint32_t prio, uint64_t since_ns, uint64_t total_ns, uint64_t arrived_ns = 0);
  // The PFC watchdog's drop action on a queue (rl_counters.wd_drop), likewise.
  bool set_wd_drop(size_t slot, uint32_t prio, bool drop);
  // The queue's peak since the last take (rl_counters.depth_peak), reset to 0 as it is read.
  uint64_t take_peak(size_t slot, uint32_t prio);
  // Time `slot`/`prio` spent paused up to `now_ns` (a pause in force included).
  uint64_t paused_ns(size_t slot, uint32_t prio, uint64_t now_ns) const;
  // The pause clock of `slot`/`prio` as one reading: whether a received pause holds it, since
  // when, when its XOFF arrived, and the time earlier pauses held it.
  sys::PauseReading pause_reading(size_t slot, uint32_t prio) const;

 private:
  int fd_;
  size_t entries_;
  void* base_ = nullptr;
  size_t length_ = 0;
  bool writable_ = false;
};

class PortPrograms {
 public:
  // Opens and loads both programs with room for `ports` port slots.
  static std::unique_ptr<PortPrograms> load(size_t ports, const rl_config& cfg, std::string& why);
  ~PortPrograms();
  PortPrograms(const PortPrograms&) = delete;
  PortPrograms& operator=(const PortPrograms&) = delete;

  // Hooks both programs to `ifindex` (a clsact qdisc's filters: tc_hook.h) in the
  // calling thread's network namespace.
  bool attach(int ifindex, std::string& why);
  bool set_port_info(size_t slot, const rl_port_info& info, std::string& why);
  bool set_port_headroom(size_t slot, const rl_port_headroom& h, std::string& why);
  int egress_fd() const;
  int ingress_fd() const;
  int pfc_events_fd() const;    // ring buffer of rl_pfc_event
  int pfc_tx_state_fd() const;
  int port_headroom_fd() const;
  int port_info_fd() const;
  int counters_fd() const;
  int depth_override_fd() const;
  int config_fd() const;
  int pg_bytes_fd() const;
  int pg_ring_fd() const;
  size_t ports() const { return ports_; }

 private:
  PortPrograms() = default;
  egress* eg_ = nullptr;
  ingress* in_ = nullptr;
  size_t ports_ = 0;
};

// The wire program (ebpf/wire.bpf.c) that joins a delayed link's two devices in the
// fabric's wire namespace. The filters that hold it keep it loaded after this goes.
class WireProgram {
 public:
  static std::unique_ptr<WireProgram> load(std::string& why);
  ~WireProgram();
  WireProgram(const WireProgram&) = delete;
  WireProgram& operator=(const WireProgram&) = delete;
  int fd() const;

 private:
  WireProgram() = default;
  ::wire* skel_ = nullptr;
};

// Bytes queued now in priority `prio`'s class of `ifindex`, read by the egress program
// itself (BPF_PROG_TEST_RUN in the calling thread's namespace; nothing is transmitted).
std::optional<uint32_t> probe_depth(int egress_fd, int ifindex, uint32_t prio, std::string& why);

}  // namespace rocelab::bpf
