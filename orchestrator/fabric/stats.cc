#include "fabric/stats.h"

#include <netlink/cache.h>
#include <netlink/route/class.h>
#include <netlink/route/link.h>
#include <netlink/route/tc.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/htb.h>
#include <netlink/route/qdisc/tbf.h>

#include <bpf/bpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "bpf/port_programs.h"
#include "fabric/realiser.h"
#include "netlink/batch.h"
#include "netlink/route_socket.h"
#include "sys/netns.h"

namespace rocelab::fabric {

namespace {

template <class T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using CachePtr = std::unique_ptr<nl_cache, Deleter<nl_cache, nl_cache_free>>;

bool wanted(const std::string& only, const std::string& node, const std::string& port) {
  if (only.empty()) return true;
  auto colon = only.find(':');
  if (colon == std::string::npos) return only == node;
  return only.substr(0, colon) == node && only.substr(colon + 1) == port;
}

bool read_node(const NodeRef& n, const std::string& only, std::unique_ptr<bpf::Counters>& counters,
               std::vector<PortStats>& out, std::string& why) {
  netlink::Status st;
  auto sock = netlink::RouteSocket::open(st);
  if (!sock) {
    why = st.text;
    return false;
  }
  nl_cache* raw = nullptr;
  if (int e = rtnl_link_alloc_cache(sock->get(), AF_UNSPEC, &raw); e < 0) {
    why = netlink::Status::from_nl(e, n.node + ": list interfaces").text;
    return false;
  }
  CachePtr links(raw);
  for (nl_object* o = nl_cache_get_first(links.get()); o; o = nl_cache_get_next(o)) {
    auto* l = reinterpret_cast<rtnl_link*>(o);
    int ifindex = rtnl_link_get_ifindex(l);
    if (ifindex < RL_FIRST_PORT_IFINDEX || !wanted(only, n.node, rtnl_link_get_name(l))) continue;
    if (!counters && !(counters = bpf::counters_of_attached_port(ifindex, why))) return false;
    PortStats ps;
    ps.node = n.node;
    ps.port = rtnl_link_get_name(l);
    ps.ifindex = ifindex;
    sys::Fd egress(bpf::attached_egress_fd(ifindex, why));
    if (!egress.valid()) return false;
    auto probe_all = [&](std::array<uint32_t, RL_NUM_PRIO>& d) {
      for (uint32_t p = 0; p < RL_NUM_PRIO; ++p) {
        auto v = bpf::probe_depth(egress.get(), ifindex, p, why);
        if (!v) return false;
        d[p] = *v;
      }
      return true;
    };
    // A consistent snapshot, seqlock style: the program's reading of every queue before and
    // after the class dump; if a queue moved in between, take it again (a few times).
    for (int attempt = 0; attempt < 4; ++attempt) {
      std::array<uint32_t, RL_NUM_PRIO> before{}, after{};
      if (!probe_all(before)) return false;
      nl_cache* craw = nullptr;
      if (int e = rtnl_class_alloc_cache(sock->get(), ifindex, &craw); e < 0) {
        why = netlink::Status::from_nl(e, n.node + ":" + ps.port + ": list classes").text;
        return false;
      }
      CachePtr classes(craw);
      for (nl_object* co = nl_cache_get_first(classes.get()); co; co = nl_cache_get_next(co)) {
        auto* tc = reinterpret_cast<rtnl_tc*>(co);
        uint32_t h = rtnl_tc_get_handle(tc);
        if ((h >> 16) != RL_HTB_MAJOR || (h & 0xffff) < RL_CLASS_BASE || (h & 0xffff) >= RL_CLASS_BASE + RL_NUM_PRIO)
          continue;
        PrioStats& s = ps.prio[(h & 0xffff) - RL_CLASS_BASE];
        s.shaper_bytes = rtnl_tc_get_stat(tc, RTNL_TC_BYTES);
        s.shaper_packets = rtnl_tc_get_stat(tc, RTNL_TC_PACKETS);
        s.shaper_drops = rtnl_tc_get_stat(tc, RTNL_TC_DROPS);
        s.backlog_bytes = static_cast<uint32_t>(rtnl_tc_get_stat(tc, RTNL_TC_BACKLOG));
      }
      if (!probe_all(after)) return false;
      for (uint32_t p = 0; p < RL_NUM_PRIO; ++p) ps.prio[p].depth_bytes = after[p];
      if (before == after) break;
    }
    for (uint32_t p = 0; p < RL_NUM_PRIO; ++p)
      ps.prio[p].c = counters->read(static_cast<size_t>(ifindex - RL_FIRST_PORT_IFINDEX), p);
    out.push_back(std::move(ps));
  }
  return true;
}

}  // namespace

std::optional<std::vector<PortStats>> read_stats(const std::vector<NodeRef>& nodes, const std::string& only,
                                                 std::string& why) {
  std::vector<PortStats> out;
  std::unique_ptr<bpf::Counters> counters;  // one map serves every port
  for (const NodeRef& n : nodes) {
    if (!only.empty() && only.substr(0, only.find(':')) != n.node) continue;
    sys::Fd owned;
    int fd = n.netns_fd;
    if (fd < 0) {
      auto f = sys::open_named_netns(n.netns, why);
      if (!f) return std::nullopt;
      owned = std::move(*f);
      fd = owned.get();
    }
    auto scope = sys::NetnsScope::enter(fd, why);
    if (!scope || !read_node(n, only, counters, out, why)) return std::nullopt;
  }
  if (!only.empty() && out.empty()) {
    why = "no port matches '" + only + "' (NODE or NODE:PORT)";
    return std::nullopt;
  }
  return out;
}

std::optional<std::vector<NodeRef>> instance_nodes(const std::string& instance, std::string& why) {
  auto st = instance_status(instance, false, why);
  if (!st) return std::nullopt;
  std::vector<NodeRef> out;
  for (const auto& n : st->nodes)
    if (n.present) out.push_back({n.node, n.netns, -1});
  return out;
}

}  // namespace rocelab::fabric

