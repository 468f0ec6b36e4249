// The one handle to a running fabric (DESIGN.md §5). Everything above fabric/ — the run,
// workloads, faults, telemetry — reaches the kernel through this interface: typed ports,
// counters, the agent's figures, and operations that each hand back the exact undo of what
// they changed. LocalTestbed (local_testbed.h) is the fabric on this machine; unit tests
// use a fake, so fault timelines and the like run without root.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/agent_protocol.h"
#include "fabric/stats.h"
#include "sys/clock.h"
#include "sys/error.h"

namespace rocelab::fabric {

struct PortInfo {
  std::string name;  // interface name inside its node: a switch port is named after its peer
  int ifindex = 0;
  uint32_t slot = 0;  // the port's index across the fabric (counters, settings)
};

struct NodeInfo {
  std::string name, netns;
  bool host = false;
  std::vector<PortInfo> ports;  // none when elsewhere
  bool elsewhere = false;       // on another machine of a split fabric (its part runs it)
};

// A port of the fabric: node and port index into Testbed::nodes(), and its slot.
struct PortRef {
  size_t node = 0, port = 0;
  uint32_t slot = 0;
  bool operator==(const PortRef&) const = default;
};

// What an operation changed, and how to put back exactly what was there before it. Undoing
// twice does nothing the second time.
class Change {
 public:
  Change() = default;
  Change(std::string what, std::function<Status()> undo) : what_(std::move(what)), undo_(std::move(undo)) {}
  const std::string& what() const { return what_; }
  Status undo() {
    if (!undo_) return ok();
    auto u = std::move(undo_);
    undo_ = nullptr;
    return u();
  }
  bool pending() const { return bool(undo_); }

 private:
  std::string what_;
  std::function<Status()> undo_;
};

// Several changes as one: undone newest first, every one even after a failure (the first is
// reported).
Change combined(std::string what, std::vector<Change> parts);

// Misconfigurations a port can be given (FAULTS.md).
enum class Misconfig {
  kPfcOff,  // its ingress PGs send no XOFF; PFC it receives is ignored
  kEcnOff,  // nothing it queues is CE-marked
  kDscp,    // every IPv4 packet it sends carries another DSCP (a host's wrong DSCP map)
};

class Testbed {
 public:
  virtual ~Testbed() = default;

  virtual const std::string& instance() const = 0;
  virtual const std::vector<NodeInfo>& nodes() const = 0;
  virtual const sys::Clock& clock() const = 0;
  // A node's network namespace, for whoever opens sockets in it (RDMA backends); -1 when
  // the testbed has none here (a fake).
  virtual int netns_fd(size_t node) const = 0;

  // A node by name (SIZE_MAX when the fabric has none).
  size_t node_index(std::string_view name) const;
  // "NODE:PORT" (a switch port is named after its peer, host NICs nic0, nic1...).
  Result<PortRef> port(std::string_view target) const;
  std::string name(const PortRef& p) const;
  // "NODE" or "NODE:PORT" or "" (every port) into the ports it selects.
  Result<std::vector<PortRef>> select(std::string_view only) const;

  // Counters per port and priority, with the shaper's own figures (every port when empty).
  virtual Result<std::vector<PortStats>> counters(const std::vector<PortRef>& ports) = 0;
  // The same cheaply, for a sampler that asks often: the counter map as it stands, each
  // queue that may hold packets probed for its exact depth (depth_bytes), and in
  // c.depth_peak the most each queue held since the previous sample (then reset). No HTB
  // dump: shaper_* stay 0. A fake testbed answers with counters(). Only the run's own
  // sampler takes the peaks; a viewer (`rocelab top`) passes false and leaves them be.
  virtual Result<std::vector<PortStats>> sample(bool take_peaks) {
    (void)take_peaks;
    return counters({});
  }
  // The agent's figures as of now; nullopt when the fabric has no agent (no PFC priority).
  virtual Result<std::optional<AgentFigures>> agent_figures() = 0;
  // The agent's process on this machine (0: none, or not known): its CPU is the run's own.
  virtual int agent_pid() const { return 0; }
  // Whether the agent answers (cheap: the run asks four times a second); ok without one.
  virtual Status agent_alive() {
    auto f = agent_figures();
    if (!f) return f.error();
    return ok();
  }

