#include "run/faults.h"

#include <algorithm>
#include <chrono>

#include "fabric/stats.h"

namespace rocelab::run {

std::string faults_not_built(const model::Scenario& s) {
  for (const auto& f : s.faults)
    if (f.type != "loss")
      return "fault type '" + f.type + "' is not built yet (loss is)";
  return {};
}

FaultTimeline::FaultTimeline(const model::Scenario& s, const std::string& instance) : s_(s), instance_(instance) {
  const double d = s.scale.factor();
  for (size_t i = 0; i < s.faults.size(); ++i) {
    const auto& f = s.faults[i];
    const double at = double(f.at.ns) / 1e9 * d;
    events_.push_back({at, i, true});
    if (f.duration) events_.push_back({at + double(f.duration->ns) / 1e9 * d, i, false});
  }
  std::stable_sort(events_.begin(), events_.end(), [](const Event& a, const Event& b) { return a.wall_s < b.wall_s; });
}

FaultTimeline::~FaultTimeline() { stop(); }

void FaultTimeline::start() {
  if (!events_.empty() && !thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

void FaultTimeline::wait_all() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return stop_ || done_ == events_.size(); });
}

void FaultTimeline::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

nlohmann::ordered_json FaultTimeline::record() const {
  std::lock_guard lk(mu_);
  return record_;
}

bool FaultTimeline::failed() const {
  std::lock_guard lk(mu_);
  return failed_;
}

void FaultTimeline::loop() {
  const auto t0 = std::chrono::steady_clock::now();
  for (const Event& e : events_) {
    std::unique_lock lk(mu_);
    if (cv_.wait_until(lk, t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(e.wall_s)),
                       [&] { return stop_; }))
      return;
    lk.unlock();
    const auto& f = s_.faults[e.fault];
    std::string why;
    // Each fault draws from its own stream: the scenario's seed and the fault's index.
    const double p = e.begin ? f.probability.value_or(0) : 0;
    const bool ok = fabric::set_port_loss(instance_, f.target, p, s_.seed ^ (0x6c6f7373ull * (e.fault + 1)), why);
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    lk.lock();
    nlohmann::ordered_json r{{"t_s", t / s_.scale.factor()}, {"fault", e.fault}, {"type", f.type},
                             {"target", f.target}, {"action", e.begin ? "start" : "end"}, {"ok", ok}};
    if (e.begin) r["probability"] = p;
    if (!ok) {
      r["error"] = why;
      failed_ = true;
    }
    record_.push_back(std::move(r));
    ++done_;
    lk.unlock();
    cv_.notify_all();
  }
}

}  // namespace rocelab::run