namespace rocelab::fabric {

namespace {

// NODE:PORT of a running instance, with the calling thread inside the node's namespace
// while this lives.
struct OpenPort {
  std::optional<sys::NetnsScope> scope;
  std::unique_ptr<netlink::RouteSocket> sock;
  int ifindex = 0;
  uint32_t mtu = 0;
};

std::optional<OpenPort> open_port(const std::string& instance, const std::string& target, std::string& why) {
  auto colon = target.find(':');
  if (colon == std::string::npos) {
    why = "expected NODE:PORT, got '" + target + "'";
    return std::nullopt;
  }
  auto nodes = instance_nodes(instance, why);
  if (!nodes) return std::nullopt;
  const std::string node = target.substr(0, colon), port = target.substr(colon + 1);
  auto n = std::find_if(nodes->begin(), nodes->end(), [&](const NodeRef& r) { return r.node == node; });
  if (n == nodes->end()) {
    why = "instance " + instance + " has no node '" + node + "'";
    return std::nullopt;
  }
  auto fd = sys::open_named_netns(n->netns, why);
  if (!fd) return std::nullopt;
  OpenPort op{sys::NetnsScope::enter(fd->get(), why)};
  if (!op.scope) return std::nullopt;
  netlink::Status st;
  op.sock = netlink::RouteSocket::open(st);
  if (!op.sock) {
    why = st.text;
    return std::nullopt;
  }
  rtnl_link* link = nullptr;
  if (int e = rtnl_link_get_kernel(op.sock->get(), 0, port.c_str(), &link); e < 0) {
    why = netlink::Status::from_nl(e, target).text;
    return std::nullopt;
  }
  op.ifindex = rtnl_link_get_ifindex(link);
  op.mtu = rtnl_link_get_mtu(link);
  rtnl_link_put(link);
  return op;
}

}  // namespace

bool set_port_loss(const std::string& instance, const std::string& target, double probability, uint64_t seed,
                   std::string& why) {
  if (!(probability >= 0 && probability <= 1)) {
    why = "loss probability must be within 0..1";
    return false;
  }
  auto op = open_port(instance, target, why);
  if (!op) return false;
  if (op->ifindex < RL_FIRST_PORT_IFINDEX) {
    why = target + " is not a testbed port";
    return false;
  }
  sys::Fd m(bpf::attached_map_fd(op->ifindex, false, "port_info", why));
  if (!m.valid()) return false;
  const uint32_t slot = uint32_t(op->ifindex - RL_FIRST_PORT_IFINDEX);
  rl_port_info info{};
  if (bpf_map_lookup_elem(m.get(), &slot, &info) != 0) {
    why = target + ": read port_info: " + std::strerror(errno);
    return false;
  }
  info.loss = uint32_t(std::min(probability * 4294967296.0, 4294967295.0));
  // splitmix64 of (seed, slot): a distinct, never-zero xorshift state per port.
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (slot + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  info.loss_rng = (z ^ (z >> 31)) | 1;
  if (bpf_map_update_elem(m.get(), &slot, &info, BPF_EXIST) != 0) {
    why = target + ": write port_info: " + std::strerror(errno);
    return false;
  }
  return true;
}

bool set_port_pause(const std::string& instance, const std::string& target, uint32_t prio, bool paused,
                    std::string& why) {
  if (prio >= RL_NUM_PRIO) {
    why = "expected a priority 0..7";
    return false;
  }
  auto op = open_port(instance, target, why);
  if (!op) return false;
  auto& sock = op->sock;
  netlink::PauseSpec ps;
  ps.ifindex = op->ifindex;
  ps.mtu = op->mtu;
  ps.major = RL_HTB_MAJOR;
  ps.class_base = RL_CLASS_BASE;
  ps.prio = prio;
  ps.paused = paused;
  // The line rate from the port's HTB parent class, the limit from the TBF leaf itself.
  nl_cache *classes = nullptr, *qdiscs = nullptr;
  if (rtnl_class_alloc_cache(sock->get(), ps.ifindex, &classes) < 0 || rtnl_qdisc_alloc_cache(sock->get(), &qdiscs) < 0) {
    if (classes) nl_cache_free(classes);
    why = target + ": cannot read its qdiscs";
    return false;
  }
  CachePtr cc(classes), qc(qdiscs);
  if (auto* c = rtnl_class_get(classes, ps.ifindex, TC_H_MAKE(RL_HTB_MAJOR << 16, 1))) {
    uint64_t rate = 0;
    if (rtnl_htb_get_rate64(c, &rate) == 0) ps.rate_bps = rate * 8;
    rtnl_class_put(c);
  }
  rtnl_qdisc* leaf = rtnl_qdisc_get_by_parent(qdiscs, ps.ifindex, TC_H_MAKE(RL_HTB_MAJOR << 16, RL_CLASS_BASE + prio));
  bool tbf = leaf && std::string(rtnl_tc_get_kind(reinterpret_cast<rtnl_tc*>(leaf))) == "tbf";
  if (tbf) ps.limit = static_cast<uint32_t>(rtnl_qdisc_tbf_get_limit(leaf));
  if (leaf) rtnl_qdisc_put(leaf);
  if (!tbf || !ps.rate_bps) {
    why = target + ": priority " + std::to_string(prio) + " cannot pause (PFC priorities only: qos.pfc.priorities)";
    return false;
  }
  netlink::Batch b(*sock);
  b.set_pause(ps);
  if (auto s2 = b.flush(); !s2.ok()) {
    why = s2.text;
    return false;
  }
  return true;
}

}  // namespace rocelab::fabric
