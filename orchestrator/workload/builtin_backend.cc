// `builtin`: the built-in RoCEv2 engine (engine/): real wire format, RC transport and DCQCN
// on UDP sockets inside the hosts' namespaces, its hosts shared out among threads. Runs on any kernel.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "sys/cpu.h"
#include "sys/netns.h"
#include "workload/backend.h"

namespace rocelab::workload {

namespace {

// The engine's threads: ROCELAB_ENGINE_THREADS, else one a core but one. That core is the PFC
// agent's, the sampler's and the forwarding's the engine's sends do not carry: with an engine
// thread on each of 2 cores a fat-tree all-to-all waited for a CPU 38 % of the time it wanted
// one (an invalid run). Two threads carry 1.75x what one does (bench/engine_threads.py, two
// write_bw pairs on 2 cores). Hosts, not NICs, are what a thread serves.
size_t thread_count() {
  if (const char* e = std::getenv("ROCELAB_ENGINE_THREADS"); e && *e) {
    char* end = nullptr;
    const long n = std::strtol(e, &end, 10);
    if (end && !*end && n >= 1 && n <= 64) return size_t(n);
  }
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return size_t(std::clamp<long>(cores - 1, 1, 64));
}

// Hosts are partitioned across engines (shards), each driven by its own thread; one engine
// alone runs exactly as before (Engine::run). Nothing on the packet path is shared: each
// shard has its own sockets, QPs and pacers, and packets between shards go through the
// fabric as any packet does. The runner's step (completions in, new messages posted) runs
// on shard 0's thread while it holds every shard's lock, so it sees each engine between
// turns; a shard with completions for it wakes shard 0, and shards it posted to are woken.
class Builtin final : public Backend {
 public:
  Builtin(const engine::DcqcnParams& emulated, size_t threads, bool agent)
      : dcqcn_(emulated), threads_(threads), agent_(agent) {}
  Result<size_t> add_endpoint(const EndpointSpec& e) override {
    // In blocks of neighbouring hosts (a leaf's, say): round robin put every sender of
    // pairs listed as (1 -> 2, 3 -> 4) on one thread, and the softirq forwarding that goes
    // with sending on its core.
    const size_t s = std::min(threads_ - 1, std::min(e.host, e.hosts - 1) * threads_ / std::max<size_t>(e.hosts, 1));
    while (shards_.size() <= s) shards_.push_back(std::make_unique<Shard>(dcqcn_, clock_));
    std::string why;
    auto id = shards_[s]->eng.add_endpoint({e.name, e.netns_fd, e.addr, e.line_bps, e.halted}, why);
    if (!id) return error(Errc::kEnvironment, why);
    eps_.push_back({s, *id});
    shards_[s]->global_ep.push_back(eps_.size() - 1);  // the engine numbers its endpoints 0, 1, ...
    return eps_.size() - 1;
  }
  Result<size_t> add_qp(size_t ep, const QpSpec& q) override {
    const auto [s, local] = eps_.at(ep);
    std::string why;
    auto id = shards_[s]->eng.add_qp(local, q.qpn, q.remote_addr, q.remote_qpn, q.sport, q.send_psn, q.expect_psn,
                                     q.rc, why, q.tos, q.paused);
    if (!id) return error(Errc::kEnvironment, why);
    qps_.push_back({s, *id});
    return qps_.size() - 1;
  }
  void register_memory(size_t qp, uint32_t rkey, uint64_t va, std::span<uint8_t> m) override {
    rc(qp).register_memory(rkey, va, m);
  }
  void post_write(size_t qp, Buffer d, uint64_t va, uint32_t rkey) override {
    rc(qp).post_write(std::move(d), va, rkey);
    posted(qp);
  }
  void post_send(size_t qp, Buffer d) override {
    rc(qp).post_send(std::move(d));
    posted(qp);
  }
  std::vector<engine::Completion> poll(size_t qp) override { return rc(qp).take_completions(); }
  std::optional<std::vector<uint8_t>> take_received(size_t qp) override {
    auto& r = rc(qp).received();
    if (r.empty()) return std::nullopt;
    auto m = std::move(r.front());
    r.pop_front();
    return m;
  }
  bool failed(size_t qp) const override { return rc(qp).failed(); }
  uint32_t mtu(size_t qp) const override { return rc(qp).config().mtu; }
  bool run(const std::function<bool()>& step, sys::Nanos deadline, const std::vector<int>& wake = {}) override;
  QpCounters qp_counters(size_t qp) const override {
    auto r = shards_[qps_.at(qp).first]->eng.qp_report(qps_.at(qp).second);
    r.endpoint = shards_[qps_.at(qp).first]->global_ep.at(r.endpoint);
    return r;
  }
  EndpointCounters endpoint_counters(size_t ep) const override {
    return shards_[eps_.at(ep).first]->eng.endpoint_stats(eps_.at(ep).second);
  }
  size_t qp_count() const override { return qps_.size(); }
  const sys::Clock& clock() const override { return clock_; }

