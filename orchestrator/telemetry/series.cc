// `series`: time series of every port x priority and every switch's buffer, sampled while
// the traffic runs, into CSV files users load without us (README "Time series"), and the
// HPCC simulator's qlen.txt. Each sample reads the counter map (a copy, no syscall), probes
// the queues that may hold packets for their exact depth, and takes each queue's peak since
// the sample before, so the series' maximum is the counters' queue_max, not a lucky sample.
#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <time.h>

#include "telemetry/sink.h"

namespace rocelab::telemetry {

namespace {

constexpr double kDefaultPhysicalS = 10e-6;        // a few packets' time at 100G
constexpr int64_t kWallFloorNs = 5'000'000;         // the default's floor: the sampler stays light
constexpr int64_t kWallMinNs = 1'000'000;           // what an explicit interval is raised to
constexpr size_t kRowsMax = 2'000'000;              // then sampling stops (and says so)

struct Prev {
  rl_counters c{};
  uint64_t paused_ns = 0;
  bool shown = false;  // the last sample wrote a row (the next writes one to show the return to 0)
};

uint64_t paused_at(const rl_counters& c, uint64_t now) {
  return c.paused_total_ns + (c.paused_since_ns && now > c.paused_since_ns ? now - c.paused_since_ns : 0);
}

uint64_t drops(const rl_counters& c) {
  uint64_t n = 0;
  for (size_t r = 0; r < size_t(RL_DROP__USED); ++r) n += c.drops[r];
  return n;
}

class SeriesRecorder final : public Recorder {
 public:
  SeriesRecorder(const Start& s, SampleInterval iv) : tb_(s.testbed), iv_(iv), d_(s.scenario.scale.factor()) {
    for (const auto& n : tb_.nodes()) host_[n.name] = n.host;
    ports_ = "t_s,node,port,prio,depth_bytes,peak_bytes,tx_gbps,rx_gbps,ecn_marked,pfc_tx,pfc_rx,paused,paused_s,drops";
    for (size_t r = 0; r < size_t(RL_DROP__USED); ++r) ports_ += std::string(",drops_") + rl_drop_names[r];
    ports_ += "\n";
    switches_ = "t_s,node,buffer_bytes,peak_bytes\n";
    sample();  // the baseline every delta starts from
    thread_ = std::thread([this] { loop(); });
  }
  ~SeriesRecorder() override { stop(); }

