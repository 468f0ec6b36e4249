#include "workload/perf.h"

#include <algorithm>
#include <random>

#include "sys/netns.h"

namespace rocelab::workload {
namespace {

struct Where {
  const fabric::NodePlan* node = nullptr;
  const fabric::PortPlan* port = nullptr;
  size_t index = 0;
};

std::optional<Where> find_host(const fabric::KernelPlan& plan, const std::string& spec, std::string& why) {
  const auto colon = spec.find(':');
  const std::string node = spec.substr(0, colon), nic = colon == std::string::npos ? "" : spec.substr(colon + 1);
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

engine::RcConfig rc_config(uint32_t mtu, double slower_line_bps, const model::TimeScale& scale) {
  engine::RcConfig rc;
  rc.mtu = mtu;
  rc.window = 256;
  rc.ack_req_every = 64;  // four ACKs per window: fewer syscalls, the window never stalls
  const double window_ns = double(rc.window) * (rc.mtu + 100) * 8e9 / std::max(slower_line_bps, 1.0);
  rc.rto = std::clamp<engine::Nanos>(
      std::max(scale.emulate(model::Duration{131'072}).ns, engine::Nanos(4 * window_ns)), 5'000'000, 2'000'000'000);
  return rc;
}

uint32_t ib_mtu_for(uint32_t netdev_mtu) {
  const uint32_t room = netdev_mtu > 60 ? netdev_mtu - 60 : 0;
  uint32_t m = 256;
  for (uint32_t c : {512u, 1024u, 2048u, 4096u})
    if (c <= room) m = c;
  return m;
}

std::optional<PerfResult> run_perf(const model::Scenario& s, const fabric::KernelPlan& plan, const PerfOptions& o,
                                   std::string& why) {
  auto from = find_host(plan, o.from, why);
  if (!from) return std::nullopt;
  auto to = find_host(plan, o.to, why);
  if (!to) return std::nullopt;
  if (from->node == to->node) return why = "--from and --to are the same host", std::nullopt;
  for (const auto* n : {from->node, to->node})
    if (!sys::named_netns_exists(n->netns))
      return why = "namespace " + n->netns + " is not there: bring the fabric up first (rocelab up " + s.file + ")",
             std::nullopt;
  if (o.size == 0 || o.qps < 1 || o.qps > 1024 || o.tx_depth == 0 || (o.iterations == 0 && o.seconds <= 0))
    return why = "size, iterations (or seconds), qps (1..1024) and tx-depth must be positive", std::nullopt;
  const std::string preset = o.dcqcn.empty() ? s.hosts.dcqcn : o.dcqcn;
  auto dcqcn = engine::DcqcnParams::preset_named(preset);
  if (!dcqcn) return why = "unknown DCQCN preset '" + preset + "' (paper, nvidia, off)", std::nullopt;

  PerfResult r;
  r.from = from->node->node + ":" + from->port->ifname;
  r.to = to->node->node + ":" + to->port->ifname;
  r.verb = o.write ? "RDMA_Write" : "Send";
  r.dcqcn = preset;
  r.size = o.size;
  r.qps = o.qps;
  r.scale = s.scale.factor();
  r.mtu = o.mtu ? o.mtu : ib_mtu_for(std::min(from->port->mtu, to->port->mtu));

  engine::MonotonicClock clock;
  engine::Engine eng(dcqcn->with(s.hosts.dcqcn_set).emulated(s.scale), clock);
  auto a = eng.add_endpoint({r.from, from->node->netns, from->port->addr, double(from->port->rate_bps)}, why);
  if (!a) return std::nullopt;
  auto b = eng.add_endpoint({r.to, to->node->netns, to->port->addr, double(to->port->rate_bps)}, why);
  if (!b) return std::nullopt;

  const engine::RcConfig rc =
      rc_config(r.mtu, double(std::min(from->port->rate_bps, to->port->rate_bps)), s.scale);
  std::mt19937_64 psn(s.seed ^ 0x5053'4e00);
  const uint32_t slots = std::min<uint32_t>(o.tx_depth, 16);
  std::vector<size_t> req, resp;
  std::vector<std::vector<uint8_t>> memory(size_t(o.qps));
  for (int i = 0; i < o.qps; ++i) {
    const uint32_t qa = 0x100 + i, qb = 0x800 + i;
    const uint32_t pa = uint32_t(psn()) & engine::kPsnMask, pb = uint32_t(psn()) & engine::kPsnMask;
    auto x = eng.add_qp(*a, qa, to->port->addr, qb, engine::qp_source_port(s.seed, uint32_t(from->index), qa), pa, pb,
                        rc, why);
    if (!x) return std::nullopt;
    auto y = eng.add_qp(*b, qb, from->port->addr, qa, engine::qp_source_port(s.seed, uint32_t(to->index), qb), pb, pa,
                        rc, why);
    if (!y) return std::nullopt;
    memory[size_t(i)].assign(size_t(o.size) * slots, 0);
    eng.qp(*y).register_memory(0x1000 + i, 0x10000000, memory[size_t(i)]);
    req.push_back(*x);
    resp.push_back(*y);
  }

  const auto shared = std::make_shared<const std::vector<uint8_t>>(message_pattern(o.size, s.seed));
  const auto& data = *shared;
  const engine::Nanos t0 = clock.now();
  const bool timed = o.seconds > 0;
  const engine::Nanos stop_posting = timed ? t0 + engine::Nanos(o.seconds * 1e9) : INT64_MAX;
  const double line = double(std::min(from->port->rate_bps, to->port->rate_bps));
  const double expect_s = double(o.size) * double(o.iterations) * o.qps * 8 / std::max(line, 1.0);
  const engine::Nanos deadline = t0 + engine::Nanos((timed ? o.seconds + 10 : expect_s * 4 + 10) * 1e9);
  const uint64_t cap = o.iterations ? o.iterations : UINT64_MAX;  // 0 with --seconds: no cap
  std::vector<uint64_t> posted(req.size(), 0), completed(req.size(), 0);
  constexpr engine::Nanos kWindow = 100'000'000;
  engine::Nanos window_start = t0, last_completion = t0;
  uint64_t window_bytes = 0;

  // Called after every engine turn: collect completions, keep tx_depth messages in flight,
  // check what the responder got, and say when every posted message has completed.
  auto step = [&]() {
    const engine::Nanos now = clock.now();
    const bool open = !timed || now < stop_posting;
    bool all_done = true;
    for (size_t i = 0; i < req.size(); ++i) {
      auto& q = eng.qp(req[i]);
      for (const auto& c : q.take_completions()) {
        ++completed[i];
        last_completion = now;
        if (!c.ok) ++r.errors;
        else window_bytes += o.size;
      }
      while (open && !q.failed() && posted[i] < cap && posted[i] - completed[i] < o.tx_depth) {
        if (o.write) q.post_write(shared, 0x10000000 + uint64_t(posted[i] % slots) * o.size, 0x1000 + uint32_t(i));
        else q.post_send(shared);
        ++posted[i];
      }
      auto& got = eng.qp(resp[i]).received();
      while (!got.empty()) {
        if (got.front() == data) r.verified_bytes += o.size;
        got.pop_front();
      }
      if (completed[i] < posted[i] || (open && posted[i] < cap && !q.failed())) all_done = false;
    }
    if (now - window_start >= kWindow) {
      r.peak_bps = std::max(r.peak_bps, double(window_bytes) * 8e9 / double(now - window_start));
      window_start = now;
      window_bytes = 0;
    }
    return all_done;
  };
  const bool finished = eng.run(step, deadline);
  r.seconds = double(last_completion - t0) / 1e9;
  for (size_t i = 0; i < req.size(); ++i) r.messages += completed[i];
  r.messages -= std::min(r.messages, r.errors);
  r.bytes = r.messages * o.size;
  r.avg_bps = r.seconds > 0 ? double(r.bytes) * 8 / r.seconds : 0;
  r.peak_bps = std::max(r.peak_bps, r.avg_bps);
  for (size_t i : req) r.requester.push_back(eng.qp_report(i));
  for (size_t i : resp) r.responder.push_back(eng.qp_report(i));
  r.from_stats = eng.endpoint_stats(*a);
  r.to_stats = eng.endpoint_stats(*b);
  if (o.write) {
    for (size_t i = 0; i < memory.size(); ++i)
      for (uint32_t k = 0; k < slots && k < completed[i]; ++k)
        if (std::equal(data.begin(), data.end(), memory[i].begin() + size_t(k) * o.size)) r.verified_bytes += o.size;
  }
  if (!finished) {
    why = "did not finish by the deadline: " + std::to_string(r.messages) + " messages completed";
    return std::nullopt;
  }
  return r;
}

}  // namespace rocelab::workload
