// Segmentation and receive offloads off on a port, so qdiscs and BPF see wire-size packets
// (DESIGN.md §1). The kernel has no rtnetlink call for this; the ethtool ioctl is the
// interface libnl lacks, used on a socket that lives in the port's namespace.
#pragma once

#include <string>

namespace rocelab::netlink {

// `inet_sock`: an AF_INET datagram socket opened in the port's namespace.
bool disable_offloads(int inet_sock, const std::string& ifname, std::string& why);

}  // namespace rocelab::netlink
