#include "fabric/connectivity.h"

#include <arpa/inet.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <poll.h>

#include <algorithm>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <numeric>

namespace rocelab::fabric {

namespace {

using Clock = std::chrono::steady_clock;

uint16_t inet_checksum(const uint8_t* p, size_t n) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < n; i += 2) sum += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
  if (n & 1) sum += static_cast<uint32_t>(p[n - 1] << 8);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

struct Nic {
  size_t node, port;
  uint32_t addr;
  std::string label;
  sys::Fd sock;
  size_t component;
};

size_t find(std::vector<size_t>& parent, size_t x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

}  // namespace

std::optional<Reachability> check_connectivity(const Fabric& f, std::string& why, int rounds) {
  const auto t0 = Clock::now();
  const KernelPlan& kp = f.plan();
  // Parts of the fabric joined through switches (hosts never forward).
  std::vector<size_t> parent(kp.nodes.size());
  std::iota(parent.begin(), parent.end(), 0);
  for (const VethPlan& v : kp.veths)
    if (!kp.nodes[v.a_node].host && !kp.nodes[v.b_node].host) parent[find(parent, v.a_node)] = find(parent, v.b_node);

  // A split fabric pings from this machine's hosts to every host: another machine's are
  // destinations only (its part pings from them).
  std::vector<Nic> nics;
  for (size_t x = 0; x < kp.nodes.size(); ++x) {
    const NodePlan& np = kp.nodes[x];
    if (!np.host) continue;
    if (!kp.part.has(x)) {
      for (size_t p = 0; p < np.ports.size(); ++p)
        nics.push_back({x, p, np.ports[p].addr, np.node + ":" + np.ports[p].ifname, sys::Fd(), find(parent, np.ports[p].peer_node)});
      continue;
    }
    auto scope = sys::NetnsScope::enter(f.netns_fd(x), why);
    if (!scope) return std::nullopt;
    for (size_t p = 0; p < np.ports.size(); ++p) {
      const PortPlan& pp = np.ports[p];
      sys::Fd s(socket(AF_INET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_ICMP));
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_addr.s_addr = htonl(pp.addr);
      if (!s.valid() || bind(s.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
        why = np.node + ":" + pp.ifname + ": ICMP socket: " + std::strerror(errno);
        return std::nullopt;
      }
      nics.push_back({x, p, pp.addr, np.node + ":" + pp.ifname, std::move(s), find(parent, pp.peer_node)});
    }
  }

  Reachability r;
  const size_t m = nics.size();
  // reached[i * m + j]: an echo from NIC i to NIC j came back. Only pairs between hosts.
  std::vector<char> wanted(m * m, 0), reached(m * m, 0);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < m; ++j) {
      if (nics[i].node == nics[j].node || !nics[i].sock.valid()) continue;
      if (nics[i].component != nics[j].component) {
        ++r.disconnected;
        continue;
      }
      wanted[i * m + j] = 1;
      ++r.pairs;
    }
  // Applied link delay lengthens every round trip (x D on the wall clock): allow a path of
  // eight delayed links each way on top of the usual wait.
  int64_t longest_ns = 0;
  for (const auto& w : kp.wire.links) longest_ns = std::max<int64_t>(longest_ns, int64_t(w.delay_ns));
  const auto round_trip = std::chrono::milliseconds(16 * longest_ns / 1'000'000);
  const uint16_t ident = static_cast<uint16_t>(getpid());
  std::vector<pollfd> pfds(m);
  for (size_t i = 0; i < m; ++i) pfds[i] = {nics[i].sock.get(), POLLIN, 0};

  for (int round = 0; round < rounds && r.reached < r.pairs; ++round) {
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < m; ++j) {
        if (!wanted[i * m + j] || reached[i * m + j]) continue;
        // Identifier: ours; sequence: the destination, so a reply names its pair.
        uint8_t pkt[16] = {ICMP_ECHO, 0, 0, 0, static_cast<uint8_t>(ident >> 8), static_cast<uint8_t>(ident),
                           static_cast<uint8_t>(j >> 8), static_cast<uint8_t>(j)};
        std::memcpy(pkt + 8, "rocelab!", 8);
        uint16_t c = inet_checksum(pkt, sizeof pkt);
        pkt[2] = static_cast<uint8_t>(c >> 8);
        pkt[3] = static_cast<uint8_t>(c);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_addr.s_addr = htonl(nics[j].addr);
        sendto(nics[i].sock.get(), pkt, sizeof pkt, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
      }
    const auto deadline = Clock::now() + std::chrono::milliseconds(500 << round) + round_trip;
    while (r.reached < r.pairs) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0 || poll(pfds.data(), pfds.size(), static_cast<int>(left)) <= 0) break;
      for (size_t i = 0; i < m; ++i) {
        if (!(pfds[i].revents & POLLIN)) continue;
        uint8_t buf[256];
        ssize_t n;
        while ((n = recv(pfds[i].fd, buf, sizeof buf, 0)) > 0) {
          size_t ihl = static_cast<size_t>(buf[0] & 0x0f) * 4;
          if (static_cast<size_t>(n) < ihl + 8) continue;
          const uint8_t* icmp = buf + ihl;
          uint16_t id = static_cast<uint16_t>(icmp[4] << 8 | icmp[5]);
          size_t j = static_cast<size_t>(icmp[6] << 8 | icmp[7]);
          uint32_t src;
          std::memcpy(&src, buf + 12, 4);
          if (icmp[0] != ICMP_ECHOREPLY || id != ident || j >= m || ntohl(src) != nics[j].addr) continue;
          if (wanted[i * m + j] && !reached[i * m + j]) {
            reached[i * m + j] = 1;
            ++r.reached;
          }
        }
      }
    }
  }
  for (size_t i = 0; i < m && r.unreachable.size() < 10; ++i)
    for (size_t j = 0; j < m && r.unreachable.size() < 10; ++j)
      if (wanted[i * m + j] && !reached[i * m + j]) r.unreachable.push_back(nics[i].label + " -> " + nics[j].label);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace rocelab::fabric
