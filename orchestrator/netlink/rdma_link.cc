#include "netlink/rdma_link.h"

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <rdma/rdma_netlink.h>

#include <memory>

namespace rocelab::netlink {

namespace {

struct SockDeleter {
  void operator()(nl_sock* s) const { nl_socket_free(s); }
};
using Sock = std::unique_ptr<nl_sock, SockDeleter>;
struct MsgDeleter {
  void operator()(nl_msg* m) const { nlmsg_free(m); }
};
using Msg = std::unique_ptr<nl_msg, MsgDeleter>;

constexpr int nldev(int cmd) { return RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd); }

Sock open_rdma(std::string& why) {
  Sock s(nl_socket_alloc());
  if (!s) return why = "RDMA netlink: out of memory", nullptr;
  if (int e = nl_connect(s.get(), NETLINK_RDMA); e < 0) return why = std::string("RDMA netlink: ") + nl_geterror(e), nullptr;
  return s;
}

// Sends one request and waits for the kernel's acknowledgement.
bool request(nl_sock* s, Msg m, const std::string& what, std::string& why) {
  if (int e = nl_send_auto(s, m.get()); e < 0) return why = what + ": " + nl_geterror(e), false;
  if (int e = nl_wait_for_ack(s); e < 0) return why = what + ": " + nl_geterror(e), false;
  return true;
}

}  // namespace

bool add_rxe_link(const std::string& name, const std::string& netdev, std::string& why) {
  auto s = open_rdma(why);
  if (!s) return false;
  Msg m(nlmsg_alloc_simple(nldev(RDMA_NLDEV_CMD_NEWLINK), NLM_F_REQUEST | NLM_F_ACK));  // no CREATE|EXCL: RDMA netlink reads 0x200 as a dump
  if (!m || nla_put_string(m.get(), RDMA_NLDEV_ATTR_DEV_NAME, name.c_str()) < 0 ||
      nla_put_string(m.get(), RDMA_NLDEV_ATTR_LINK_TYPE, "rxe") < 0 ||
      nla_put_string(m.get(), RDMA_NLDEV_ATTR_NDEV_NAME, netdev.c_str()) < 0)
    return why = "RDMA netlink: out of memory", false;
  return request(s.get(), std::move(m), "rdma link add " + name + " type rxe netdev " + netdev, why);
}

}  // namespace rocelab::netlink