  void stop() override {
    {
      std::lock_guard lk(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    sample();  // the traffic's end
  }

  // Text with times relative to `t0_ns` (the traffic's start on the Testbed clock).
  std::string ports_csv(int64_t t0) const { return retime(ports_, t0); }
  std::string switches_csv(int64_t t0) const { return retime(switches_, t0); }
  size_t samples() const { return samples_; }
  double cpu_seconds() const { return cpu_s_; }  // the sampling thread's, once stopped
  size_t rows() const { return rows_; }
  const std::string& failure() const { return failure_; }
  bool capped() const { return capped_; }

  // qlen.txt: HPCC's monitor_buffer histogram of each switch port's egress bytes (all
  // priorities), one count per sample in 1 KB buckets: "time: T" then "node ifIdx n0 n1 ...".
  std::string qlen_txt(const fabric::KernelPlan& plan, int64_t t0) const {
    std::map<std::string, size_t> index;
    for (size_t x = 0; x < plan.nodes.size(); ++x) index[plan.nodes[x].node] = x;
    std::string out = fmt::format("time: {}\n", uint64_t(std::max<double>(0, double(last_ns_ - t0) / d_)));
    for (const auto& [key, hist] : qlen_) {
      auto it = index.find(key.first);
      if (it == index.end()) continue;
      const auto& ports = plan.nodes[it->second].ports;
      size_t ifidx = 0;
      for (size_t i = 0; i < ports.size(); ++i)
        if (ports[i].ifname == key.second) ifidx = i + 1;
      out += fmt::format("{} {}", it->second, ifidx);
      for (uint32_t n : hist) out += fmt::format(" {}", n);
      out += "\n";
    }
    return out;
  }

 private:
  void loop() {
    struct CpuClock {  // the sampler thread's own CPU time, what the run pays for its series
      double& out;
      ~CpuClock() {
        timespec ts{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        out = double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
      }
    } cpu{cpu_s_};
    std::unique_lock lk(mu_);
    auto next = std::chrono::steady_clock::now();
    while (!stopped_) {
      next += std::chrono::nanoseconds(iv_.wall_ns);
      if (cv_.wait_until(lk, next, [&] { return stopped_; })) break;
      const auto now = std::chrono::steady_clock::now();
      if (now > next + std::chrono::nanoseconds(iv_.wall_ns)) next = now;  // fell behind: no burst of catch-up samples
      lk.unlock();
      const bool go_on = sample();
      lk.lock();
      if (!go_on) break;
    }
  }

  // One sample; false once sampling must stop (an error, or the row cap).
  bool sample() {
    if (!failure_.empty() || capped_) return false;
    auto ports = tb_.sample(true);
    const int64_t now = tb_.clock().now();
    if (!ports) {
      failure_ = ports.error().what;
      return false;
    }
    const double dt_ns = first_ ? 0 : double(now - last_ns_);
    std::map<std::string, std::pair<uint64_t, uint64_t>> buffer;  // switch -> (bytes now, sum of peaks)
    for (const auto& ps : *ports) {
      const bool host = host_[ps.node];
      uint64_t port_bytes = 0;
      for (uint32_t prio = 0; prio < RL_NUM_PRIO; ++prio) {
        const fabric::PrioStats& s = ps.prio[prio];
        const rl_counters& c = s.c;
        Prev& p = prev_[{ps.node + ":" + ps.port, prio}];
        const uint64_t depth = s.depth_bytes, peak = std::max<uint64_t>(c.depth_peak, depth);
        const uint64_t paused = paused_at(c, uint64_t(now));
        port_bytes += depth;
        if (!host) {
          buffer[ps.node].first += depth;
          buffer[ps.node].second += peak;
        }
        if (!first_) {
          const uint64_t dtx = c.tx_bytes - p.c.tx_bytes, drx = c.rx_bytes - p.c.rx_bytes;
          const uint64_t decn = c.ecn_marked - p.c.ecn_marked, dptx = c.pfc_tx - p.c.pfc_tx, dprx = c.pfc_rx - p.c.pfc_rx;
          // A pause's end is stamped when the agent saw it, which can be before this sampler's
          // last reading of the open pause: the clock never runs back in the series.
          const uint64_t dpaused = paused > p.paused_ns ? paused - p.paused_ns : 0, ddrop = drops(c) - drops(p.c);
          const bool active = depth || peak || dtx || drx || decn || dptx || dprx || dpaused || ddrop || c.paused_since_ns;
          if ((active || p.shown) && dt_ns > 0) {
            // Rates are physical: emulated bytes over the interval's physical length (wall / D).
            const double gbps = 8.0 * d_ / dt_ns;
            ports_ += fmt::format("{},{},{},{},{},{},{:.4f},{:.4f},{},{},{},{},{:.9f},{}", now, ps.node, ps.port, prio, depth,
                                  peak, double(dtx) * gbps, double(drx) * gbps, decn, dptx, dprx,
                                  c.paused_since_ns ? 1 : 0, double(dpaused) / 1e9 / d_, ddrop);
            for (size_t r = 0; r < size_t(RL_DROP__USED); ++r) ports_ += fmt::format(",{}", c.drops[r] - p.c.drops[r]);
            ports_ += "\n";
            ++rows_;
          }
          p.shown = active;
        }
        p.c = c;
        p.paused_ns = std::max(p.paused_ns, paused);
      }
      if (!host) {
        auto& hist = qlen_[{ps.node, ps.port}];
        const size_t kb = port_bytes / 1000;
        if (hist.size() < kb + 1) hist.resize(kb + 1);
        ++hist[kb];
      }
    }
    if (!first_)
      for (const auto& [node, b] : buffer) {
        switches_ += fmt::format("{},{},{},{}\n", now, node, b.first, b.second);
        ++rows_;
      }
    first_ = false;
    last_ns_ = now;
    ++samples_;
    if (rows_ >= kRowsMax) capped_ = true;
    return !capped_;
  }

  // The sampler writes raw Testbed-clock ns in the first column; the files carry physical
  // seconds from the traffic's start.
  std::string retime(const std::string& text, int64_t t0) const {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    bool header = true;
    while (pos < text.size()) {
      size_t eol = text.find('\n', pos);
      if (eol == std::string::npos) eol = text.size();
      std::string_view line(text.data() + pos, eol - pos);
      if (header) {
        out.append(line);
        header = false;
      } else {
        const size_t comma = line.find(',');
        const int64_t t = std::stoll(std::string(line.substr(0, comma)));
        out += fmt::format("{:.9f}", double(t - t0) / 1e9 / d_);
        out.append(line.substr(comma));
      }
      out += '\n';
      pos = eol + 1;
    }
    return out;
  }

  fabric::Testbed& tb_;
  const SampleInterval iv_;
  const double d_;
  std::map<std::string, bool> host_;
  std::map<std::pair<std::string, uint32_t>, Prev> prev_;
  std::map<std::pair<std::string, std::string>, std::vector<uint32_t>> qlen_;
  std::string ports_, switches_, failure_;
  size_t samples_ = 0, rows_ = 0;
  int64_t last_ns_ = 0;
  bool first_ = true, capped_ = false;
  double cpu_s_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
};

}  // namespace

SampleInterval sample_interval(const model::Scenario& s) {
  const double d = s.scale.factor();
  int64_t wall;
  if (s.telemetry.interval) wall = std::max<int64_t>(int64_t(double(s.telemetry.interval->ns) * d), kWallMinNs);
  else wall = std::max<int64_t>(int64_t(kDefaultPhysicalS * 1e9 * d), kWallFloorNs);
  return {wall, double(wall) / 1e9 / d};
}

Sink series_sink() {
  Sink k{"series", "time series of every port x priority and every switch's buffer, sampled while the traffic runs",
         [](Collect& c) -> Status {
           auto* r = dynamic_cast<SeriesRecorder*>(c.recorder);
           if (!r || !c.files) return ok();
           r->stop();
           (*c.files)["series-ports.csv"] = r->ports_csv(c.t0_ns);
           (*c.files)["series-switches.csv"] = r->switches_csv(c.t0_ns);
           (*c.files)["qlen.txt"] = r->qlen_txt(c.plan, c.t0_ns);
           const SampleInterval iv = sample_interval(c.scenario);
           c.record["samples"] = r->samples();
           c.record["rows"] = r->rows();
           c.record["cpu_seconds"] = r->cpu_seconds();
           c.record["interval_s"] = iv.physical_s;
           c.record["interval_wall_s"] = double(iv.wall_ns) / 1e9;
           c.metrics["series_samples"] = model::MetricValue{model::MetricKind::kScalar, double(r->samples()), {}};
           if (!r->failure().empty())
             c.notes.push_back("time series stopped early (" + r->failure() + "): the files hold what came before");
           if (r->capped())
             c.notes.push_back(fmt::format("time series stopped at {} rows: set a longer telemetry.interval", r->rows()));
           if (c.scenario.telemetry.interval && iv.physical_s * 1e9 > double(c.scenario.telemetry.interval->ns) * 1.0001)
             c.notes.push_back(fmt::format("telemetry.interval raised to {:.3g} s physical ({} ms of wall clock, the "
                                           "sampler's floor)", iv.physical_s, kWallMinNs / 1'000'000));
           return ok();
         }};
  k.start = [](const Start& s) -> std::unique_ptr<Recorder> {
    if (!s.scenario.telemetry.series) return nullptr;
    return std::make_unique<SeriesRecorder>(s, sample_interval(s.scenario));
  };
  return k;
}

}  // namespace rocelab::telemetry
