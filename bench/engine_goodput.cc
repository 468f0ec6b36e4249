// Engine goodput against raw UDP on the same path, one core, one run (issue 6 bench).
//
//   engine_goodput SCENARIO FROM TO SECONDS
//
// The fabric must be up. Both phases run in this one thread pinned to CPU 0, receiver and
// sender alike, with sendmmsg/recvmmsg batches of 32:
//   raw UDP: datagrams of a RoCE WRITE MIDDLE packet's UDP size (MTU 1024 + BTH + ICRC),
//            counting 1024 data bytes per datagram that arrives;
//   engine:  `rocelab perf`'s RDMA WRITE, 64 KiB messages, MTU 1024, DCQCN off, one QP,
//            counting message bytes completed (acknowledged end to end).
// Prints one JSON line with both goodputs and engine / raw.
#include <arpa/inet.h>
#include <sched.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "engine/wire.h"
#include "fabric/kernel_plan.h"
#include "model/loader.h"
#include "fabric/local_testbed.h"
#include "sys/netns.h"
#include "workload/perf.h"

namespace {

using namespace rocelab;

int udp_in(const std::string& netns, uint32_t addr, uint16_t port) {
  std::string why;
  auto ns = sys::open_named_netns(netns, why);
  if (!ns) return -1;
  auto scope = sys::NetnsScope::enter(ns->get(), why);
  if (!scope) return -1;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
  // The engine's data class: DSCP 26 with ECT(0), so both phases use the same queue.
  const int buf = 4 << 20, df = IP_PMTUDISC_DO, tos = engine::kTosData;
  setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &df, sizeof df);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(addr);
  a.sin_port = htons(port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  return fd;
}

double raw_udp(const fabric::PortPlan& a, const std::string& ns_a, const fabric::PortPlan& b, const std::string& ns_b,
               double seconds, size_t datagram, size_t data_bytes) {
  const int tx = udp_in(ns_a, a.addr, 0xC000), rx = udp_in(ns_b, b.addr, engine::kRoceUdpPort);
  if (tx < 0 || rx < 0) return -1;
  constexpr int kBatch = 32;
  std::vector<char> out(datagram, 'x'), in(kBatch * 9216);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(b.addr);
  to.sin_port = htons(engine::kRoceUdpPort);
  mmsghdr sm[kBatch], rm[kBatch];
  iovec siov[kBatch], riov[kBatch];
  for (int i = 0; i < kBatch; ++i) {
    siov[i] = {out.data(), datagram};
    sm[i] = {};
    sm[i].msg_hdr.msg_name = &to;
    sm[i].msg_hdr.msg_namelen = sizeof to;
    sm[i].msg_hdr.msg_iov = &siov[i];
    sm[i].msg_hdr.msg_iovlen = 1;
  }
  uint64_t got = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (el >= seconds) break;
    sendmmsg(tx, sm, kBatch, 0);
    for (;;) {
      for (int i = 0; i < kBatch; ++i) {
        riov[i] = {in.data() + i * 9216, 9216};
        rm[i] = {};
        rm[i].msg_hdr.msg_iov = &riov[i];
        rm[i].msg_hdr.msg_iovlen = 1;
      }
      const int n = recvmmsg(rx, rm, kBatch, MSG_DONTWAIT, nullptr);
      if (n <= 0) break;
      got += uint64_t(n);
    }
  }
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  close(tx);
  close(rx);
  return double(got * data_bytes) * 8 / el;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: engine_goodput SCENARIO FROM TO SECONDS\n");
    return 2;
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  sched_setaffinity(0, sizeof one, &one);
  auto loaded = model::load_scenario_file(argv[1]);
  if (!loaded.ok()) {
    std::fprintf(stderr, "engine_goodput: %s does not load\n", argv[1]);
    return 3;
  }
  const auto& s = *loaded.scenario;
  const auto plan = fabric::plan_kernel(s);
  const double seconds = std::atof(argv[4]);
  const fabric::NodePlan *a = nullptr, *b = nullptr;
  for (const auto& n : plan.nodes) {
    if (n.node == argv[2]) a = &n;
    if (n.node == argv[3]) b = &n;
  }
  if (!a || !b) return std::fprintf(stderr, "engine_goodput: no such hosts\n"), 3;
  constexpr uint32_t kMtu = 1024;
  const size_t datagram = engine::wire_size(engine::Opcode::kWriteMiddle, kMtu);
  const double raw = raw_udp(a->ports[0], a->netns, b->ports[0], b->netns, seconds, datagram, kMtu);
  if (raw < 0) return std::fprintf(stderr, "engine_goodput: raw UDP sockets failed\n"), 4;

  workload::PerfOptions o;
  o.from = argv[2];
  o.to = argv[3];
  o.size = 65536;
  o.seconds = seconds;
  o.iterations = 0;
  o.mtu = kMtu;
  o.dcqcn = "off";
  auto t = fabric::LocalTestbed::attach(s.name);
  if (!t) return std::fprintf(stderr, "engine_goodput: %s\n", t.error().what.c_str()), 4;
  auto r = workload::run_perf(s, plan, **t, o);
  if (!r) return std::fprintf(stderr, "engine_goodput: %s\n", r.error().what.c_str()), 4;
  const auto& q = r->requester.at(0);
  std::printf(
      "{\"datagram_bytes\": %zu, \"raw_udp_gbps\": %.4f, \"engine_gbps\": %.4f, \"ratio\": %.4f, "
      "\"engine_messages\": %llu, \"retransmitted\": %llu, \"send_blocked\": %llu}\n",
      datagram, raw / 1e9, r->avg_bps / 1e9, r->avg_bps / raw, (unsigned long long)r->messages,
      (unsigned long long)q.rc.retransmitted, (unsigned long long)r->from_stats.send_blocked);
  return 0;
}
