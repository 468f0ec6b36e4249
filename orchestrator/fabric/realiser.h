// The fabric realiser: a scenario's kernel plan made real through netlink, and taken back.
// Every namespace and veth pair is written to the instance's state file (a write-ahead log,
// /run/rocelab/NAME.state) before it is made; a failure rolls back by replaying it, and
// `down` replays it after anything, including `up` killed with SIGKILL at any instant.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bpf/port_programs.h"
#include "fabric/kernel_plan.h"
#include "model/scenario.h"
#include "netlink/route_socket.h"
#include "sys/netns.h"
#include "sys/state_log.h"

namespace rocelab::fabric {

std::string state_path(const std::string& instance);
std::string scenario_record_path(const std::string& instance);

struct UpOptions {
  std::string scenario_path;                          // recorded in the state file
  // Kept beside the state file as NAME.scenario.json (and removed with the fabric), so a
  // later process can attach with the scenario: `inject` reconverges routes from it.
  std::string scenario_record;
  const std::atomic<bool>* cancel = nullptr;          // set by a signal: roll back and stop
  std::function<void(const std::string&)> progress;   // long fabrics report as they go
  uint16_t metrics_port = 0;  // the agent serves Prometheus metrics here (started even without PFC)
  // One machine's share of a fabric split over several (docs/multi-machine.md): part
  // `index` of `parts`, underlay[i] the IPv4 address (host order) of part i's machine.
  struct Split {
    size_t index = 0, parts = 1;
    std::vector<uint32_t> underlay;
  };
  std::optional<Split> split;
  // The scheduler's job this fabric belongs to ("slurm:ID", from the caller's environment),
  // recorded so the job's epilog can take away what a killed part left: down_job().
  std::string job;
};

// A fabric this process brought up. Destroying the handle leaves the fabric running (it
// outlives `rocelab up`); down() takes it away.
class Fabric {
 public:
  static std::unique_ptr<Fabric> up(const model::Scenario& s, const UpOptions& o, std::string& why);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  bool down(std::string& why);
  const KernelPlan& plan() const { return plan_; }
  int netns_fd(size_t node) const { return nodes_[node].netns.get(); }
  const std::string& instance() const { return instance_; }
  double up_seconds() const { return up_seconds_; }
  double agent_seconds() const { return agent_seconds_; }  // the agent's start: handshake to ready
  const std::vector<std::string>& notes() const { return notes_; }
  // What link delay became (empty: no link has one, or the kernel cannot: then a note says so).
  const std::string& delay_summary() const { return delay_summary_; }
  const std::string& agent_socket() const { return agent_socket_; }
  int agent_pid() const { return agent_pid_; }  // 0: no agent
  const bpf::PortPrograms& programs() const { return *progs_; }

  // The kinds of link a fabric is made of, one registry as fault and workload kinds are
  // (link_kinds() in realiser.cc): each makes its links of the plan after the namespaces,
  // its own state-file records (four fields each) written first, configures them once the
  // nodes are, and says for `status` what each end of its record is joined to.
  struct Steps;  // the progress and cancellation of one `up`
  struct LinkKind {
    using Peers = std::map<std::string, std::map<std::string, std::string>>;  // ns -> if -> what it reaches
    std::string type;
    std::string summary;  // for `rocelab help kinds`
    std::string record;   // the key of its state-file lines
    bool (Fabric::*make)(Steps&);
    bool (Fabric::*configure)(std::string&);  // nullptr: made whole
    void (*peers)(const std::array<std::string, 4>& f, const std::map<std::string, std::string>& node_of, Peers& out);
  };
  static const std::vector<LinkKind>& link_kinds();

 private:
  struct NodeHandles {
    sys::Fd netns;
    std::unique_ptr<netlink::RouteSocket> rtnl;
    sys::Fd inet;  // for the ethtool ioctl
  };
  Fabric(std::string instance, KernelPlan plan) : instance_(std::move(instance)), plan_(std::move(plan)) {}
  bool build(const UpOptions& o, std::string& why);
  bool load_programs(std::string& why);
  bool make_namespaces(Steps& st);
  bool record_init_sysctls(Steps& st);
  bool make_veths(Steps& st);    // link kind veth
  bool make_delayed(Steps& st);  // link kind delayed (the wire namespace, netem)
  bool make_cuts(Steps& st);     // link kind vxlan (a cut link's local end)
  void plan_link_delay();
  bool configure_node(size_t x, std::string& why);
  bool configure_wire(std::string& why);
  bool start_agent(const UpOptions& o, std::string& why);
  bool keep_scenario(const std::string& text, std::string& why);

  std::string instance_;
  KernelPlan plan_;
  std::unique_ptr<sys::StateLog> log_;
  std::unique_ptr<bpf::PortPrograms> progs_;  // loaded here; the ports' filters keep them after
  std::vector<NodeHandles> nodes_;
  NodeHandles wire_;                          // the wire namespace (delayed links), if any
  std::unique_ptr<bpf::WireProgram> wire_prog_;
  std::vector<std::string> notes_;
  std::string delay_summary_;
  std::string agent_socket_;  // empty: no agent (no PFC priority)
  int agent_pid_ = 0;
  double up_seconds_ = 0, agent_seconds_ = 0;
};

struct DownReport {
  bool found = false;  // a state file existed
  size_t namespaces = 0;
  double seconds = 0;
  double agent_seconds = 0;  // stopping the recorded processes (the agent), included in seconds
};
// Tears an instance down exactly as its state file recorded it. Idempotent: an instance
// that is not up is not an error (found = false). A running `up`/`run` of it holds its lock:
// waited for as long as it takes (lock_wait_ms < 0) or that long, then an error naming it.
std::optional<DownReport> down_instance(const std::string& instance, std::string& why, int64_t lock_wait_ms = -1);

// Instances with a state file.
std::vector<std::string> list_instances();

// "slurm:" and the job's id (digits): what UpOptions::job may record.
bool is_job_name(const std::string& job);
// The instances brought up inside `job` (their state files say so): what a Slurm epilog
// takes down after a part was killed before it could (`rocelab down --slurm-job ID`).
std::vector<std::string> instances_of_job(const std::string& job);

struct IfaceStatus {
  std::string name, peer, mac;
  std::string state;       // operstate; settles asynchronously (linkwatch) after a change
  bool admin_up = false;   // IFF_UP
  bool carrier = false;    // IFF_LOWER_UP: the peer is up too
  uint32_t mtu = 0;
  std::vector<std::string> addresses;
  uint64_t rx_packets = 0, tx_packets = 0, rx_bytes = 0, tx_bytes = 0, rx_dropped = 0, tx_dropped = 0;
};
struct NodeStatus {
  std::string node, netns;
  bool present = false;
  std::string error;
  std::vector<IfaceStatus> interfaces;
};
struct InstanceStatus {
  std::string instance, scenario, started;
  std::string job;    // "slurm:ID" when brought up inside that Slurm job, else empty
  std::string state;  // "up", or "incomplete" (an `up` still running, or killed: run down)
  int pid = 0;
  size_t links = 0;
  int agent_pid = 0;           // 0: no agent (no PFC priority)
  bool agent_running = false;  // the recorded process, with its recorded start time
  std::vector<NodeStatus> nodes;
};
std::optional<InstanceStatus> instance_status(const std::string& instance, bool with_nodes, std::string& why);

}  // namespace rocelab::fabric
