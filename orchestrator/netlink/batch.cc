#include "netlink/batch.h"

#include <arpa/inet.h>
#include <linux/fib_rules.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/pkt_sched.h>
#include <linux/netlink.h>
#include <linux/nexthop.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netlink/addr.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/link/vxlan.h>
#include <netlink/route/neighbour.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <netlink/route/rule.h>
#include <netlink/route/class.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/fifo.h>
#include <netlink/route/qdisc/htb.h>
#include <netlink/route/qdisc/tbf.h>
#include <netlink/socket.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "model/ipv4.h"

namespace rocelab::netlink {

namespace {

// Requests per send: the kernel answers each with an ack, and the acks of one send must
// fit the socket's receive buffer.
constexpr size_t kWindow = 128;
constexpr size_t kWindowBytes = 32 * 1024;

template <class T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using AddrPtr = std::unique_ptr<nl_addr, Deleter<nl_addr, nl_addr_put>>;

AddrPtr v4(uint32_t host_order, int len) {
  uint32_t be = htonl(host_order);
  AddrPtr a(nl_addr_build(AF_INET, &be, sizeof be));
  if (a) nl_addr_set_prefixlen(a.get(), len);
  return a;
}
AddrPtr mac_addr(const Mac& m) { return AddrPtr(nl_addr_build(AF_LLC, m.data(), m.size())); }

std::string v4s(uint32_t a, int len) { return model::format_prefix(model::Ipv4Prefix{a, len}); }

void fill_link(rtnl_link* l, const std::string& name, int ifindex, const Mac& mac, uint32_t mtu) {
  rtnl_link_set_name(l, name.c_str());
  rtnl_link_set_ifindex(l, ifindex);
  rtnl_link_set_mtu(l, mtu);
  auto a = mac_addr(mac);
  rtnl_link_set_addr(l, a.get());
}

}  // namespace

Batch::~Batch() {
  for (auto& p : pending_) nlmsg_free(p.msg);
}

void Batch::queue(nl_msg* msg, int build_err, std::string what, int tolerated) {
  if (build_err < 0 || !msg) {
    if (build_error_.ok()) build_error_ = Status::from_nl(build_err < 0 ? build_err : -NLE_NOMEM, "build " + what);
    if (msg) nlmsg_free(msg);
    return;
  }
  pending_.push_back({msg, std::move(what), tolerated});
}

void Batch::add_veth(const VethSpec& v) {
  std::unique_ptr<rtnl_link, Deleter<rtnl_link, rtnl_link_veth_release>> link(rtnl_link_veth_alloc());
  if (!link) return queue(nullptr, -NLE_NOMEM, "veth " + v.name);
  fill_link(link.get(), v.name, v.ifindex, v.mac, v.mtu);
  // Up at creation saves a request, but only for this end: the kernel configures the peer
  // before the pair is joined, and a veth without its peer refuses to open (ENOTCONN).
  rtnl_link_set_flags(link.get(), IFF_UP);
  rtnl_link* peer = rtnl_link_veth_get_peer(link.get());  // takes a reference
  fill_link(peer, v.peer_name, v.peer_ifindex, v.peer_mac, v.mtu);
  if (v.peer_netns_fd >= 0) rtnl_link_set_ns_fd(peer, v.peer_netns_fd);
  rtnl_link_put(peer);
  nl_msg* msg = nullptr;
  int e = rtnl_link_build_add_request(link.get(), NLM_F_CREATE | NLM_F_EXCL, &msg);
  queue(msg, e, "veth pair " + v.name + " <-> " + v.peer_name);
}

bool vxlan_port_as_be16(nl_msg* msg, uint16_t port) {
  nlmsghdr* h = msg ? nlmsg_hdr(msg) : nullptr;
  nlattr* info = h ? nlmsg_find_attr(h, sizeof(ifinfomsg), IFLA_LINKINFO) : nullptr;
  nlattr* data = info ? nla_find(static_cast<nlattr*>(nla_data(info)), nla_len(info), IFLA_INFO_DATA) : nullptr;
  nlattr* p = data ? nla_find(static_cast<nlattr*>(nla_data(data)), nla_len(data), IFLA_VXLAN_PORT) : nullptr;
  if (!p || nla_len(p) != 4) return false;
  const uint16_t be = htons(port);
  std::memset(nla_data(p), 0, 4);  // the two bytes after the be16 are the attribute's padding now
  std::memcpy(nla_data(p), &be, sizeof be);
  p->nla_len = NLA_HDRLEN + sizeof be;  // NLA_ALIGN(6) == NLA_ALIGN(8): nothing around it moves
  return true;
}

nl_msg* vxlan_request(const VxlanSpec& v, int& e) {
  std::unique_ptr<rtnl_link, Deleter<rtnl_link, rtnl_link_put>> link(rtnl_link_vxlan_alloc());
  if (!link) return e = -NLE_NOMEM, nullptr;
  fill_link(link.get(), v.name, v.ifindex, v.mac, v.mtu);
  auto local = v4(v.local, 32), remote = v4(v.remote, 32);
  e = rtnl_link_vxlan_set_id(link.get(), v.vni);
  if (e >= 0) e = rtnl_link_vxlan_set_group(link.get(), remote.get());  // a unicast group: the only destination
  if (e >= 0) e = rtnl_link_vxlan_set_local(link.get(), local.get());
  if (e >= 0) e = rtnl_link_vxlan_set_port(link.get(), v.port);
  if (e >= 0) e = rtnl_link_vxlan_set_learning(link.get(), 0);
  if (e >= 0 && v.netns_fd >= 0) rtnl_link_set_ns_fd(link.get(), v.netns_fd);
  nl_msg* msg = nullptr;
  if (e >= 0) e = rtnl_link_build_add_request(link.get(), NLM_F_CREATE | NLM_F_EXCL, &msg);
  if (e >= 0) vxlan_port_as_be16(msg, v.port);
  return msg;
}

void Batch::add_vxlan(const VxlanSpec& v) {
  const std::string what = "VXLAN port " + v.name + " (VNI " + std::to_string(v.vni) + " to " + v4s(v.remote, 32) + ")";
  int e = 0;
  nl_msg* msg = vxlan_request(v, e);
  queue(msg, e, what);
}

void Batch::set_up(int ifindex) { set_link(ifindex, true); }

void Batch::set_link(int ifindex, bool up) {
  nl_msg* msg = nlmsg_alloc_simple(RTM_NEWLINK, 0);
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = ifindex;
  ifi.ifi_flags = up ? IFF_UP : 0;
  ifi.ifi_change = IFF_UP;
  int e = msg ? nlmsg_append(msg, &ifi, sizeof ifi, NLMSG_ALIGNTO) : -NLE_NOMEM;
  queue(msg, e, "set interface " + std::to_string(ifindex) + (up ? " up" : " down"));
}

void Batch::add_addr(const AddrSpec& a) {
  std::unique_ptr<rtnl_addr, Deleter<rtnl_addr, rtnl_addr_put>> addr(rtnl_addr_alloc());
  if (!addr) return queue(nullptr, -NLE_NOMEM, "address");
  rtnl_addr_set_ifindex(addr.get(), a.ifindex);
  auto local = v4(a.addr, a.prefix_len);
  rtnl_addr_set_local(addr.get(), local.get());
  rtnl_addr_set_prefixlen(addr.get(), a.prefix_len);
  nl_msg* msg = nullptr;
  int e = rtnl_addr_build_add_request(addr.get(), NLM_F_CREATE | NLM_F_EXCL, &msg);
  queue(msg, e, "address " + v4s(a.addr, a.prefix_len) + " on interface " + std::to_string(a.ifindex));
}

namespace {
using RoutePtr = std::unique_ptr<rtnl_route, Deleter<rtnl_route, rtnl_route_put>>;

RoutePtr route_of(const RouteSpec& r) {
  RoutePtr route(rtnl_route_alloc());
  if (!route) return route;
  rtnl_route_set_family(route.get(), AF_INET);
  rtnl_route_set_table(route.get(), r.table ? static_cast<uint32_t>(r.table) : RT_TABLE_MAIN);
  rtnl_route_set_protocol(route.get(), RTPROT_STATIC);
  rtnl_route_set_scope(route.get(), RT_SCOPE_UNIVERSE);
  rtnl_route_set_type(route.get(), RTN_UNICAST);
  auto dst = v4(r.dst, r.prefix_len);
  rtnl_route_set_dst(route.get(), dst.get());
  for (const auto& h : r.nexthops) {
    rtnl_nexthop* nh = rtnl_route_nh_alloc();  // owned by the route once added
    if (!nh) return nullptr;
    auto gw = v4(h.via, 32);
    rtnl_route_nh_set_gateway(nh, gw.get());
    rtnl_route_nh_set_ifindex(nh, h.ifindex);
    if (h.onlink) rtnl_route_nh_set_flags(nh, RTNH_F_ONLINK);
    rtnl_route_add_nexthop(route.get(), nh);
  }
  return route;
}

std::string route_text(const RouteSpec& r) {
  return "route " + v4s(r.dst, r.prefix_len) + (r.table ? " table " + std::to_string(r.table) : std::string());
}
}  // namespace

namespace {

// Kernel next-hop objects (RTM_NEWNEXTHOP, linux/nexthop.h), which libnl 3.7 cannot build:
// the messages are put together with libnl's message API.
nl_msg* nexthop_request(uint32_t id, const NextHopSpec& h, int& err) {
  nl_msg* m = nlmsg_alloc_simple(RTM_NEWNEXTHOP, NLM_F_CREATE | NLM_F_EXCL);
  nhmsg nh{};
  nh.nh_family = AF_INET;
  nh.nh_protocol = RTPROT_STATIC;
  const uint32_t gw = htonl(h.via);
  err = !m ? -NLE_NOMEM
           : nlmsg_append(m, &nh, sizeof nh, NLMSG_ALIGNTO) < 0 || nla_put_u32(m, NHA_ID, id) < 0 ||
                     nla_put_u32(m, NHA_OIF, uint32_t(h.ifindex)) < 0 || nla_put(m, NHA_GATEWAY, sizeof gw, &gw) < 0
                 ? -NLE_NOMEM
                 : 0;
  return m;
}

nl_msg* group_request(uint32_t id, const std::vector<NextHopSpec>& members, uint16_t buckets, int& err) {
  nl_msg* m = nlmsg_alloc_simple(RTM_NEWNEXTHOP, NLM_F_CREATE | NLM_F_REPLACE);
  if (!m) return err = -NLE_NOMEM, nullptr;
  nhmsg nh{};
  nh.nh_family = AF_UNSPEC;
  nh.nh_protocol = RTPROT_STATIC;
  std::vector<nexthop_grp> grp;
  for (const auto& h : members) grp.push_back({uint32_t(h.ifindex), 0, 0, 0});
  err = nlmsg_append(m, &nh, sizeof nh, NLMSG_ALIGNTO) < 0 || nla_put_u32(m, NHA_ID, id) < 0 ||
                nla_put(m, NHA_GROUP, int(grp.size() * sizeof(nexthop_grp)), grp.data()) < 0 ||
                nla_put_u16(m, NHA_GROUP_TYPE, NEXTHOP_GRP_TYPE_RES) < 0
            ? -NLE_NOMEM
            : 0;
  nlattr* res = err ? nullptr : nla_nest_start(m, NHA_RES_GROUP);
  if (!res || nla_put_u16(m, NHA_RES_GROUP_BUCKETS, buckets) < 0) return err = -NLE_NOMEM, m;
  nla_nest_end(m, res);
  return m;
}

nl_msg* group_route_request(const RouteSpec& r, int flags, int& err) {
  nl_msg* m = nlmsg_alloc_simple(RTM_NEWROUTE, flags);
  if (!m) return err = -NLE_NOMEM, nullptr;
  rtmsg rt{};
  rt.rtm_family = AF_INET;
  rt.rtm_dst_len = uint8_t(r.prefix_len);
  rt.rtm_table = RT_TABLE_MAIN;
  rt.rtm_protocol = RTPROT_STATIC;
  rt.rtm_scope = RT_SCOPE_UNIVERSE;
  rt.rtm_type = RTN_UNICAST;
  const uint32_t dst = htonl(r.dst);
  err = nlmsg_append(m, &rt, sizeof rt, NLMSG_ALIGNTO) < 0 || nla_put(m, RTA_DST, sizeof dst, &dst) < 0 ||
                nla_put_u32(m, RTA_TABLE, r.table ? uint32_t(r.table) : RT_TABLE_MAIN) < 0 ||
                nla_put_u32(m, RTA_NH_ID, r.dst) < 0
            ? -NLE_NOMEM
            : 0;
  return m;
}

}  // namespace

// A route through a resilient group: each member's next-hop object (kept if it exists: the
// kernel deletes one whose port went down, so a port that came back needs it again), the
// group with the route's next hops, then the route naming the group.
void Batch::group_route(const RouteSpec& r, int flags, const std::string& what) {
  int e = 0;
  for (const auto& h : r.nexthops) {
    nl_msg* m = nexthop_request(uint32_t(h.ifindex), h, e);
    queue(m, e, "next hop " + std::to_string(h.ifindex) + " via " + v4s(h.via, 32), EEXIST);
  }
  nl_msg* g = group_request(r.dst, r.nexthops, r.buckets, e);
  queue(g, e, "resilient group " + std::to_string(r.dst) + " for " + what);
  nl_msg* m = group_route_request(r, flags, e);
  queue(m, e, what);
}

void Batch::add_route(const RouteSpec& r) {
  if (r.buckets && !r.nexthops.empty()) return group_route(r, NLM_F_CREATE | NLM_F_EXCL, route_text(r));
  auto route = route_of(r);
  if (!route) return queue(nullptr, -NLE_NOMEM, "route");
  nl_msg* msg = nullptr;
  int e = rtnl_route_build_add_request(route.get(), NLM_F_CREATE | NLM_F_EXCL, &msg);
  queue(msg, e, route_text(r));
}

void Batch::replace_route(const RouteSpec& r) {
  if (r.buckets && !r.nexthops.empty()) return group_route(r, NLM_F_CREATE | NLM_F_REPLACE, "replace " + route_text(r));
  auto route = route_of(r);
  if (!route) return queue(nullptr, -NLE_NOMEM, "route");
  nl_msg* msg = nullptr;
  int e = rtnl_route_build_add_request(route.get(), NLM_F_CREATE | NLM_F_REPLACE, &msg);
  queue(msg, e, "replace " + route_text(r));
}

void Batch::delete_route(const RouteSpec& r) {
  RouteSpec bare = r;
  bare.nexthops.clear();  // the prefix and table name it
  auto route = route_of(bare);
  if (!route) return queue(nullptr, -NLE_NOMEM, "route");
  nl_msg* msg = nullptr;
  int e = rtnl_route_build_del_request(route.get(), 0, &msg);
  queue(msg, e, "delete " + route_text(r), ESRCH);
}

namespace {
nl_msg* neigh_request(const NeighSpec& n, int flags, int& err) {
  std::unique_ptr<rtnl_neigh, Deleter<rtnl_neigh, rtnl_neigh_put>> neigh(rtnl_neigh_alloc());
  if (!neigh) {
    err = -NLE_NOMEM;
    return nullptr;
  }
  rtnl_neigh_set_ifindex(neigh.get(), n.ifindex);
  rtnl_neigh_set_family(neigh.get(), AF_INET);
  auto dst = v4(n.addr, 32);
  rtnl_neigh_set_dst(neigh.get(), dst.get());
  auto ll = mac_addr(n.mac);
  rtnl_neigh_set_lladdr(neigh.get(), ll.get());
  rtnl_neigh_set_state(neigh.get(), NUD_PERMANENT);
  nl_msg* msg = nullptr;
  err = rtnl_neigh_build_add_request(neigh.get(), flags, &msg);
  return msg;
}
}  // namespace

void Batch::replace_neigh(const NeighSpec& n) {
  int e = 0;
  nl_msg* msg = neigh_request(n, NLM_F_CREATE | NLM_F_REPLACE, e);
  queue(msg, e, "neighbour " + v4s(n.addr, 32) + " on interface " + std::to_string(n.ifindex));
}

void Batch::add_neigh(const NeighSpec& n) {
  int e = 0;
  nl_msg* msg = neigh_request(n, NLM_F_CREATE | NLM_F_EXCL, e);
  queue(msg, e, "neighbour " + v4s(n.addr, 32) + " on interface " + std::to_string(n.ifindex));
}

namespace {
using RulePtr = std::unique_ptr<rtnl_rule, Deleter<rtnl_rule, rtnl_rule_put>>;
RulePtr rule_of(const RuleSpec& r) {
  RulePtr rule(rtnl_rule_alloc());
  if (!rule) return rule;
  rtnl_rule_set_family(rule.get(), AF_INET);
  if (r.src) {
    auto src = v4(r.src, 32);
    rtnl_rule_set_src(rule.get(), src.get());
  }
  if (!r.iif.empty()) rtnl_rule_set_iif(rule.get(), r.iif.c_str());
  if (!r.oif.empty()) rtnl_rule_set_oif(rule.get(), r.oif.c_str());
  rtnl_rule_set_table(rule.get(), static_cast<uint32_t>(r.table));
  rtnl_rule_set_prio(rule.get(), static_cast<uint32_t>(r.priority));
  rtnl_rule_set_action(rule.get(), FR_ACT_TO_TBL);
  return rule;
}
std::string rule_text(const RuleSpec& r) {
  std::string t = "rule";
  if (r.src) t += " from " + v4s(r.src, 32);
  if (!r.iif.empty()) t += " iif " + r.iif;
  if (!r.oif.empty()) t += " oif " + r.oif;
  return t + " lookup " + std::to_string(r.table) + " pref " + std::to_string(r.priority);
}
}  // namespace

void Batch::add_rule(const RuleSpec& r) {
  auto rule = rule_of(r);
  if (!rule) return queue(nullptr, -NLE_NOMEM, "rule");
  nl_msg* msg = nullptr;
  int e = rtnl_rule_build_add_request(rule.get(), NLM_F_CREATE | NLM_F_EXCL, &msg);
  queue(msg, e, rule_text(r));
}

void Batch::delete_rule(const RuleSpec& r) {
  auto rule = rule_of(r);
  if (!rule) return queue(nullptr, -NLE_NOMEM, "rule");
  nl_msg* msg = nullptr;
  int e = rtnl_rule_build_delete_request(rule.get(), 0, &msg);
  queue(msg, e, "delete " + rule_text(r), ENOENT);
}

void Batch::add_scheduler(const SchedulerSpec& s) {
  using QdiscPtr = std::unique_ptr<rtnl_qdisc, Deleter<rtnl_qdisc, rtnl_qdisc_put>>;
  using ClassPtr = std::unique_ptr<rtnl_class, Deleter<rtnl_class, rtnl_class_put>>;
  const std::string port = "interface " + std::to_string(s.ifindex) + ": ";
  const uint64_t bytes_per_s = s.rate_bps / 8;
  // Each leaf's assured rate is a thousandth of the port: strict priority comes from HTB
  // lending the rest by class priority, and a starved class still trickles, as on switches
  // whose strict queues keep a minimum.
  const uint64_t assured = std::max<uint64_t>(bytes_per_s / 1000, 125);
  const uint32_t quantum = std::max<uint32_t>(s.mtu + 14, 1514);
  auto tc = [](auto* obj) { return reinterpret_cast<rtnl_tc*>(obj); };

  QdiscPtr root(rtnl_qdisc_alloc());
  if (!root) return queue(nullptr, -NLE_NOMEM, port + "htb");
  rtnl_tc_set_ifindex(tc(root.get()), s.ifindex);
  rtnl_tc_set_parent(tc(root.get()), TC_H_ROOT);
  rtnl_tc_set_handle(tc(root.get()), TC_H_MAKE(s.major << 16, 0));
  rtnl_tc_set_kind(tc(root.get()), "htb");
  rtnl_htb_set_defcls(root.get(), s.class_base);  // unclassified: priority 0 (HTB takes the minor)
  nl_msg* msg = nullptr;
  int e = rtnl_qdisc_build_add_request(root.get(), NLM_F_CREATE | NLM_F_REPLACE, &msg);
  queue(msg, e, port + "htb root qdisc");

  auto add_class = [&](uint32_t minor, uint32_t parent_minor, uint64_t rate, int prio) {
    ClassPtr c(rtnl_class_alloc());
    if (!c) return queue(nullptr, -NLE_NOMEM, port + "htb class");
    rtnl_tc_set_ifindex(tc(c.get()), s.ifindex);
    rtnl_tc_set_parent(tc(c.get()), TC_H_MAKE(s.major << 16, parent_minor));
    rtnl_tc_set_handle(tc(c.get()), TC_H_MAKE(s.major << 16, minor));
    rtnl_tc_set_kind(tc(c.get()), "htb");
    rtnl_tc_set_mtu(tc(c.get()), s.mtu + 14);
    rtnl_htb_set_rate64(c.get(), rate);
    rtnl_htb_set_ceil64(c.get(), bytes_per_s);
    rtnl_htb_set_quantum(c.get(), quantum);
    if (prio >= 0) rtnl_htb_set_prio(c.get(), static_cast<uint32_t>(prio));
    nl_msg* m = nullptr;
    int err = rtnl_class_build_add_request(c.get(), NLM_F_CREATE, &m);
    queue(m, err, port + "htb class " + std::to_string(s.major) + ":" + std::to_string(minor));
  };
  add_class(1, 0, bytes_per_s, -1);
  for (uint32_t p = 0; p < 8; ++p) {
    if (!(((s.queues | s.pausable) >> p) & 1)) continue;
    add_class(s.class_base + p, 1, assured, static_cast<int>(7 - p));  // HTB: 0 is served first
    if ((s.pausable >> p) & 1) {
      set_pause({s.ifindex, s.major, s.class_base, p, false, s.rate_bps, s.mtu, s.fifo_limit[p]});
      continue;
    }
    QdiscPtr fifo(rtnl_qdisc_alloc());
    if (!fifo) return queue(nullptr, -NLE_NOMEM, port + "bfifo");
    rtnl_tc_set_ifindex(tc(fifo.get()), s.ifindex);
    rtnl_tc_set_parent(tc(fifo.get()), TC_H_MAKE(s.major << 16, s.class_base + p));
    rtnl_tc_set_handle(tc(fifo.get()), TC_H_MAKE((s.major + 1 + p) << 16, 0));
    rtnl_tc_set_kind(tc(fifo.get()), "bfifo");
    rtnl_qdisc_fifo_set_limit(fifo.get(), static_cast<int>(s.fifo_limit[p]));
    nl_msg* m = nullptr;
    int err = rtnl_qdisc_build_add_request(fifo.get(), NLM_F_CREATE | NLM_F_EXCL, &m);
    queue(m, err, port + "bfifo under class " + std::to_string(s.class_base + p));
  }
}

namespace {

// Appends a u32 attribute inside the message's TCA_OPTIONS nest, which libnl closed as the
// message's last attribute (checked): a TBF field libnl has no setter for.
int append_to_options(nl_msg* msg, int type, uint32_t value) {
  nlmsghdr* h = nlmsg_hdr(msg);
  nlattr* opts = nlmsg_find_attr(h, sizeof(tcmsg), TCA_OPTIONS);
  if (!opts) return -NLE_MISSING_ATTR;
  const auto* end = reinterpret_cast<const char*>(h) + h->nlmsg_len;
  if (reinterpret_cast<const char*>(opts) + NLA_ALIGN(opts->nla_len) != end) return -NLE_INVAL;
  if (const int e = nla_put_u32(msg, type, value); e < 0) return e;
  opts->nla_len = uint16_t(opts->nla_len + nla_total_size(sizeof value));
  return 0;
}

// RTM_NEWQDISC of `kind` on a device, options to follow (libnl's qdisc objects know neither
// shared blocks nor netem's 64-bit latency). Null when out of memory.
nl_msg* qdisc_request(int flags, int ifindex, uint32_t parent, uint32_t handle, const char* kind, int& e) {
  nl_msg* m = nlmsg_alloc_simple(RTM_NEWQDISC, flags);
  if (!m) return nullptr;
  tcmsg t{};
  t.tcm_family = AF_UNSPEC;
  t.tcm_ifindex = ifindex;
  t.tcm_parent = parent;
  t.tcm_handle = handle;
  e = nlmsg_append(m, &t, sizeof t, NLMSG_ALIGNTO);
  if (e >= 0) e = nla_put_string(m, TCA_KIND, kind);
  return m;
}

}  // namespace

void Batch::add_shared_clsact(int ifindex, uint32_t ingress_block, uint32_t egress_block) {
  const std::string what = "interface " + std::to_string(ifindex) + ": clsact on shared blocks";
  int e = 0;
  nl_msg* m = qdisc_request(NLM_F_CREATE | NLM_F_EXCL, ifindex, TC_H_CLSACT, TC_H_MAKE(TC_H_CLSACT, 0), "clsact", e);
  if (!m) return queue(nullptr, -NLE_NOMEM, what);
  if (e >= 0) e = nla_put_u32(m, TCA_INGRESS_BLOCK, ingress_block);
  if (e >= 0) e = nla_put_u32(m, TCA_EGRESS_BLOCK, egress_block);
  queue(m, e, what);
}

void Batch::add_block_bpf(uint32_t block, int prog_fd, const std::string& name) {
  const std::string what = "BPF program " + name + " on tc block " + std::to_string(block);
  nl_msg* m = nlmsg_alloc_simple(RTM_NEWTFILTER, NLM_F_CREATE | NLM_F_EXCL);
  if (!m) return queue(nullptr, -NLE_NOMEM, what);
  tcmsg t{};
  t.tcm_family = AF_UNSPEC;
  t.tcm_ifindex = int(TCM_IFINDEX_MAGIC_BLOCK);
  t.tcm_block_index = block;
  t.tcm_handle = 1;
  t.tcm_info = TC_H_MAKE(1u << 16, htons(ETH_P_ALL));
  int e = nlmsg_append(m, &t, sizeof t, NLMSG_ALIGNTO);
  if (e >= 0) e = nla_put_string(m, TCA_KIND, "bpf");
  nlattr* opts = e >= 0 ? nla_nest_start(m, TCA_OPTIONS) : nullptr;
  if (e >= 0 && !opts) e = -NLE_NOMEM;
  if (e >= 0) e = nla_put_u32(m, TCA_BPF_FD, uint32_t(prog_fd));
  if (e >= 0) e = nla_put_string(m, TCA_BPF_NAME, name.c_str());
  if (e >= 0) e = nla_put_u32(m, TCA_BPF_FLAGS, TCA_BPF_FLAG_ACT_DIRECT);
  if (e >= 0) e = nla_nest_end(m, opts);
  queue(m, e, what);
}

void Batch::add_netem(int ifindex, uint64_t delay_ns, uint32_t limit) {
  const std::string what = "interface " + std::to_string(ifindex) + ": netem delay " + std::to_string(delay_ns) + " ns";
  int e = 0;
  nl_msg* m = qdisc_request(NLM_F_CREATE | NLM_F_REPLACE, ifindex, TC_H_ROOT, TC_H_MAKE(1u << 16, 0), "netem", e);
  if (!m) return queue(nullptr, -NLE_NOMEM, what);
  // netem's options are its fixed struct followed by attributes; the delay goes as
  // TCA_NETEM_LATENCY64 (nanoseconds) rather than the struct's scheduler ticks.
  tc_netem_qopt q{};
  q.limit = limit;
  nlattr* opts = e >= 0 ? nla_nest_start(m, TCA_OPTIONS) : nullptr;
  if (e >= 0 && !opts) e = -NLE_NOMEM;
  if (e >= 0) e = nlmsg_append(m, &q, sizeof q, NLMSG_ALIGNTO);
  if (e >= 0) e = nla_put_u64(m, TCA_NETEM_LATENCY64, delay_ns);
  if (e >= 0) e = nla_nest_end(m, opts);
  queue(m, e, what);
}

void Batch::set_pause(const PauseSpec& p) {
  std::unique_ptr<rtnl_qdisc, Deleter<rtnl_qdisc, rtnl_qdisc_put>> q(rtnl_qdisc_alloc());
  const std::string what = "interface " + std::to_string(p.ifindex) + ": " + (p.paused ? "pause" : "resume") +
                           " priority " + std::to_string(p.prio);
  if (!q) return queue(nullptr, -NLE_NOMEM, what);
  auto* tc = reinterpret_cast<rtnl_tc*>(q.get());
  rtnl_tc_set_ifindex(tc, p.ifindex);
  rtnl_tc_set_parent(tc, TC_H_MAKE(p.major << 16, p.class_base + p.prio));
  rtnl_tc_set_handle(tc, TC_H_MAKE((p.major + 1 + p.prio) << 16, 0));
  rtnl_tc_set_kind(tc, "tbf");
  const int frame = static_cast<int>(p.mtu) + 14;
  const int line = static_cast<int>(std::min<uint64_t>(p.rate_bps / 8, INT32_MAX));
  // Unpaused, the TBF must hold nothing back: HTB's class shapes the line. At the line's own
  // rate it did (a second shaper in series with a smaller bucket): when HTB made up a late
  // timer with a burst, the TBF throttled, HTB found its leaf empty-handed ("tbf qdisc is
  // non-work-conserving?" in the kernel log) and the line waited for the TBF's soft timer,
  // 3-5 ms on this 2-core VM at HZ 250. So it resumes to libnl's ceiling (int bytes/s).
  const int open = INT32_MAX;
  // Paused: 1 byte/s, so the bucket (one frame and a margin, full when the pause starts: the
  // frame a real port may still finish) refills in over an hour and nothing else leaves. The
  // bucket must stay, as TBF drops a packet larger than it at enqueue. libnl passes the
  // bucket as a time in 32-bit ticks, which wraps past 4.29 s (measured: every packet
  // dropped), so the paused bucket also goes in bytes as TCA_TBF_BURST, which the kernel
  // takes instead (3.13+). (A trickle of a frame per 4 s before hid PGs left unsynced.)
  const int bucket = p.paused ? frame + kPauseBucketMargin : std::max(2 * frame, line / 1000);
  const int rate = p.paused ? 1 : open;
  rtnl_qdisc_tbf_set_limit(q.get(), static_cast<int>(std::min<uint32_t>(p.limit, INT32_MAX)));
  rtnl_qdisc_tbf_set_rate(q.get(), rate, bucket, 0);
  nl_msg* msg = nullptr;
  // Create at set-up, change in place afterwards (the same handle under the same class).
  int e = rtnl_qdisc_build_add_request(q.get(), NLM_F_CREATE | NLM_F_REPLACE, &msg);
  if (e >= 0 && p.paused) e = append_to_options(msg, TCA_TBF_BURST, uint32_t(bucket));
  queue(msg, e, what);
}

Status Batch::flush() {
  struct Clear {
    Batch& b;
    ~Clear() {
      for (auto& p : b.pending_) nlmsg_free(p.msg);
      b.pending_.clear();
      b.build_error_ = Status::success();
    }
  } clear{*this};
  if (!build_error_.ok()) return build_error_;
  int fd = nl_socket_get_fd(sock_.get());
  int one = 1;
  // Extended acks carry the kernel's own words for a refusal; capped acks stay small.
  setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
  setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
  // FORCE needs CAP_NET_ADMIN, which whoever makes fabrics has.
  // libnl leaves 32 KB buffers; a window of requests and its acks need more.
  int bufsize = 1 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bufsize, sizeof bufsize) != 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof bufsize);
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bufsize, sizeof bufsize) != 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof bufsize);

  Status first;
  size_t first_index = pending_.size();
  std::vector<char> out, in(1 << 16);
  for (size_t base = 0, end = 0; base < pending_.size(); base = end) {
    out.clear();
    // A window: up to kWindow requests and kWindowBytes (HTB classes carry 2 KB of rate
    // tables each; a send must fit the socket's send buffer).
    for (end = base; end < pending_.size() && end - base < kWindow; ++end) {
      nlmsghdr* h = nlmsg_hdr(pending_[end].msg);
      if (end > base && out.size() + h->nlmsg_len > kWindowBytes) break;
      h->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
      h->nlmsg_seq = static_cast<uint32_t>(end + 1);
      h->nlmsg_pid = 0;
      const char* p = reinterpret_cast<const char*>(h);
      out.insert(out.end(), p, p + h->nlmsg_len);
      out.resize(NLMSG_ALIGN(out.size()));
    }
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    ssize_t sent;
    do sent = sendto(fd, out.data(), out.size(), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel);
    while (sent < 0 && errno == EINTR);
    if (sent != static_cast<ssize_t>(out.size()))
      return Status{NLE_FAILURE, std::string("netlink send: ") + std::strerror(errno)};
    for (size_t acked = 0; acked < end - base;) {
      ssize_t n = recv(fd, in.data(), in.size(), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status{NLE_FAILURE, std::string("netlink receive: ") + std::strerror(errno)};
      int len = static_cast<int>(n);
      for (auto* h = reinterpret_cast<nlmsghdr*>(in.data()); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
        if (h->nlmsg_type != NLMSG_ERROR) continue;
        ++acked;
        auto* e = static_cast<nlmsgerr*>(NLMSG_DATA(h));
        size_t idx = h->nlmsg_seq - 1;
        if (e->error == 0 || idx >= pending_.size() || idx >= first_index) continue;
        if (pending_[idx].tolerated && -e->error == pending_[idx].tolerated) continue;
        std::string reason = std::strerror(-e->error);
        if (h->nlmsg_flags & NLM_F_ACK_TLVS) {
          // With NETLINK_CAP_ACK the TLVs follow the echoed header directly.
          auto* attrs = reinterpret_cast<nlattr*>(reinterpret_cast<char*>(e) + sizeof *e);
          int alen = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof *e));
          nlattr* tb[NLMSGERR_ATTR_MAX + 1] = {};
          if (alen > 0 && nla_parse(tb, NLMSGERR_ATTR_MAX, attrs, alen, nullptr) == 0 && tb[NLMSGERR_ATTR_MSG])
            reason += " (" + std::string(nla_get_string(tb[NLMSGERR_ATTR_MSG])) + ")";
        }
        first_index = idx;
        first = Status{-e->error, pending_[idx].what + ": " + reason};
      }
    }
  }
  return first;
}

}  // namespace rocelab::netlink
