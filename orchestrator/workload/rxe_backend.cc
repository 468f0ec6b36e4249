// `rxe`: the kernel's soft-RoCE through rdma-core's verbs (libibverbs), the RDMA stack
// applications use. The fabric puts an rxe device on every host NIC; per QP pair: PD and MRs of its endpoints, a CQ each, RC QPs through INIT → RTR →
// RTS with rc_pingpong's masks, WRITE and SEND posted and polled. The runner's QP numbers,
// rkeys and addresses are its own: the backend maps them onto the kernel's. rxe has no
// ECN reaction (no DCQCN): PFC alone keeps a lossless class lossless.
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <sched.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <thread>

#include "workload/backend.h"

namespace rocelab::workload {

namespace {

constexpr uint8_t kPort = 1;
constexpr uint32_t kSendDepth = 128;  // work requests in flight per QP; more wait here
constexpr uint32_t kRecvDepth = 32;   // receives kept posted per QP once SENDs are used

template <typename T, int (*Free)(T*)>
struct VerbsDeleter {
  void operator()(T* p) const {
    if (p) (void)Free(p);
  }
};
using Context = std::unique_ptr<ibv_context, VerbsDeleter<ibv_context, ibv_close_device>>;
using Pd = std::unique_ptr<ibv_pd, VerbsDeleter<ibv_pd, ibv_dealloc_pd>>;
using Mr = std::unique_ptr<ibv_mr, VerbsDeleter<ibv_mr, ibv_dereg_mr>>;
using Cq = std::unique_ptr<ibv_cq, VerbsDeleter<ibv_cq, ibv_destroy_cq>>;
using Qp = std::unique_ptr<ibv_qp, VerbsDeleter<ibv_qp, ibv_destroy_qp>>;

std::string errno_text(const std::string& what, int e) { return what + ": " + std::strerror(e); }

ibv_gid mapped_gid(uint32_t addr) {
  ibv_gid g{};
  g.raw[10] = g.raw[11] = 0xff;
  for (int k = 0; k < 4; ++k) g.raw[12 + k] = uint8_t(addr >> (24 - 8 * k));
  return g;
}

// IB path MTU of at most `bytes` (256 … 4096).
ibv_mtu mtu_enum(uint32_t bytes) {
  if (bytes >= 4096) return IBV_MTU_4096;
  if (bytes >= 2048) return IBV_MTU_2048;
  if (bytes >= 1024) return IBV_MTU_1024;
  if (bytes >= 512) return IBV_MTU_512;
  return IBV_MTU_256;
}
uint32_t mtu_bytes(ibv_mtu m) { return 128u << int(m); }

// The local ACK timeout exponent: 4.096 us × 2^t covering the runner's RTO.
uint8_t timeout_exponent(sys::Nanos rto) {
  if (rto <= 0) return 0;  // never
  const double t = std::ceil(std::log2(double(rto) / 4096.0));
  return uint8_t(std::clamp(t, 1.0, 31.0));
}

// rxe's counters (FAULTS.md names) of one device, as the kernel keeps them.
std::map<std::string, uint64_t> hw_counters(const std::string& dev) {
  std::map<std::string, uint64_t> out;
  static const char* names[] = {"sent_pkts", "rcvd_pkts", "duplicate_request", "out_of_seq_request",
                                "rcvd_rnr_err", "send_rnr_err", "rcvd_seq_err", "ack_deferred",
                                "retry_exceeded_err", "retry_rnr_exceeded_err", "completer_retry_err",
                                "send_err", "link_downed", "rdma_sends", "rdma_recvs"};
  for (const char* n : names) {
    std::ifstream f("/sys/class/infiniband/" + dev + "/ports/1/hw_counters/" + n);
    uint64_t v = 0;
    if (f >> v) out[n] = v;
  }
  return out;
}

struct Endpoint {
  EndpointSpec spec;
  std::string device;  // the rxe device the fabric put on the NIC
  Context ctx;
  Pd pd;
  int gid_index = -1;
  ibv_mtu active_mtu = IBV_MTU_1024;
  std::map<const uint8_t*, std::pair<Mr, Buffer>> source_mrs;  // posted buffers, kept alive
  std::map<const uint8_t*, Mr> region_mrs;                     // responder regions
  std::map<std::string, uint64_t> counters_at_start;
};

struct Region {
  uint64_t va = 0;
  std::span<uint8_t> memory;
  ibv_mr* mr = nullptr;
};

struct Posted {
  uint64_t wr_id = 0;
  enum class Kind { kWrite, kSend } kind = Kind::kWrite;
  Buffer data;
  uint64_t remote_va = 0;
  uint32_t rkey = 0;
};

struct QpState {
  size_t ep = 0;
  QpSpec spec;
  Cq cq;
  Qp qp;
  size_t peer = SIZE_MAX;  // the QP it is connected to (this backend's id)
  ibv_mtu path_mtu = IBV_MTU_1024;
  bool failed = false;
  std::string failure;
  uint32_t in_flight = 0;
  std::deque<Posted> waiting;        // beyond kSendDepth, in order
  std::map<uint64_t, Posted> posted;  // by wr_id, until completed
  uint64_t next_wr = 1;
  std::vector<engine::Completion> done;
  std::deque<std::vector<uint8_t>> received;
  std::map<uint32_t, Region> regions;  // by the runner's rkey
  // Receives (for SENDs): fixed buffers, posted and reposted.
  std::vector<std::vector<uint8_t>> recv_bufs;
  Mr recv_mr;
  std::vector<uint8_t> recv_arena;
  uint32_t recv_size = 0;
  QpCounters report;
};

class Rxe final : public Backend {
 public:
  ~Rxe() override {
    // Reverse order of creation: QPs and CQs, then MRs, PDs and contexts, then devices.
    qps_.clear();
    eps_.clear();
  }

