#include "netlink/datapath_probe.h"

#include <linux/pkt_sched.h>
#include <netlink/errno.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <linux/rtnetlink.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>

#include <memory>
#include <sstream>

#include "netlink/route_socket.h"

namespace rocelab::netlink {

namespace {

struct LinkDeleter {
  void operator()(rtnl_link* l) const { rtnl_link_put(l); }
};

// Asks the kernel for a qdisc of `kind` with nothing but TCA_KIND. An unknown kind is
// refused with ENOENT before any option is looked at; a known one is created or refused for
// its options. (libnl's per-kind helpers would fill options, and some assert without them.)
Probe try_qdisc(nl_sock* sock, int ifindex, const std::string& kind) {
  Probe p{"qdisc:" + kind, false, ""};
  std::unique_ptr<nl_msg, decltype(&nlmsg_free)> msg(
      nlmsg_alloc_simple(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK), nlmsg_free);
  struct tcmsg tcm {};
  tcm.tcm_family = AF_UNSPEC;
  tcm.tcm_ifindex = ifindex;
  bool clsact = kind == "clsact";
  tcm.tcm_parent = clsact ? TC_H_CLSACT : TC_H_ROOT;
  tcm.tcm_handle = clsact ? TC_H_MAKE(TC_H_CLSACT, 0) : TC_H_MAKE(1u << 16, 0);
  if (!msg || nlmsg_append(msg.get(), &tcm, sizeof tcm, NLMSG_ALIGNTO) < 0 ||
      nla_put_string(msg.get(), TCA_KIND, kind.c_str()) < 0) {
    p.why = "could not build the netlink message";
    return p;
  }
  int err = nl_send_auto(sock, msg.get());
  if (err >= 0) err = nl_wait_for_ack(sock);
  if (err >= 0) {
    p.ok = true;
    p.why = "created on a veth in a private namespace";
    struct tcmsg del = tcm;
    std::unique_ptr<nl_msg, decltype(&nlmsg_free)> dm(nlmsg_alloc_simple(RTM_DELQDISC, NLM_F_ACK), nlmsg_free);
    if (dm && nlmsg_append(dm.get(), &del, sizeof del, NLMSG_ALIGNTO) >= 0 && nl_send_auto(sock, dm.get()) >= 0)
      nl_wait_for_ack(sock);
  } else if (err == -NLE_OBJ_NOTFOUND) {
    p.why = "the kernel does not know this qdisc (" + std::string(nl_geterror(err)) + ")";
  } else {
    p.ok = true;
    p.why = std::string("known to the kernel (it wants options: ") + nl_geterror(err) + ")";
  }
  return p;
}

}  // namespace

std::vector<Probe> probe_datapath(const std::vector<std::string>& qdisc_kinds) {
  std::vector<Probe> out;
  Status st;
  auto sock = RouteSocket::open(st);
  if (!sock) {
    out.push_back({"netlink", false, st.text});
    return out;
  }
  std::unique_ptr<rtnl_link, LinkDeleter> veth(rtnl_link_veth_alloc());
  rtnl_link_set_name(veth.get(), "probe0");
  rtnl_link_set_name(rtnl_link_veth_get_peer(veth.get()), "probe1");
  int err = rtnl_link_add(sock->get(), veth.get(), NLM_F_CREATE | NLM_F_EXCL);
  if (err < 0) {
    out.push_back({"veth", false, Status::from_nl(err, "create veth pair").text});
    return out;
  }
  out.push_back({"veth", true, "created a veth pair in a private namespace"});
  rtnl_link* raw = nullptr;
  if (int e = rtnl_link_get_kernel(sock->get(), 0, "probe0", &raw); e < 0) {
    out.push_back({"veth", false, Status::from_nl(e, "look up probe0").text});
    return out;
  }
  std::unique_ptr<rtnl_link, LinkDeleter> link(raw);
  int ifindex = rtnl_link_get_ifindex(link.get());
  for (const auto& kind : qdisc_kinds) out.push_back(try_qdisc(sock->get(), ifindex, kind));
  return out;
}

std::string encode(const std::vector<Probe>& probes) {
  std::string out;
  for (const auto& p : probes) {
    std::string why = p.why;
    for (char& c : why)
      if (c == '\n' || c == '\t') c = ' ';
    out += p.name + "\t" + (p.ok ? "1" : "0") + "\t" + why + "\n";
  }
  return out;
}

std::vector<Probe> decode(const std::string& text) {
  std::vector<Probe> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
    if (t1 == std::string::npos || t2 == std::string::npos) continue;
    out.push_back({line.substr(0, t1), line.substr(t1 + 1, 1) == "1", line.substr(t2 + 1)});
  }
  return out;
}

}  // namespace rocelab::netlink
