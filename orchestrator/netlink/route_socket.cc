#include "netlink/route_socket.h"

#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

namespace rocelab::netlink {

Status Status::from_nl(int nl_err, const std::string& what) {
  if (nl_err >= 0) return {};
  int code = -nl_err;
  return Status{code, what + ": " + nl_geterror(nl_err)};
}

std::unique_ptr<RouteSocket> RouteSocket::open(Status& st) {
  nl_sock* s = nl_socket_alloc();
  if (!s) {
    st = Status{NLE_NOMEM, "nl_socket_alloc: out of memory"};
    return nullptr;
  }
  if (int err = nl_connect(s, NETLINK_ROUTE); err < 0) {
    st = Status::from_nl(err, "connect NETLINK_ROUTE");
    nl_socket_free(s);
    return nullptr;
  }
  st = Status::success();
  return std::unique_ptr<RouteSocket>(new RouteSocket(s));
}

RouteSocket::~RouteSocket() { nl_socket_free(sock_); }

}  // namespace rocelab::netlink