 private:
  struct Shard {
    Shard(const engine::DcqcnParams& d, const sys::Clock& c) : eng(d, c), wake(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
    engine::Engine eng;
    std::mutex mu;         // held while its thread turns, and by the step
    sys::Fd wake;          // an eventfd its thread waits on besides its sockets
    bool posted = false;   // the step gave it work: wake it after the step
    std::atomic<bool> told{false};  // it woke shard 0 for news since the last step
    std::vector<size_t> global_ep;  // the engine's endpoint id -> the backend's
  };
  engine::RcQp& rc(size_t qp) { return shards_[qps_.at(qp).first]->eng.qp(qps_.at(qp).second); }
  const engine::RcQp& rc(size_t qp) const { return shards_[qps_.at(qp).first]->eng.qp(qps_.at(qp).second); }
  void posted(size_t qp) { shards_[qps_.at(qp).first]->posted = true; }
  static void poke(Shard& s) {
    const uint64_t one = 1;
    (void)!::write(s.wake.get(), &one, sizeof one);
  }
  void serve(size_t i, const std::function<bool()>& step, sys::Nanos deadline, std::atomic<int>& outcome,
             const std::vector<int>& wake);
  std::vector<sys::ThreadCpu> run_cpu() const override { return run_cpu_; }

  sys::MonotonicClock clock_;  // declared before the engines, which keep a reference
  engine::DcqcnParams dcqcn_;
  size_t threads_;
  bool agent_;  // a PFC agent runs beside the engine (its core is kept for it)
  std::atomic<bool> stepping_{false};  // shard 0 wants every lock for the step
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<std::pair<size_t, size_t>> eps_, qps_;  // backend id -> (shard, the engine's id)
  std::vector<sys::ThreadCpu> run_cpu_;  // per shard's thread, over the last run()
};

// The calling thread's CPU accounting across `body`, written to `out` (left zero where the
// kernel keeps no schedstat).
void accounted(sys::ThreadCpu& out, const std::function<void()>& body) {
  const auto c0 = sys::thread_cpu();
  body();
  if (const auto c1 = sys::thread_cpu(); c0 && c1) out = {c1->on_cpu_ns - c0->on_cpu_ns, c1->waiting_ns - c0->waiting_ns};
}

// One shard's thread: turns until the step says done (shard 0 runs it), the deadline passes,
// or another shard ended the run (outcome set: 1 done, 0 deadline).
constexpr sys::Nanos kStepEvery = 1'000'000;
void Builtin::serve(size_t i, const std::function<bool()>& step, sys::Nanos deadline, std::atomic<int>& outcome,
                    const std::vector<int>& wake) {
  Shard& me = *shards_[i];
  std::vector<pollfd> fds;
  for (int fd : me.eng.rx_fds()) fds.push_back({fd, POLLIN, 0});
  const size_t first_wake = fds.size();
  if (i == 0)  // the step's own news
    for (int fd : wake) fds.push_back({fd, POLLIN, 0});
  const size_t last_wake = fds.size();
  fds.push_back({me.wake.get(), POLLIN, 0});
  bool woke = false;
  auto finish = [&](int how) {
    int none = -1;
    outcome.compare_exchange_strong(none, how);
    for (auto& s : shards_) poke(*s);
  };
  sys::Nanos last_step = 0;  // the first turn steps (the clock is far past 0)
  while (outcome.load(std::memory_order_relaxed) < 0) {
    bool news = false;
    // A waiting step goes first: a mutex hands over unfairly, and a shard that takes its lock
    // again right after each turn kept the step (and shard 0's own hosts) waiting for many.
    while (i != 0 && stepping_.load(std::memory_order_acquire)) std::this_thread::yield();
    {
      std::lock_guard lk(me.mu);
      me.eng.turn();
      news = me.eng.has_news();
    }
    if (i != 0 && news && !me.told.exchange(true)) poke(*shards_[0]);
    // The step stops every shard, so it runs when there is news for it (completions,
    // messages), or each kStepEvery for what comes with time (a job's start, the samples).
    bool step_now = i == 0 && (news || woke || clock_.now() - last_step >= kStepEvery);
    woke = false;
    for (size_t k = 1; i == 0 && !step_now && k < shards_.size(); ++k) step_now = shards_[k]->told.load();
    if (step_now) {
      last_step = clock_.now();
      bool done = false;
      stepping_.store(true, std::memory_order_release);
      {
        std::vector<std::unique_lock<std::mutex>> all;
        for (auto& s : shards_) all.emplace_back(s->mu);
        for (auto& s : shards_) s->told = false;
        done = step();
        for (size_t k = 1; k < shards_.size(); ++k)
          if (std::exchange(shards_[k]->posted, false)) poke(*shards_[k]);
        me.posted = false;
      }
      stepping_.store(false, std::memory_order_release);
      if (done) return finish(1);
    }
    const sys::Nanos now = clock_.now();
    if (now >= deadline) return finish(0);
    sys::Nanos due;
    {
      std::lock_guard lk(me.mu);
      due = me.eng.next_due(now);
    }
    const sys::Nanos wait = std::min(due, deadline) - now;
    if (wait > 20'000) {  // below that, sleeping costs more than it saves (as Engine::run)
      timespec ts{time_t(wait / 1'000'000'000), long(wait % 1'000'000'000)};
      ppoll(fds.data(), fds.size(), &ts, nullptr);
    }
    if (fds.back().revents & POLLIN) {
      uint64_t n;
      (void)!::read(me.wake.get(), &n, sizeof n);
    }
    for (size_t k = first_wake; k < last_wake; ++k) woke = woke || (fds[k].revents & POLLIN);
  }
}

bool Builtin::run(const std::function<bool()>& step, sys::Nanos deadline, const std::vector<int>& wake) {
  if (shards_.empty()) shards_.push_back(std::make_unique<Shard>(dcqcn_, clock_));
  run_cpu_.assign(shards_.size(), {});
  // The PFC agent's core, which the engine's threads keep off while they leave it one
  // (ROCELAB_ENGINE_THREADS asking for every core gets every core); without PFC there is no
  // agent, and every core is the engine's.
  const int agent = agent_ && long(shards_.size()) < sysconf(_SC_NPROCESSORS_ONLN) ? sys::agent_core() : -1;
  if (shards_.size() == 1) {
    sys::AvoidCore off(agent);
    sys::PreciseTimers on_time;
    bool done = false;
    accounted(run_cpu_[0], [&] { done = shards_[0]->eng.run(step, deadline, wake); });
    return done;
  }
  std::atomic<int> outcome{-1};
  std::vector<std::thread> others;
  for (size_t i = 1; i < shards_.size(); ++i)
    others.emplace_back([&, i] {
      sys::AvoidCore off(agent);
      sys::PreciseTimers on_time;
      accounted(run_cpu_[i], [&] { serve(i, step, deadline, outcome, wake); });
    });
  sys::AvoidCore off(agent);
  sys::PreciseTimers on_time;
  accounted(run_cpu_[0], [&] { serve(0, step, deadline, outcome, wake); });
  for (auto& t : others) t.join();

  return outcome.load() == 1;
}

}  // namespace

BackendKind builtin_backend() {
  return {"builtin", "the built-in RoCEv2 engine (wire format, RC, DCQCN), on any kernel",
          [](const model::Scenario& s, std::string_view dcqcn) -> Result<std::unique_ptr<Backend>> {
            auto preset = engine::DcqcnParams::preset_named(std::string(dcqcn));
            if (!preset) return error(Errc::kBadInput, "unknown DCQCN preset '" + std::string(dcqcn) + "' (paper, nvidia, ns3, off)");
            const bool agent = s.qos.pfc_enabled && s.qos.pfc_mask != 0;  // PFC to honour: the agent runs
            return std::unique_ptr<Backend>(
                new Builtin(preset->with(s.hosts.dcqcn_set).emulated(s.scale), thread_count(), agent));
          }};
}

}  // namespace rocelab::workload
