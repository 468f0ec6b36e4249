// A Testbed without a kernel: ports from a scenario's plan, operations recorded and applied
// to plain state, so features above fabric/ (fault timelines, sinks) run in unit tests
// without root, on a fake clock.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "fabric/kernel_plan.h"
#include "fabric/testbed.h"

namespace rocelab::testing {

class FakeTestbed final : public fabric::Testbed {
 public:
  explicit FakeTestbed(const model::Scenario& s) : instance_(s.name) {
    const auto plan = fabric::plan_kernel(s);
    for (const auto& np : plan.nodes) {
      fabric::NodeInfo n{np.node, np.netns, np.host, {}};
      for (const auto& p : np.ports) n.ports.push_back({p.ifname, p.ifindex, uint32_t(p.slot)});
      nodes_.push_back(std::move(n));
    }
  }
  sys::FakeClock clock_;
  std::map<uint32_t, double> loss;                   // slot -> probability in force
  std::map<uint32_t, double> corrupt;                // slot -> corruption probability in force
  std::map<std::pair<uint32_t, uint32_t>, bool> paused;  // (slot, prio)
  std::map<uint32_t, bool> link_up;                  // slot -> admin state (absent: up)
  std::vector<std::string> log;                      // every operation and undo, in order
  std::optional<fabric::AgentFigures> figures;

  const std::string& instance() const override { return instance_; }
  const std::vector<fabric::NodeInfo>& nodes() const override { return nodes_; }
  const sys::Clock& clock() const override { return clock_; }
  int netns_fd(size_t) const override { return -1; }
  std::vector<fabric::PortStats> stats;  // what counters() answers
  Result<std::vector<fabric::PortStats>> counters(const std::vector<fabric::PortRef>&) override { return stats; }
  // sample(): what `sampled` makes of its n-th call (none: no ports); each call advances the
  // clock by `sample_step_ns` first.
  std::function<std::vector<fabric::PortStats>(int)> sampled;
  int64_t sample_step_ns = 1'000'000;
  int sample_calls = 0;
  Result<std::vector<fabric::PortStats>> sample(bool) override {
    clock_.advance(sample_step_ns);
    return sampled ? sampled(sample_calls++) : std::vector<fabric::PortStats>{};
  }
  Result<std::optional<fabric::AgentFigures>> agent_figures() override { return figures; }

  Result<fabric::Change> set_loss(const fabric::PortRef& p, double probability, uint64_t seed) override {
    return set_draw(loss, "loss", p, probability, seed);
  }
  Result<fabric::Change> set_corruption(const fabric::PortRef& p, double probability, uint64_t seed) override {
    return set_draw(corrupt, "corruption", p, probability, seed);
  }
  Result<fabric::Change> set_draw(std::map<uint32_t, double>& in_force, std::string what, const fabric::PortRef& p,
                                  double probability, uint64_t seed) {
    const double before = in_force.count(p.slot) ? in_force[p.slot] : 0;
    in_force[p.slot] = probability;
    log.push_back(what + " " + name(p) + " " + std::to_string(probability) + " seed " + std::to_string(seed));
    return fabric::Change(what, [this, &in_force, what, p, before] {
      in_force[p.slot] = before;
      log.push_back("undo " + what + " " + name(p) + " -> " + std::to_string(before));
      return ok();
    });
  }
  Result<fabric::Change> set_pause(const fabric::PortRef& p, uint32_t prio, bool on) override {
    const bool before = paused[{p.slot, prio}];
    paused[{p.slot, prio}] = on;
    log.push_back(std::string(on ? "pause " : "resume ") + name(p));
    return fabric::Change("pause", [this, p, prio, before] {
      paused[{p.slot, prio}] = before;
      log.push_back("undo pause " + name(p));
      return ok();
    });
  }
  std::function<int64_t()> pause_clock(const fabric::PortRef&, uint32_t) override {
    return [] { return int64_t{0}; };
  }
  Result<fabric::Change> set_link(const fabric::PortRef& p, bool up) override {
    const bool before = link_up.count(p.slot) ? link_up[p.slot] : true;
    link_up[p.slot] = up;
    log.push_back(std::string("link ") + (up ? "up " : "down ") + name(p));
    return fabric::Change("link", [this, p, before] {
      link_up[p.slot] = before;
      log.push_back("undo link " + name(p));
      return ok();
    });
  }

  // A link's ends share its down count (slot -> faults holding it down), as the real one.
  std::map<uint32_t, int> link_faults;
  Result<fabric::Change> fail_link(const fabric::PortRef& p) override {
    if (link_faults[p.slot]++ == 0) ++path_changes_;
    log.push_back("fail link " + name(p));
    return fabric::Change("fail link", [this, p] {
      if (--link_faults[p.slot] == 0) ++path_changes_;
      log.push_back("undo fail link " + name(p));
      return ok();
    });
  }
  uint64_t path_changes() const override { return path_changes_; }
  uint64_t link_downed(const fabric::PortRef& p) const override {
    auto it = link_faults.find(p.slot);
    return it == link_faults.end() ? 0 : uint64_t(it->second > 0);
  }
  std::map<uint32_t, uint32_t> mtu;  // slot -> MTU its side was given
  Result<fabric::Change> mtu_mismatch(const fabric::PortRef& p, uint32_t m) override {
    const uint32_t before = mtu[p.slot];
    mtu[p.slot] = m;
    return fabric::Change("mtu", [this, p, before] {
      mtu[p.slot] = before;
      return ok();
    });
  }
  std::map<uint32_t, int> storms;  // slot -> storms in force
  Result<fabric::Change> pause_storm(const fabric::PortRef& p, uint8_t vector, uint16_t quanta, double fps,
                                     uint64_t frames) override {
    ++storms[p.slot];
    log.push_back("storm " + name(p) + " vector " + std::to_string(vector) + " quanta " + std::to_string(quanta) +
                  " rate " + std::to_string(int(fps)) + " frames " + std::to_string(frames));
    return fabric::Change("storm", [this, p] {
      --storms[p.slot];
      log.push_back("storm over " + name(p));
      return ok();
    });
  }
  std::map<uint32_t, double> slow;  // slot -> drain fraction in force
  Result<fabric::Change> slow_receiver(const fabric::PortRef& p, double fraction) override {
    const double before = slow[p.slot];
    slow[p.slot] = fraction;
    log.push_back("slow receiver " + name(p));
    return fabric::Change("slow", [this, p, before] {
      slow[p.slot] = before;
      return ok();
    });
  }
  std::map<uint32_t, std::vector<int>> misconfigured;  // slot -> misconfigurations in force
  Result<fabric::Change> misconfigure(const fabric::PortRef& p, fabric::Misconfig m, uint32_t dscp) override {
    misconfigured[p.slot].push_back(int(m));
    log.push_back("misconfigure " + name(p) + " " + std::to_string(int(m)) + " dscp " + std::to_string(dscp));
    return fabric::Change("misconfigure", [this, p] {
      misconfigured[p.slot].pop_back();
      log.push_back("undo misconfigure " + name(p));
      return ok();
    });
  }

 private:
  uint64_t path_changes_ = 0;
  std::string instance_;
  std::vector<fabric::NodeInfo> nodes_;
};

}  // namespace rocelab::testing
