// Batched rtnetlink: requests built with libnl are packed many to a sendmsg and their acks
// collected afterwards, instead of one round trip per object. The kernel handles the
// requests of one send in order, so a route may follow the address its gateway needs.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "netlink/route_socket.h"

struct nl_msg;

namespace rocelab::netlink {

using Mac = std::array<uint8_t, 6>;

// A VXLAN link request as libnl 3.7 builds it carries IFLA_VXLAN_PORT as 32 bits, where the
// kernel's policy is a be16: it takes the first two bytes and logs "netlink: 'rocelab':
// attribute type 15 has an invalid length" each time (issue 48: four times a suite). Rewrites
// the attribute in place as a be16 of `port` (its aligned size, and so every length around it,
// stays). The same request (`add_vxlan` builds it) once built; false when it holds no such
// attribute to fix.
bool vxlan_port_as_be16(nl_msg* msg, uint16_t port);
// A VXLAN link request (netns_fd < 0: none), as add_vxlan sends it; null when libnl cannot.
nl_msg* vxlan_request(const struct VxlanSpec& v, int& err);

// IPv4 addresses here are in host byte order, as in the model.
struct VethSpec {
  std::string name, peer_name;
  int ifindex = 0, peer_ifindex = 0;  // requested; each namespace has its own index space
  Mac mac{}, peer_mac{};
  uint32_t mtu = 1500;
  int peer_netns_fd = -1;             // the peer is created straight into this namespace (-1: same)
};
// A point-to-point VXLAN port (a link cut between machines): every frame to one remote
// address, no learning. Created in the sender's namespace (its UDP socket stays there) and
// put straight into `netns_fd`'s.
struct VxlanSpec {
  std::string name;
  int ifindex = 0;  // requested, in the target namespace
  Mac mac{};
  uint32_t mtu = 1500;
  uint32_t vni = 0;
  uint32_t local = 0, remote = 0;  // underlay IPv4, host order
  uint16_t port = 4789;
  int netns_fd = -1;
};
struct AddrSpec {
  int ifindex = 0;
  uint32_t addr = 0;
  int prefix_len = 32;
};
struct NextHopSpec {
  uint32_t via = 0;
  int ifindex = 0;
  bool onlink = false;  // the gateway is on the port's wire, whatever the route's table holds
  bool operator==(const NextHopSpec&) const = default;
};
struct RouteSpec {
  uint32_t dst = 0;
  int prefix_len = 32;
  int table = 0;  // 0: main
  std::vector<NextHopSpec> nexthops;
  // Nonzero: the route points at a resilient next-hop group (`ip nexthop ... type resilient
  // buckets N`) of kernel next-hop objects, one per port (id = its ifindex), the group's id
  // the route's destination address; a changed next-hop set replaces the group, and the
  // kernel moves only the buckets of members that left (or idle ones to members that came).
  uint16_t buckets = 0;
  bool operator==(const RouteSpec&) const = default;
};
struct NeighSpec {
  int ifindex = 0;
  uint32_t addr = 0;
  Mac mac{};
};
// The egress scheduler of a port: HTB root MAJOR:, a parent class MAJOR:1 at the port's
// rate, one leaf class per priority in `queues` MAJOR:(class_base + p) borrowing up to the
// port rate in strict order (a higher priority number wins), each leaf holding a bfifo.
struct SchedulerSpec {
  int ifindex = 0;
  uint32_t major = 1, class_base = 0x10;
  uint64_t rate_bps = 0;           // emulated link rate, bit/s
  uint32_t mtu = 1500;
  std::array<uint32_t, 8> fifo_limit{};  // bytes, per priority
  uint8_t pausable = 0;  // priorities whose leaf is a TBF (pause = its rate at 1 byte/s)
  uint8_t queues = 0xff;  // priorities that get a class at all (pausable ones always do)
};

// Pausing priority `prio` of a port (PFC received), or resuming it: the TBF leaf under the
// priority's class goes to 1 byte/s (nothing leaves for an hour) and back to the line rate. Queued
// packets stay queued; TBF refills its one-frame bucket on each change, so a pause may let one frame out.
inline constexpr int kPauseBucketMargin = 64;  // bytes beyond one frame in a paused TBF's bucket
struct PauseSpec {
  int ifindex = 0;
  uint32_t major = 1, class_base = 0x10, prio = 3;
  bool paused = true;
  uint64_t rate_bps = 0;  // the line rate to resume to
  uint32_t mtu = 1500;
  uint32_t limit = 0;     // the leaf's queue limit, bytes
};

struct RuleSpec {
  uint32_t src = 0;  // 0: any source
  int table = 0;
  int priority = 0;
  std::string iif, oif;  // by name; "lo" as iif matches locally generated packets only
};

class Batch {
 public:
  explicit Batch(RouteSocket& sock) : sock_(sock) {}
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  // Creates the pair with this end up; the peer comes up with set_up() in its namespace.
  void add_veth(const VethSpec& v);
  void add_vxlan(const VxlanSpec& v);
  void set_up(int ifindex);
  void set_link(int ifindex, bool up);  // administrative state
  void add_addr(const AddrSpec& a);
  void add_route(const RouteSpec& r);
  // Routing changes on a live fabric (a link fault's reconvergence): replace creates or
  // swaps the whole next-hop set in one request; delete of a route already gone (the kernel
  // removes single-path routes through a device that went down) is no failure.
  void replace_route(const RouteSpec& r);
  void delete_route(const RouteSpec& r);
  void add_neigh(const NeighSpec& n);
  void replace_neigh(const NeighSpec& n);  // a device's permanent entries go when it goes down
  void add_rule(const RuleSpec& r);
  void delete_rule(const RuleSpec& r);  // one that is gone already is not an error
  void add_scheduler(const SchedulerSpec& s);
  void set_pause(const PauseSpec& p);
  // A clsact qdisc whose ingress and egress filter blocks are the namespace's shared blocks
  // `ingress_block` and `egress_block` (made by the first port that names them), and a
  // direct-action BPF filter (handle 1, priority 1, every protocol: what libbpf's
  // bpf_tc_attach makes, so bpf_tc_query finds it through any port) on such a block. Ports
  // of one node share two blocks instead of holding two each: every tc block on a device
  // without offload joins one machine-wide list that each new block scans.
  void add_shared_clsact(int ifindex, uint32_t ingress_block, uint32_t egress_block);
  void add_block_bpf(uint32_t block, int prog_fd, const std::string& name);
  // A netem root qdisc delaying everything the device sends by `delay_ns` (the middle of
  // a delayed link: fabric/kernel_plan.h WirePlan), holding up to `limit` packets.
  void add_netem(int ifindex, uint64_t delay_ns, uint32_t limit);
  size_t size() const { return pending_.size(); }

  // Sends every queued request and waits for all their acks. The first failure (in request
  // order) comes back with what it was and the kernel's reason; the batch is empty after.
  Status flush();

 private:
  void queue(nl_msg* msg, int build_err, std::string what, int tolerated = 0);
  void group_route(const RouteSpec& r, int flags, const std::string& what);
  struct Pending {
    nl_msg* msg;
    std::string what;
    int tolerated = 0;  // an errno that means "already so"
  };
  RouteSocket& sock_;
  std::vector<Pending> pending_;
  Status build_error_;
};

}  // namespace rocelab::netlink
