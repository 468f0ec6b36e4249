#include "workload/perf.h"

#include <algorithm>
#include <climits>
#include <random>

#include "model/port_target.h"
#include "workload/backend.h"

namespace rocelab::workload {
namespace {

struct Where {
  const fabric::NodePlan* node = nullptr;
  const fabric::PortPlan* port = nullptr;
  size_t index = 0;
};

std::optional<Where> find_host(const fabric::KernelPlan& plan, const std::string& spec, std::string& why) {
  const auto t = model::PortTarget::parse(spec);
  const std::string &node = t.node, &nic = t.port_or_empty();
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    const auto& n = plan.nodes[i];
    if (n.node != node) continue;
    if (!n.host) return why = "'" + node + "' is a switch: perf runs between hosts", std::nullopt;
    if (n.ports.empty()) return why = "host '" + node + "' has no NIC", std::nullopt;
    for (const auto& p : n.ports)
      if (nic.empty() || p.ifname == nic) return Where{&n, &p, i};
    return why = "host '" + node + "' has no NIC '" + nic + "'", std::nullopt;
  }
  return why = "no node '" + node + "' in the scenario", std::nullopt;
}

}  // namespace

std::vector<uint8_t> message_pattern(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 g(seed);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t x = g();
    for (size_t k = 0; k < 8 && i + k < n; ++k) v[i + k] = uint8_t(x >> (8 * k));
  }
  return v;
}

// IB local ACK timeout exponent 8: 4.096 us x 2^8 = 1.05 ms physical. Exponent 5 (131 us)
// timed out under PFC in lossless fabrics with no drop (a fat-tree all-to-all whose pauses
// chain over hops held ACKs past it); RNICs ship larger values still (perftest 14, NCCL 20).
constexpr int64_t kAckTimeoutNs = 4096LL << 8;

engine::RcConfig rc_config(uint32_t mtu, double slower_line_bps, const model::TimeScale& scale, const model::RcTimers& t) {
  engine::RcConfig rc;
  rc.mtu = mtu;
  rc.window = 256;
  rc.ack_req_every = 64;  // four ACKs per window: fewer syscalls, the window never stalls
  const double window_ns = double(rc.window) * (rc.mtu + 100) * 8e9 / std::max(slower_line_bps, 1.0);
  // Both terms scale with D (times x D; the window's serialisation at rates / D), so the
  // physical timeout is the same at any D: no cap in emulated time (one made the physical
  // timeout shrink as D grew, and the retransmissions move with D). 5 ms is the software
  // timer's floor, which bites only below D ~ 40.
  rc.rto = std::max({scale.emulate(model::Duration{kAckTimeoutNs}).ns, engine::Nanos(4 * window_ns),
                     engine::Nanos{5'000'000}});
  if (t.fixed) {
    // The scenario's RNIC timer, as the NIC runs it: the physical period x D, nothing added.
    rc.fixed_timeout = true;
    rc.rto = scale.emulate(t.period()).ns;
    rc.retry_limit = t.retry_cnt;
  }
  return rc;
}

uint32_t ib_mtu_for(uint32_t netdev_mtu) {
  const uint32_t room = netdev_mtu > 60 ? netdev_mtu - 60 : 0;
  uint32_t m = 256;
  for (uint32_t c : {512u, 1024u, 2048u, 4096u})
    if (c <= room) m = c;
  return m;
}

namespace {

// A perftest run on a backend: requester QPs on one NIC, responder QPs on the other.
struct PerfRun {
  const model::Scenario& s;
  const PerfOptions& o;
  Backend& b;
  PerfResult r;
  size_t a = 0, z = 0;  // endpoints
  std::vector<size_t> req, resp;
  std::vector<std::vector<uint8_t>> memory;
  uint32_t slots = 0;
  Buffer data;
  std::vector<uint64_t> posted, completed;
  sys::Nanos t0 = 0, window_start = 0, last_completion = 0, stop_posting = 0;
  uint64_t window_bytes = 0, cap = 0;

