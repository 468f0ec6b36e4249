// The Testbed of a fabric on this machine: either brought up here (up: this handle owns it
// and down() takes it away) or left running by `rocelab up` (attach: found from its state
// file; `rocelab down` takes it away). Maps are opened once; operations run inside the
// node's namespace and each records the undo of exactly its own change.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bpf/fabric_maps.h"
#include "fabric/realiser.h"
#include "fabric/testbed.h"
#include "model/scenario.h"

namespace rocelab::fabric {

class LocalTestbed final : public Testbed {
 public:
  static Result<std::unique_ptr<LocalTestbed>> up(const model::Scenario& s, const UpOptions& o);
  static Result<std::unique_ptr<LocalTestbed>> attach(const std::string& instance);
  ~LocalTestbed() override;

  // Takes a fabric this handle brought up away (an attached one is `rocelab down`'s). A
  // fabric brought up here also goes when the handle does (an error, an exception), unless
  // keep_running() said it is to outlive this process (`rocelab up`).
  Status down();
  void keep_running() { keep_ = true; }
  // The fabric brought up here (plan, notes, timings); null when attached.
  const Fabric* fabric() const { return fabric_.get(); }

  const std::string& instance() const override { return instance_; }
  const std::vector<NodeInfo>& nodes() const override { return nodes_; }
  const sys::Clock& clock() const override { return clock_; }
  int netns_fd(size_t node) const override;
  Result<std::vector<PortStats>> counters(const std::vector<PortRef>& ports) override;
  Result<std::vector<PortStats>> sample(bool take_peaks) override;
  Result<std::optional<AgentFigures>> agent_figures() override;
  int agent_pid() const override { return agent_pid_; }
  Status agent_alive() override;
  Result<Change> set_loss(const PortRef& p, double probability, uint64_t seed) override;
  Result<Change> set_corruption(const PortRef& p, double probability, uint64_t seed) override;
  Result<Change> set_pause(const PortRef& p, uint32_t prio, bool paused) override;
  Result<Change> set_link(const PortRef& p, bool up) override;
  Result<Change> fail_link(const PortRef& p) override;
  Result<Change> fail_link_named(std::string_view target) override;
  Result<Change> crash_node_named(std::string_view node) override;
  Result<Change> misconfigure(const PortRef& p, Misconfig m, uint32_t dscp) override;
  Result<Change> slow_receiver(const PortRef& p, double fraction) override;
  Result<Change> mtu_mismatch(const PortRef& p, uint32_t mtu) override;
  Result<Change> pause_storm(const PortRef& p, uint8_t vector, uint16_t quanta, double frames_per_s,
                             uint64_t frames) override;
  uint64_t path_changes() const override { return path_changes_; }
  uint64_t link_downed(const PortRef& p) const override {
    auto it = downed_.find(p.slot);
    return it == downed_.end() ? 0 : it->second;
  }
  // Links with an end administratively down now, by index into the scenario's links.
  std::vector<size_t> links_down() const;
  // Puts back what faults left in force (`rocelab inject --clear`): no loss or corruption on
  // any port, every link up, the routes of a fabric with every link up. Returns what it did.
  Result<std::vector<std::string>> clear_faults();
  std::function<int64_t()> pause_clock(const PortRef& p, uint32_t prio) override;
  std::function<sys::PauseReading()> pause_in_force(const PortRef& p, uint32_t prio) override;

 private:
  LocalTestbed() = default;
  Status open_maps();
  enum class Draw { kLoss, kCorrupt };
  Status write_draw(const PortRef& p, Draw d, uint32_t threshold, uint64_t rng);
  Result<Change> set_draw(const PortRef& p, Draw d, double probability, uint64_t seed);
  Status write_pause(const PortRef& p, uint32_t prio, bool paused);
  Status write_link(const PortRef& p, bool up);
  Status load_routing();  // the scenario and its plan, and which links are down now
  Status set_link_both(size_t link, bool up);  // the ends this machine holds
  Result<Change> fail_link_at(size_t link, const std::string& what);
  Status reconverge();
  size_t plan_node(const std::string& name) const;  // SIZE_MAX: none
  const KernelPlan& plan() const { return fabric_ ? fabric_->plan() : *kplan_; }

  std::string instance_;
  std::unique_ptr<Fabric> fabric_;
  std::vector<sys::Fd> netns_;  // attached: the nodes' namespaces (a fabric brought up here holds its own)
  std::vector<NodeInfo> nodes_;
  std::optional<bpf::FabricMaps> maps_;
  std::string agent_socket_;    // empty: no agent
  int agent_pid_ = 0;
  sys::MonotonicClock clock_;
  bool keep_ = false;
  // Routing: the scenario (a copy when brought up here; NAME.scenario.json when attached),
  // the routes each node holds now, and the faults holding each link down.
  std::optional<model::Scenario> scenario_;
  std::optional<KernelPlan> kplan_;
  std::vector<std::vector<netlink::RouteSpec>> routes_;
  std::map<size_t, int> down_;
  uint64_t path_changes_ = 0;
  std::map<uint32_t, uint64_t> downed_;  // slot -> times its link went down
};

}  // namespace rocelab::fabric
