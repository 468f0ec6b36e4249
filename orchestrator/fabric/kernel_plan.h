// What the kernel must hold for a scenario, computed without touching it: per node its
// namespace, ports (names, requested ifindexes, seeded MACs, addresses), neighbours,
// routes, rules and sysctls. The realiser only turns this into netlink requests, so
// everything here is checked by unit tests without root.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bpf/headroom.h"
#include "model/partition.h"
#include "model/scenario.h"
#include "netlink/batch.h"
#include "rocelab_abi.h"
#include "sys/error.h"

namespace rocelab::fabric {

// Requested ifindexes start high: a new namespace may already hold fallback tunnel devices
// (tunl0, sit0, ...) at low indexes when their modules are loaded. Each namespace has its
// own index space, yet every port gets an index unique across the whole fabric: the BPF
// programs (loaded once, attached to every port) find a port's counters and settings by
// skb->ifindex alone. Must equal RL_FIRST_PORT_IFINDEX in ebpf/rocelab_abi.h.
inline constexpr int kFirstPortIfindex = 1000;
inline constexpr int kLoopbackIfindex = 1;
inline constexpr int kFirstRulePriority = 100;
// Hosts in the machine's own namespace (rxe before Linux 7.1, DESIGN.md "Real rxe"): one
// routing table per NIC, chosen by rules ahead of the local table, which moves behind them.
inline constexpr int kInitNicRulePriority = 10;
inline constexpr int kInitLocalRulePriority = 1000;
inline constexpr int kInitFirstTable = 10000;  // + the port's slot

// The rxe device on a host NIC (its RDMA name is global, whatever the namespace).
std::string rxe_device_name(const std::string& instance, size_t slot);

struct PortPlan {
  std::string ifname;  // the kernel's name: the model's, or NODE-IF for a host in the init namespace
  int ifindex = 0;     // kFirstPortIfindex + slot
  size_t slot = 0;     // the port's index across the fabric (counters, settings)
  netlink::Mac mac{};
  uint32_t addr = 0;  // of a /31
  uint32_t mtu = 0;
  uint64_t rate_bps = 0;  // emulated: the shaper's rate (physical / D)
  size_t link = 0;     // index into Scenario::links
  int64_t delay_ns = 0;  // the link's one-way propagation delay, physical (applied only through a wire)
  int cut = -1;          // index into PartPlan::cuts: the peer is on another machine, this port a VXLAN device
  bool made_here = false;  // the veth pair is created from this end's namespace (the a end)
  size_t peer_node = 0;
  std::string peer_ifname;
  int peer_ifindex = 0;
  uint32_t peer_addr = 0;
  netlink::Mac peer_mac{};
};

struct NodePlan {
  std::string node, netns;  // netns empty: the machine's own (init) namespace
  bool host = false;
  bool in_init = false;  // a host whose NICs live in the init namespace (netns empty)
  uint32_t loopback = 0;
  uint32_t hash_seed = 0;  // fib_multipath_hash_seed: seeded per node, never 0 (0 = random)
  uint16_t ecmp_buckets = 0;  // a switch's routes through resilient groups of this many buckets (0: plain)
  std::vector<PortPlan> ports;
  std::vector<netlink::RouteSpec> routes;
  std::vector<netlink::RuleSpec> rules;
  std::vector<std::pair<std::string, std::string>> sysctls;  // in order: defaults before devices
};

struct VethPlan {
  size_t a_node = 0, a_port = 0;  // created from a's namespace
  size_t b_node = 0, b_port = 0;  // peer created straight into b's
  int wire = -1;                  // index into WirePlan::links: the link runs through the wire namespace
};

// Links with a propagation delay, where the kernel has netem: each runs through the
// fabric's wire namespace as two veth pairs, a's port to device RL_WIRE_FIRST_IFINDEX + 2i
// there and device + 2i + 1 to b's port. ebpf/wire.bpf.c passes each device's arrivals to
// the other, whose netem root delays them toward its end: the delay sits after the
// sender's queue and before the receiver's ingress, where a cable's is, for data and PFC.
struct WirePlan {
  std::string netns;  // empty: no link is delayed
  struct Link {
    size_t link = 0;        // index into Scenario::links (and KernelPlan::veths)
    uint64_t delay_ns = 0;  // one-way, emulated (physical x D)
    uint32_t limit = 0;     // netem's queue, packets
  };
  std::vector<Link> links;
  static std::string device(size_t i, bool toward_b) { return "w" + std::to_string(i) + (toward_b ? "b" : "a"); }
  static int ifindex(size_t i, bool toward_b) { return RL_WIRE_FIRST_IFINDEX + 2 * int(i) + (toward_b ? 1 : 0); }
};

// One machine's share of a fabric split over several (model/partition.h,
// docs/multi-machine.md): only the nodes of part `index` are made here. A link to another
// part's node is a cut link: its local end is a VXLAN device in the node's namespace with the
// port's name, index and MAC, one VNI a link, its only destination the other machine's
// underlay address (no learning, no flooding: a point-to-point wire that carries PFC frames
// as any other, which a bridge would not). Its socket stays in the namespace `up` runs in.
inline constexpr uint16_t kVxlanPort = 4789;
inline constexpr uint32_t kVxlanOverhead = 50;  // outer Ethernet, IPv4, UDP, VXLAN
struct CutLink {
  size_t link = 0, node = 0, port = 0;  // the local end
  uint32_t vni = 0;                     // the link's index + 1
  uint32_t remote = 0;                  // the other part's underlay IPv4, host order
};
struct PartPlan {
  size_t index = 0, parts = 1;
  uint32_t local = 0;     // this machine's underlay IPv4, host order
  std::vector<char> here;  // per node: made on this machine (empty: every node)
  std::vector<CutLink> cuts;
  bool split() const { return parts > 1; }
  bool has(size_t node) const { return here.empty() || here[node]; }
};

struct KernelPlan {
  size_t ports = 0;             // slots in use
  rl_config port_config{};      // what every port program shares
  uint32_t pfc_headroom = 0;    // qos.pfc.headroom: every port's physical headroom (0: 2 x its MTU)
  int64_t max_link_delay_ns = 0;  // physical; applied only where apply_link_delay() made a wire
  // qos.pfc.watchdog on the wall clock (physical x D); the agent runs it.
  bool watchdog = false;
  uint64_t seed = 0;  // the scenario's: seeds each switch's watchdog poll phase
  double scale = 1;   // the time scale D (the agent's metrics are physical)
  int64_t wd_detection_ns = 0, wd_restoration_ns = 0, wd_poll_ns = 0;
  model::WdAction wd_action = model::WdAction::kDrop;
  std::string wd_predicate = "mellanox";
  bool hosts_in_init = false;   // every host's NICs in the init namespace (never a user's own)
  bool rxe = false;             // hosts.engine: rxe: an rxe device on every host NIC
  std::vector<NodePlan> nodes;  // same order as Scenario::nodes
  std::vector<VethPlan> veths;  // same order as Scenario::links
  WirePlan wire;                // empty unless apply_link_delay()
  PartPlan part;                // every node unless take_part()
};

// hosts_in_init: only where the machine is the testbed's own (the VM image, a Vagrant box):
// see hosts_in_init_netns().
KernelPlan plan_kernel(const model::Scenario& s, bool hosts_in_init = false);

// Whether a scenario's hosts need the init namespace: real rxe (hosts.engine: rxe) on a
// kernel whose rxe works only there (before 7.1). Refused unless ROCELAB_DEDICATED_MACHINE=1
// says this machine belongs to the testbed (the VM image's init sets it): the layout moves
// the local routing rule and adds addresses, rules and tables to the init namespace.
Result<bool> hosts_in_init_netns(const model::Scenario& s);

// Narrows the plan to part `index` of `p`, `underlay[i]` being part i's machine address:
// nodes of other parts are left out, links to them become cut links.
void take_part(KernelPlan& kp, const model::Partition& p, size_t index, const std::vector<uint32_t>& underlay);

// Routes every link with a delay through a wire namespace named `wire_netns` (the caller
// knows the kernel has netem); the headroom of their ends then counts the round trip.
void apply_link_delay(KernelPlan& kp, const std::string& wire_netns);

// A port's link round trip in bytes (2 x delay x rate): 0 unless its delay is applied.
uint64_t round_trip_bytes(const KernelPlan& kp, const PortPlan& p);

// A node's model routes as netlink requests (next hops by the node's port ifindexes).
std::vector<netlink::RouteSpec> route_specs(const NodePlan& np, const model::NodeRoutes& routes);

// The headroom inputs of a node's ports (same order): emulated rate and physical headroom.
std::vector<bpf::HeadroomPort> headroom_inputs(const KernelPlan& kp, const NodePlan& np);

// A port's egress scheduler: HTB at its emulated rate, a class per priority, bfifo leaves
// sized past what the egress program admits (it counts what it refuses; the fifo is a
// backstop), TBF leaves on PFC priorities so they can pause.
netlink::SchedulerSpec scheduler_of(const KernelPlan& kp, const NodePlan& np, const PortPlan& p);

struct AgentConfig;
// What the agent needs to know of the fabric: its nodes and every port's pause settings.
AgentConfig agent_config(const KernelPlan& kp, const std::string& instance);

// Locally administered unicast MAC 02:SS:NN:NN:PP:PP (S seed, N node, P port).
netlink::Mac port_mac(uint64_t seed, size_t node, size_t port);
std::string format_mac(const netlink::Mac& m);

}  // namespace rocelab::fabric
