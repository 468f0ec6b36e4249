// UDP traffic for benchmarks, inside a testbed namespace: `send` blasts fixed-size
// datagrams with sendmmsg in batches of 32 for SECONDS; `recv` drains with recvmmsg and
// prints how many arrived in its SECONDS. No UDP GSO: the fabric must see wire-size packets.
//   udp_blast send NETNS DST_IP SIZE SECONDS
//   udp_blast recv NETNS BIND_IP SECONDS
#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kBatch = 32;
constexpr uint16_t kPort = 5001;
using Clock = std::chrono::steady_clock;

int fail(const char* what) {
  std::fprintf(stderr, "udp_blast: %s: %s\n", what, std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: udp_blast send NETNS DST SIZE SECONDS | recv NETNS BIND SECONDS\n");
    return 2;
  }
  const std::string mode = argv[1];
  int ns = open(("/run/netns/" + std::string(argv[2])).c_str(), O_RDONLY | O_CLOEXEC);
  if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) return fail("enter namespace");
  close(ns);
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  if (s < 0) return fail("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(kPort);
  if (inet_pton(AF_INET, argv[3], &addr.sin_addr) != 1) return fail("address");

  if (mode == "send") {
    if (argc < 6) return 2;
    size_t size = std::strtoul(argv[4], nullptr, 10);
    double seconds = std::atof(argv[5]);
    std::vector<char> payload(size, 'x');
    iovec iov{payload.data(), size};
    mmsghdr msgs[kBatch]{};
    for (auto& m : msgs) {
      m.msg_hdr.msg_name = &addr;
      m.msg_hdr.msg_namelen = sizeof addr;
      m.msg_hdr.msg_iov = &iov;
      m.msg_hdr.msg_iovlen = 1;
    }
    unsigned long long sent = 0, refused = 0;
    auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    while (Clock::now() < end) {
      int n = sendmmsg(s, msgs, kBatch, 0);
      if (n > 0) sent += static_cast<unsigned>(n);
      else if (errno == ENOBUFS || errno == EAGAIN) ++refused;  // the sender's own port is full
      else return fail("sendmmsg");
    }
    std::printf("{\"sent\": %llu, \"refused_batches\": %llu}\n", sent, refused);
    return 0;
  }
  if (bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return fail("bind");
  int big = 8 << 20;
  setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
  timeval tv{0, 100000};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  double seconds = std::atof(argv[4]);
  std::vector<char> bufs(kBatch * 2048);
  iovec iovs[kBatch];
  mmsghdr msgs[kBatch]{};
  for (int i = 0; i < kBatch; ++i) {
    iovs[i] = {bufs.data() + i * 2048, 2048};
    msgs[i].msg_hdr.msg_iov = &iovs[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  unsigned long long got = 0;
  auto start = Clock::now();
  auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  while (Clock::now() < end) {
    int n = recvmmsg(s, msgs, kBatch, 0, nullptr);
    if (n > 0) got += static_cast<unsigned>(n);
  }
  std::printf("{\"received\": %llu, \"seconds\": %.6f}\n", got,
              std::chrono::duration<double>(Clock::now() - start).count());
  return 0;
}
