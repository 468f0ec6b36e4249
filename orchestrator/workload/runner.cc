#include "workload/runner.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/wire.h"
#include "model/percentile.h"
#include "sys/files.h"
#include "sys/host_info.h"
#include "workload/backend.h"
#include "workload/kinds.h"
#include "workload/perf.h"

namespace rocelab::workload {
namespace {

using sys::Nanos;

constexpr uint32_t kTxDepth = 16;           // messages in flight per QP (point to point)
constexpr size_t kTraceMax = 2000;
constexpr uint64_t kBaseVa = 0x10000000;

constexpr size_t kElsewhere = SIZE_MAX;  // a QP end that another machine of a split fabric runs

// A trace is due this period when the flow's step says so; a full one (kTraceMax) keeps every
// other point and samples half as often, so that it spans its whole flow whatever the flow's
// length or D (a cap that dropped the rest left 0.51 s of a 1.3 s flow at D = 20, and a
// test's rate between its last point and the flow's end read a stopped flow as 137 Mbit/s).
template <class Point>
bool trace_due(std::vector<Point>& trace, uint64_t& ticks, uint32_t& step) {
  if (trace.size() >= kTraceMax) {
    size_t kept = 0;
    for (size_t i = 0; i < trace.size(); i += 2) trace[kept++] = trace[i];
    trace.resize(kept);
    step *= 2;
  }
  return ticks++ % step == 0;
}

struct Qpair {
  size_t req = 0, resp = 0;  // backend QP ids (kElsewhere: on another machine)
  uint32_t mtu = 0;          // the QP's path MTU
  // The ends another machine ran, as it reported them when the traffic ended.
  std::optional<engine::QpReport> req_far, resp_far;
  uint64_t posted = 0, completed = 0, errors = 0;
  uint64_t bytes_posted = 0;
  uint32_t expect_crc = 0;  // CRC-32 of every payload byte posted, in order
  Nanos failed_at = -1;     // when the runner saw the requester fail (retry exceeded...)
  bool seen_by_peer = false;  // failed on a surviving host (not its own crash): the job notices
};

struct Flow {
  size_t job = 0;
  FlowSpec spec;
  std::vector<Qpair> qps;
  Nanos started = -1, finished = -1;
  bool trace_closed = false;  // its rate trace has its last point, at `finished`
  // Its trace takes one sampling period in `trace_step` (periods counted from its first).
  uint64_t trace_ticks = 0;
  uint32_t trace_step = 1;
  FlowResult r;
  // Split fabric: what the responder delivered over time, traced where it runs, and the
  // machines of its ends (set when the figures are traded).
  std::vector<std::pair<double, uint64_t>> delivered_trace;
  size_t req_part = 0, resp_part = 0;
};

struct Job {
  const model::Workload* w = nullptr;
  JobSpec spec;
  std::vector<size_t> flows;
  Nanos start = 0;  // emulated, from t0
  bool started = false, done = false;
  bool aborted = false;  // a collective stops at its first failed QP, as NCCL aborts
  bool serve_only = false;  // split fabric: only ping-pong responders here (they answer until the end)
  uint64_t round = 0;
  Nanos op_started = 0;
  std::vector<double> op_seconds;
  // Latency ping-pong
  uint64_t pongs = 0;
  Nanos ping_at = 0;
  bool ping_out = false;
  std::vector<double> rtts;
  // Ping posted -> arrived at its responder, when both ends run here (one clock): the one-way
  // latency itself. RTT / 2 halves a queue that only one direction meets (a probe into an
  // incast's receiver waits going, not coming back).
  std::vector<double> one_ways;
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

// One run of a scenario's jobs on a backend.
class Session {
 public:
  Session(const model::Scenario& s, const Ranks& ranks, fabric::Testbed& t, Backend& b, const RunnerOptions& o)
      : s_(s), ranks_(ranks), t_(t), b_(b), o_(o), psn_(s.seed ^ 0x70736eull), parts_(o.parts) {}

  Status build(std::vector<JobSpec> specs);
  Status fits_in_memory(const std::map<size_t, uint64_t>& regions) const;
  Result<WorkloadRun> run();

 private:
  struct Pattern {
    Buffer bytes;
    uint32_t crc = 0;  // computed once: a 64 MB message is posted many times
  };
  const Pattern& pattern(uint64_t size);
  double line(size_t rank) const { return double(ranks_.nic(rank).rate_bps); }
  Result<size_t> endpoint(size_t rank);
  std::optional<std::pair<fabric::PortRef, uint32_t>> nic_queue(size_t rank, uint8_t tos);
  Status add_flow(size_t job, const FlowSpec& f);
  void post(Flow& f, Qpair& q);
  bool step();
  void collect(Job& j, Nanos now);
  void step_pingpong(Job& j, Nanos now);
  void step_lockstep(Job& j, Nanos now);
  void step_streaming(Job& j, Nanos now);
  void sample(Nanos now);
  bool here(size_t rank) const { return ranks_.plan().part.has(ranks_[rank].node); }
  bool agreed(const std::string& tag, bool failed, bool& any_failed);
  bool ended();
  nlohmann::json my_ends(const WorkloadRun& totals) const;
  Status take_far_flow(const nlohmann::json& e, size_t part);
  Status take_far_ends(const std::vector<std::string>& parts, WorkloadRun& out);
  engine::QpReport req_of(const Qpair& q) const { return q.req_far ? *q.req_far : b_.qp_counters(q.req); }
  engine::QpReport resp_of(const Qpair& q) const { return q.resp_far ? *q.resp_far : b_.qp_counters(q.resp); }
  FlowResult flow_result(Flow& f);
  WorkloadResult workload_result(const Job& j, const WorkloadRun& out);
  void totals(WorkloadRun& out) const;

