#include "netlink/offload.h"

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <cstring>

namespace rocelab::netlink {

bool disable_offloads(int inet_sock, const std::string& ifname, std::string& why) {
  struct Off {
    uint32_t cmd;
    const char* name;
  };
  // TSO and GSO build 64 KB super-packets on transmit, GRO merges them on receive.
  static constexpr Off kOffloads[] = {{ETHTOOL_STSO, "tso"}, {ETHTOOL_SGSO, "gso"}, {ETHTOOL_SGRO, "gro"}};
  for (const Off& o : kOffloads) {
    ethtool_value v{o.cmd, 0};
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
    ifr.ifr_data = reinterpret_cast<char*>(&v);
    if (ioctl(inet_sock, SIOCETHTOOL, &ifr) != 0) {
      why = ifname + ": turn " + o.name + " off: " + std::strerror(errno);
      return false;
    }
  }
  return true;
}

}  // namespace rocelab::netlink