  // Data packets leaving `p` are lost with `probability`, drawn from a generator seeded by
  // `seed`; counted as drop reason fault_loss. PFC frames are never lost.
  virtual Result<Change> set_loss(const PortRef& p, double probability, uint64_t seed) = 0;
  // RoCEv2 packets leaving `p` get one bit flipped with `probability` (seeded likewise), so
  // the receiver's ICRC check drops them; counted per port and priority as `corrupted`.
  virtual Result<Change> set_corruption(const PortRef& p, double probability, uint64_t seed) = 0;
  // Priority `prio` stops (or resumes) leaving `p`, as a received XOFF (XON) does; queued
  // packets stay queued. PFC priorities only.
  virtual Result<Change> set_pause(const PortRef& p, uint32_t prio, bool paused) = 0;
  // The port's administrative state (its veth peer loses carrier with it).
  virtual Result<Change> set_link(const PortRef& p, bool up) = 0;
  // The link `p` is an end of fails: carrier off at both ends (each administratively down),
  // and the fabric's routes reconverge around it as a link-state protocol would
  // (model::plan_routes without it): ECMP groups lose the dead next hop and flows re-hash,
  // prefixes behind it are withdrawn. The Change brings the link back and reconverges.
  // Faults on one link nest: it comes back when the last of them ends.
  virtual Result<Change> fail_link(const PortRef& p) = 0;
  // fail_link by the scenario's name of an end (NODE:PORT), wherever its node is: on a split
  // fabric each machine downs the ends it holds and reconverges its own nodes' routes, so
  // every part applies a link fault (the routes come from one model: each computes the same).
  virtual Result<Change> fail_link_named(std::string_view target);
  // Port `p` (a host NIC) drains what it receives on PFC priorities at `fraction` of its line
  // rate: a virtual RX buffer fills, and at XOFF the NIC pauses its link for as long as the
  // buffer takes to drain to half (bursty pause, as a backed-up NIC sends). Counted as PFC
  // sent by that port.
  virtual Result<Change> slow_receiver(const PortRef& p, double fraction) = 0;
  // The link's other end gets MTU `mtu` at `p`'s side: what `p`'s peer sends larger than that
  // is dropped as `p` would (drop reason mtu, counted at the peer's egress).
  virtual Result<Change> mtu_mismatch(const PortRef& p, uint32_t mtu) = 0;
  // Port `p` sends a pause storm (FAULTS.md, as sonic-mgmt's pfc_gen.py): XOFF frames naming
  // the priorities of `vector` with pause time `quanta`, `frames_per_s` of them each physical
  // second (0: two per pause time at the port's rate, which holds its peer paused), `frames`
  // in all (0: until the Change ends it). The PFC agent sends them; the Change stops the
  // storm and nothing else: the pauses it caused run out as a quiet NIC's would.
  virtual Result<Change> pause_storm(const PortRef& p, uint8_t vector, uint16_t quanta, double frames_per_s,
                                     uint64_t frames) = 0;
  // Gives port `p` a misconfiguration (`dscp`: the DSCP kDscp writes); the Change puts back
  // the port's own setting.
  virtual Result<Change> misconfigure(const PortRef& p, Misconfig m, uint32_t dscp) = 0;
  // Times port `p` lost its link to a fault so far (rxe's link_downed, for host NICs).
  virtual uint64_t link_downed(const PortRef& p) const = 0;
  // Route entries (node, prefix) that reconvergence has changed so far.
  virtual uint64_t path_changes() const = 0;
  // The node crashes: every link of it fails (fail_link) and it halts (node_halted), so its
  // RDMA endpoints stop answering; the Change brings the links back and the node up again.
  Result<Change> crash_node(size_t node);
  // crash_node by name; a node on another machine of a split fabric (its own part crashes
  // it) has its links fail here as there.
  virtual Result<Change> crash_node_named(std::string_view node);
  // True while the node is crashed; for RDMA backends, which read it from their own thread.
  std::function<bool()> node_halted(size_t node);

  // How long `prio` on `p` has been held by received PFC so far (CLOCK_MONOTONIC ns, a
  // pause in force included), read cheaply and often: an RNIC's timers stop while it is.
  virtual std::function<int64_t()> pause_clock(const PortRef& p, uint32_t prio) = 0;
  // The pause clock of `prio` on `p` as one reading (whether a received pause holds it, since
  // when, when its XOFF arrived), read as cheaply: an RNIC's scheduler begins no frame of a
  // paused priority and its rate limiters save no credit meanwhile. Empty where the testbed
  // cannot tell.
  virtual std::function<sys::PauseReading()> pause_in_force(const PortRef&, uint32_t) { return {}; }

 private:
  std::shared_ptr<std::atomic<int>> halted_flag(size_t node);
  std::map<size_t, std::shared_ptr<std::atomic<int>>> halted_;  // crashes in force, per node
};

}  // namespace rocelab::fabric
