#include "netlink/offload.h"

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <cstring>

namespace rocelab::netlink {

bool set_port_offloads(int inet_sock, const std::string& ifname, std::string& why) {
  struct Setting {
    uint32_t cmd, on;
    const char* name;
  };
  // TSO and GSO build 64 KB super-packets on transmit; GRO is the veth's NAPI mode (header).
  static constexpr Setting kOffloads[] = {{ETHTOOL_STSO, 0, "tso"}, {ETHTOOL_SGSO, 0, "gso"}, {ETHTOOL_SGRO, 1, "gro"}};
  for (const Setting& o : kOffloads) {
    ethtool_value v{o.cmd, o.on};
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
    ifr.ifr_data = reinterpret_cast<char*>(&v);
    if (ioctl(inet_sock, SIOCETHTOOL, &ifr) != 0) {
      why = ifname + ": turn " + o.name + (o.on ? " on: " : " off: ") + std::strerror(errno);
      return false;
    }
  }
  return true;
}

}  // namespace rocelab::netlink
