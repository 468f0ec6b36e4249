// The scenario model: what a YAML file means once generators, defaults and overrides are
// applied. Pure data; nothing here touches the kernel.
#pragma once

#include <array>
#include <map>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/diagnostics.h"
#include "model/expect.h"
#include "model/ipv4.h"
#include "model/pfcwd.h"
#include "model/units.h"

namespace rocelab::model {

inline constexpr size_t kIfnameMax = 15;     // IFNAMSIZ - 1
inline constexpr size_t kNodeNameMax = 32;
inline constexpr size_t kInstanceNameMax = 16;
// Lower-case letters, digits and '-', not starting with '-', at most kInstanceNameMax: an
// instance name becomes part of paths and namespace names, so nothing else may pass.
constexpr bool is_instance_name(std::string_view n) {
  if (n.empty() || n.size() > kInstanceNameMax || n[0] == '-') return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}
// What one machine holds: a lossless fat-tree took 0.3-0.85 MiB of kernel memory per
// namespace (bench/fabric_scale.py, k = 4-16, MemAvailable), so 4,096 namespaces need ~3.5
// GiB; the address pool (198.18.0.0/15) holds 16,384 /31 links and the loopbacks beside
// them. Time is the limit before memory: k = 16 (1,344 namespaces) came up in 69 s here.
inline constexpr size_t kMaxNodes = 4096;
inline constexpr size_t kMaxLinks = 16384;
inline constexpr uint32_t kMtuMin = 576, kMtuMax = 9216;
inline constexpr Rate kRateMin{1000000};               // 1 Mbit/s physical
inline constexpr Rate kRateMax{1600000000000ULL};      // 1.6 Tbit/s physical
inline constexpr Rate kEmulatedRateMin{64000};         // below this HTB's granularity dominates
inline constexpr uint32_t kDefaultMtu = 1500;
inline constexpr Rate kDefaultRate{100000000000ULL};   // 100 Gbit/s
inline constexpr uint64_t kDefaultSeed = 1;

enum class NodeKind { kSwitch, kHost };
enum class FabricType { kExplicit, kLeafSpine, kRailOptimized, kFatTree };

std::string_view fabric_type_name(FabricType t);
std::string_view node_kind_name(NodeKind k);

// What the user asked a generator for (kept so the resolved dump says where a fabric came from).
struct GeneratorParams {
  FabricType type = FabricType::kExplicit;
  int spines = 0;          // leaf-spine, rail-optimized
  int leaves = 0;          // leaf-spine
  int hosts_per_leaf = 0;  // leaf-spine: hosts under each leaf
  int nics_per_host = 1;   // leaf-spine: all NICs of a host to its leaf; rail: one NIC per rail
  int uplinks = 1;         // parallel links between each leaf and each spine
  int rails = 0;           // rail-optimized
  int hosts = 0;           // rail-optimized: hosts in total
  int leaves_per_rail = 1; // rail-optimized
  int k = 0;               // fat-tree
  std::optional<Rate> uplink_rate;
  std::optional<double> oversubscription;
};

struct Node {
  std::string name;
  NodeKind kind = NodeKind::kSwitch;
  std::string role;   // spine, leaf, rail, core, agg, edge, switch, host
  int tier = 0;       // 0 hosts, 1 leaf/edge/rail, 2 spine/agg, 3 core: drawing order only
  Ipv4Prefix loopback{};
  Position pos;
  std::vector<size_t> ports;  // indices into Scenario::links, in port order
};

struct Endpoint {
  size_t node = 0;
  std::string ifname;
  uint32_t addr = 0;
};

struct Link {
  Endpoint a, b;
  Rate rate;
  uint32_t mtu = kDefaultMtu;
  Duration delay{0};  // one-way propagation, physical (not applied on kernels without netem)
  Ipv4Prefix subnet{};  // a /31: a takes the even address, b the odd one
  Position pos;

