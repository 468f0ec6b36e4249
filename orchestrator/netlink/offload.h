// A port's offloads as the fabric needs them (DESIGN.md §1): segmentation off, so qdiscs and
// BPF see wire-size packets; GRO on, which on a veth means NAPI: the peer's transmit goes
// into this port's one receive ring, in order. Without it each packet joins the backlog of
// whichever CPU sent it, and two CPUs can deliver one flow's packets swapped (measured: a
// lossless run's receiver filled a one-packet gap one serialisation time later, and RC
// went back N). GRO merges no UDP here (no UDP GRO socket, forwarding or fraglist GRO).
// The kernel has no rtnetlink call for this; the ethtool ioctl is the interface libnl lacks,
// used on a socket that lives in the port's namespace.
#pragma once

#include <string>

namespace rocelab::netlink {

// `inet_sock`: an AF_INET datagram socket opened in the port's namespace.
bool set_port_offloads(int inet_sock, const std::string& ifname, std::string& why);

}  // namespace rocelab::netlink
