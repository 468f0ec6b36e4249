// Soft-RoCE devices (rxe) on a netdev, through RDMA netlink (NETLINK_RDMA, the nldev client):
// what `rdma link add NAME type rxe netdev DEV` sends, without forking it. The kernel loads
// rdma_rxe itself on the first request ("rdma-link-rxe"). An rxe device also goes by itself
// when its netdev is unregistered (a namespace or veth pair removed).
#pragma once

#include <string>

namespace rocelab::netlink {

// Adds rxe device `name` on `netdev`, from the calling thread's network namespace, where
// `netdev` must be. It lives as long as the netdev (no teardown of its own).
bool add_rxe_link(const std::string& name, const std::string& netdev, std::string& why);

}  // namespace rocelab::netlink