  const Endpoint& end(size_t node) const { return a.node == node ? a : b; }
  const Endpoint& peer_of(size_t node) const { return a.node == node ? b : a; }
};

struct NextHop {
  uint32_t via = 0;
  std::string dev;
  auto operator<=>(const NextHop&) const = default;
};

struct Route {
  Ipv4Prefix dst;
  std::vector<NextHop> nexthops;  // more than one: ECMP
  int table = 0;                  // 0 = main
};

// Per-NIC source routing of a multi-NIC host: "from ADDR lookup TABLE".
struct SourceRule {
  uint32_t from = 0;
  int table = 0;
  std::string nic;
};

struct NodeRoutes {
  std::vector<Route> routes;
  std::vector<SourceRule> rules;
};

struct Scenario;
// Routes for every node (DESIGN.md §1: ECMP over all equal-cost next hops; per-NIC source
// routing on multi-NIC hosts), as a link-state protocol converges with the links in `down`
// (indexes into Scenario::links) gone: shortest live paths, a host NIC's prefix behind a
// dead link withdrawn. (Not BGP's valley-free policy: a spine cut off from a leaf routes
// down through another leaf and up again — the kind of path PFC deadlocks form on.)
// Pure function of nodes, links, the pool and `down`.
std::vector<NodeRoutes> plan_routes(const Scenario& s, const std::vector<size_t>& down);

// --- reserved sections: typed now, acted on by later issues -----------------------------

struct EcnConfig {
  bool enabled = true;
  std::string preset = "nvidia";
  Bytes kmin{150 * 1024}, kmax{1500 * 1024};
  double pmax = 1.0;
  // qos.ecn.marking: where the mark is decided. Dequeue [default] as HPCC's ns-3
  // (SwitchNotifyDequeue) and the ASICs sonic-mgmt's test_dequeue_ecn covers; enqueue as
  // rocelab did first (DESIGN.md §2).
  bool at_dequeue = true;
};

// qos.pfc.watchdog (FAULTS.md: SONiC's pfcwd on every switch port x PFC priority). Times
// physical (x D on the wall clock); unset ones take SONiC's defaults at build time:
// detection 200 ms x ceil(ports / 32) (the largest switch's ports), restoration twice the
// detection, poll 200 ms x the same factor, at most 1000 ms.
struct WatchdogConfig {
  bool enabled = false;
  std::optional<Duration> detection, restoration, poll;
  WdAction action = WdAction::kDrop;
  std::string predicate = "mellanox";  // the ASIC's storm rule (model/pfcwd.h): mellanox | broadcom
};

struct PfcConfig {
  // What XOFF counts: per ingress port and priority, the bytes the switch holds that came in
  // through it (its priority group, as switches do: the default), or the egress queue a
  // packet joins, from every input (qos.pfc.trigger: egress).
  bool per_ingress = true;
  Bytes xoff{128 * 1024};
  std::optional<Bytes> xon;  // default XOFF - 2 x MTU, resolved against the fabric's MTU
  uint32_t quanta = 65535;
  // What may still arrive after XOFF went out; computed from MTU, link and the agent's
  // measured reaction when unset (the agent reports it). At least one MTU when set.
  std::optional<Bytes> headroom;
  WatchdogConfig watchdog;
};

struct BufferConfig {
  Bytes size{16 * 1024 * 1024};
  int dynamic_th = 0;  // alpha = 2^dynamic_th
};

// DESIGN.md §2: DSCP 24-31 -> 3 (RoCE data), 48-55 -> 6 (CNP), the rest -> 0.
constexpr std::array<uint8_t, 64> default_dscp_map() {
  std::array<uint8_t, 64> m{};
  for (size_t d = 24; d <= 31; ++d) m[d] = 3;
  for (size_t d = 48; d <= 55; ++d) m[d] = 6;
  return m;
}

struct Qos {
  std::string profile = "roce-lossless";
  std::array<uint8_t, 64> dscp_to_prio = default_dscp_map();
  uint8_t lossless_mask = 1u << 3;
  uint8_t pfc_mask = 1u << 3;  // priorities PFC pauses: the lossless ones, or qos.pfc.priorities
  EcnConfig ecn;
  bool pfc_enabled = true;
  PfcConfig pfc;
  BufferConfig buffer;
  // What the nodes' ECMP hash reads (net.ipv4.fib_multipath_hash_policy): l4 (addresses and
  // UDP ports: each QP's source port picks its path) or l3 (addresses only: every QP between
  // two NICs on one path).
  std::string ecmp_hash = "l4";
  // How the switches hold an ECMP set: plain (one multipath route; Linux's hash-threshold, so
  // a next hop leaving or coming back moves flows on other paths too) or resilient (a kernel
  // next-hop group of `ecmp_buckets` hash buckets: only the leaving member's flows move).
  std::string ecmp_groups = "plain";
  int ecmp_buckets = 128;
};

// DCQCN parameters a scenario sets on top of its preset (physical values; DESIGN.md §2).
struct DcqcnOverrides {
  std::optional<Duration> cnp_interval, alpha_timer, alpha_window, rate_timer, reduce_period;
  std::optional<double> g, initial_alpha, max_cut;
  std::optional<Bytes> byte_counter;
  std::optional<int> threshold;
  std::optional<Rate> rate_ai, rate_hai, rate_min, rate_on_first_cnp;
  std::optional<int> rpg_gd;  // mlx5's cut factor: alpha / 2^(rpg_gd - 10)
  std::optional<bool> clamp_target, clamp_target_after_timer;
  std::optional<bool> notification_point, reaction_point;  // each end of DCQCN on or off
  bool empty() const {
    return !cnp_interval && !alpha_timer && !alpha_window && !rate_timer && !reduce_period && !g &&
           !initial_alpha && !max_cut && !byte_counter && !threshold && !rate_ai && !rate_hai && !rate_min &&
           !rate_on_first_cnp && !rpg_gd && !clamp_target && !clamp_target_after_timer && !notification_point &&
           !reaction_point;
  }
};

// The RC local ACK timeout as an RNIC runs it (FAULTS.md): 4.096 us x 2^timeout, fixed, retried
// retry_cnt times; then the QP fails with retry-exceeded. timeout 0 is infinite (IBTA).
// Not set: the engine's adaptive timer (4.096 us x 2^8, raised by RFC 6298's round-trip
// estimate where the emulated round trip is longer; no back-off), retried retry_cnt times.
struct RcTimers {
  bool fixed = false;
  int timeout = 8;     // exponent, 0-31
  int retry_cnt = 7;   // 0-7
  std::string preset;  // "nccl" (20 / 7) when chosen by name
  Duration period() const { return Duration{timeout == 0 ? 0 : int64_t(4096) << timeout}; }
};

struct HostsConfig {
  std::string engine = "builtin";  // an RDMA backend by name (the registry above the model knows which exist)
  Position engine_pos;
  std::string dcqcn = "paper";     // paper | nvidia | off
  DcqcnOverrides dcqcn_set;        // hosts.dcqcn as a map: {preset: P, g: ..., rate_timer: ...}
  RcTimers rc;                     // hosts.rc: {timeout: N, retry_cnt: M} or a preset name
};

// The keys an item of a kind-typed list (workloads, faults) set, with where: the kind
// (registered above the model) checks which it requires and which it takes.
using KeysSet = std::map<std::string, Position>;

struct Workload {
  std::string name;
  std::string type;  // a workload kind by name: write_bw, latency, incast, permutation, allreduce, alltoall
  Position type_pos;
  KeysSet keys;
  std::vector<std::string> hosts;  // participants; empty = all hosts
  std::string from, to;
  int from_gpu = 0, to_gpu = 0;  // "host:gpuN": GPU N, which uses the host's NIC N (nicN)
  Bytes message{1024 * 1024};
  int qps = 1;
  int iterations = 10;
  int dscp = 26;  // the RoCE traffic's DSCP (perftest --tclass >> 2): picks the priority
  bool ring_as_listed = false;  // allreduce: the ring follows `hosts:` as written, not by leaf
  Duration start{0};
  Position pos;
};

struct Fault {
  std::string type;    // a fault kind by name (loss; link_down, pause_storm, ... as they land)
  Position type_pos;
  KeysSet keys;
  std::string target;  // "node" or "node:ifname"
  Duration at{0};
  std::optional<Duration> duration;
  std::optional<Duration> period;
  std::optional<double> probability;
  std::optional<int> priority;
  std::optional<int> count;          // link_flap: cycles
  std::optional<Duration> down;      // link_flap: down time of each cycle (default period / 2)
  std::vector<Duration> train;       // link_flap: explicit down, up, down, ... times
  std::optional<int> dscp;           // dscp_remap: the DSCP written (0-63)
  std::optional<double> fraction;    // slow_receiver: of line rate its RX side drains
  std::optional<int> mtu;            // mtu_mismatch: the MTU the target end is given
  std::optional<int> vector;         // pause_storm: class-enable vector (1-255), instead of priority
  std::optional<int> quanta;         // pause_storm: pause time of each frame (0-65535)
  std::optional<double> frame_rate;  // pause_storm: frames per physical second
  Position pos;
};

struct Expectation {
  std::string text;
  std::string name;  // defaults to the text
  std::shared_ptr<const Expr> expr;
  Position pos;
};

// Packets captured on chosen ports while the traffic runs (telemetry/capture.cc), each
// port's file bounded by `packets` and `size`, whichever comes first.
// What captures may take in all (issue 34): each captured port pins a kernel ring of
// kCaptureRingBytes (telemetry/pcap_tap.cc) and may write `size` bytes of file.
inline constexpr uint64_t kCaptureRingBytes = 32ull << 20;
inline constexpr uint64_t kCaptureRingBudget = 512ull << 20;  // 16 ports' rings
inline constexpr uint64_t kCaptureDiskBudget = 8ull << 30;

struct Capture {
  Position pos;
  std::vector<std::string> ports;  // "node:ifname", "node", or "all"
  Bytes snaplen{65535};  // whole frames: Wireshark calls a cut RoCEv2 packet malformed ("Invalid Packet Length")
  uint64_t packets = 1'000'000;    // per port
  Bytes size{100'000'000};         // per port, bytes written
};

// What a run records while the traffic runs (telemetry/series.cc): time series sampled
// every `interval` of physical time (unset: 10 us, or 5 ms of wall clock / D when that is
// longer, so files stay small and the sampler light).
struct Telemetry {
  Position pos;
  bool series = true;
  std::optional<Duration> interval;
};

struct Scenario {
  std::string file;
  // The file's bytes as loaded (before --set): what a run copies to its directory and sends
  // to a guest, never the path read again. Empty when the scenario came from no file.
  std::string source;
  std::vector<std::string> sets;  // --set KEY=VALUE, in order, applied over the file
  std::string name;  // instance name: the prefix of everything the testbed makes
  std::string description;
  uint64_t seed = kDefaultSeed;
  TimeScale scale{1.0};
  // `scale: auto`: D is this machine's to choose (run/autoscale.h) before anything is built;
  // until then `scale` holds 1.
  bool scale_auto = false;
  Ipv4Prefix pool = kDefaultPool;
  GeneratorParams fabric;
  std::vector<Node> nodes;
  std::vector<Link> links;
  std::vector<NodeRoutes> routes;  // per node, same order as nodes
  Qos qos;
  HostsConfig hosts;
  std::vector<Workload> workloads;
  std::vector<Fault> faults;
  std::vector<Expectation> expect;
  Capture capture;
  Telemetry telemetry;

  std::optional<size_t> find_node(std::string_view name) const;
  size_t count(NodeKind k) const;
  // Everything the testbed names in the machine's own namespace starts with this. Instance
  // and node names cannot hold '.', so "rl-a.b-c" and "rl-a-b.c" never collide.
  std::string namespace_prefix() const { return "rl-" + name + "."; }
  // Namespace name of a node, as seen from the machine's own namespace.
  std::string namespace_of(const Node& n) const { return namespace_prefix() + n.name; }
  // Largest leaf downlink/uplink capacity ratio; 0 when no switch has both host links and
  // links up to a spine, aggregation or core switch.
  double oversubscription() const;
};

// The link with an end at port `ifname` of node `node`, by index into s.links; none: nullopt.
inline std::optional<size_t> link_at(const Scenario& s, size_t node, std::string_view ifname) {
  for (size_t i = 0; i < s.links.size(); ++i) {
    const Link& l = s.links[i];
    if ((l.a.node == node && l.a.ifname == ifname) || (l.b.node == node && l.b.ifname == ifname)) return i;
  }
  return std::nullopt;
}

}  // namespace rocelab::model
