// Reading a namespace's ports and their schedulers through rtnetlink (libnl caches), for
// the layers above that must not touch libnl: the socket's namespace is the one read.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "netlink/batch.h"
#include "netlink/route_socket.h"

namespace rocelab::netlink {

struct LinkInfo {
  std::string name;
  int ifindex = 0;
  uint32_t mtu = 0;
  bool admin_up = false;  // IFF_UP
  bool carrier = false;   // IFF_LOWER_UP
};

// Every interface with ifindex >= min_ifindex.
std::optional<std::vector<LinkInfo>> list_links(RouteSocket& s, int min_ifindex, Status& st);
std::optional<LinkInfo> link(RouteSocket& s, int ifindex, Status& st);
// The interface that holds IPv4 address `addr` (host order); nullopt with st ok: none does.
std::optional<LinkInfo> link_with_address(RouteSocket& s, uint32_t addr, Status& st);

// What HTB counted for each leaf class MAJOR:(class_base + p) of a port.
struct ClassStats {
  uint64_t bytes = 0, packets = 0, drops = 0;
  uint32_t backlog = 0;
};
std::optional<std::array<ClassStats, 8>> class_stats(RouteSocket& s, int ifindex, uint32_t major, uint32_t class_base,
                                                     Status& st);

// The pause settings of priority `prio` of a port: the line rate of its HTB parent class
// MAJOR:1 and the TBF leaf under MAJOR:(class_base + prio), if the priority has one (a PFC
// priority), with whether it is paused now (its rate is below the line's).
struct PauseState {
  PauseSpec spec;     // paused = the current state
  bool pausable = false;
};
std::optional<PauseState> pause_state(RouteSocket& s, int ifindex, uint32_t major, uint32_t class_base, uint32_t prio,
                                      Status& st);

}  // namespace rocelab::netlink
