#include "workload/runner.h"

#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>

#include "engine/engine.h"
#include "engine/wire.h"
#include "workload/perf.h"

namespace rocelab::workload {
namespace {

using engine::Nanos;
using Buffer = engine::RcQp::Buffer;

constexpr uint32_t kTxDepth = 16;           // messages in flight per QP (point to point)
constexpr Nanos kTraceEvery = 10'000'000;   // rate trace sample period, emulated
constexpr size_t kTraceMax = 2000;
constexpr uint64_t kBaseVa = 0x10000000;

struct Qpair {
  size_t req = 0, resp = 0;  // engine QP ids
  uint64_t posted = 0, completed = 0, errors = 0;
  uint64_t bytes_posted = 0;
  uint32_t expect_crc = 0;  // CRC-32 of every payload byte posted, in order
};

// A GPU: GPU i of a host uses the host's NIC i (DESIGN.md §1); the unit workloads talk between.
struct Rank {
  size_t node = 0, port = 0;  // plan node, and the index of the GPU's NIC among its ports
  int gpu = 0;
};

struct Flow {
  size_t workload = 0, src = 0, dst = 0;  // rank indices
  std::vector<Qpair> qps;
  uint64_t message = 0;       // bytes per message on each QP
  uint64_t per_qp = 0;        // messages per QP (point to point)
  Nanos started = -1, finished = -1;
  FlowResult r;
};

struct Job {
  const model::Workload* w = nullptr;
  size_t index = 0;
  std::vector<size_t> flows;
  Nanos start = 0;          // emulated, from t0
  bool started = false, done = false;
  // Collectives and all-to-all run in lock step: every flow posts one round, all finish,
  // then the next. rounds = steps × iterations.
  bool lockstep = false;
  uint64_t rounds = 0, round = 0;
  Nanos round_started = 0, op_started = 0;
  std::vector<double> op_seconds;
  uint64_t steps_per_op = 1;
  size_t ranks = 0;          // collectives: the GPUs taking part (nccl-tests' N)
  double bound_factor = 1;   // busbw's bound over the slowest edge's payload rate
  // Latency ping-pong
  bool pingpong = false;
  uint64_t pongs = 0;
  Nanos ping_at = 0;
  bool ping_out = false;
  std::vector<double> rtts;
  Nanos finished = 0;
};

uint64_t wire_bytes(uint64_t message, uint32_t mtu) {
  const uint64_t packets = std::max<uint64_t>(1, (message + mtu - 1) / mtu);
  uint64_t total = 0;
  for (uint64_t k = 0; k < packets; ++k) {
    const uint64_t len = std::min<uint64_t>(mtu, message - std::min(message, k * mtu));
    const auto op = k == 0 ? engine::Opcode::kWriteFirst : engine::Opcode::kWriteMiddle;  // RETH on the first
    total += engine::wire_size(op, len) + 42;
  }
  return total;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, size_t(std::ceil(q / 100 * double(v.size()))) - (q > 0 ? 1 : 0));
  return v[i];
}

// GPU i's NIC: the host's port named nicI (the validator's rule), else its i-th port.
size_t gpu_port(const fabric::NodePlan& n, size_t gpu) {
  for (size_t k = 0; k < n.ports.size(); ++k)
    if (n.ports[k].ifname == "nic" + std::to_string(gpu)) return k;
  return gpu;
}

}  // namespace

std::vector<size_t> ring_order(const fabric::KernelPlan& plan, const std::vector<size_t>& hosts, size_t gpu) {
  std::vector<size_t> order = hosts;
  auto leaf = [&](size_t n) {
    const auto& node = plan.nodes[n];
    const size_t p = gpu_port(node, gpu);
    return p < node.ports.size() ? node.ports[p].peer_node : SIZE_MAX;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return leaf(a) < leaf(b); });
  return order;
}

