#include "bpf/fabric_maps.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "bpf/tc_hook.h"
#include "emit.skel.h"

namespace rocelab::bpf {

namespace {

std::string err(const std::string& what, int e) { return what + ": " + std::strerror(e < 0 ? -e : e); }

// What each map of the port programs must be: the ABI's layout, checked when a running
// fabric's maps are opened, so a binary from another build cannot misread them.
struct Expected {
  const char* name;
  bpf_map_type type;
  uint32_t value_size;  // 0: not checked (ring buffer)
  sys::Fd FabricMaps::*slot;
};

bool lookup(int fd, uint32_t key, void* out, const char* what, std::string& why) {
  if (bpf_map_lookup_elem(fd, &key, out) == 0) return true;
  why = err(std::string("read ") + what + " " + std::to_string(key), errno);
  return false;
}

bool update(int fd, uint32_t key, const void* v, const char* what, std::string& why) {
  if (bpf_map_update_elem(fd, &key, v, BPF_ANY) == 0) return true;
  why = err(std::string("write ") + what + " " + std::to_string(key), errno);
  return false;
}

int attached_prog(int ifindex, bool ingress, std::string& why) {
  const uint32_t id = attached_tc(ifindex, ingress ? TcHook::kIngress : TcHook::kEgress, why);
  if (!id) return -1;
  int prog = bpf_prog_get_fd_by_id(id);
  if (prog < 0) why = err("open program " + std::to_string(id), errno);
  return prog;
}

}  // namespace

FabricMaps::FabricMaps(FabricMaps&& o) noexcept
    : config_(std::move(o.config_)), info_(std::move(o.info_)), counters_map_(std::move(o.counters_map_)),
      tx_state_(std::move(o.tx_state_)), headroom_(std::move(o.headroom_)), events_(std::move(o.events_)),
      egress_(std::move(o.egress_)), pg_bytes_(std::move(o.pg_bytes_)), counters_(std::move(o.counters_)),
      pg_base_(std::exchange(o.pg_base_, nullptr)), pg_length_(o.pg_length_),
      tx_base_(std::exchange(o.tx_base_, nullptr)), tx_length_(o.tx_length_), ports_(o.ports_) {}

FabricMaps::~FabricMaps() {
  if (pg_base_) munmap(pg_base_, pg_length_);
  if (tx_base_) munmap(tx_base_, tx_length_);
}

int64_t FabricMaps::pg_bytes(uint32_t key) const {
  if (!pg_base_ || key >= ports_ * RL_NUM_PRIO) return 0;
  return __atomic_load_n(static_cast<const int64_t*>(pg_base_) + key, __ATOMIC_RELAXED);
}

bool FabricMaps::finish(std::string& why) {
  bpf_map_info mi{};
  uint32_t len = sizeof mi;
  if (bpf_obj_get_info_by_fd(info_.get(), &mi, &len) != 0) {
    why = err("port_info", errno);
    return false;
  }
  ports_ = mi.max_entries;
  counters_ = std::make_unique<Counters>(counters_map_.get(), ports_ * RL_NUM_PRIO, /*writable=*/true);
  if (!counters_->ok()) {
    why = err("mmap port_counters", errno);
    return false;
  }
  pg_length_ = (ports_ * RL_NUM_PRIO * sizeof(int64_t) + 4095) / 4096 * 4096;
  void* p = mmap(nullptr, pg_length_, PROT_READ, MAP_SHARED, pg_bytes_.get(), 0);
  if (p == MAP_FAILED) {
    why = err("mmap pg_bytes", errno);
    return false;
  }
  pg_base_ = p;
  tx_length_ = (ports_ * RL_NUM_PRIO * sizeof(rl_pfc_tx_state) + 4095) / 4096 * 4096;
  p = mmap(nullptr, tx_length_, PROT_READ, MAP_SHARED, tx_state_.get(), 0);
  if (p == MAP_FAILED) {
    why = err("mmap pfc_tx_state", errno);
    return false;
  }
  tx_base_ = p;
  return true;
}

std::optional<FabricMaps> FabricMaps::of(const PortPrograms& p, std::string& why) {
  FabricMaps m;
  m.config_ = sys::Fd(dup(p.config_fd()));
  m.info_ = sys::Fd(dup(p.port_info_fd()));
  m.counters_map_ = sys::Fd(dup(p.counters_fd()));
  m.tx_state_ = sys::Fd(dup(p.pfc_tx_state_fd()));
  m.headroom_ = sys::Fd(dup(p.port_headroom_fd()));
  m.events_ = sys::Fd(dup(p.pfc_events_fd()));
  m.egress_ = sys::Fd(dup(p.egress_fd()));
  m.pg_bytes_ = sys::Fd(dup(p.pg_bytes_fd()));
  if (!m.finish(why)) return std::nullopt;
  return m;
}

std::optional<FabricMaps> FabricMaps::open_attached(int ifindex, std::string& why) {
  static const Expected kMaps[] = {
      {"port_config", BPF_MAP_TYPE_ARRAY, sizeof(rl_config), &FabricMaps::config_},
      {"port_info", BPF_MAP_TYPE_ARRAY, sizeof(rl_port_info), &FabricMaps::info_},
      {"port_counters", BPF_MAP_TYPE_ARRAY, sizeof(rl_counters), &FabricMaps::counters_map_},
      {"pfc_tx_state", BPF_MAP_TYPE_ARRAY, sizeof(rl_pfc_tx_state), &FabricMaps::tx_state_},
      {"port_headroom", BPF_MAP_TYPE_ARRAY, sizeof(rl_port_headroom), &FabricMaps::headroom_},
      {"pfc_events", BPF_MAP_TYPE_RINGBUF, 0, &FabricMaps::events_},
      {"pg_bytes", BPF_MAP_TYPE_ARRAY, sizeof(int64_t), &FabricMaps::pg_bytes_},
  };
  FabricMaps m;
  m.egress_ = sys::Fd(attached_prog(ifindex, false, why));
  if (!m.egress_.valid()) return std::nullopt;
  for (const sys::Fd& prog : {sys::Fd(dup(m.egress_.get())), sys::Fd(attached_prog(ifindex, true, why))}) {
    if (!prog.valid()) return std::nullopt;
    uint32_t ids[16] = {};
    bpf_prog_info info{};
    info.nr_map_ids = 16;
    info.map_ids = reinterpret_cast<uint64_t>(ids);
    uint32_t len = sizeof info;
    if (bpf_obj_get_info_by_fd(prog.get(), &info, &len) != 0) {
      why = err("program info", errno);
      return std::nullopt;
    }
    for (uint32_t i = 0; i < std::min<uint32_t>(info.nr_map_ids, 16); ++i) {
      sys::Fd map(bpf_map_get_fd_by_id(ids[i]));
      bpf_map_info mi{};
      uint32_t mlen = sizeof mi;
      if (!map.valid() || bpf_obj_get_info_by_fd(map.get(), &mi, &mlen) != 0) continue;
      for (const Expected& e : kMaps) {
        if (std::strcmp(mi.name, e.name) != 0 || (m.*e.slot).valid()) continue;
        if (mi.type != uint32_t(e.type) || (e.value_size && mi.value_size != e.value_size)) {
          why = std::string("map ") + e.name + " of interface " + std::to_string(ifindex) +
                " does not have this build's layout (another rocelab version made the fabric)";
          return std::nullopt;
        }
        m.*e.slot = sys::Fd(dup(map.get()));
      }
    }
  }
  for (const Expected& e : kMaps)
    if (!(m.*e.slot).valid()) {
      why = "the programs on interface " + std::to_string(ifindex) + " have no map " + e.name;
      return std::nullopt;
    }
  if (!m.finish(why)) return std::nullopt;
  return m;
}

bool FabricMaps::config(rl_config& out, std::string& why) const {
  return lookup(config_.get(), 0, &out, "port_config", why);
}
bool FabricMaps::port_info(uint32_t slot, rl_port_info& out, std::string& why) const {
  return lookup(info_.get(), slot, &out, "port_info", why);
}
bool FabricMaps::set_port_info(uint32_t slot, const rl_port_info& v, std::string& why) const {
  return update(info_.get(), slot, &v, "port_info", why);
}
bool FabricMaps::headroom(uint32_t slot, rl_port_headroom& out, std::string& why) const {
  return lookup(headroom_.get(), slot, &out, "port_headroom", why);
}
bool FabricMaps::set_headroom(uint32_t slot, const rl_port_headroom& v, std::string& why) const {
  return update(headroom_.get(), slot, &v, "port_headroom", why);
}
bool FabricMaps::tx_state(uint32_t key, rl_pfc_tx_state& out, std::string& why) const {
  return lookup(tx_state_.get(), key, &out, "pfc_tx_state", why);
}
bool FabricMaps::set_tx_state(uint32_t key, const rl_pfc_tx_state& v, std::string& why) const {
  return update(tx_state_.get(), key, &v, "pfc_tx_state", why);
}

// Read from the mapped array, as the BPF programs write it (a copy per entry, as a lookup
// makes): the agent's loop reads it every 200 us, where a batch lookup (a syscall copying
// every entry) took a fifth of the loop's CPU in a leaf-spine incast (issue 48).
bool FabricMaps::tx_states(std::vector<uint32_t>& keys, std::vector<rl_pfc_tx_state>& states, std::string&) const {
  const size_t n = ports_ * RL_NUM_PRIO;
  keys.resize(n);
  states.resize(n);
  const auto* at = static_cast<const volatile unsigned char*>(tx_base_);
  for (size_t k = 0; k < n; ++k) {
    keys[k] = uint32_t(k);
    auto* to = reinterpret_cast<unsigned char*>(&states[k]);
    for (size_t b = 0; b < sizeof(rl_pfc_tx_state); ++b) to[b] = at[k * sizeof(rl_pfc_tx_state) + b];
  }
  return true;
}

std::unique_ptr<PfcEvents> PfcEvents::open(const FabricMaps& maps, Handler on_event, std::string& why) {
  std::unique_ptr<PfcEvents> p(new PfcEvents());
  p->on_ = std::move(on_event);
  p->rb_ = ring_buffer__new(maps.pfc_events_fd(), &PfcEvents::on_sample, p.get(), nullptr);
  if (!p->rb_) {
    why = err("open the PFC event ring buffer", errno);
    return nullptr;
  }
  return p;
}

PfcEvents::~PfcEvents() {
  if (rb_) ring_buffer__free(rb_);
}

int PfcEvents::on_sample(void* ctx, void* data, size_t len) {
  if (len >= sizeof(rl_pfc_event)) static_cast<PfcEvents*>(ctx)->on_(*static_cast<const rl_pfc_event*>(data));
  return 0;
}

int PfcEvents::fd() const { return ring_buffer__epoll_fd(rb_); }
int PfcEvents::consume() { return ring_buffer__consume(rb_); }
int PfcEvents::poll(int timeout_ms) { return ring_buffer__poll(rb_, timeout_ms); }

std::unique_ptr<FrameEmitter> FrameEmitter::load(std::string& why) {
  std::unique_ptr<FrameEmitter> f(new FrameEmitter());
  f->skel_ = emit__open_and_load();
  if (!f->skel_) {
    why = err("load emit.bpf.o", errno);
    return nullptr;
  }
  return f;
}

FrameEmitter::~FrameEmitter() {
  if (skel_) emit__destroy(skel_);
}

bool FrameEmitter::send(int ifindex, uint32_t mark, std::string& why, uint32_t priority) const {
  // Any 60-byte frame: the port's egress program rewrites the clone whole.
  unsigned char frame[RL_PFC_FRAME_LEN] = {0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, 0x02, 0, 0, 0, 0, 0, 0x88, 0x08};
  __sk_buff ctx{};
  ctx.ifindex = uint32_t(ifindex);
  ctx.mark = mark;
  ctx.priority = priority;
  LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = frame, .data_size_in = sizeof frame, .ctx_in = &ctx,
              .ctx_size_in = sizeof ctx, .repeat = 1);
  if (bpf_prog_test_run_opts(bpf_program__fd(skel_->progs.rl_emit), &o) != 0) {
    why = err("send a frame out of interface " + std::to_string(ifindex), errno);
    return false;
  }
  if (o.retval != 0) {
    why = "interface " + std::to_string(ifindex) + " refused the frame";
    return false;
  }
  return true;
}

}  // namespace rocelab::bpf
