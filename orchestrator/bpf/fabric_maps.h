// A running fabric's maps, opened once and typed. `up` has them from the programs it loaded
// (PortPrograms); a later process (the agent, `stats`, `inject`) opens them once from any
// attached port, checked against the ABI's layouts. Nothing above bpf/ looks a map up by
// name or touches libbpf: it reads and writes through these accessors.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bpf/port_programs.h"
#include "rocelab_abi.h"
#include "sys/netns.h"

struct ring_buffer;
struct emit;

namespace rocelab::bpf {

class FabricMaps {
 public:
  // Duplicates of the maps of programs this process loaded.
  static std::optional<FabricMaps> of(const PortPrograms& p, std::string& why);
  // The maps behind the programs attached to `ifindex` in the calling thread's namespace.
  static std::optional<FabricMaps> open_attached(int ifindex, std::string& why);

  FabricMaps(FabricMaps&& o) noexcept;
  FabricMaps& operator=(FabricMaps&&) noexcept = delete;
  ~FabricMaps();

  size_t ports() const { return ports_; }
  bool config(rl_config& out, std::string& why) const;
  bool port_info(uint32_t slot, rl_port_info& out, std::string& why) const;
  bool set_port_info(uint32_t slot, const rl_port_info& v, std::string& why) const;
  bool headroom(uint32_t slot, rl_port_headroom& out, std::string& why) const;
  bool set_headroom(uint32_t slot, const rl_port_headroom& v, std::string& why) const;
  // Every (key = rl_queue_key(slot, prio), state) of the PFC transmit state, with no syscall.
  bool tx_states(std::vector<uint32_t>& keys, std::vector<rl_pfc_tx_state>& states, std::string& why) const;
  bool tx_state(uint32_t key, rl_pfc_tx_state& out, std::string& why) const;
  bool set_tx_state(uint32_t key, const rl_pfc_tx_state& v, std::string& why) const;
  const Counters& counters() const { return *counters_; }
  uint64_t take_peak(uint32_t slot, uint32_t prio) const { return counters_->take_peak(slot, prio); }
  // The agent's record of a port-priority's pauses (rl_counters.paused_*).
  bool set_pause_clock(uint32_t slot, uint32_t prio, uint64_t since_ns, uint64_t total_ns, uint64_t arrived_ns = 0) const {
    return counters_->set_pause_clock(slot, prio, since_ns, total_ns, arrived_ns);
  }
  bool set_wd_drop(uint32_t slot, uint32_t prio, bool drop) const { return counters_->set_wd_drop(slot, prio, drop); }
  // The bytes a switch holds from ingress port `slot` on priority `prio` (its PG).
  int64_t pg_bytes(uint32_t key) const;
  int egress_program() const { return egress_.get(); }  // for probe_depth
  int port_info_fd() const { return info_.get(); }      // shared with the pause watcher
  int pfc_events_fd() const { return events_.get(); }

 private:
  FabricMaps() = default;
  bool finish(std::string& why);
  sys::Fd config_, info_, counters_map_, tx_state_, headroom_, events_, egress_, pg_bytes_;
  std::unique_ptr<Counters> counters_;
  void* pg_base_ = nullptr;  // pg_bytes, mapped
  size_t pg_length_ = 0;
  void* tx_base_ = nullptr;  // pfc_tx_state, mapped
  size_t tx_length_ = 0;
  size_t ports_ = 0;
};

// The PFC frames the ingress programs received (ring buffer of rl_pfc_event).
class PfcEvents {
 public:
  using Handler = std::function<void(const rl_pfc_event&)>;
  static std::unique_ptr<PfcEvents> open(const FabricMaps& maps, Handler on_event, std::string& why);
  ~PfcEvents();
  PfcEvents(const PfcEvents&) = delete;
  PfcEvents& operator=(const PfcEvents&) = delete;
  int fd() const;      // readable (poll) when events wait
  int consume();       // hands every waiting event to the handler; how many, or < 0
  int poll(int timeout_ms);

 private:
  PfcEvents() = default;
  static int on_sample(void* ctx, void* data, size_t len);
  ::ring_buffer* rb_ = nullptr;
  Handler on_;
};

// Sends the agent's frames out of a port (ebpf/emit.bpf.c): `mark` is RL_MARK_PFC(xoff,
// prio) or RL_MARK_PFC_KICK; the port's egress program builds the frame. Runs in the
// calling thread's namespace, which must be the port's.
class FrameEmitter {
 public:
  static std::unique_ptr<FrameEmitter> load(std::string& why);
  ~FrameEmitter();
  FrameEmitter(const FrameEmitter&) = delete;
  FrameEmitter& operator=(const FrameEmitter&) = delete;
  // `priority` is the clone's skb->priority (a storm's RL_STORM_PRIORITY; else unused).
  bool send(int ifindex, uint32_t mark, std::string& why, uint32_t priority = 0) const;

 private:
  FrameEmitter() = default;
  ::emit* skel_ = nullptr;
};

}  // namespace rocelab::bpf