  Result<size_t> add_endpoint(const EndpointSpec& e) override {
    auto ep = std::make_unique<Endpoint>();
    ep->spec = e;
    auto st = open_device(*ep);
    if (!st) return st.error();
    ep->counters_at_start = hw_counters(ep->device);
    eps_.push_back(std::move(ep));
    return eps_.size() - 1;
  }

  Result<size_t> add_qp(size_t epi, const QpSpec& q) override {
    Endpoint& ep = *eps_.at(epi);
    auto s = std::make_unique<QpState>();
    s->ep = epi;
    s->spec = q;
    s->cq.reset(ibv_create_cq(ep.ctx.get(), int(kSendDepth + kRecvDepth + 8), nullptr, nullptr, 0));
    if (!s->cq) return error(Errc::kEnvironment, errno_text(ep.spec.name + ": ibv_create_cq", errno));
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = s->cq.get();
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = kSendDepth;
    ia.cap.max_recv_wr = kRecvDepth;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    s->qp.reset(ibv_create_qp(ep.pd.get(), &ia));
    if (!s->qp) return error(Errc::kEnvironment, errno_text(ep.spec.name + ": ibv_create_qp", errno));
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = kPort;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    if (int e = ibv_modify_qp(s->qp.get(), &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      return error(Errc::kEnvironment, errno_text(ep.spec.name + ": QP to INIT", e));
    s->path_mtu = std::min(mtu_enum(q.rc.mtu), ep.active_mtu);
    s->report.endpoint = epi;
    s->report.qpn = s->qp->qp_num;
    qps_.push_back(std::move(s));
    const size_t id = qps_.size() - 1;
    // The runner adds a pair's two ends one after the other: once both exist, connect them.
    // The runner numbers QPs per NIC (a GPU each), so (address, QPN) names one QP.
    if (!by_runner_.emplace(std::pair{ep.spec.addr, q.qpn}, id).second)
      return error(Errc::kEnvironment, ep.spec.name + ": a second QP numbered " + std::to_string(q.qpn) + " on one NIC");
    if (auto it = by_runner_.find({q.remote_addr, q.remote_qpn}); it != by_runner_.end()) {
      auto st = connect(it->second, id);
      if (!st) return st.error();
    }
    return id;
  }

  void register_memory(size_t qp, uint32_t rkey, uint64_t va, std::span<uint8_t> m) override {
    QpState& s = *qps_.at(qp);
    Endpoint& ep = *eps_.at(s.ep);
    auto& mr = ep.region_mrs[m.data()];
    if (!mr)
      mr.reset(ibv_reg_mr(ep.pd.get(), m.data(), m.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
    if (!mr) fail(s, errno_text("ibv_reg_mr", errno));
    s.regions[rkey] = {va, m, mr.get()};
  }

  void post_write(size_t qp, Buffer d, uint64_t va, uint32_t rkey) override {
    enqueue(qp, {0, Posted::Kind::kWrite, std::move(d), va, rkey});
  }
  void post_send(size_t qp, Buffer d) override {
    QpState& s = *qps_.at(qp);
    if (s.peer != SIZE_MAX) ensure_receives(*qps_[s.peer], uint32_t(d->size()));
    enqueue(qp, {0, Posted::Kind::kSend, std::move(d), 0, 0});
  }

  std::vector<engine::Completion> poll(size_t qp) override {
    drain(qp);
    return std::exchange(qps_.at(qp)->done, {});
  }
  std::optional<std::vector<uint8_t>> take_received(size_t qp) override {
    drain(qp);
    auto& r = qps_.at(qp)->received;
    if (r.empty()) return std::nullopt;
    auto m = std::move(r.front());
    r.pop_front();
    return m;
  }
  bool failed(size_t qp) const override { return qps_.at(qp)->failed; }
  uint32_t mtu(size_t qp) const override { return mtu_bytes(qps_.at(qp)->path_mtu); }

  bool run(const std::function<bool()>& step, sys::Nanos deadline, const std::vector<int>& = {}) override {
    // Never asleep longer than 50 us: a wake descriptor needs no watching here.
    for (;;) {
      size_t seen = 0;
      for (size_t q = 0; q < qps_.size(); ++q) seen += drain(q);
      if (step()) return true;
      if (clock_.now() >= deadline) return false;
      // rxe does its work in the kernel's softirqs and workers: give them the CPU.
      if (!seen) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  QpCounters qp_counters(size_t qp) const override { return qps_.at(qp)->report; }

  EndpointCounters endpoint_counters(size_t epi) const override {
    const Endpoint& ep = *eps_.at(epi);
    EndpointCounters c;
    const auto now = hw_counters(ep.device);
    auto delta = [&](const char* n) {
      auto a = now.find(n);
      auto b = ep.counters_at_start.find(n);
      return a == now.end() ? 0 : a->second - (b == ep.counters_at_start.end() ? 0 : b->second);
    };
    c.rx_packets = delta("rcvd_pkts");
    c.send_errors = delta("send_err");
    for (const auto& [n, v] : now) c.hw_counters.emplace_back(n, delta(n.c_str()));
    return c;
  }
  size_t qp_count() const override { return qps_.size(); }
  const sys::Clock& clock() const override { return clock_; }

 private:
  // The rxe device whose RoCEv2 GID is the NIC's address (the fabric made one per host NIC;
  // the kernel fills its GID table from the address a moment after).
  Status open_device(Endpoint& ep) {
    const ibv_gid want = mapped_gid(ep.spec.addr);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!ep.ctx) {
      int n = 0;
      ibv_device** list = ibv_get_device_list(&n);
      for (int i = 0; list && i < n && !ep.ctx; ++i) {
        Context ctx(ibv_open_device(list[i]));
        ibv_port_attr pa{};
        if (!ctx || ibv_query_port(ctx.get(), kPort, &pa) != 0) continue;
        for (int g = 0; g < pa.gid_tbl_len && ep.gid_index < 0; ++g) {
          ibv_gid_entry e{};
          if (ibv_query_gid_ex(ctx.get(), kPort, uint32_t(g), &e, 0) == 0 && e.gid_type == IBV_GID_TYPE_ROCE_V2 &&
              std::memcmp(e.gid.raw, want.raw, 16) == 0)
            ep.gid_index = g;
        }
        if (ep.gid_index >= 0) {
          ep.device = ibv_get_device_name(list[i]);
          ep.active_mtu = pa.active_mtu;
          ep.ctx = std::move(ctx);
        }
      }
      if (list) ibv_free_device_list(list);
      if (ep.ctx) break;
      if (std::chrono::steady_clock::now() > until)
        return error(Errc::kEnvironment, ep.spec.name + ": no RDMA device has a RoCEv2 GID for its address (is the fabric "
                                                        "up with hosts.engine: rxe, and ibverbs-providers installed?)");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ep.pd.reset(ibv_alloc_pd(ep.ctx.get()));
    if (!ep.pd) return error(Errc::kEnvironment, errno_text(ep.spec.name + ": ibv_alloc_pd", errno));
    return ok();
  }

  // INIT → RTR → RTS on both ends, each aimed at the other's QPN and GID.
  Status connect(size_t a, size_t b) {
    for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
      QpState& s = *qps_[x];
      const QpState& peer = *qps_[y];
      const Endpoint& ep = *eps_[s.ep];
      s.peer = y;
      s.path_mtu = std::min(s.path_mtu, peer.path_mtu);
      ibv_qp_attr r{};
      r.qp_state = IBV_QPS_RTR;
      r.path_mtu = std::min(mtu_enum(s.spec.rc.mtu), std::min(ep.active_mtu, eps_[peer.ep]->active_mtu));
      r.dest_qp_num = peer.qp->qp_num;
      r.rq_psn = s.spec.expect_psn;
      r.max_dest_rd_atomic = 1;
      r.min_rnr_timer = 12;  // 0.64 ms
      r.ah_attr.is_global = 1;
      r.ah_attr.port_num = kPort;
      r.ah_attr.grh.dgid = mapped_gid(s.spec.remote_addr);
      r.ah_attr.grh.sgid_index = uint8_t(ep.gid_index);
      r.ah_attr.grh.hop_limit = 64;
      r.ah_attr.grh.traffic_class = s.spec.tos;  // DSCP picks the lossless class; ECT as the runner asks
      if (int e = ibv_modify_qp(s.qp.get(), &r,
                                IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return error(Errc::kEnvironment, errno_text(ep.spec.name + ": QP to RTR", e));
      s.path_mtu = r.path_mtu;
      ibv_qp_attr t{};
      t.qp_state = IBV_QPS_RTS;
      t.timeout = timeout_exponent(s.spec.rc.rto);
      t.retry_cnt = uint8_t(std::clamp(s.spec.rc.retry_limit, 0, 7));
      t.rnr_retry = 7;  // infinite: a receiver without a posted buffer only delays
      t.sq_psn = s.spec.send_psn;
      t.max_rd_atomic = 1;
      if (int e = ibv_modify_qp(s.qp.get(), &t,
                                IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                    IBV_QP_MAX_QP_RD_ATOMIC))
        return error(Errc::kEnvironment, errno_text(ep.spec.name + ": QP to RTS", e));
    }
    return ok();
  }

  void fail(QpState& s, const std::string& why) {
    if (s.failed) return;
    s.failed = true;
    s.failure = s.report.failure = why;
  }

  // The peer's region the runner calls `rkey` (null: none).
  const Region* region(const QpState& s, uint32_t rkey) const {
    if (s.peer == SIZE_MAX) return nullptr;
    const auto& regions = qps_[s.peer]->regions;
    auto it = regions.find(rkey);
    return it == regions.end() || !it->second.mr ? nullptr : &it->second;
  }

  ibv_mr* source_mr(Endpoint& ep, const Buffer& d) {
    auto& slot = ep.source_mrs[d->data()];
    if (!slot.first) {
      slot.first.reset(ibv_reg_mr(ep.pd.get(), const_cast<uint8_t*>(d->data()), std::max<size_t>(d->size(), 1), IBV_ACCESS_LOCAL_WRITE));
      slot.second = d;
    }
    return slot.first.get();
  }

  // Keeps kRecvDepth receives of at least `size` bytes posted on `s`.
  void ensure_receives(QpState& s, uint32_t size) {
    if (s.recv_size >= size || s.failed) return;
    if (s.recv_size) return fail(s, "a SEND larger than the receives already posted (" + std::to_string(s.recv_size) + " bytes)");
    Endpoint& ep = *eps_[s.ep];
    s.recv_size = std::max<uint32_t>(size, 64);
    s.recv_arena.assign(size_t(s.recv_size) * kRecvDepth, 0);
    s.recv_mr.reset(ibv_reg_mr(ep.pd.get(), s.recv_arena.data(), s.recv_arena.size(), IBV_ACCESS_LOCAL_WRITE));
    if (!s.recv_mr) return fail(s, errno_text("ibv_reg_mr", errno));
    for (uint32_t k = 0; k < kRecvDepth; ++k) post_recv(s, k);
  }

  void post_recv(QpState& s, uint32_t slot) {
    ibv_sge sge{uint64_t(uintptr_t(s.recv_arena.data() + size_t(slot) * s.recv_size)), s.recv_size, s.recv_mr->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (int e = ibv_post_recv(s.qp.get(), &wr, &bad)) fail(s, errno_text("ibv_post_recv", e));
  }

  void enqueue(size_t qp, Posted p) {
    QpState& s = *qps_.at(qp);
    p.wr_id = s.next_wr++;
    s.waiting.push_back(std::move(p));
    flush(s);
  }

  void flush(QpState& s) {
    Endpoint& ep = *eps_[s.ep];
    while (!s.waiting.empty() && s.in_flight < kSendDepth && !s.failed) {
      Posted& p = s.waiting.front();
      ibv_mr* mr = source_mr(ep, p.data);
      if (!mr) return fail(s, errno_text("ibv_reg_mr", errno));
      ibv_sge sge{uint64_t(uintptr_t(p.data->data())), uint32_t(p.data->size()), mr->lkey};
      ibv_send_wr wr{}, *bad = nullptr;
      wr.wr_id = p.wr_id;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.send_flags = IBV_SEND_SIGNALED;
      if (p.kind == Posted::Kind::kWrite) {
        const Region* r = region(s, p.rkey);
        if (!r || p.remote_va < r->va || p.remote_va - r->va + p.data->size() > r->memory.size())
          return fail(s, "WRITE outside the responder's registered memory");
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.wr.rdma.remote_addr = uint64_t(uintptr_t(r->memory.data())) + (p.remote_va - r->va);
        wr.wr.rdma.rkey = r->mr->rkey;
      } else {
        wr.opcode = IBV_WR_SEND;
      }
      if (int e = ibv_post_send(s.qp.get(), &wr, &bad)) return fail(s, errno_text("ibv_post_send", e));
      ++s.in_flight;
      s.report.rc.tx_bytes += p.data->size();
      s.posted.emplace(p.wr_id, std::move(p));
      s.waiting.pop_front();
    }
  }

  // Everything the QP's CQ holds: completions to the runner, received SENDs to their queue.
  // A completed WRITE was acknowledged, so its bytes are in the responder's memory: the
  // digest reads them there, as they landed.
  size_t drain(size_t qp) {
    QpState& s = *qps_.at(qp);
    ibv_wc wc[32];
    size_t total = 0;
    for (int n; (n = ibv_poll_cq(s.cq.get(), 32, wc)) > 0;) {
      total += size_t(n);
      for (int i = 0; i < n; ++i) on_completion(s, wc[i]);
    }
    flush(s);
    return total;
  }

  void on_completion(QpState& s, const ibv_wc& wc) {
    if (wc.opcode & IBV_WC_RECV) {
      if (wc.status != IBV_WC_SUCCESS) return fail(s, ibv_wc_status_str(wc.status));
      const uint8_t* at = s.recv_arena.data() + size_t(wc.wr_id) * s.recv_size;
      s.received.emplace_back(at, at + wc.byte_len);
      deliver(s, at, wc.byte_len);
      ++s.report.rc.messages_received;
      post_recv(s, uint32_t(wc.wr_id));
      return;
    }
    auto it = s.posted.find(wc.wr_id);
    if (it == s.posted.end()) return;
    Posted p = std::move(it->second);
    s.posted.erase(it);
    --s.in_flight;
    const bool good = wc.status == IBV_WC_SUCCESS;
    if (!good)
      fail(s, wc.status == IBV_WC_RETRY_EXC_ERR ? std::string(engine::kRetryExceeded) : ibv_wc_status_str(wc.status));
    s.done.push_back({wc.wr_id, good, good ? std::string() : s.failure});
    if (const Region* r = region(s, p.rkey); good && p.kind == Posted::Kind::kWrite && r)
      deliver(*qps_[s.peer], r->memory.data() + (p.remote_va - r->va), p.data->size());
  }

  static void deliver(QpState& s, const uint8_t* bytes, size_t n) {
    s.report.rc.delivered_crc = uint32_t(crc32_z(s.report.rc.delivered_crc, bytes, n));
    s.report.rc.delivered_bytes += n;
  }

  sys::MonotonicClock clock_;
  std::vector<std::unique_ptr<Endpoint>> eps_;
  std::vector<std::unique_ptr<QpState>> qps_;
  std::map<std::pair<uint32_t, uint32_t>, size_t> by_runner_;  // (address, runner's QPN) → id
};

}  // namespace

BackendKind rxe_backend() {
  return {"rxe", "the kernel's soft-RoCE (rdma_rxe) through libibverbs: the stack applications use; no DCQCN",
          [](const model::Scenario&, std::string_view) -> Result<std::unique_ptr<Backend>> {
            return std::unique_ptr<Backend>(new Rxe());
          }};
}

}  // namespace rocelab::workload