  Status setup(const Where& from, const Where& to, fabric::Testbed& t);
  bool step();
  void finish();
};

Status PerfRun::setup(const Where& from, const Where& to, fabric::Testbed& t) {
  const size_t fa = t.node_index(from.node->node), fz = t.node_index(to.node->node);
  if (fa == SIZE_MAX || fz == SIZE_MAX) return error(Errc::kEnvironment, "the fabric that is up is not this scenario's");
  auto ea = b.add_endpoint({r.from, t.netns_fd(fa), from.port->addr, double(from.port->rate_bps)});
  if (!ea) return ea.error();
  auto ez = b.add_endpoint({r.to, t.netns_fd(fz), to.port->addr, double(to.port->rate_bps)});
  if (!ez) return ez.error();
  a = *ea;
  z = *ez;
  const engine::RcConfig rc = rc_config(r.mtu, double(std::min(from.port->rate_bps, to.port->rate_bps)), s.scale, s.hosts.rc);
  std::mt19937_64 psn(s.seed ^ 0x5053'4e00);
  slots = std::min<uint32_t>(o.tx_depth, 16);
  memory.resize(size_t(o.qps));
  for (int i = 0; i < o.qps; ++i) {
    const uint32_t qa = 0x100 + i, qb = 0x800 + i;
    const uint32_t pa = uint32_t(psn()) & engine::kPsnMask, pb = uint32_t(psn()) & engine::kPsnMask;
    auto x = b.add_qp(a, {qa, to.port->addr, qb, engine::qp_source_port(s.seed, uint32_t(from.index), qa), pa, pb, rc});
    if (!x) return x.error();
    auto y = b.add_qp(z, {qb, from.port->addr, qa, engine::qp_source_port(s.seed, uint32_t(to.index), qb), pb, pa, rc});
    if (!y) return y.error();
    memory[size_t(i)].assign(size_t(o.size) * slots, 0);
    b.register_memory(*y, 0x1000 + i, 0x10000000, memory[size_t(i)]);
    req.push_back(*x);
    resp.push_back(*y);
  }
  data = std::make_shared<const std::vector<uint8_t>>(message_pattern(o.size, s.seed));
  posted.assign(req.size(), 0);
  completed.assign(req.size(), 0);
  cap = o.iterations ? o.iterations : UINT64_MAX;  // 0 with --seconds: no cap
  return ok();
}

// After every backend turn: collect completions, keep tx_depth messages in flight, check
// what the responder got, and say when every posted message has completed.
bool PerfRun::step() {
  constexpr sys::Nanos kWindow = 100'000'000;
  const sys::Nanos now = b.clock().now();
  const bool open = now < stop_posting;
  bool all_done = true;
  for (size_t i = 0; i < req.size(); ++i) {
    for (const auto& c : b.poll(req[i])) {
      ++completed[i];
      last_completion = now;
      if (!c.ok) ++r.errors;
      else window_bytes += o.size;
    }
    while (open && !b.failed(req[i]) && posted[i] < cap && posted[i] - completed[i] < o.tx_depth) {
      if (o.write) b.post_write(req[i], data, 0x10000000 + uint64_t(posted[i] % slots) * o.size, 0x1000 + uint32_t(i));
      else b.post_send(req[i], data);
      ++posted[i];
    }
    while (auto got = b.take_received(resp[i]))
      if (*got == *data) r.verified_bytes += o.size;
    if (completed[i] < posted[i] || (open && posted[i] < cap && !b.failed(req[i]))) all_done = false;
  }
  if (now - window_start >= kWindow) {
    r.peak_bps = std::max(r.peak_bps, double(window_bytes) * 8e9 / double(now - window_start));
    window_start = now;
    window_bytes = 0;
  }
  return all_done;
}

void PerfRun::finish() {
  r.seconds = double(last_completion - t0) / 1e9;
  for (size_t i = 0; i < req.size(); ++i) r.messages += completed[i];
  r.messages -= std::min(r.messages, r.errors);
  r.bytes = r.messages * o.size;
  r.avg_bps = r.seconds > 0 ? double(r.bytes) * 8 / r.seconds : 0;
  r.peak_bps = std::max(r.peak_bps, r.avg_bps);
  for (size_t i : req) r.requester.push_back(b.qp_counters(i));
  for (size_t i : resp) r.responder.push_back(b.qp_counters(i));
  r.from_stats = b.endpoint_counters(a);
  r.to_stats = b.endpoint_counters(z);
  if (!o.write) return;
  for (size_t i = 0; i < memory.size(); ++i)
    for (uint32_t k = 0; k < slots && k < completed[i]; ++k)
      if (std::equal(data->begin(), data->end(), memory[i].begin() + size_t(k) * o.size)) r.verified_bytes += o.size;
}

}  // namespace

Result<PerfResult> run_perf(const model::Scenario& s, const fabric::KernelPlan& plan, fabric::Testbed& t,
                            const PerfOptions& o) {
  std::string why;
  auto from = find_host(plan, o.from, why);
  auto to = from ? find_host(plan, o.to, why) : std::nullopt;
  if (!to) return error(Errc::kBadInput, why);
  if (from->node == to->node) return error(Errc::kBadInput, "--from and --to are the same host");
  if (o.size == 0 || o.qps < 1 || o.qps > 1024 || o.tx_depth == 0 || (o.iterations == 0 && o.seconds <= 0))
    return error(Errc::kBadInput, "size, iterations (or seconds), qps (1..1024) and tx-depth must be positive");
  const std::string preset = o.dcqcn.empty() ? s.hosts.dcqcn : o.dcqcn;
  const BackendKind* kind = backends().find(s.hosts.engine);
  if (!kind) return error(Errc::kBadInput, "hosts.engine '" + s.hosts.engine + "' is not built (built: " + backends().list() + ")");
  auto backend = kind->make(s, preset);
  if (!backend) return backend.error();
  PerfRun p{s, o, **backend, {}};
  p.r.from = from->node->node + ":" + from->port->ifname;
  p.r.to = to->node->node + ":" + to->port->ifname;
  p.r.verb = o.write ? "RDMA_Write" : "Send";
  p.r.dcqcn = preset;
  p.r.size = o.size;
  p.r.qps = o.qps;
  p.r.scale = s.scale.factor();
  p.r.mtu = o.mtu ? o.mtu : ib_mtu_for(std::min(from->port->mtu, to->port->mtu));
  if (auto st = p.setup(*from, *to, t); !st) return st.error();
  p.t0 = p.window_start = p.last_completion = p.b.clock().now();
  const bool timed = o.seconds > 0;
  p.stop_posting = timed ? p.t0 + sys::Nanos(o.seconds * 1e9) : INT64_MAX;
  const double line = double(std::min(from->port->rate_bps, to->port->rate_bps));
  const double expect_s = double(o.size) * double(o.iterations) * o.qps * 8 / std::max(line, 1.0);
  const sys::Nanos deadline = p.t0 + sys::Nanos((timed ? o.seconds + 10 : expect_s * 4 + 10) * 1e9);
  const bool finished = p.b.run([&p] { return p.step(); }, deadline);
  p.finish();
  if (!finished)
    return error(Errc::kInvalidRun, "did not finish by the deadline: " + std::to_string(p.r.messages) + " messages completed");
  return p.r;
}

}  // namespace rocelab::workload
