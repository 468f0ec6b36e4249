// IPv4 socket addresses from the host-order addresses the model plans.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>

namespace rocelab::sys {

inline sockaddr_in ipv4_sockaddr(uint32_t addr, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(addr);
  a.sin_port = htons(port);
  return a;
}

}  // namespace rocelab::sys
