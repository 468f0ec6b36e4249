#include "bpf/port_programs.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "egress.skel.h"
#include "ingress.skel.h"
#include "wire.skel.h"
#include "bpf/tc_hook.h"
#include "sys/netns.h"

namespace rocelab::bpf {

namespace {
std::string err(const std::string& what, int e) { return what + ": " + std::strerror(e < 0 ? -e : e); }
constexpr size_t kPage = 4096;
}  // namespace

Counters::Counters(int map_fd, size_t entries, bool writable) : fd_(dup(map_fd)), entries_(entries), writable_(writable) {
  length_ = (entries * sizeof(rl_counters) + kPage - 1) / kPage * kPage;
  const int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  void* p = fd_ >= 0 ? mmap(nullptr, length_, prot, MAP_SHARED, fd_, 0) : MAP_FAILED;
  base_ = p == MAP_FAILED ? nullptr : p;
}

bool Counters::set_pause_clock(size_t slot, uint32_t prio, uint64_t since_ns, uint64_t total_ns, uint64_t arrived_ns) {
  const size_t i = rl_queue_key(uint32_t(slot), prio);
  if (!base_ || !writable_ || i >= entries_) return false;
  auto* c = static_cast<rl_counters*>(base_) + i;
  // arrived before since before total, and readers load them the other way round: a reader
  // that sees the new total sees the pause's end too, so an ending pause is never counted
  // twice, and one that sees a pause begin sees when its XOFF arrived.
  __atomic_store_n(&c->paused_arrived_ns, arrived_ns, __ATOMIC_RELAXED);
  __atomic_store_n(&c->paused_since_ns, since_ns, __ATOMIC_RELEASE);
  __atomic_store_n(&c->paused_total_ns, total_ns, __ATOMIC_RELEASE);
  return true;
}

bool Counters::set_wd_drop(size_t slot, uint32_t prio, bool drop) {
  const size_t i = rl_queue_key(uint32_t(slot), prio);
  if (!base_ || !writable_ || i >= entries_) return false;
  __atomic_store_n(&(static_cast<rl_counters*>(base_) + i)->wd_drop, uint64_t(drop), __ATOMIC_RELEASE);
  return true;
}

uint64_t Counters::take_peak(size_t slot, uint32_t prio) {
  const size_t i = rl_queue_key(uint32_t(slot), prio);
  if (!base_ || !writable_ || i >= entries_) return 0;
  return __atomic_exchange_n(&(static_cast<rl_counters*>(base_) + i)->depth_peak, uint64_t{0}, __ATOMIC_ACQ_REL);
}

uint64_t Counters::paused_ns(size_t slot, uint32_t prio, uint64_t now_ns) const {
  const size_t i = rl_queue_key(uint32_t(slot), prio);
  if (!base_ || i >= entries_) return 0;
  const auto* c = static_cast<const rl_counters*>(base_) + i;
  const uint64_t total = __atomic_load_n(&c->paused_total_ns, __ATOMIC_ACQUIRE);
  const uint64_t since = __atomic_load_n(&c->paused_since_ns, __ATOMIC_RELAXED);
  return total + (since && now_ns > since ? now_ns - since : 0);
}

sys::PauseReading Counters::pause_reading(size_t slot, uint32_t prio) const {
  const size_t i = rl_queue_key(uint32_t(slot), prio);
  if (!base_ || i >= entries_) return {};
  const auto* c = static_cast<const rl_counters*>(base_) + i;
  sys::PauseReading r;
  r.total = sys::Nanos(__atomic_load_n(&c->paused_total_ns, __ATOMIC_ACQUIRE));
  r.since = sys::Nanos(__atomic_load_n(&c->paused_since_ns, __ATOMIC_ACQUIRE));
  r.arrived = r.since ? sys::Nanos(__atomic_load_n(&c->paused_arrived_ns, __ATOMIC_RELAXED)) : 0;
  if (r.since && (r.arrived == 0 || r.arrived > r.since)) r.arrived = r.since;  // a pause set by hand, or torn
  r.xon = sys::Nanos(__atomic_load_n(&c->xon_arrived_ns, __ATOMIC_RELAXED));
  return r;
}

Counters::~Counters() {
  if (base_) munmap(base_, length_);
  if (fd_ >= 0) close(fd_);
}

rl_counters Counters::read(size_t slot, uint32_t prio) const {
  rl_counters out{};
  const size_t i = rl_queue_key(uint32_t(slot), prio);
  if (!base_ || i >= entries_) return out;
  const auto* src = reinterpret_cast<const uint64_t*>(static_cast<const rl_counters*>(base_) + i);
  auto* dst = reinterpret_cast<uint64_t*>(&out);
  for (size_t k = 0; k < sizeof out / 8; ++k) dst[k] = __atomic_load_n(src + k, __ATOMIC_RELAXED);
  // The pause clock again, in the order set_pause_clock needs (total, then since).
  const auto* c = static_cast<const rl_counters*>(base_) + i;
  out.paused_total_ns = __atomic_load_n(&c->paused_total_ns, __ATOMIC_ACQUIRE);
  out.paused_since_ns = __atomic_load_n(&c->paused_since_ns, __ATOMIC_RELAXED);
  return out;
}

std::unique_ptr<PortPrograms> PortPrograms::load(size_t ports, const rl_config& cfg, std::string& why) {
  std::unique_ptr<PortPrograms> p(new PortPrograms());
  p->ports_ = ports;
  p->eg_ = egress__open();
  if (!p->eg_) {
    why = err("open egress.bpf.o", errno);
    return nullptr;
  }
  const auto slots = static_cast<uint32_t>(std::max<size_t>(ports, 1));
  bpf_map__set_max_entries(p->eg_->maps.port_counters, slots * RL_NUM_PRIO);
  bpf_map__set_max_entries(p->eg_->maps.pfc_tx_state, slots * RL_NUM_PRIO);
  bpf_map__set_max_entries(p->eg_->maps.port_info, slots);
  bpf_map__set_max_entries(p->eg_->maps.port_headroom, slots);
  bpf_map__set_max_entries(p->eg_->maps.pg_bytes, slots * RL_NUM_PRIO);
  bpf_map__set_max_entries(p->eg_->maps.pg_ring, slots * std::max<uint32_t>(cfg.pg_rows, 1));
  if (int e = egress__load(p->eg_); e) {
    why = err("load egress.bpf.o (verifier log above with -v)", e);
    return nullptr;
  }
  p->in_ = ingress__open();
  if (!p->in_) {
    why = err("open ingress.bpf.o", errno);
    return nullptr;
  }
  // One set of maps for both programs.
  if (int e = bpf_map__reuse_fd(p->in_->maps.port_counters, bpf_map__fd(p->eg_->maps.port_counters)); e ||
      (e = bpf_map__reuse_fd(p->in_->maps.port_config, bpf_map__fd(p->eg_->maps.port_config))) ||
      (e = bpf_map__reuse_fd(p->in_->maps.port_info, bpf_map__fd(p->eg_->maps.port_info))) ||
      (e = bpf_map__reuse_fd(p->in_->maps.depth_override, bpf_map__fd(p->eg_->maps.depth_override))) ||
      (e = bpf_map__reuse_fd(p->in_->maps.pfc_tx_state, bpf_map__fd(p->eg_->maps.pfc_tx_state)))) {
    why = err("share maps with ingress.bpf.o", e);
    return nullptr;
  }
  if (int e = ingress__load(p->in_); e) {
    why = err("load ingress.bpf.o", e);
    return nullptr;
  }
  uint32_t zero = 0;
  if (bpf_map_update_elem(p->config_fd(), &zero, &cfg, BPF_ANY) != 0) {
    why = err("write port_config", errno);
    return nullptr;
  }
  return p;
}

PortPrograms::~PortPrograms() {
  if (in_) ingress__destroy(in_);
  if (eg_) egress__destroy(eg_);
}

bool PortPrograms::set_port_info(size_t slot, const rl_port_info& info, std::string& why) {
  auto key = static_cast<uint32_t>(slot);
  if (bpf_map_update_elem(bpf_map__fd(eg_->maps.port_info), &key, &info, BPF_ANY) != 0) {
    why = err("write port_info of slot " + std::to_string(slot), errno);
    return false;
  }
  return true;
}

bool PortPrograms::set_port_headroom(size_t slot, const rl_port_headroom& h, std::string& why) {
  auto key = static_cast<uint32_t>(slot);
  if (bpf_map_update_elem(port_headroom_fd(), &key, &h, BPF_ANY) != 0) {
    why = err("write port_headroom of slot " + std::to_string(slot), errno);
    return false;
  }
  return true;
}

int PortPrograms::port_info_fd() const { return bpf_map__fd(eg_->maps.port_info); }
int PortPrograms::port_headroom_fd() const { return bpf_map__fd(eg_->maps.port_headroom); }
int PortPrograms::pfc_events_fd() const { return bpf_map__fd(in_->maps.pfc_events); }
int PortPrograms::pfc_tx_state_fd() const { return bpf_map__fd(eg_->maps.pfc_tx_state); }
int PortPrograms::ingress_fd() const { return bpf_program__fd(in_->progs.rl_ingress); }

int PortPrograms::egress_fd() const { return bpf_program__fd(eg_->progs.rl_egress); }
int PortPrograms::counters_fd() const { return bpf_map__fd(eg_->maps.port_counters); }
int PortPrograms::depth_override_fd() const { return bpf_map__fd(eg_->maps.depth_override); }
int PortPrograms::config_fd() const { return bpf_map__fd(eg_->maps.port_config); }
int PortPrograms::pg_bytes_fd() const { return bpf_map__fd(eg_->maps.pg_bytes); }
int PortPrograms::pg_ring_fd() const { return bpf_map__fd(eg_->maps.pg_ring); }

bool PortPrograms::attach(int ifindex, std::string& why) {
  return add_clsact(ifindex, why) && attach_tc(ifindex, TcHook::kEgress, egress_fd(), why) &&
         attach_tc(ifindex, TcHook::kIngress, ingress_fd(), why);
}

std::optional<uint32_t> probe_depth(int egress_fd, int ifindex, uint32_t prio, std::string& why) {
  unsigned char frame[60] = {0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45};
  __sk_buff ctx{};
  ctx.ifindex = static_cast<uint32_t>(ifindex);
  ctx.mark = RL_MARK_PROBE(prio);
  LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = frame, .data_size_in = sizeof frame, .ctx_in = &ctx,
              .ctx_size_in = sizeof ctx, .repeat = 1);
  if (bpf_prog_test_run_opts(egress_fd, &o) != 0) {
    why = err("probe the depth of interface " + std::to_string(ifindex), errno);
    return std::nullopt;
  }
  return o.retval;
}

std::unique_ptr<WireProgram> WireProgram::load(std::string& why) {
  std::unique_ptr<WireProgram> w(new WireProgram());
  w->skel_ = wire__open_and_load();
  if (!w->skel_) {
    why = err("load wire.bpf.o", errno);
    return nullptr;
  }
  return w;
}

WireProgram::~WireProgram() {
  if (skel_) wire__destroy(skel_);
}

int WireProgram::fd() const { return bpf_program__fd(skel_->progs.rl_wire); }

}  // namespace rocelab::bpf
