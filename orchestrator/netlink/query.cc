#include "netlink/query.h"

#include <arpa/inet.h>
#include <linux/if.h>
#include <netlink/cache.h>
#include <netlink/route/addr.h>
#include <netlink/route/class.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/htb.h>
#include <netlink/route/qdisc/tbf.h>
#include <netlink/route/tc.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>

namespace rocelab::netlink {

namespace {

template <class T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using CachePtr = std::unique_ptr<nl_cache, Deleter<nl_cache, nl_cache_free>>;

LinkInfo info_of(rtnl_link* l) {
  const unsigned flags = rtnl_link_get_flags(l);
  return {rtnl_link_get_name(l), rtnl_link_get_ifindex(l), rtnl_link_get_mtu(l), (flags & IFF_UP) != 0,
          (flags & IFF_LOWER_UP) != 0};
}

}  // namespace

std::optional<LinkInfo> link_with_address(RouteSocket& s, uint32_t addr, Status& st) {
  nl_cache* raw = nullptr;
  if (int e = rtnl_addr_alloc_cache(s.get(), &raw); e < 0) {
    st = Status::from_nl(e, "list addresses");
    return std::nullopt;
  }
  CachePtr addrs(raw);
  const uint32_t want = htonl(addr);
  for (nl_object* o = nl_cache_get_first(addrs.get()); o; o = nl_cache_get_next(o)) {
    auto* a = reinterpret_cast<rtnl_addr*>(o);
    nl_addr* local = rtnl_addr_get_local(a);
    if (rtnl_addr_get_family(a) != AF_INET || !local || nl_addr_get_len(local) != 4 ||
        std::memcmp(nl_addr_get_binary_addr(local), &want, 4) != 0)
      continue;
    return link(s, rtnl_addr_get_ifindex(a), st);
  }
  return std::nullopt;
}

std::optional<std::vector<LinkInfo>> list_links(RouteSocket& s, int min_ifindex, Status& st) {
  nl_cache* raw = nullptr;
  if (int e = rtnl_link_alloc_cache(s.get(), AF_UNSPEC, &raw); e < 0) {
    st = Status::from_nl(e, "list interfaces");
    return std::nullopt;
  }
  CachePtr links(raw);
  std::vector<LinkInfo> out;
  for (nl_object* o = nl_cache_get_first(links.get()); o; o = nl_cache_get_next(o)) {
    auto* l = reinterpret_cast<rtnl_link*>(o);
    if (rtnl_link_get_ifindex(l) >= min_ifindex) out.push_back(info_of(l));
  }
  return out;
}

std::optional<LinkInfo> link(RouteSocket& s, int ifindex, Status& st) {
  rtnl_link* l = nullptr;
  if (int e = rtnl_link_get_kernel(s.get(), ifindex, nullptr, &l); e < 0) {
    st = Status::from_nl(e, "interface " + std::to_string(ifindex));
    return std::nullopt;
  }
  LinkInfo i = info_of(l);
  rtnl_link_put(l);
  return i;
}

std::optional<std::array<ClassStats, 8>> class_stats(RouteSocket& s, int ifindex, uint32_t major, uint32_t class_base,
                                                     Status& st) {
  nl_cache* raw = nullptr;
  if (int e = rtnl_class_alloc_cache(s.get(), ifindex, &raw); e < 0) {
    st = Status::from_nl(e, "list classes of interface " + std::to_string(ifindex));
    return std::nullopt;
  }
  CachePtr classes(raw);
  std::array<ClassStats, 8> out{};
  for (nl_object* co = nl_cache_get_first(classes.get()); co; co = nl_cache_get_next(co)) {
    auto* tc = reinterpret_cast<rtnl_tc*>(co);
    const uint32_t h = rtnl_tc_get_handle(tc);
    if ((h >> 16) != major || (h & 0xffff) < class_base || (h & 0xffff) >= class_base + out.size()) continue;
    ClassStats& c = out[(h & 0xffff) - class_base];
    c.bytes = rtnl_tc_get_stat(tc, RTNL_TC_BYTES);
    c.packets = rtnl_tc_get_stat(tc, RTNL_TC_PACKETS);
    c.drops = rtnl_tc_get_stat(tc, RTNL_TC_DROPS);
    c.backlog = static_cast<uint32_t>(rtnl_tc_get_stat(tc, RTNL_TC_BACKLOG));
  }
  return out;
}

std::optional<PauseState> pause_state(RouteSocket& s, int ifindex, uint32_t major, uint32_t class_base, uint32_t prio,
                                      Status& st) {
  auto l = link(s, ifindex, st);
  if (!l) return std::nullopt;
  nl_cache *classes = nullptr, *qdiscs = nullptr;
  if (int e = rtnl_class_alloc_cache(s.get(), ifindex, &classes); e < 0) {
    st = Status::from_nl(e, "list classes of interface " + std::to_string(ifindex));
    return std::nullopt;
  }
  CachePtr cc(classes);
  if (int e = rtnl_qdisc_alloc_cache(s.get(), &qdiscs); e < 0) {
    st = Status::from_nl(e, "list qdiscs");
    return std::nullopt;
  }
  CachePtr qc(qdiscs);
  PauseState ps;
  ps.spec = {ifindex, major, class_base, prio, false, 0, l->mtu, 0};
  if (auto* c = rtnl_class_get(classes, ifindex, TC_H_MAKE(major << 16, 1))) {
    uint64_t rate = 0;
    if (rtnl_htb_get_rate64(c, &rate) == 0) ps.spec.rate_bps = rate * 8;
    rtnl_class_put(c);
  }
  rtnl_qdisc* leaf = rtnl_qdisc_get_by_parent(qdiscs, ifindex, TC_H_MAKE(major << 16, class_base + prio));
  if (leaf && std::string(rtnl_tc_get_kind(reinterpret_cast<rtnl_tc*>(leaf))) == "tbf") {
    ps.pausable = ps.spec.rate_bps > 0;
    ps.spec.limit = static_cast<uint32_t>(rtnl_qdisc_tbf_get_limit(leaf));
    const int rate = rtnl_qdisc_tbf_get_rate(leaf);
    // Resumed, TBF runs at the line (capped as set_pause caps it); paused, at a trickle far
    // below even the slowest line.
    const uint64_t line = std::min<uint64_t>(ps.spec.rate_bps / 8, INT32_MAX);
    ps.spec.paused = rate > 0 && 2 * uint64_t(rate) < line;
  }
  if (leaf) rtnl_qdisc_put(leaf);
  return ps;
}

}  // namespace rocelab::netlink