std::optional<WorkloadRun> run_workloads(const model::Scenario& s, const fabric::KernelPlan& plan,
                                         const RunnerOptions& o, std::string& why) {
  auto preset = engine::DcqcnParams::preset_named(s.hosts.dcqcn);
  if (!preset) return why = "unknown DCQCN preset " + s.hosts.dcqcn, std::nullopt;
  engine::MonotonicClock clock;
  engine::Engine eng(preset->with(s.hosts.dcqcn_set).emulated(s.scale), clock);

  auto node_of = [&](const std::string& name) -> size_t {
    for (size_t i = 0; i < plan.nodes.size(); ++i)
      if (plan.nodes[i].node == name) return i;
    return SIZE_MAX;
  };
  std::vector<size_t> all_hosts;
  for (size_t i = 0; i < plan.nodes.size(); ++i)
    if (plan.nodes[i].host && !plan.nodes[i].ports.empty()) all_hosts.push_back(i);

  // The GPUs: GPU i of a host uses its NIC i.
  std::vector<Rank> ranks;
  std::map<std::pair<size_t, int>, size_t> rank_of;
  for (size_t n : all_hosts)
    for (size_t g = 0; g < plan.nodes[n].ports.size(); ++g) {
      rank_of[{n, int(g)}] = ranks.size();
      ranks.push_back({n, gpu_port(plan.nodes[n], g), int(g)});
    }
  auto gpus_of = [&](size_t node) { return plan.nodes[node].ports.size(); };
  auto rank = [&](size_t node, int gpu) {
    auto it = rank_of.find({node, gpu});
    return it == rank_of.end() ? SIZE_MAX : it->second;
  };
  auto nic = [&](size_t r) -> const fabric::PortPlan& { return plan.nodes[ranks[r].node].ports[ranks[r].port]; };
  // A flow's end as results name it: the host, with its GPU when it has several.
  auto label = [&](size_t r) {
    const auto& n = plan.nodes[ranks[r].node];
    return n.ports.size() > 1 ? n.node + ":gpu" + std::to_string(ranks[r].gpu) : n.node;
  };

  // One engine endpoint per GPU that takes part (its NIC), one memory region per endpoint.
  std::map<size_t, size_t> endpoint;
  std::map<size_t, uint32_t> next_qpn;
  std::map<size_t, std::unique_ptr<std::vector<uint8_t>>> memory;
  std::map<size_t, uint64_t> memory_need;
  auto ensure_endpoint = [&](size_t r) -> bool {
    if (endpoint.count(r)) return true;
    const auto& n = plan.nodes[ranks[r].node];
    const auto& p = nic(r);
    auto ep = eng.add_endpoint({n.node + ":" + p.ifname, n.netns, p.addr, double(p.rate_bps)}, why);
    if (!ep) return false;
    endpoint[r] = *ep;
    next_qpn[r] = 0x100;
    return true;
  };
  auto line = [&](size_t r) { return double(nic(r).rate_bps); };
  auto mtu_between = [&](size_t a, size_t b) { return ib_mtu_for(std::min(nic(a).mtu, nic(b).mtu)); };

  std::vector<Flow> flows;
  std::vector<Job> jobs;
  struct Pattern {
    Buffer bytes;
    uint32_t crc = 0;  // computed once: a 64 MB message is posted many times
  };
  std::map<uint64_t, Pattern> patterns;  // by size
  auto pattern_of = [&](uint64_t size) -> const Pattern& {
    auto& p = patterns[size];
    if (!p.bytes) {
      p.bytes = std::make_shared<const std::vector<uint8_t>>(message_pattern(size, s.seed ^ size));
      p.crc = engine::crc32_update(0, *p.bytes);
    }
    return p;
  };
  std::mt19937_64 rng(s.seed ^ 0x776f726bull);

  auto add_flow = [&](size_t job, size_t src, size_t dst, uint64_t message, uint64_t per_qp, int qps) -> bool {
    const uint8_t tos = uint8_t(jobs[job].w->dscp << 2 | 0x2);  // ECT(0): DCQCN needs marks
    if (!ensure_endpoint(src) || !ensure_endpoint(dst)) return false;
    Flow f;
    f.workload = job;
    f.src = src;
    f.dst = dst;
    f.message = message;
    f.per_qp = per_qp;
    const engine::RcConfig rc = rc_config(mtu_between(src, dst), std::min(line(src), line(dst)), s.scale);
    for (int q = 0; q < qps; ++q) {
      const uint32_t qa = next_qpn[src]++, qb = next_qpn[dst]++;
      const uint32_t pa = uint32_t(rng()) & engine::kPsnMask, pb = uint32_t(rng()) & engine::kPsnMask;
      const auto& A = nic(src);
      const auto& B = nic(dst);
      // Source ports seeded by (node, GPU): GPU 0 keeps the node's own, as before GPUs.
      const auto seed_of = [&](size_t r) { return uint32_t(ranks[r].node) + (uint32_t(ranks[r].gpu) << 16); };
      auto x = eng.add_qp(endpoint[src], qa, B.addr, qb, engine::qp_source_port(s.seed, seed_of(src), qa), pa, pb,
                          rc, why, tos);
      if (!x) return false;
      auto y = eng.add_qp(endpoint[dst], qb, A.addr, qa, engine::qp_source_port(s.seed, seed_of(dst), qb), pb, pa,
                          rc, why, tos);
      if (!y) return false;
      f.qps.push_back({*x, *y});
    }
    memory_need[dst] = std::max(memory_need[dst], message);
    f.r.workload = jobs[job].w->name;
    f.r.from = label(src);
    f.r.to = label(dst);
    f.r.qps = qps;
    flows.push_back(std::move(f));
    jobs[job].flows.push_back(flows.size() - 1);
    return true;
  };

  for (const auto& w : s.workloads) {
    Job j;
    j.w = &w;
    j.index = jobs.size();
    j.start = s.scale.emulate(w.start).ns;
    jobs.push_back(j);
    const size_t ji = jobs.size() - 1;
    std::vector<size_t> hosts;
    for (const auto& h : w.hosts) hosts.push_back(node_of(h));
    if (hosts.empty()) hosts = all_hosts;
    // Every GPU of every participating host; transfers between GPUs of one host go over its
    // own links (NVLink), not the fabric, and are not emulated.
    std::vector<size_t> members;
    for (size_t h : hosts)
      for (size_t g = 0; g < gpus_of(h); ++g) members.push_back(rank(h, int(g)));
    auto apart = [&](size_t a, size_t b) { return ranks[a].node != ranks[b].node; };
    const uint64_t msg = w.message.n;
    const uint64_t iters = uint64_t(w.iterations);
    bool ok = true;
    if (w.type == "write_bw") {
      ok = add_flow(ji, rank(node_of(w.from), w.from_gpu), rank(node_of(w.to), w.to_gpu), msg, iters, w.qps);
    } else if (w.type == "latency") {
      jobs[ji].pingpong = true;
      ok = add_flow(ji, rank(node_of(w.from), w.from_gpu), rank(node_of(w.to), w.to_gpu), msg, iters, 1);
    } else if (w.type == "incast") {
      const size_t dst = rank(node_of(w.to), w.to_gpu);
      for (size_t r : members)
        if (apart(r, dst) && ok) ok = add_flow(ji, r, dst, msg, iters, w.qps);
    } else if (w.type == "permutation") {
      // A seeded permutation: every GPU sends to one GPU of another host and receives from one.
      // Uniform by rejection; when that is unlikely to end (many GPUs on few hosts), GPUs
      // grouped by host in a shuffled order, each sending to the one a largest group ahead.
      std::map<size_t, size_t> per_host;
      for (size_t r : members) ++per_host[ranks[r].node];
      size_t largest = 0;
      for (const auto& [h, c] : per_host) largest = std::max(largest, c);
      if (2 * largest > members.size())
        return why = "workload " + w.name + ": a host holds more than half its GPUs, so some must send to their own host",
               std::nullopt;
      std::vector<size_t> perm = members;
      bool found = false;
      for (int tries = 0; tries < 10000 && !found; ++tries) {
        std::shuffle(perm.begin(), perm.end(), rng);
        found = true;
        for (size_t i = 0; i < members.size() && found; ++i) found = apart(perm[i], members[i]);
      }
      if (!found) {
        std::vector<size_t> order(per_host.size());
        size_t x = 0;
        for (const auto& [h, c] : per_host) order[x++] = h;
        std::shuffle(order.begin(), order.end(), rng);
        std::vector<size_t> grouped;
        for (size_t h : order)
          for (size_t r : members)
            if (ranks[r].node == h) grouped.push_back(r);
        members = grouped;
        for (size_t i = 0; i < members.size(); ++i) perm[i] = members[(i + largest) % members.size()];
      }
      for (size_t i = 0; i < members.size() && ok; ++i) ok = add_flow(ji, members[i], perm[i], msg, iters, w.qps);
    } else if (w.type == "alltoall") {
      // nccl-tests alltoall: each rank sends size / N to every other rank, per operation
      // (to the GPUs of its own host over its own links: not emulated). A NIC then carries
      // (N - k) / N of the size for k GPUs a host: the bound on busbw rises by (N-1)/(N-k).
      const uint64_t part = std::max<uint64_t>(1, msg / members.size());
      jobs[ji].lockstep = true;
      jobs[ji].steps_per_op = 1;
      jobs[ji].rounds = iters;
      jobs[ji].ranks = members.size();
      const double n = double(members.size()), k = double(members.size()) / double(hosts.size());
      jobs[ji].bound_factor = n > k ? (n - 1) / (n - k) : 1;
      for (size_t a : members)
        for (size_t b : members)
          if (apart(a, b) && ok) ok = add_flow(ji, a, b, std::max<uint64_t>(1, part / uint64_t(w.qps)), 1, w.qps);
    } else if (w.type == "allreduce") {
      // Ring: 2(H-1) steps, each moving size / H to the successor, each waiting for the
      // slowest. With k GPUs a host, k rings, one per rail (GPU r of every host, over NIC r),
      // each reducing size / k: the hierarchical all-reduce (the steps inside a host are
      // NVLink's, not emulated). busbw counts all N = H·k ranks (nccl-tests), so its bound
      // is the edge rate × k·H(N-1) / ((H-1)·N), the edge rate for k = 1.
      size_t k = SIZE_MAX;
      for (size_t h : hosts) k = std::min(k, gpus_of(h));
      const double H = double(hosts.size()), N = H * double(k);
      jobs[ji].lockstep = true;
      jobs[ji].steps_per_op = 2 * (hosts.size() - 1);
      jobs[ji].rounds = jobs[ji].steps_per_op * iters;
      jobs[ji].ranks = size_t(N);
      jobs[ji].bound_factor = double(k) * H * (N - 1) / ((H - 1) * N);
      const uint64_t chunk = std::max<uint64_t>(1, msg / k / hosts.size());
      for (size_t r = 0; r < k && ok; ++r) {
        // By leaf, so no two ring edges share a link where the topology allows; or exactly
        // as `hosts:` lists them when the scenario says so (ring: as_listed).
        const auto ring = w.ring_as_listed ? hosts : ring_order(plan, hosts, r);
        for (size_t i = 0; i < ring.size() && ok; ++i)
          ok = add_flow(ji, rank(ring[i], int(r)), rank(ring[(i + 1) % ring.size()], int(r)),
                        std::max<uint64_t>(1, chunk / uint64_t(w.qps)), 1, w.qps);
      }
    }
    if (!ok) return std::nullopt;
  }
  // Responder memory: one region per GPU, as large as the largest message it receives.
  for (auto& [node, need] : memory_need) {
    memory[node] = std::make_unique<std::vector<uint8_t>>(need);
    for (auto& f : flows)
      if (f.dst == node)
        for (auto& q : f.qps) eng.qp(q.resp).register_memory(0x1000 + uint32_t(node), kBaseVa, *memory[node]);
  }

  auto post = [&](Flow& f, Qpair& q) {
    const Pattern& p = pattern_of(f.message);
    eng.qp(q.req).post_write(p.bytes, kBaseVa, 0x1000 + uint32_t(f.dst));
    ++q.posted;
    q.bytes_posted += f.message;
    // CRC of everything posted so far, then this message (the CRC of nothing is 0).
    q.expect_crc = uint32_t(crc32_combine(q.expect_crc, p.crc, z_off_t(f.message)));
  };

  WorkloadRun out;
  const Nanos t0 = clock.now();
  uint64_t total_bytes = 0;
  double slowest = 1e300;
  Nanos last_start = 0;
  for (const auto& f : flows) {
    // Lock-step jobs post one message per QP per round; the others per_qp messages.
    const Job& j = jobs[f.workload];
    total_bytes += f.message * f.qps.size() * (j.lockstep ? j.rounds : f.per_qp);
    slowest = std::min(slowest, std::min(line(f.src), line(f.dst)));
  }
  for (const auto& j : jobs) last_start = std::max(last_start, j.start);
  // Everything through the slowest NIC, four times over, plus the last start and slack.
  const Nanos deadline = t0 + last_start + Nanos(double(total_bytes) * 8 / slowest * 4e9) + 30'000'000'000;
  Nanos next_trace = t0, next_progress = t0 + 1'000'000'000;
  uint64_t done_bytes = 0;

  auto step = [&]() {
    const Nanos now = clock.now();
    if (o.cancel && o.cancel->load()) return true;
    bool all_done = true;
    for (auto& j : jobs) {
      if (j.done) continue;
      all_done = false;
      if (!j.started) {
        if (now - t0 < j.start) continue;
        j.started = true;
        j.op_started = j.round_started = now;
        for (size_t fi : j.flows) flows[fi].started = now;
      }
      // Collect completions.
      for (size_t fi : j.flows) {
        Flow& f = flows[fi];
        for (auto& q : f.qps)
          for (const auto& c : eng.qp(q.req).take_completions()) {
            ++q.completed;
            if (!c.ok) ++q.errors;
            else done_bytes += f.message;
          }
      }
      if (j.pingpong) {
        Flow& f = flows[j.flows[0]];
        auto& q = f.qps[0];
        auto& a = eng.qp(q.req);
        auto& b = eng.qp(q.resp);
        const Buffer& buf = pattern_of(f.message).bytes;
        while (!b.received().empty()) {  // the pong: the responder answers what it got
          b.received().pop_front();
          b.post_send(buf);
        }
        b.take_completions();
        if (!a.received().empty()) {
          a.received().pop_front();
          j.rtts.push_back(double(now - j.ping_at) / 1e9);
          j.ping_out = false;
          ++j.pongs;
        }
        if (!j.ping_out && j.pongs < f.per_qp && !a.failed()) {
          a.post_send(buf);
          q.bytes_posted += f.message;
          ++q.posted;
          j.ping_at = now;
          j.ping_out = true;
        }
        if (j.pongs >= f.per_qp || a.failed()) {
          j.done = true;
          j.finished = f.finished = now;
        }
        continue;
      }
      if (j.lockstep) {
        bool round_done = true;
        for (size_t fi : j.flows)
          for (auto& q : flows[fi].qps) round_done = round_done && q.completed == q.posted;
        if (round_done) {
          if (j.round > 0 && j.round % j.steps_per_op == 0) {
            j.op_seconds.push_back(double(now - j.op_started) / 1e9);
            j.op_started = now;
          }
          if (j.round == j.rounds) {
            j.done = true;
            j.finished = now;
            for (size_t fi : j.flows) flows[fi].finished = now;
            continue;
          }
          for (size_t fi : j.flows)
            for (auto& q : flows[fi].qps) post(flows[fi], q);
          ++j.round;
        }
        continue;
      }
      bool job_done = true;
      for (size_t fi : j.flows) {
        Flow& f = flows[fi];
        bool flow_done = true;
        for (auto& q : f.qps) {
          auto& rq = eng.qp(q.req);
          while (!rq.failed() && q.posted < f.per_qp && q.posted - q.completed < kTxDepth) post(f, q);
          flow_done = flow_done && q.completed == q.posted && (q.posted == f.per_qp || rq.failed());
        }
        if (flow_done && f.finished < 0) f.finished = now;
        job_done = job_done && flow_done;
      }
      if (job_done) {
        j.done = true;
        j.finished = now;
      }
    }
    if (now >= next_trace) {
      next_trace = now + kTraceEvery;
      for (auto& f : flows) {
        if (f.started < 0 || f.finished >= 0 || f.r.rate_trace.size() >= kTraceMax) continue;
        FlowResult::TracePoint p{double(now - t0) / 1e9, 0, 0};
        for (auto& q : f.qps) {
          p.rate_bps += eng.qp_report(q.req).rate_bps;
          p.delivered += eng.qp_report(q.resp).rc.delivered_bytes;
        }
        f.r.rate_trace.push_back(p);
      }
    }
    if (o.progress && now >= next_progress) {
      next_progress = now + 1'000'000'000;
      size_t jobs_done = 0;
      for (const auto& j : jobs) jobs_done += j.done;
      char line[160];
      std::snprintf(line, sizeof line, "%zu of %zu workloads done, %.1f of %.1f MB acknowledged, %.0f s",
                    jobs_done, jobs.size(), double(done_bytes) / 1e6, double(total_bytes) / 1e6,
                    double(now - t0) / 1e9);
      o.progress(line);
    }
    return all_done;
  };
  const bool finished = eng.run(step, deadline);
  const Nanos t_end = clock.now();
  if (o.cancel && o.cancel->load()) return why = "cancelled", std::nullopt;
  if (!finished) {
    why = "workloads did not finish within " + std::to_string((deadline - t0) / 1'000'000'000) +
          " s (four times what the bytes need at the slowest line rate, plus 30 s)";
    return std::nullopt;
  }

  // Results
  out.seconds = double(t_end - t0) / 1e9;
  for (size_t i = 0; i < eng.qp_count(); ++i) {
    const auto r = eng.qp_report(i);
    // Only QPs whose NIC never pushed back: under PFC the pause, not the pacer, sets the pace.
    if (r.send_blocked == 0) out.worst_pacing_error = std::min(out.worst_pacing_error, r.pacing_error);
    out.retransmitted += r.rc.retransmitted;
  }
  for (const auto& [node, ep] : endpoint) {
    const auto& st = eng.endpoint_stats(ep);
    out.bad_icrc += st.bad_icrc;
    out.rx_overflow += st.rx_overflow;
    out.send_errors += st.send_errors;
    if (st.last_send_error) out.last_send_error = st.last_send_error;
    out.cnp_sent += st.cnp_sent;
    out.cnp_received += st.cnp_received;
    out.ce_marked += st.ce_marked;
  }
  for (auto& f : flows) {
    FlowResult& r = f.r;
    const Job& j = jobs[f.workload];
    uint64_t bytes = 0, wire = 0;
    for (auto& q : f.qps) {
      const auto req = eng.qp_report(q.req);
      const auto resp = eng.qp_report(q.resp);
      bytes += (q.completed - q.errors) * f.message;
      wire += q.posted * wire_bytes(f.message, eng.qp(q.req).config().mtu);
      r.retransmitted += req.rc.retransmitted;
      r.timeouts += req.rc.timeouts;
      if (resp.rc.delivered_bytes != q.bytes_posted || (j.pingpong ? false : resp.rc.delivered_crc != q.expect_crc))
        r.digest_ok = false;
      if (q.errors) r.digest_ok = false;
    }
    r.bytes = bytes;
    r.streaming = !j.lockstep && !j.pingpong;
    r.rx_line_bps = line(f.dst);
    r.wire_bytes = wire;
    r.start_s = double(f.started - t0) / 1e9;
    r.fct_s = f.finished > f.started ? double(f.finished - f.started) / 1e9 : 0;
    r.ideal_s = double(wire) * 8 / std::min(line(f.src), line(f.dst));
    r.slowdown = r.ideal_s > 0 ? r.fct_s / r.ideal_s : 0;
    r.goodput_bps = r.fct_s > 0 ? double(bytes) * 8 / r.fct_s : 0;
    // CNPs the sender's QPs received.
    for (auto& q : f.qps) {
      r.cnp_received += eng.qp_report(q.req).cnp_received;
      r.cnp_sent += eng.qp_report(q.resp).cnp_sent;
    }
    out.flows.push_back(r);
  }
  for (const auto& j : jobs) {
    WorkloadResult w;
    w.name = j.w->name;
    w.type = j.w->type;
    w.message = j.w->message.n;
    w.iterations = j.w->iterations;
    w.flows = j.flows;
    std::vector<size_t> members;
    for (size_t fi : j.flows) {
      members.push_back(flows[fi].src);
      members.push_back(flows[fi].dst);
    }
    std::sort(members.begin(), members.end());
    // Ranks (GPUs): those the job's flows join, or for a collective all it spans.
    w.hosts = std::max(j.ranks, size_t(std::unique(members.begin(), members.end()) - members.begin()));
    w.jct_s = double(j.finished - t0 - j.start) / 1e9;
    // Aggregate: every byte over the job's time (flows that end early do not count twice).
    uint64_t job_bytes = 0;
    for (size_t fi : j.flows) job_bytes += out.flows[fi].bytes;
    if (w.jct_s > 0) w.goodput_bps = double(job_bytes) * 8 / w.jct_s;
    // The busiest receiver: its wire bytes over the time from the job's first post to its
    // last completion, against its line rate (an incast's bottleneck).
    std::map<size_t, double> rx_wire;
    for (size_t fi : j.flows)
      for (const auto& q : flows[fi].qps)
        rx_wire[flows[fi].dst] += double(q.posted * wire_bytes(flows[fi].message, eng.qp(q.req).config().mtu));
    const double busy = j.started ? double(j.finished - (t0 + j.start)) / 1e9 : 0;
    for (const auto& [node, bytes] : rx_wire)
      if (busy > 0) w.rx_utilization = std::max(w.rx_utilization, bytes * 8 / busy / line(node));
    if (j.lockstep) {
      // What the busiest NIC can carry of payload: a ring's steps and an all-to-all's
      // transfers all go through NICs at line rate, headers included.
      w.busbw_bound_bps = 1e300;
      for (size_t fi : j.flows) {
        const Flow& f = flows[fi];
        const double eff = double(f.message) / double(wire_bytes(f.message, eng.qp(f.qps[0].req).config().mtu));
        w.busbw_bound_bps = std::min(w.busbw_bound_bps, std::min(line(f.src), line(f.dst)) * eff);
      }
      w.busbw_bound_bps *= j.bound_factor;
      w.busbw_bound_factor = j.bound_factor;
    }
    if (j.lockstep && !j.op_seconds.empty()) {
      w.iteration_s = std::accumulate(j.op_seconds.begin(), j.op_seconds.end(), 0.0) / double(j.op_seconds.size());
      const double n = double(w.hosts);
      w.algbw_bps = double(w.message) * 8 / w.iteration_s;
      w.busbw_bps = w.algbw_bps * (w.type == "allreduce" ? 2 * (n - 1) / n : (n - 1) / n);
    }
    if (j.pingpong) {
      std::vector<double> one_way;
      for (double r : j.rtts) one_way.push_back(r / 2);
      w.latency_p50_s = percentile(one_way, 50);
      w.latency_p99_s = percentile(one_way, 99);
      w.latency_avg_s = one_way.empty() ? 0 : std::accumulate(one_way.begin(), one_way.end(), 0.0) / double(one_way.size());
    }
    out.workloads.push_back(w);
  }
  // DESIGN.md §3: a pacer that fell well behind its own rate means the machine did not keep up.
  // The per-QP measure reads up to ~10 % low when QPs share a NIC (arbitration between
  // turns), so only a pacer a quarter behind marks the run.
  if (out.send_errors > 0)
    out.invalid = std::to_string(out.send_errors) + " packets the kernel refused to send (" +
                  std::strerror(out.last_send_error) + "): an engine fault, not the fabric's";
  else if (out.rx_overflow > 0)
    out.invalid = std::to_string(out.rx_overflow) +
                  " packets were lost in full host receive sockets (the engine did not read in time): "
                  "loss the emulation made, not the fabric";
  else if (out.worst_pacing_error < -0.25)
    out.invalid = "the engine fell behind its pacing (a QP sent " +
                  std::to_string(int(std::lround(-out.worst_pacing_error * 100))) +
                  " % less than its rate allowed): the machine did not keep up";
  return out;
}

}  // namespace rocelab::workload