  const model::Scenario& s_;
  const Ranks& ranks_;
  fabric::Testbed& t_;
  Backend& b_;
  const RunnerOptions& o_;
  std::mt19937_64 psn_;
  std::vector<Flow> flows_;
  std::vector<Job> jobs_;
  std::map<size_t, size_t> endpoint_;    // rank -> backend endpoint
  std::map<size_t, std::string> nic_;    // backend endpoint -> NODE:IF
  // Backend endpoint -> its pause clock on its traffic's priority and the clock's reading
  // before the traffic: a NIC that PFC paused is left out of the pacing check.
  std::map<size_t, std::pair<std::function<sys::Nanos()>, sys::Nanos>> nic_pause_;
  std::map<size_t, uint32_t> next_qpn_;  // rank -> next QPN
  std::map<size_t, std::unique_ptr<std::vector<uint8_t>>> memory_;  // rank -> responder memory
  std::map<uint64_t, Pattern> patterns_;  // by size
  Nanos t0_ = 0, next_trace_ = 0, next_progress_ = 0;
  uint64_t total_bytes_ = 0, done_bytes_ = 0;
  Nanos max_rto_ = 0;  // the longest first timeout of any QP (emulated)
  sys::Rendezvous* parts_ = nullptr;  // split fabric: the other machines
  std::optional<Error> part_error_;   // a part stopped, or could not be reached
  bool stopped_ = false;              // the run stopped before every flow completed or failed
};

const Session::Pattern& Session::pattern(uint64_t size) {
  auto& p = patterns_[size];
  if (!p.bytes) {
    p.bytes = std::make_shared<const std::vector<uint8_t>>(message_pattern(size, s_.seed ^ size));
    p.crc = engine::crc32_update(0, *p.bytes);
  }
  return p;
}

// One endpoint per GPU that takes part (its NIC).
Result<size_t> Session::endpoint(size_t rank) {
  if (auto it = endpoint_.find(rank); it != endpoint_.end()) return it->second;
  const auto& n = ranks_.plan().nodes[ranks_[rank].node];
  const auto& p = ranks_.nic(rank);
  const size_t at = t_.node_index(n.node);
  if (at == SIZE_MAX) return error(Errc::kEnvironment, "the fabric has no node " + n.node);
  const auto& hosts = ranks_.hosts();
  const size_t place = size_t(std::find(hosts.begin(), hosts.end(), ranks_[rank].node) - hosts.begin());
  auto ep = b_.add_endpoint({n.node + ":" + p.ifname, t_.netns_fd(at), p.addr, double(p.rate_bps), t_.node_halted(at),
                             place, std::max<size_t>(hosts.size(), 1)});
  if (!ep) return ep.error();
  nic_[*ep] = n.node + ":" + p.ifname;
  return endpoint_[rank] = *ep;
}

// A GPU's NIC and the priority its traffic with `tos` takes there.
std::optional<std::pair<fabric::PortRef, uint32_t>> Session::nic_queue(size_t rank, uint8_t tos) {
  const auto& n = ranks_.plan().nodes[ranks_[rank].node];
  const size_t at = t_.node_index(n.node);
  if (at == SIZE_MAX) return std::nullopt;
  const auto& ports = t_.nodes()[at].ports;
  for (size_t p = 0; p < ports.size(); ++p)
    if (ports[p].name == ranks_.nic(rank).ifname)
      return std::pair{fabric::PortRef{at, p, ports[p].slot}, uint32_t(s_.qos.dscp_to_prio[(tos >> 2) & 63])};
  return std::nullopt;
}

Status Session::add_flow(size_t job, const FlowSpec& spec) {
  if (spec.src == SIZE_MAX || spec.dst == SIZE_MAX) return error(Errc::kBadInput, "a flow names a GPU the fabric lacks");
  const uint8_t tos = uint8_t(jobs_[job].w->dscp << 2 | 0x2);  // ECT(0): DCQCN needs marks
  // Each end where its host is (a split fabric runs the other end elsewhere); the numbers
  // below are drawn for every flow alike, so both machines give a QP the same ones.
  const bool src_here = here(spec.src), dst_here = here(spec.dst);
  Result<size_t> ea = src_here ? endpoint(spec.src) : Result<size_t>(kElsewhere);
  if (!ea) return ea.error();
  Result<size_t> eb = dst_here ? endpoint(spec.dst) : Result<size_t>(kElsewhere);
  if (!eb) return eb.error();
  Flow f;
  f.job = job;
  f.spec = spec;
  const auto &A = ranks_.nic(spec.src), &B = ranks_.nic(spec.dst);
  const engine::RcConfig rc = rc_config(ib_mtu_for(std::min(A.mtu, B.mtu)), std::min(line(spec.src), line(spec.dst)), s_.scale, s_.hosts.rc);
  max_rto_ = std::max(max_rto_, rc.rto);
  // Source ports seeded by (node, GPU): GPU 0 keeps the node's own.
  const auto seed_of = [&](size_t r) { return uint32_t(ranks_[r].node) + (uint32_t(ranks_[r].gpu) << 16); };
  for (int q = 0; q < spec.qps; ++q) {
    const uint32_t qa = next_qpn_.try_emplace(spec.src, 0x100).first->second++;
    const uint32_t qb = next_qpn_.try_emplace(spec.dst, 0x100).first->second++;
    const uint32_t pa = uint32_t(psn_()) & engine::kPsnMask, pb = uint32_t(psn_()) & engine::kPsnMask;
    Qpair qp;
    qp.req = qp.resp = kElsewhere;
    qp.mtu = rc.mtu;
    if (src_here) {
      const auto nic = nic_queue(spec.src, tos);
      if (nic && !nic_pause_.count(*ea))
        if (auto clock = t_.pause_clock(nic->first, nic->second)) nic_pause_[*ea] = {clock, clock()};
      auto x = b_.add_qp(*ea, {qa, B.addr, qb, engine::qp_source_port(s_.seed, seed_of(spec.src), qa), pa, pb, rc, tos,
                               nic ? t_.pause_in_force(nic->first, nic->second) : std::function<sys::PauseReading()>{}});
      if (!x) return x.error();
      qp.req = *x;
      qp.mtu = b_.mtu(*x);
    }
    if (dst_here) {
      auto y = b_.add_qp(*eb, {qb, A.addr, qa, engine::qp_source_port(s_.seed, seed_of(spec.dst), qb), pb, pa, rc, tos});
      if (!y) return y.error();
      qp.resp = *y;
    }
    f.qps.push_back(std::move(qp));
  }
  f.r.workload = jobs_[job].w->name;
  f.r.from = ranks_.label(spec.src);
  f.r.to = ranks_.label(spec.dst);
  f.r.qps = spec.qps;
  flows_.push_back(std::move(f));
  jobs_[job].flows.push_back(flows_.size() - 1);
  return ok();
}

// The buffers a run holds: each receiving GPU's region and one source pattern per message
// size. Refused before any is allocated when the machine lacks them (a message that fits
// once but not twice would otherwise meet the OOM killer mid-run).
Status Session::fits_in_memory(const std::map<size_t, uint64_t>& regions) const {
  uint64_t bytes = 0;
  std::set<uint64_t> sizes;
  for (const auto& [rank, n] : regions) bytes += n;
  for (const auto& f : flows_)
    if (here(f.spec.src)) sizes.insert(f.spec.message);
  for (uint64_t n : sizes) bytes += n;
  const auto avail = sys::memory_available();
  if (!avail || bytes <= *avail / 10 * 9) return ok();
  const auto gib = [](uint64_t n) { return fmt::format("{:.1f} GiB", double(n) / double(1ull << 30)); };
  return error(Errc::kEnvironment, "the workloads need " + gib(bytes) + " of message buffers (each receiving GPU's "
                                       "largest message, one source copy per size); the machine has " + gib(*avail) +
                                       " available: use smaller messages");
}

Status Session::build(std::vector<JobSpec> specs) {
  for (size_t i = 0; i < specs.size(); ++i) {
    Job j;
    j.w = &s_.workloads[i];
    j.spec = std::move(specs[i]);
    j.start = s_.scale.emulate(j.w->start).ns;
    jobs_.push_back(std::move(j));
    for (const FlowSpec& f : jobs_.back().spec.flows)
      if (auto st = add_flow(i, f); !st) return Error{st.error().code, "workload " + j.w->name + ": " + st.error().what};
  }
  // Responder memory: one region per GPU, as large as the largest message it receives.
  std::map<size_t, uint64_t> need;
  for (const auto& f : flows_)
    if (here(f.spec.dst)) need[f.spec.dst] = std::max(need[f.spec.dst], f.spec.message);
  if (auto st = fits_in_memory(need); !st) return st;
  for (auto& [rank, bytes] : need) {
    memory_[rank] = std::make_unique<std::vector<uint8_t>>(bytes);
    for (auto& f : flows_)
      if (f.spec.dst == rank)
        for (auto& q : f.qps) b_.register_memory(q.resp, 0x1000 + uint32_t(rank), kBaseVa, *memory_[rank]);
  }
  return ok();
}

void Session::post(Flow& f, Qpair& q) {
  const Pattern& p = pattern(f.spec.message);
  b_.post_write(q.req, p.bytes, kBaseVa, 0x1000 + uint32_t(f.spec.dst));
  ++q.posted;
  q.bytes_posted += f.spec.message;
  // CRC of everything posted so far, then this message (the CRC of nothing is 0).
  q.expect_crc = uint32_t(crc32_combine(q.expect_crc, p.crc, z_off_t(f.spec.message)));
}

void Session::collect(Job& j, Nanos now) {
  for (size_t fi : j.flows) {
    Flow& f = flows_[fi];
    for (auto& q : f.qps) {
      if (q.req == kElsewhere) continue;
      for (const auto& c : b_.poll(q.req)) {
        ++q.completed;
        if (!c.ok) ++q.errors;
        else done_bytes_ += f.spec.message;
      }
      if (q.failed_at < 0 && b_.failed(q.req)) {
        q.failed_at = now;
        q.seen_by_peer = b_.qp_counters(q.req).failure != engine::kHostCrashed;
        if (o_.progress)
          o_.progress(fmt::format("{} {} -> {}: QP {} failed ({}) at {:.6f} s", j.w->name, f.r.from, f.r.to,
                                  b_.qp_counters(q.req).qpn, b_.qp_counters(q.req).failure,
                                  double(now - t0_) / 1e9 / s_.scale.factor()));
      }
    }
  }
}

void Session::step_pingpong(Job& j, Nanos now) {
  Flow& f = flows_[j.flows[0]];
  auto& q = f.qps[0];
  const Buffer& buf = pattern(f.spec.message).bytes;
  if (q.resp != kElsewhere) {
    while (b_.take_received(q.resp)) {  // the pong: the responder answers what it got
      if (q.req != kElsewhere && j.ping_out) j.one_ways.push_back(double(now - j.ping_at) / 1e9);
      b_.post_send(q.resp, buf);
    }
    b_.poll(q.resp);
  }
  if (q.req == kElsewhere) {  // the pinging end is another machine's: this one answers until the end
    j.serve_only = j.done = true;
    return;
  }
  if (b_.take_received(q.req)) {
    j.rtts.push_back(double(now - j.ping_at) / 1e9);
    j.ping_out = false;
    ++j.pongs;
  }
  const bool failed = b_.failed(q.req);
  if (!j.ping_out && j.pongs < f.spec.per_qp && !failed) {
    b_.post_send(q.req, buf);
    q.bytes_posted += f.spec.message;
    ++q.posted;
    j.ping_at = now;
    j.ping_out = true;
  }
  if (j.pongs >= f.spec.per_qp || failed) {
    j.done = true;
    j.finished = f.finished = now;
  }
}

void Session::step_lockstep(Job& j, Nanos now) {
  bool failed = false;
  for (size_t fi : j.flows)
    for (auto& q : flows_[fi].qps) failed = failed || q.seen_by_peer;
  if (!failed)
    for (size_t fi : j.flows)
      for (auto& q : flows_[fi].qps)
        if (q.req != kElsewhere && q.completed != q.posted) return;
  // Split fabric: a round ends when every machine's requesters finished it (or one failed).
  if (parts_ && !agreed(fmt::format("job{}:round{}", size_t(&j - jobs_.data()), j.round), failed, failed)) return;
  if (failed) {
    // A collective cannot go on without a rank: it stops once a surviving rank's QP fails (a
    // crashed rank's own QPs die with it, unseen), its unfinished flows marked failed.
    j.done = j.aborted = true;
    j.finished = now;
    for (size_t fi : j.flows)
      if (flows_[fi].finished < 0) flows_[fi].finished = now;
    return;
  }
  if (j.round > 0 && j.round % j.spec.steps_per_op == 0) {
    j.op_seconds.push_back(double(now - j.op_started) / 1e9);
    j.op_started = now;
  }
  if (j.round == j.spec.rounds) {
    j.done = true;
    j.finished = now;
    for (size_t fi : j.flows) flows_[fi].finished = now;
    return;
  }
  for (size_t fi : j.flows)
    for (auto& q : flows_[fi].qps)
      if (q.req != kElsewhere) post(flows_[fi], q);
  ++j.round;
}

void Session::step_streaming(Job& j, Nanos now) {
  bool job_done = true;
  for (size_t fi : j.flows) {
    Flow& f = flows_[fi];
    bool flow_done = true;
    for (auto& q : f.qps) {
      if (q.req == kElsewhere) continue;  // its requester's machine says when it is done
      const bool failed = b_.failed(q.req);
      while (!b_.failed(q.req) && q.posted < f.spec.per_qp && q.posted - q.completed < kTxDepth) post(f, q);
      flow_done = flow_done && q.completed == q.posted && (q.posted == f.spec.per_qp || failed);
    }
    if (flow_done && f.finished < 0 && !f.qps.empty() && f.qps[0].req != kElsewhere) f.finished = now;
    job_done = job_done && flow_done;
  }
  if (job_done) {
    j.done = true;
    j.finished = now;
  }
}

// The rate trace and the progress line.
void Session::sample(Nanos now) {
  const bool due = now >= next_trace_;
  if (due) next_trace_ = now + o_.trace_every_ns;
  {
    for (auto& f : flows_) {
      if (f.started < 0 || f.qps.empty()) continue;
      if (f.qps[0].req == kElsewhere) {
        // Split fabric: the responder's delivered bytes, which its requester's machine traces
        // with the rates (take_far_ends puts them together).
        if (!due || f.qps[0].resp == kElsewhere || !trace_due(f.delivered_trace, f.trace_ticks, f.trace_step)) continue;
        uint64_t delivered = 0;
        for (auto& q : f.qps) delivered += b_.qp_counters(q.resp).rc.delivered_bytes;
        f.delivered_trace.push_back({double(now - t0_) / 1e9, delivered});
        continue;
      }
      // Every due period while the flow runs (trace_due: at most kTraceMax points), and once
      // when it has finished (all it delivered): a trace ends at its flow's end.
      if (f.trace_closed) continue;
      if (f.finished >= 0) f.trace_closed = true;
      else if (!due || !trace_due(f.r.rate_trace, f.trace_ticks, f.trace_step)) continue;
      FlowResult::TracePoint p{double((f.finished >= 0 ? f.finished : now) - t0_) / 1e9, 0, 0};
      for (auto& q : f.qps) {
        const auto req = b_.qp_counters(q.req);
        p.rate_bps += req.rate_bps;
        p.cnp_received += req.cnp_received;
        if (q.resp != kElsewhere) p.delivered += b_.qp_counters(q.resp).rc.delivered_bytes;
      }
      f.r.rate_trace.push_back(p);
    }
  }
  if ((o_.progress || o_.meter) && now >= next_progress_) {
    next_progress_ = now + (o_.meter ? 200'000'000 : 1'000'000'000);
    size_t jobs_done = 0;
    for (const auto& j : jobs_) jobs_done += j.done;
    char line[160];
    std::snprintf(line, sizeof line, "%zu of %zu workloads done, %.1f of %.1f MB acknowledged, %.0f s", jobs_done,
                  jobs_.size(), double(done_bytes_) / 1e6, double(total_bytes_) / 1e6, double(now - t0_) / 1e9);
    if (o_.meter) o_.meter(total_bytes_ ? double(done_bytes_) / double(total_bytes_) : 0, line);
    else o_.progress(line);
  }
}

bool Session::step() {
  const Nanos now = b_.clock().now();
  if (o_.cancel && o_.cancel->load()) return true;
  bool all_done = true;
  for (auto& j : jobs_) {
    if (j.serve_only) step_pingpong(j, now);  // another machine pings: answer until the end
    if (j.done) continue;
    all_done = false;
    if (!j.started) {
      if (now - t0_ < j.start) continue;
      j.started = true;
      j.op_started = now;
      for (size_t fi : j.flows) flows_[fi].started = now;
    }
    collect(j, now);
    if (j.spec.pingpong) step_pingpong(j, now);
    else if (j.spec.lockstep) step_lockstep(j, now);
    else step_streaming(j, now);
  }
  sample(now);
  return part_error_ || (all_done && ended());
}

// Split fabric: every machine offers whether its requesters finished the round (or one
// failed); true once all have, `any_failed` then saying whether any did.
bool Session::agreed(const std::string& tag, bool failed, bool& any_failed) {
  auto r = parts_->offer(tag, failed ? "failed" : "done");
  if (!r) {
    part_error_ = r.error();
    return false;
  }
  if (!*r) return false;
  for (const auto& m : **r) any_failed = any_failed || m == "failed";
  return true;
}

// This machine's requesters are done; the traffic ends when every machine's are (until then
// its responders go on answering the others').
bool Session::ended() {
  if (!parts_) return true;
  auto r = parts_->offer("traffic-end", "");
  if (!r) {
    part_error_ = r.error();
    return true;
  }
  return r->has_value();
}

FlowResult Session::flow_result(Flow& f) {
  FlowResult& r = f.r;
  const Job& j = jobs_[f.job];
  uint64_t bytes = 0, wire = 0;
  for (auto& q : f.qps) {
    const auto req = req_of(q);
    const auto resp = resp_of(q);
    bytes += (q.completed - q.errors) * f.spec.message;
    wire += q.posted * wire_bytes(f.spec.message, q.mtu);
    r.retransmitted += req.rc.retransmitted;
    r.timeouts += req.rc.timeouts;
    r.rcvd_seq_err += req.rc.naks_received;
    r.out_of_seq_request += resp.rc.out_of_sequence;
    r.duplicate_request += resp.rc.duplicates;
    r.retry_exceeded_err += req.failure == engine::kRetryExceeded;
    if (!req.failure.empty() || q.failed_at >= 0 || (stopped_ && f.finished < 0)) {
      // A failed QP, or one stopped at work: what it was told is acknowledged must have
      // arrived (the rest need not).
      if (resp.rc.delivered_bytes < (q.completed - q.errors) * f.spec.message) r.digest_ok = false;
    } else {
      if (resp.rc.delivered_bytes != q.bytes_posted || (!j.spec.pingpong && resp.rc.delivered_crc != q.expect_crc))
        r.digest_ok = false;
      if (q.errors) r.digest_ok = false;
    }
    if (q.failed_at >= 0 && (r.failed_at_s < 0 || double(q.failed_at - t0_) / 1e9 < r.failed_at_s)) {
      r.failed_at_s = double(q.failed_at - t0_) / 1e9;
      r.error = req.failure;
    }
    r.cnp_received += req.cnp_received;
    r.cnp_sent += resp.cnp_sent;
  }
  const double slower = std::min(line(f.spec.src), line(f.spec.dst));
  r.bytes = bytes;
  r.streaming = !j.spec.lockstep && !j.spec.pingpong;
  r.rx_line_bps = line(f.spec.dst);
  r.wire_bytes = wire;
  r.start_s = double(f.started - t0_) / 1e9;
  r.fct_s = f.finished > f.started ? double(f.finished - f.started) / 1e9 : 0;
  r.ideal_s = double(wire) * 8 / slower;
  r.slowdown = r.ideal_s > 0 ? r.fct_s / r.ideal_s : 0;
  // A flow that failed, or that its collective abandoned, did not complete.
  const uint64_t due = f.spec.message * f.qps.size() * (j.spec.lockstep ? j.spec.rounds : f.spec.per_qp);
  r.failed = r.failed_at_s >= 0 || (j.aborted && bytes < due);
  if (r.failed && r.error.empty()) r.error = "its collective stopped at another rank's failure";
  r.unfinished = stopped_ && !r.failed && f.finished < 0 && bytes < due;
  r.goodput_bps = r.fct_s > 0 ? double(bytes) * 8 / r.fct_s : 0;
  return r;
}

WorkloadResult Session::workload_result(const Job& j, const WorkloadRun& out) {
  WorkloadResult w;
  w.name = j.w->name;
  w.type = j.w->type;
  w.message = j.w->message.n;
  w.iterations = j.w->iterations;
  w.flows = j.flows;
  std::vector<size_t> members;
  for (size_t fi : j.flows) members.insert(members.end(), {flows_[fi].spec.src, flows_[fi].spec.dst});
  std::sort(members.begin(), members.end());
  // Ranks (GPUs): those the job's flows join, or for a collective all it spans.
  w.hosts = std::max(j.spec.ranks, size_t(std::unique(members.begin(), members.end()) - members.begin()));
  w.jct_s = double(j.finished - t0_ - j.start) / 1e9;
  // Aggregate: every byte over the job's time (flows that end early do not count twice).
  uint64_t job_bytes = 0;
  for (size_t fi : j.flows) job_bytes += out.flows[fi].bytes;
  if (w.jct_s > 0) w.goodput_bps = double(job_bytes) * 8 / w.jct_s;
  // The busiest receiver: its wire bytes over the time from the job's first post to its
  // last completion, against its line rate (an incast's bottleneck).
  std::map<size_t, double> rx_wire;
  for (size_t fi : j.flows) rx_wire[flows_[fi].spec.dst] += double(out.flows[fi].wire_bytes);
  const double busy = j.started ? double(j.finished - (t0_ + j.start)) / 1e9 : 0;
  for (const auto& [rank, bytes] : rx_wire)
    if (busy > 0) w.rx_utilization = std::max(w.rx_utilization, bytes * 8 / busy / line(rank));
  if (j.spec.lockstep) {
    // What the busiest NIC can carry of payload: a ring's steps and an all-to-all's
    // transfers all go through NICs at line rate, headers included.
    w.busbw_bound_bps = 1e300;
    for (size_t fi : j.flows) {
      const Flow& f = flows_[fi];
      const double eff = double(f.spec.message) / double(wire_bytes(f.spec.message, f.qps[0].mtu));
      w.busbw_bound_bps = std::min(w.busbw_bound_bps, std::min(line(f.spec.src), line(f.spec.dst)) * eff);
    }
    w.busbw_bound_bps *= j.spec.bound_factor;
    w.busbw_bound_factor = j.spec.bound_factor;
  }
  if (j.spec.lockstep && !j.op_seconds.empty()) {
    w.iteration_s = std::accumulate(j.op_seconds.begin(), j.op_seconds.end(), 0.0) / double(j.op_seconds.size());
    const double n = double(w.hosts);
    w.algbw_bps = double(w.message) * 8 / w.iteration_s;
    w.busbw_bps = w.algbw_bps * (w.type == "allreduce" ? 2 * (n - 1) / n : (n - 1) / n);
  }
  if (j.spec.pingpong) {
    std::vector<double> one_way = j.one_ways;
    w.one_way_measured = !one_way.empty() && one_way.size() + 1 >= j.rtts.size();
    if (!w.one_way_measured) {  // the responder is another machine's (another clock): RTT / 2
      one_way.clear();
      for (double r : j.rtts) one_way.push_back(r / 2);
    }
    w.per_ping_p50_s = model::percentile(one_way, 50);
    w.per_ping_p99_s = model::percentile(one_way, 99);
    w.per_ping_avg_s = one_way.empty() ? 0 : std::accumulate(one_way.begin(), one_way.end(), 0.0) / double(one_way.size());
    // A ping-pong sends the next ping as the pong arrives: it pings ten times as often while
    // the queue it crosses is empty as while it holds ten pings' time, and per ping it reads
    // the empty queue (issue 48: p50 41 ns behind a queue averaging 93 KB at 100G). Each ping
    // samples the path at its send; it stands for half the gap to the ping before and half
    // to the one after (its round trip and the last one's), as a time series' sample does.
    std::vector<double> weight;
    double sum = 0, total = 0;
    const auto gap = [&](size_t i) { return i < j.rtts.size() ? j.rtts[i] : one_way[i]; };  // the last pong may not have come
    for (size_t i = 0; i < one_way.size(); ++i) {
      weight.push_back((gap(i == 0 ? 0 : i - 1) + gap(i)) / 2);
      sum += one_way[i] * weight.back(), total += weight.back();
    }
    w.latency_p50_s = model::weighted_percentile(one_way, weight, 50);
    w.latency_p99_s = model::weighted_percentile(one_way, weight, 99);
    w.latency_avg_s = total > 0 ? sum / total : 0;
  }
  return w;
}

// The engine shares the CPUs with the fabric's own softirq work, so some waiting is normal:
// ~2 % of the phase for a fat-tree all-to-all that keeps it 94 % busy, ~12 % (a quarter of the
// time it wanted a CPU) for a light permutation. Starved is waiting a fifth of the phase and
// over 35 % of the time it was runnable (the contended all-to-all above: 38-59 % and 40-62 %),
// with 50 ms of it at least, so one kernel thread's burst does not mark a 10 ms run.
bool cpu_starved(const WorkloadRun& r) {
  const double wanted = r.engine_cpu_busy + r.engine_cpu_waiting;
  return r.engine_cpu_waiting > 0.2 && wanted > 0 && r.engine_cpu_waiting / wanted > 0.35 &&
         r.engine_cpu_waiting * r.seconds > 0.05;
}

}  // namespace

// Who held the CPUs while the engine waited for one (issue 48: exit 2 names the machine's
// contention): other programs' CPU time or the hypervisor's steal in the phase, when either
// came to half the engine's wait at least; else neither did, and what held it was
// rocelab's own threads and the fabric's kernel work (the engine's threads past the cores,
// the agent, softirq). A program that took a CPU as long as the engine waited is the cause
// a busy neighbour makes; one that took a tenth of it is not.
std::string cpu_wait_cause(const WorkloadRun& r) {
  const double waited = r.engine_cpu_waiting * r.seconds;
  const double cpus = std::max(1, r.machine_cpus) * r.seconds;
  const double other = r.machine_other > 0 ? r.machine_other * cpus : 0, steal = r.machine_steal > 0 ? r.machine_steal * cpus : 0;
  if (other >= steal && other >= waited / 2)
    return fmt::format("; meanwhile another program held the CPUs (other programs ran {:.2f} s of CPU time in the phase, "
                       "the engine waited {:.2f} s)", other, waited);
  if (steal >= waited / 2)
    return fmt::format("; meanwhile the hypervisor took {:.2f} s of the CPUs in the phase (steal; the engine waited {:.2f} s)",
                       steal, waited);
  return fmt::format("; neither another program ({:.2f} s of CPU time) nor the hypervisor ({:.2f} s of steal) took half "
                     "the engine's {:.2f} s of waiting: rocelab's own threads and the fabric's kernel work held the CPUs",
                     other, steal, waited);
}

namespace {

// DESIGN.md §3: a NIC that sent this much less than its QPs' rates allowed means the machine
// did not keep up. The engine counts no time its queue refused packets, but it does count
// the NIC whose queue refuses without PFC (its socket full while the line drains it), which
// the ring all-reduce needs: there every NIC's queue refuses at times. Ring, 8 ranks (worst
// NIC -> busbw efficiency): D = 1000 -0.000 -> 0.998, D = 500 -0.02..-0.05 -> 0.94-0.97,
// D = 100 -0.77 -> 0.23. The thread's CPU share is no such measure: it ran 0.88 at
// D = 1000, and a paused NIC's held packets kept it busy waiting.
constexpr double kPacingShortfall = -0.15;

void Session::totals(WorkloadRun& out) const {
  for (size_t i = 0; i < b_.qp_count(); ++i) out.retransmitted += b_.qp_counters(i).rc.retransmitted;
  for (const auto& [rank, ep] : endpoint_) {
    const auto st = b_.endpoint_counters(ep);
    // Each NIC as a whole: its QPs trade turns; only their sum says whether the engine kept up.
    // Not a NIC that PFC paused: its queue (paused, then draining) set its pace, not the
    // engine (a 7:1 PFC-only incast's senders measured 17 % short on a quiet machine).
    const auto pause = nic_pause_.find(ep);
    const bool paused = pause != nic_pause_.end() && pause->second.first() > pause->second.second;
    if (!paused && st.pacing_error < out.worst_pacing_error) {
      out.worst_pacing_error = st.pacing_error;
      out.worst_paced_nic = nic_.at(ep);
    }
    out.bad_icrc += st.bad_icrc;
    out.rx_overflow += st.rx_overflow;
    out.send_errors += st.send_errors;
    if (st.last_send_error) out.last_send_error = st.last_send_error;
    out.cnp_sent += st.cnp_sent;
    out.cnp_received += st.cnp_received;
    out.ce_marked += st.ce_marked;
    for (const auto& [name, v] : st.hw_counters) out.nic_counters[name] += v;
  }
  // The engine thread's run-queue wait sees a contended machine: a fat-tree all-to-all at
  // D = 4000 lost 14 % of busbw at 47 % waiting (one busy loop beside it) and 27 % at 59 %,
  // against ~2 % waiting alone.
  if (out.machine_steal > 0.05 && out.machine_steal * out.seconds > 0.05)
    out.steal = "the hypervisor ran something else on this machine's CPUs " +
                std::to_string(int(std::lround(out.machine_steal * 100))) + " % of the traffic phase (steal time)";
  if (out.send_errors > 0)
    out.fault = std::to_string(out.send_errors) + " packets the kernel refused to send (" +
                std::strerror(out.last_send_error) + "): an engine fault, not the fabric's";
  if (out.rx_overflow > 0)
    out.invalid = std::to_string(out.rx_overflow) +
                  " packets were lost in full host receive sockets (the engine did not read in time): "
                  "loss the emulation made, not the fabric";
  else if (cpu_starved(out))
    out.invalid = "the engine waited for a CPU " + std::to_string(int(std::lround(out.engine_cpu_waiting * 100))) +
                  " % of the traffic phase, " +
                  std::to_string(int(std::lround(100 * out.engine_cpu_waiting / (out.engine_cpu_waiting + out.engine_cpu_busy)))) +
                  " % of the time it wanted one: the machine did not keep up" + cpu_wait_cause(out);
  else if (out.worst_pacing_error < kPacingShortfall)
    out.invalid = "the engine fell behind its pacing (" + out.worst_paced_nic + " sent " +
                  std::to_string(int(std::lround(-out.worst_pacing_error * 100))) +
                  " % less than its QPs' rates allowed while its queue took packets): the machine did not keep up";
}

bool has_requesters(const Job& j, const std::vector<Flow>& flows) {
  for (size_t fi : j.flows)
    if (!flows[fi].qps.empty() && flows[fi].qps[0].req != kElsewhere) return true;
  return false;
}

// The requester's rate trace with what its responder, on another machine, had delivered by
// each point: linear between that machine's samples (both count from the same time 0), all
// of it by the flow's end.
void fill_delivered(Flow& f, uint64_t total) {
  auto d = f.delivered_trace;
  if (f.finished >= 0 && !f.r.rate_trace.empty()) {  // the responder went on sampling after the flow's end
    const double end = f.r.rate_trace.back().t_s;
    d.erase(std::remove_if(d.begin(), d.end(), [end](const auto& x) { return x.first >= end; }), d.end());
    d.push_back({end, total});
  }
  for (auto& p : f.r.rate_trace) {
    auto after = std::lower_bound(d.begin(), d.end(), p.t_s, [](const auto& a, double t) { return a.first < t; });
    if (after == d.end()) p.delivered = d.empty() ? 0 : d.back().second;
    else if (after == d.begin() || after->first <= p.t_s) p.delivered = after->second;
    else {
      const auto& [t1, d1] = *(after - 1);
      const auto& [t2, d2] = *after;
      p.delivered = d1 + uint64_t(double(d2 - d1) * (p.t_s - t1) / (t2 - t1));
    }
  }
}

void merge_totals(WorkloadRun& out, const nlohmann::json& t, size_t part) {
  out.bad_icrc += t.at("bad_icrc").get<uint64_t>();
  out.rx_overflow += t.at("rx_overflow").get<uint64_t>();
  out.send_errors += t.at("send_errors").get<uint64_t>();
  if (int e = t.at("last_send_error"); e) out.last_send_error = e;
  out.cnp_sent += t.at("cnp_sent").get<uint64_t>();
  out.cnp_received += t.at("cnp_received").get<uint64_t>();
  out.ce_marked += t.at("ce_marked").get<uint64_t>();
  out.retransmitted += t.at("retransmitted").get<uint64_t>();
  if (double e = t.at("worst_pacing_error"); e < out.worst_pacing_error) {
    out.worst_pacing_error = e;
    out.worst_paced_nic = t.at("worst_paced_nic");
  }
  if (double w = t.at("engine_cpu_waiting"); w > out.engine_cpu_waiting) {
    out.engine_cpu_waiting = w;
    out.engine_cpu_busy = t.at("engine_cpu_busy");
  }
  out.engine_threads = std::max<size_t>(out.engine_threads, t.at("engine_threads"));
  out.machine_steal = std::max<double>(out.machine_steal, t.at("machine_steal"));
  out.machine_other = std::max<double>(out.machine_other, t.value("machine_other", -1.0));
  if (out.invalid.empty() && !t.at("invalid").get<std::string>().empty())
    out.invalid = "part " + std::to_string(part) + ": " + t.at("invalid").get<std::string>();
  for (const auto& [name, v] : t.at("nic_counters").items()) out.nic_counters[name] += v.get<uint64_t>();
}

// Split fabric: what this machine knows of each flow it holds an end of (emulated ns from
// time 0), of each job, and its totals.
nlohmann::json Session::my_ends(const WorkloadRun& t) const {
  using nlohmann::json;
  const auto rel = [&](Nanos x) { return x < 0 ? Nanos(-1) : x - t0_; };
  json flows = json::array();
  for (size_t fi = 0; fi < flows_.size(); ++fi) {
    const Flow& f = flows_[fi];
    json req = json::array(), resp = json::array();
    for (const Qpair& q : f.qps) {
      if (q.req != kElsewhere) {
        const auto c = b_.qp_counters(q.req);
        req.push_back({q.posted, q.completed, q.errors, q.bytes_posted, q.expect_crc, rel(q.failed_at), q.seen_by_peer,
                       q.mtu, c.rc.retransmitted, c.rc.timeouts, c.rc.naks_received, c.cnp_received, c.failure, c.qpn});
      }
      if (q.resp != kElsewhere) {
        const auto c = b_.qp_counters(q.resp);
        resp.push_back({c.rc.delivered_bytes, c.rc.delivered_crc, c.rc.out_of_sequence, c.rc.duplicates, c.cnp_sent});
      }
    }
    if (req.empty() && resp.empty()) continue;
    json e{{"flow", fi}};
    if (!req.empty()) {
      json trace = json::array();
      for (const auto& p : f.r.rate_trace) trace.push_back({p.t_s, p.rate_bps, p.cnp_received, p.delivered});
      e.update({{"req", req}, {"started", rel(f.started)}, {"finished", rel(f.finished)}, {"trace", trace}});
    }
    if (!resp.empty()) e.update({{"resp", resp}, {"delivered", f.delivered_trace}});
    flows.push_back(std::move(e));
  }
  json jobs = json::array();
  for (const Job& j : jobs_)
    jobs.push_back({{"requesters", has_requesters(j, flows_)}, {"finished", rel(j.finished)}, {"pongs", j.pongs},
                    {"rtts", j.rtts}});
  json totals{{"bad_icrc", t.bad_icrc}, {"rx_overflow", t.rx_overflow}, {"send_errors", t.send_errors},
              {"last_send_error", t.last_send_error}, {"cnp_sent", t.cnp_sent}, {"cnp_received", t.cnp_received},
              {"ce_marked", t.ce_marked}, {"retransmitted", t.retransmitted}, {"worst_pacing_error", t.worst_pacing_error},
              {"worst_paced_nic", t.worst_paced_nic}, {"engine_cpu_busy", t.engine_cpu_busy},
              {"engine_cpu_waiting", t.engine_cpu_waiting}, {"engine_threads", t.engine_threads},
              {"machine_steal", t.machine_steal}, {"machine_other", t.machine_other}, {"invalid", t.invalid},
              {"nic_counters", t.nic_counters}};
  return {{"flows", std::move(flows)}, {"jobs", std::move(jobs)}, {"totals", std::move(totals)}};
}

// One flow's ends as another machine reported them.
Status Session::take_far_flow(const nlohmann::json& e, size_t part) {
  const size_t fi = e.at("flow");
  if (fi >= flows_.size()) return error(Errc::kEnvironment, "part " + std::to_string(part) + " reports a flow this plan lacks");
  Flow& f = flows_[fi];
  const auto abs = [&](Nanos x) { return x < 0 ? Nanos(-1) : t0_ + x; };
  if (e.contains("req") && e["req"].size() == f.qps.size()) {
    f.req_part = part;
    for (size_t qi = 0; qi < f.qps.size(); ++qi) {
      Qpair& q = f.qps[qi];
      const auto& v = e["req"][qi];
      q.posted = v.at(0), q.completed = v.at(1), q.errors = v.at(2), q.bytes_posted = v.at(3), q.expect_crc = v.at(4);
      q.failed_at = abs(v.at(5)), q.seen_by_peer = v.at(6), q.mtu = v.at(7);
      engine::QpReport c;
      c.rc.retransmitted = v.at(8), c.rc.timeouts = v.at(9), c.rc.naks_received = v.at(10), c.cnp_received = v.at(11);
      c.failure = v.at(12), c.qpn = v.at(13);
      q.req_far = std::move(c);
    }
    f.started = abs(e.at("started")), f.finished = abs(e.at("finished"));
    f.r.rate_trace.clear();
    for (const auto& p : e.at("trace")) f.r.rate_trace.push_back({p.at(0), p.at(1), p.at(3), p.at(2)});
  }
  if (e.contains("resp") && e["resp"].size() == f.qps.size()) {
    f.resp_part = part;
    for (size_t qi = 0; qi < f.qps.size(); ++qi) {
      const auto& v = e["resp"][qi];
      engine::QpReport c;
      c.rc.delivered_bytes = v.at(0), c.rc.delivered_crc = v.at(1), c.rc.out_of_sequence = v.at(2), c.rc.duplicates = v.at(3);
      c.cnp_sent = v.at(4);
      f.qps[qi].resp_far = std::move(c);
    }
    f.delivered_trace = e.at("delivered").get<std::vector<std::pair<double, uint64_t>>>();
  }
  return ok();
}

// Every other machine's figures, traded when the traffic ended: the far ends of this
// machine's QPs, the flows it held no end of, when each job ended there, and its totals.
Status Session::take_far_ends(const std::vector<std::string>& parts, WorkloadRun& out) {
  const size_t me = parts_->index();
  for (auto& f : flows_) f.req_part = f.resp_part = me;
  std::vector<Nanos> job_end(jobs_.size(), -1);  // a streaming or ping-pong job ends with its last requester
  for (size_t ji = 0; ji < jobs_.size(); ++ji)
    if (has_requesters(jobs_[ji], flows_)) job_end[ji] = jobs_[ji].finished;
  for (size_t p = 0; p < parts.size(); ++p) {
    if (p == me) continue;
    const auto m = sys::json_depth(parts[p]) > sys::kMaxJsonDepth ? nlohmann::json(nlohmann::json::value_t::discarded)
                                                                    : nlohmann::json::parse(parts[p], nullptr, false);
    try {
      if (m.is_discarded()) throw std::runtime_error("not JSON (or nested deeper than " +
                                                     std::to_string(sys::kMaxJsonDepth) + " levels)");
      for (const auto& e : m.at("flows"))
        if (auto st = take_far_flow(e, p); !st) return st;
      const auto& jobs = m.at("jobs");
      for (size_t ji = 0; ji < jobs_.size() && ji < jobs.size(); ++ji) {
        if (!jobs[ji].at("requesters").get<bool>()) continue;
        job_end[ji] = std::max(job_end[ji], t0_ + jobs[ji].at("finished").get<Nanos>());
        if (jobs_[ji].spec.pingpong) {
          jobs_[ji].pongs = jobs[ji].at("pongs");
          jobs_[ji].rtts = jobs[ji].at("rtts").get<std::vector<double>>();
        }
      }
      merge_totals(out, m.at("totals"), p);
    } catch (const std::exception& e) {
      return error(Errc::kEnvironment, "part " + std::to_string(p) + " sent figures this machine cannot read: " + e.what());
    }
  }
  for (size_t ji = 0; ji < jobs_.size(); ++ji)
    if (!jobs_[ji].spec.lockstep && job_end[ji] >= 0) jobs_[ji].finished = job_end[ji];
  for (auto& f : flows_) {
    if (f.req_part == f.resp_part) continue;
    uint64_t total = 0;
    for (const auto& q : f.qps) total += resp_of(q).rc.delivered_bytes;
    fill_delivered(f, total);
  }
  return ok();
}

Result<WorkloadRun> Session::run() {
  double slowest = 1e300;
  Nanos last_start = 0;
  for (const auto& f : flows_) {
    // Lock-step jobs post one message per QP per round; the others per_qp messages.
    const Job& j = jobs_[f.job];
    if (here(f.spec.src)) total_bytes_ += f.spec.message * f.qps.size() * (j.spec.lockstep ? j.spec.rounds : f.spec.per_qp);
    slowest = std::min(slowest, std::min(line(f.spec.src), line(f.spec.dst)));
  }
  for (const auto& j : jobs_) last_start = std::max(last_start, j.start);
  if (parts_) {  // time 0 is when every machine is ready: the message's latency is the skew
    auto ready = parts_->exchange("traffic-start", "", o_.parts_timeout_ms, o_.cancel);
    if (!ready) return ready.error();
  }
  t0_ = next_trace_ = b_.clock().now();
  next_progress_ = t0_ + 1'000'000'000;
  if (o_.at_start) o_.at_start();
  // Everything through the slowest NIC, four times over, plus the last start and slack.
  // A QP with no path fails only after its timer ran (retry_cnt + 1) times: that much more.
  // The adaptive timer never backs off, but its round-trip estimate can raise it above its
  // first (a round trip through PFC-paused queues): four times the first leaves room.
  const Nanos retries = s_.hosts.rc.fixed ? Nanos(s_.hosts.rc.retry_cnt + 2) * s_.scale.emulate(s_.hosts.rc.period()).ns
                                          : Nanos(s_.hosts.rc.retry_cnt + 2) * 4 * max_rto_;
  const Nanos deadline = t0_ + last_start + Nanos(double(total_bytes_) * 8 / slowest * 4e9) + retries + 30'000'000'000;
  const auto cpu0 = sys::thread_cpu();
  const auto steal0 = sys::machine_steal();
  const std::vector<int> ours{getpid(), t_.agent_pid()};
  const auto other0 = sys::other_processes_cpu_ns(ours);
  const bool finished = b_.run([this] { return step(); }, deadline, parts_ ? parts_->fds() : std::vector<int>{});
  const Nanos t_end = b_.clock().now();
  const auto cpu1 = sys::thread_cpu();
  const auto steal1 = sys::machine_steal();
  const auto other1 = sys::other_processes_cpu_ns(ours);
  if (part_error_) return *part_error_;
  auto stop = [&](Error e) {
    if (parts_) parts_->abort(e.what);
    return e;
  };
  WorkloadRun out;
  out.cancelled = o_.cancel && o_.cancel->load();
  if (out.cancelled) out.stopped = "cancelled";
  else if (!finished)
    out.stopped = "workloads did not finish within " + std::to_string((deadline - t0_) / 1'000'000'000) +
                  " s (four times what the bytes need at the slowest line rate, plus the RC timers' longest retry chain "
                  "and 30 s)";
  // A split run's parts cannot trade figures once one stopped; alone, what was measured is reported.
  stopped_ = !out.stopped.empty();
  if (stopped_ && parts_) return stop(error(out.cancelled ? Errc::kEnvironment : Errc::kTestbedFault, out.stopped));
  out.seconds = double(t_end - t0_) / 1e9;
  out.t0_ns = t0_;
  // With several engine threads, the one that waited longest for a CPU: its hosts fall
  // behind first (the others' shares would hide it in a sum or a mean).
  std::vector<sys::ThreadCpu> threads = b_.run_cpu();
  if (threads.empty() && cpu0 && cpu1) threads.push_back({cpu1->on_cpu_ns - cpu0->on_cpu_ns, cpu1->waiting_ns - cpu0->waiting_ns});
  if (!threads.empty() && t_end > t0_) {
    const auto worst = std::max_element(threads.begin(), threads.end(),
                                        [](const auto& a, const auto& b) { return a.waiting_ns < b.waiting_ns; });
    out.engine_cpu_busy = double(worst->on_cpu_ns) / double(t_end - t0_);
    out.engine_cpu_waiting = double(worst->waiting_ns) / double(t_end - t0_);
    out.engine_threads = threads.size();
  }
  if (steal0 && steal1 && t_end > t0_ && steal1->steal_ns >= steal0->steal_ns)
    out.machine_steal = double(steal1->steal_ns - steal0->steal_ns) / (double(t_end - t0_) * steal1->cpus);
  if (steal1) out.machine_cpus = int(steal1->cpus);
  if (other0 && other1 && steal1 && t_end > t0_)
    out.machine_other = double(*other1 > *other0 ? *other1 - *other0 : 0) / (double(t_end - t0_) * steal1->cpus);
  totals(out);
  if (parts_) {  // the far ends of this machine's QPs, and the flows it holds no end of
    auto all = parts_->exchange("traffic-figures", my_ends(out).dump(), o_.parts_timeout_ms, o_.cancel);
    if (!all) return all.error();
    if (auto st = take_far_ends(*all, out); !st) return st.error();
  }
  for (auto& f : flows_) out.flows.push_back(flow_result(f));
  for (const auto& j : jobs_) out.workloads.push_back(workload_result(j, out));
  return out;
}

}  // namespace

Result<WorkloadRun> run_workloads(const model::Scenario& s, const fabric::KernelPlan& plan, fabric::Testbed& t,
                                  const RunnerOptions& o) {
  const Ranks ranks(plan);
  auto jobs = plan_jobs(s, ranks);
  if (!jobs) return jobs.error();
  const BackendKind* kind = backends().find(s.hosts.engine);
  if (!kind) return error(Errc::kBadInput, "hosts.engine '" + s.hosts.engine + "' is not built (built: " + backends().list() + ")");
  auto backend = kind->make(s, s.hosts.dcqcn);
  if (!backend) return backend.error();
  Session session(s, ranks, t, **backend, o);
  if (auto st = session.build(std::move(*jobs)); !st) return st.error();
  return session.run();
}

}  // namespace rocelab::workload
