// bpf tier: the port programs on packets built in memory, through BPF_PROG_TEST_RUN, with
// the queue depth injected through a map (test_run never enqueues into a qdisc). Needs
// root; the process moves into a private network namespace first, so the veth pair that
// gives test_run a device with a port ifindex vanishes with it.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <sys/socket.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "bpf/pause_watch.h"
#include "bpf/fabric_maps.h"
#include "bpf/port_programs.h"
#include "bpf/tc_hook.h"
#include "netlink/batch.h"
#include "sys/netns.h"

using namespace rocelab;

namespace {

constexpr int kPortA = RL_FIRST_PORT_IFINDEX;      // slot 0
constexpr int kPortB = RL_FIRST_PORT_IFINDEX + 1;  // slot 1
constexpr int kPortC = RL_FIRST_PORT_IFINDEX + 2;  // slot 2: a third port of the same node
constexpr int kPortD = RL_FIRST_PORT_IFINDEX + 3;  // C's peer
constexpr uint32_t kMB = 1 << 20;
constexpr uint32_t kJumbo = 9000;  // C and D's MTU

struct Lab {
  std::unique_ptr<bpf::PortPrograms> progs;
  std::unique_ptr<bpf::Counters> counters;
  std::string why;
};

rl_config base_config() {
  rl_config c{};
  for (int d = 0; d < 64; ++d) c.dscp_to_prio[d] = (d >= 24 && d <= 31) ? 3 : (d >= 48 && d <= 55) ? 6 : 0;
  c.lossless_mask = 1u << 3;
  for (auto& l : c.queue_limit) l = 4 * kMB;
  return c;
}

// Once per process: a private namespace with a veth pair at the port ifindexes, and the
// programs loaded for 2 ports.
Lab& lab() {
  static Lab* l = [] {
    auto* x = new Lab;
    if (unshare(CLONE_NEWNET) != 0) {
      x->why = std::string("unshare: ") + std::strerror(errno);
      return x;
    }
    netlink::Status st;
    auto sock = netlink::RouteSocket::open(st);
    if (!sock) {
      x->why = st.text;
      return x;
    }
    netlink::Batch b(*sock);
    b.add_veth({"pa", "pb", kPortA, kPortB, {2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, 1500, -1});
    // Jumbo: the pause watcher's test sends full 9000-byte frames through a paused queue.
    b.add_veth({"pc", "pd", kPortC, kPortD, {2, 0, 0, 0, 0, 3}, {2, 0, 0, 0, 0, 4}, kJumbo, -1});
    b.set_up(kPortB);
    b.set_up(kPortD);
    if (auto s = b.flush(); !s.ok()) {
      x->why = s.text;
      return x;
    }
    x->progs = bpf::PortPrograms::load(4, base_config(), x->why);
    if (!x->progs) return x;
    x->counters = std::make_unique<bpf::Counters>(x->progs->counters_fd(), 4 * RL_NUM_PRIO);
    // Both ends carry the programs, as every fabric port does: a PFC clone redirected to
    // one end is rewritten by its egress and taken in by the other end's ingress.
    for (int port : {kPortA, kPortB, kPortC, kPortD})
      if (!x->progs->attach(port, x->why)) x->progs.reset();
    return x;
  }();
  return *l;
}

uint16_t csum(const uint8_t* p, size_t n) {
  uint32_t s = 0;
  for (size_t i = 0; i + 1 < n; i += 2) s += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return static_cast<uint16_t>(~s);
}

// Ethernet + IPv4 (valid checksum) + UDP, 128 bytes.
std::vector<uint8_t> udp_frame(uint8_t dscp, uint8_t ecn, uint16_t ethertype = 0x0800) {
  std::vector<uint8_t> f(128, 0);
  uint8_t mac[12] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1};
  std::memcpy(f.data(), mac, 12);
  f[12] = static_cast<uint8_t>(ethertype >> 8);
  f[13] = static_cast<uint8_t>(ethertype);
  uint8_t* ip = f.data() + 14;
  ip[0] = 0x45;
  ip[1] = static_cast<uint8_t>(dscp << 2 | ecn);
  ip[2] = 0;
  ip[3] = 114;  // total length
  ip[6] = 0x40; // DF
  ip[8] = 64;
  ip[9] = 17;
  uint32_t src = htonl(0xc6120001), dst = htonl(0xc6120002);
  std::memcpy(ip + 12, &src, 4);
  std::memcpy(ip + 16, &dst, 4);
  uint16_t c = csum(ip, 20);
  ip[10] = static_cast<uint8_t>(c >> 8);
  ip[11] = static_cast<uint8_t>(c);
  ip[20] = 0xc0;  // UDP 49152 -> 4791
  ip[22] = 0x12;
  ip[23] = 0xb7;
  ip[25] = 94;
  return f;
}

struct Result {
  int retval = -1;
  uint32_t priority = 0;
  std::vector<uint8_t> out;
};

Result run(int prog_fd, std::vector<uint8_t> frame, int ifindex, uint32_t repeat = 1, uint32_t mark = 0,
           int ingress_ifindex = 0, uint32_t priority = 0) {
  Result r;
  r.out.resize(frame.size() + 64);
  __sk_buff ctx{};
  ctx.ifindex = static_cast<uint32_t>(ifindex);
  ctx.mark = mark;
  ctx.ingress_ifindex = static_cast<uint32_t>(ingress_ifindex);
  ctx.priority = priority;
  __sk_buff ctx_out{};
  LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = frame.data(), .data_out = r.out.data(),
              .data_size_in = static_cast<uint32_t>(frame.size()), .data_size_out = static_cast<uint32_t>(r.out.size()),
              .ctx_in = &ctx, .ctx_out = &ctx_out, .ctx_size_in = sizeof ctx, .ctx_size_out = sizeof ctx_out,
              .repeat = static_cast<int>(repeat));
  int e = bpf_prog_test_run_opts(prog_fd, &o);
  EXPECT_EQ(e, 0) << std::strerror(errno);
  r.retval = static_cast<int>(o.retval);
  r.priority = ctx_out.priority;
  r.out.resize(o.data_size_out);
  return r;
}

void set_config(const rl_config& c) {
  uint32_t zero = 0;
  ASSERT_EQ(bpf_map_update_elem(lab().progs->config_fd(), &zero, &c, BPF_ANY), 0);
}

void set_depth(uint32_t prio, uint32_t depth) {
  rl_depth_override o{};
  o.enabled = 1;
  o.depth[prio] = depth;
  uint32_t zero = 0;
  ASSERT_EQ(bpf_map_update_elem(lab().progs->depth_override_fd(), &zero, &o, BPF_ANY), 0);
}

// A port's seeded per-packet faults: probabilities as the programs' thresholds (p x 2^32).
void set_draws(double loss, uint64_t loss_rng, double corrupt = 0, uint64_t corrupt_rng = 0) {
  auto threshold = [](double p) { return static_cast<uint32_t>(std::min(p * 4294967296.0, 4294967295.0)); };
  rl_port_info info{};
  info.loss = threshold(loss);
  info.loss_rng = loss_rng;
  info.corrupt = threshold(corrupt);
  info.corrupt_rng = corrupt_rng;
  std::string why;
  ASSERT_TRUE(lab().progs->set_port_info(0, info, why)) << why;
}

class PortPrograms : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (CAP_BPF, CAP_NET_ADMIN); run the bpf tier as root";
    ASSERT_TRUE(lab().progs) << lab().why;
    set_config(base_config());
    rl_depth_override off{};  // each test reads the real classes unless it injects depths
    uint32_t zero = 0;
    ASSERT_EQ(bpf_map_update_elem(lab().progs->depth_override_fd(), &zero, &off, BPF_ANY), 0);
    std::string why;
    for (size_t slot : {0, 1}) ASSERT_TRUE(lab().progs->set_port_info(slot, rl_port_info{}, why)) << why;
  }
  int egress() const { return lab().progs->egress_fd(); }
  rl_counters at(int ifindex, uint32_t prio) const {
    return lab().counters->read(static_cast<size_t>(ifindex - RL_FIRST_PORT_IFINDEX), prio);
  }
};

TEST_F(PortPrograms, EveryDscpLandsInItsPriorityClass) {
  set_depth(0, 0);
  for (uint8_t d = 0; d < 64; ++d) {
    uint32_t want = (d >= 24 && d <= 31) ? 3 : (d >= 48 && d <= 55) ? 6 : 0;
    Result r = run(egress(), udp_frame(d, 0), kPortA);
    EXPECT_EQ(r.retval, 0) << "dscp " << int(d);
    EXPECT_EQ(r.priority, static_cast<uint32_t>(RL_CLASSID(want))) << "dscp " << int(d);
  }
  // A custom map is honoured too: DSCP 10 -> priority 5.
  rl_config c = base_config();
  c.dscp_to_prio[10] = 5;
  set_config(c);
  EXPECT_EQ(run(egress(), udp_frame(10, 0), kPortA).priority, static_cast<uint32_t>(RL_CLASSID(5)));
}

TEST_F(PortPrograms, PfcFramesBypassTheDataQueues) {
  Result r = run(egress(), udp_frame(26, 0, 0x8808), kPortA);
  EXPECT_EQ(r.retval, 0);
  EXPECT_EQ(r.priority, static_cast<uint32_t>(RL_DIRECT_CLASSID));
}

struct Preset {
  const char* name;
  uint32_t kmin, kmax;
  double pmax;
};

// Ports A and B as the two ends of one link (rl_port_info.peer), for dequeue marking: B's
// ingress decides the mark of what left A's queue. Zeroed again by the fixture.
void link_peers() {
  std::string why;
  rl_port_info a{}, b{};
  a.peer = 1 + 1;  // B's slot + 1
  b.peer = 0 + 1;  // A's
  ASSERT_TRUE(lab().progs->set_port_info(0, a, why)) << why;
  ASSERT_TRUE(lab().progs->set_port_info(1, b, why)) << why;
}

// The frame as the `psn`-th packet of its QP: RoCEv2's BTH PSN (bytes 9-11 of the BTH, past
// the UDP header), all that tells one packet of a flow from the next.
std::vector<uint8_t> with_psn(std::vector<uint8_t> f, uint32_t psn) {
  uint8_t* bth = f.data() + 14 + 20 + 8;
  bth[8] = 0;
  bth[9] = static_cast<uint8_t>(psn >> 16);
  bth[10] = static_cast<uint8_t>(psn >> 8);
  bth[11] = static_cast<uint8_t>(psn);
  return f;
}

// Which of `n` successive packets of one QP the program marks (CE out), one run each.
std::vector<bool> marked(int prog_fd, int port, uint32_t n, uint8_t ecn = 2, uint8_t ttl = 64) {
  std::vector<bool> m(n);
  for (uint32_t i = 0; i < n; ++i) {
    auto f = with_psn(udp_frame(26, ecn), i);
    f[14 + 8] = ttl;  // the checksum no longer matches; the draw must not read either
    m[i] = (run(prog_fd, f, port).out[15] & 3) == 3;
  }
  return m;
}

// 40,000 packets a point, each of them different (the draw is the packet's, so repeating one
// packet draws one number): at the paper preset's mid-curve point 200 marks are expected.
// The draws are a hash, so a point passes or fails the same every run; 4.5 sigma of the
// binomial says the hash is as uniform as a random draw would be.
// Both marking points: at enqueue A's egress decides by the bytes ahead of the packet, at
// dequeue B's ingress by what A's queue holds as the packet arrives from it; either way the
// mark is counted on A's queue, and the other program leaves ECT packets alone.
TEST_F(PortPrograms, MarkFractionFollowsTheCurveForBothPresetsAtEnqueueAndDequeue) {
  const uint32_t n = 40000;
  link_peers();
  for (uint8_t marking : {RL_ECN_AT_ENQUEUE, RL_ECN_AT_DEQUEUE})
    for (Preset p : {Preset{"nvidia", 150 * 1024, 1500 * 1024, 1.0}, Preset{"paper", 5 * 1024, 200 * 1024, 0.01}}) {
      const char* at_name = marking == RL_ECN_AT_DEQUEUE ? "dequeue" : "enqueue";
      rl_config c = base_config();
      c.ecn_marking = marking;
      c.ecn[3] = {p.kmin, p.kmax, p.pmax >= 1.0 ? 0xffffffffu : static_cast<uint32_t>(p.pmax * 4294967296.0), 1};
      set_config(c);
      const int decides = marking == RL_ECN_AT_DEQUEUE ? lab().progs->ingress_fd() : egress();
      const int other = marking == RL_ECN_AT_DEQUEUE ? egress() : lab().progs->ingress_fd();
      const int decides_port = marking == RL_ECN_AT_DEQUEUE ? kPortB : kPortA;
      const int other_port = marking == RL_ECN_AT_DEQUEUE ? kPortA : kPortB;
      const uint32_t span = p.kmax - p.kmin;
      for (uint32_t depth : {p.kmin / 2, p.kmin, p.kmin + span / 4, p.kmin + span / 2, p.kmin + 3 * span / 4, p.kmax,
                             p.kmax + 1, 2 * p.kmax}) {
        set_depth(3, depth);
        double want = depth < p.kmin ? 0 : depth > p.kmax ? 1 : p.pmax * (depth - p.kmin) / span;
        uint64_t before = at(kPortA, 3).ecn_marked, b_before = at(kPortB, 3).ecn_marked;
        const auto m = marked(decides, decides_port, n);
        double got = static_cast<double>(at(kPortA, 3).ecn_marked - before) / n;
        EXPECT_EQ(static_cast<double>(std::count(m.begin(), m.end(), true)) / n, got) << "each mark is a CE set";
        double tol = std::max(0.02 * p.pmax, 4.5 * std::sqrt(want * (1 - want) / n));
        EXPECT_NEAR(got, want, tol) << at_name << " " << p.name << " depth " << depth;
        EXPECT_EQ(at(kPortB, 3).ecn_marked, b_before) << at_name << ": counted on the queue the packet left (A's)";
        if (depth < p.kmin) {
          EXPECT_EQ(got, 0.0) << at_name << " " << p.name << ": no mark below kmin";
        }
        if (depth > p.kmax) {
          EXPECT_EQ(got, 1.0) << at_name << " " << p.name << ": every packet above kmax";
          uint64_t none = at(kPortA, 3).ecn_marked;
          Result o = run(other, udp_frame(26, 2), other_port, 100);
          EXPECT_EQ(o.out[15] & 3, 2) << at_name << ": the other program leaves ECT(0) as it is";
          EXPECT_EQ(at(kPortA, 3).ecn_marked + at(kPortB, 3).ecn_marked, none + b_before)
              << at_name << ": one place decides";
        }
      }
    }
}

// A packet's ECN draw is its own (mark_draw): the same packets at the same depth are marked
// the same every time, whatever their TTL or ECN codepoint on the way (hop by hop fields);
// another run key (another seed) marks other packets, and so does another queue.
TEST_F(PortPrograms, APacketsMarkIsDrawnFromItselfTheSeedAndTheQueue) {
  const uint32_t n = 4000;
  rl_config c = base_config();
  c.ecn[3] = {1000, 3000, 0xffffffffu, 1};  // p = 0.5 at 2000 bytes
  c.draw_key = 12345;
  set_config(c);
  set_depth(3, 2000);
  const auto a = marked(egress(), kPortA, n);
  const auto share = static_cast<double>(std::count(a.begin(), a.end(), true)) / n;
  EXPECT_NEAR(share, 0.5, 0.05);
  EXPECT_EQ(marked(egress(), kPortA, n), a) << "the same packets, the same marks";
  EXPECT_EQ(marked(egress(), kPortA, n, 1, 17), a) << "ECT(1) and another TTL: the same packets";
  auto differ = [&](const std::vector<bool>& b) {
    size_t d = 0;
    for (uint32_t i = 0; i < n; ++i) d += a[i] != b[i];
    return static_cast<double>(d) / n;
  };
  // Independent draws at p = 0.5 differ on half the packets.
  EXPECT_NEAR(differ(marked(egress(), kPortC, n)), 0.5, 0.05) << "another queue draws anew";
  c.draw_key = 54321;
  set_config(c);
  EXPECT_NEAR(differ(marked(egress(), kPortA, n)), 0.5, 0.05) << "another seed draws anew";
}

// Dequeue marking sets CE with a valid checksum too, leaves non-ECT alone, and falls back to
// enqueue on a port whose peer is on another machine (peer 0: a cut link).
TEST_F(PortPrograms, DequeueMarkingAtTheNextPortAndEnqueueWhereThePeerIsRemote) {
  link_peers();
  rl_config c = base_config();
  c.ecn_marking = RL_ECN_AT_DEQUEUE;
  c.ecn[3] = {1000, 2000, 0xffffffffu, 1};
  set_config(c);
  set_depth(3, 5000);
  for (uint8_t ecn : {1, 2, 3}) {
    Result r = run(lab().progs->ingress_fd(), udp_frame(26, ecn), kPortB);
    ASSERT_GE(r.out.size(), 34u);
    EXPECT_EQ(r.out[15] & 3, 3) << "CE";
    EXPECT_EQ(r.out[15] >> 2, 26) << "DSCP kept";
    EXPECT_EQ(csum(r.out.data() + 14, 20), 0) << "IPv4 header checksum";
  }
  EXPECT_EQ(run(lab().progs->ingress_fd(), udp_frame(26, 0), kPortB).out[15] & 3, 0) << "non-ECT is never marked";
  std::string why;
  ASSERT_TRUE(lab().progs->set_port_info(0, rl_port_info{}, why)) << why;  // A's peer not here
  uint64_t before = at(kPortA, 3).ecn_marked;
  EXPECT_EQ(run(egress(), udp_frame(26, 2), kPortA).out[15] & 3, 3) << "A marks at enqueue: no peer reads its queue";
  EXPECT_EQ(at(kPortA, 3).ecn_marked, before + 1);
}

TEST_F(PortPrograms, MarkingSetsCeAndKeepsTheChecksumValid) {
  rl_config c = base_config();
  c.ecn[3] = {1000, 2000, 0xffffffffu, 1};
  set_config(c);
  set_depth(3, 5000);
  for (uint8_t ecn : {1, 2, 3}) {
    Result r = run(egress(), udp_frame(26, ecn), kPortA);
    ASSERT_GE(r.out.size(), 34u);
    EXPECT_EQ(r.out[15] & 3, 3) << "CE";
    EXPECT_EQ(r.out[15] >> 2, 26) << "DSCP kept";
    EXPECT_EQ(csum(r.out.data() + 14, 20), 0) << "IPv4 header checksum";
  }
}

TEST_F(PortPrograms, NonEctIsNeverMarkedOrDroppedOnALosslessQueue) {
  rl_config c = base_config();
  c.ecn[3] = {1000, 2000, 0xffffffffu, 1};
  set_config(c);
  set_depth(3, 1 * kMB);
  rl_counters before = at(kPortA, 3);
  Result r = run(egress(), udp_frame(26, 0), kPortA, 1000);
  rl_counters after = at(kPortA, 3);
  EXPECT_EQ(r.retval, 0);
  EXPECT_EQ(r.out[15] & 3, 0);
  EXPECT_EQ(after.ecn_marked, before.ecn_marked);
  for (int d = 0; d < RL_DROP__MAX; ++d) EXPECT_EQ(after.drops[d], before.drops[d]);
  EXPECT_EQ(after.tx_packets - before.tx_packets, 1000u);
}

TEST_F(PortPrograms, EveryDropReasonIsCountedUnderItsName) {
  rl_config c = base_config();
  c.ecn[0] = {1000, 2000, 0xffffffffu, 1};  // a lossy queue with ECN: non-ECT is WRED-dropped
  c.queue_limit[0] = 64 * 1024;
  c.queue_limit[3] = 64 * 1024;
  set_config(c);
  struct Case {
    uint8_t dscp, ecn;
    uint32_t prio, depth;
    int reason;
  };
  for (Case k : {Case{0, 0, 0, 64 * 1024, RL_DROP_QUEUE_FULL}, Case{0, 0, 0, 4000, RL_DROP_WRED},
                 Case{26, 2, 3, 64 * 1024, RL_DROP_HEADROOM}}) {
    set_depth(k.prio, k.depth);
    rl_counters before = at(kPortB, k.prio);
    Result r = run(egress(), udp_frame(k.dscp, k.ecn), kPortB, 10);
    rl_counters after = at(kPortB, k.prio);
    EXPECT_EQ(r.retval, 2) << rl_drop_names[k.reason];
    for (int d = 0; d < RL_DROP__MAX; ++d)
      EXPECT_EQ(after.drops[d] - before.drops[d], d == k.reason ? 10u : 0u)
          << rl_drop_names[k.reason] << " counted as reason " << d;
    EXPECT_EQ(after.tx_packets, before.tx_packets);
  }
  // ECT on the same lossy queue is marked, not dropped.
  set_depth(0, 4000);
  rl_counters before = at(kPortB, 0);
  EXPECT_EQ(run(egress(), udp_frame(0, 1), kPortB, 10).retval, 0);
  EXPECT_EQ(at(kPortB, 0).ecn_marked - before.ecn_marked, 10u);
}

// A switch port's lossless queues stop at its lossless_limit (XOFF + the headroom of the
// node's other ports), counted as headroom; a lossy queue of the same port keeps its own
// limit; a host NIC never drops its own lossless traffic, whatever its entry says.
TEST_F(PortPrograms, LosslessQueuesStopAtXoffPlusHeadroom) {
  rl_config c = base_config();
  c.queue_limit[0] = 64 * 1024;
  set_config(c);
  const uint32_t limit = 300000, len = 128;
  rl_port_headroom h{2 * 1500, 150000, limit, 50000};
  std::string why;
  ASSERT_TRUE(lab().progs->set_port_headroom(1, h, why)) << why;
  auto admitted = [&](uint8_t dscp, uint32_t prio, uint32_t depth) {
    set_depth(prio, depth);
    rl_counters before = at(kPortB, prio);
    int rv = run(egress(), udp_frame(dscp, 2), kPortB).retval;
    rl_counters after = at(kPortB, prio);
    EXPECT_EQ(after.tx_packets - before.tx_packets, rv == 0 ? 1u : 0u);
    const int reason = prio == 3 ? RL_DROP_HEADROOM : RL_DROP_QUEUE_FULL;
    EXPECT_EQ(after.drops[reason] - before.drops[reason], rv == 0 ? 0u : 1u);
    return rv == 0;
  };
  EXPECT_TRUE(admitted(26, 3, limit - len)) << "exactly at the limit";
  EXPECT_FALSE(admitted(26, 3, limit - len + 1)) << "one byte beyond: headroom overflow";
  EXPECT_FALSE(admitted(26, 3, kMB)) << "the config's 4 MB queue_limit no longer governs it";
  EXPECT_FALSE(admitted(0, 0, 64 * 1024)) << "lossy: its own queue limit";
  rl_port_info host{};
  host.flags = RL_PORT_HOST;
  ASSERT_TRUE(lab().progs->set_port_info(1, host, why)) << why;
  EXPECT_TRUE(admitted(26, 3, 2 * limit)) << "a host NIC holds its own lossless traffic";
  ASSERT_TRUE(lab().progs->set_port_info(1, rl_port_info{}, why)) << why;
  ASSERT_TRUE(lab().progs->set_port_headroom(1, rl_port_headroom{}, why)) << why;
}

TEST_F(PortPrograms, LossFaultDropsItsShareRepeatablyAndCountsIt) {
  set_config(base_config());
  set_depth(3, 0);
  auto with_loss = [&](double p, uint64_t rng) { set_draws(p, rng); };
  auto lost = [&](uint32_t packets) {
    rl_counters before = at(kPortA, 3);
    run(egress(), udp_frame(26, 2), kPortA, packets);
    rl_counters after = at(kPortA, 3);
    for (int d = 0; d < RL_DROP__MAX; ++d)
      if (d != RL_DROP_FAULT) {
        EXPECT_EQ(after.drops[d], before.drops[d]);
      }
    EXPECT_EQ(after.tx_packets - before.tx_packets + after.drops[RL_DROP_FAULT] - before.drops[RL_DROP_FAULT], packets);
    return after.drops[RL_DROP_FAULT] - before.drops[RL_DROP_FAULT];
  };
  with_loss(0.01, 0x1234567);
  const uint64_t first = lost(20000);
  EXPECT_GE(first, 140u);  // 1 % of 20,000 = 200, sd 14
  EXPECT_LE(first, 260u);
  with_loss(0.01, 0x1234567);  // the same seed: the same draws
  EXPECT_EQ(lost(20000), first);
  with_loss(0.01, 0x7654321);
  EXPECT_NE(lost(20000), first);  // another seed, other draws (equal counts are possible but rare)
  with_loss(0, 0x1234567);
  EXPECT_EQ(lost(1000), 0u);
  // A link losing everything still carries PFC: MAC control is never lost.
  with_loss(1, 0x1234567);
  EXPECT_EQ(lost(100), 100u);
  rl_counters before = at(kPortA, 3);
  EXPECT_EQ(run(egress(), udp_frame(26, 0, 0x8808), kPortA, 10).retval, 0);
  EXPECT_EQ(at(kPortA, 3).drops[RL_DROP_FAULT], before.drops[RL_DROP_FAULT]);
  with_loss(0, 0);
}

// One bit flipped after the BTH and before the ICRC, the UDP checksum still valid (or left 0
// when the sender sent none), counted; only RoCEv2 (UDP 4791) is touched.
TEST_F(PortPrograms, CorruptionFlipsOneBitUnderTheIcrcAndKeepsUdpValid) {
  set_config(base_config());
  set_depth(3, 0);
  auto with_corruption = [&](double p, uint64_t rng) { set_draws(0, 0, p, rng); };
  // The UDP checksum over the IPv4 pseudo-header: 0 when the datagram is intact.
  auto udp_sum = [](const std::vector<uint8_t>& f) {
    std::vector<uint8_t> ph(f.begin() + 26, f.begin() + 34);  // source and destination
    ph.insert(ph.end(), {0, 17, f[38], f[39]});
    ph.insert(ph.end(), f.begin() + 34, f.end());
    if (ph.size() % 2) ph.push_back(0);
    return csum(ph.data(), ph.size());
  };
  std::vector<uint8_t> frame = udp_frame(26, 2);
  for (size_t i = 42; i < frame.size(); ++i) frame[i] = uint8_t(i * 7);
  std::vector<uint8_t> zero_sum = frame;
  frame[40] = frame[41] = 0;
  const uint16_t c = udp_sum(frame);
  frame[40] = uint8_t(c >> 8);
  frame[41] = uint8_t(c);
  ASSERT_EQ(udp_sum(frame), 0);
  with_corruption(1, 0x1234567);
  for (int i = 0; i < 64; ++i) {
    for (const auto* in : {&frame, &zero_sum}) {
      const rl_counters before = at(kPortA, 3);
      Result r = run(egress(), *in, kPortA);
      ASSERT_EQ(r.out.size(), in->size());
      int bits = 0;
      size_t where = 0;
      for (size_t k = 0; k < in->size(); ++k)
        if (k != 40 && k != 41 && r.out[k] != (*in)[k]) {
          bits += __builtin_popcount(r.out[k] ^ (*in)[k]);
          where = k;
        }
      EXPECT_EQ(bits, 1);
      EXPECT_GE(where, 14u + 20 + 8 + 12) << "after the BTH";
      EXPECT_LT(where, in->size() - 4) << "before the ICRC";
      if (in == &frame) EXPECT_EQ(udp_sum(r.out), 0) << "the UDP checksum still holds";
      else EXPECT_EQ(r.out[40] | r.out[41], 0) << "no checksum stays no checksum";
      EXPECT_EQ(at(kPortA, 3).corrupted - before.corrupted, 1u);
    }
  }
  std::vector<uint8_t> other = frame;  // UDP to another port: not RoCEv2
  other[37] = 0x35;
  EXPECT_EQ(run(egress(), other, kPortA).out, other);
  with_corruption(0.01, 0x1234567);
  const rl_counters before = at(kPortA, 3);
  run(egress(), frame, kPortA, 20000);
  const uint64_t n = at(kPortA, 3).corrupted - before.corrupted;
  EXPECT_GE(n, 140u);  // 1 % of 20,000 = 200, sd 14
  EXPECT_LE(n, 260u);
  with_corruption(0, 0);
}

TEST_F(PortPrograms, IngressCountsWhatArrivesPerPriority) {
  int ingress_fd = -1;
  {
    // Attach both to port B (twice, as a retried step does) and find the
    // ingress program through the kernel's hook.
    std::string why;
    ASSERT_TRUE(lab().progs->attach(kPortB, why)) << why;
    ASSERT_TRUE(lab().progs->attach(kPortB, why)) << why;
    const uint32_t id = bpf::attached_tc(kPortB, bpf::TcHook::kIngress, why);
    ASSERT_NE(id, 0u) << why;
    ingress_fd = bpf_prog_get_fd_by_id(id);
  }
  ASSERT_GE(ingress_fd, 0);
  bpf_prog_info info{};
  uint32_t len = sizeof info;
  ASSERT_EQ(bpf_obj_get_info_by_fd(ingress_fd, &info, &len), 0);
  {
    bpf_prog_info ours{};
    uint32_t olen = sizeof ours;
    ASSERT_EQ(bpf_obj_get_info_by_fd(lab().progs->ingress_fd(), &ours, &olen), 0);
    EXPECT_EQ(info.id, ours.id) << "the hook runs the ingress program";
  }
  rl_counters before = at(kPortB, 6);
  Result r = run(ingress_fd, udp_frame(48, 0), kPortB, 7);
  close(ingress_fd);
  EXPECT_EQ(r.retval, 0);
  rl_counters after = at(kPortB, 6);
  EXPECT_EQ(after.rx_packets - before.rx_packets, 7u);
  EXPECT_EQ(after.rx_bytes - before.rx_bytes, 7u * 128);
  // And a later process (`rocelab stats`, the agent) opens the same maps from the attached port.
  std::string why;
  auto found = bpf::FabricMaps::open_attached(kPortB, why);
  ASSERT_TRUE(found) << why;
  EXPECT_EQ(found->counters().read(1, 6).rx_packets, after.rx_packets);
  EXPECT_EQ(found->ports(), lab().progs->ports());
}

}  // namespace

namespace {

void set_port_info(int ifindex, netlink::Mac mac, uint32_t quantum_ps) {
  rl_port_info info{};
  std::copy(mac.begin(), mac.end(), info.mac);
  info.quantum_ps = quantum_ps;
  std::string why;
  ASSERT_TRUE(lab().progs->set_port_info(static_cast<size_t>(ifindex - RL_FIRST_PORT_IFINDEX), info, why)) << why;
}

std::vector<rl_pfc_event> drain_events() {
  std::vector<rl_pfc_event> out;
  auto cb = [](void* ctx, void* data, size_t len) -> int {
    if (len >= sizeof(rl_pfc_event))
      static_cast<std::vector<rl_pfc_event>*>(ctx)->push_back(*static_cast<rl_pfc_event*>(data));
    return 0;
  };
  ring_buffer* rb = ring_buffer__new(lab().progs->pfc_events_fd(), cb, &out, nullptr);
  if (rb) {
    ring_buffer__consume(rb);
    ring_buffer__free(rb);
  }
  return out;
}

// PFC triggered by egress occupancy (qos.pfc.trigger: egress).
rl_config pfc_config(uint32_t xoff, uint32_t xon) {
  rl_config c = base_config();
  c.pfc_mask = 1u << 3;
  c.pfc_quanta = 0xffff;
  c.pfc_xoff = xoff;
  c.pfc_xon = xon;
  c.pfc_trigger = RL_PFC_TRIGGER_EGRESS;
  return c;
}

// PFC by priority group (the default): one pg_ring row, for priority 3.
rl_config pg_config(uint32_t xoff, uint32_t xon) {
  rl_config c = pfc_config(xoff, xon);
  c.pfc_trigger = RL_PFC_TRIGGER_INGRESS;
  c.pg_rows = 1;
  for (auto& i : c.pg_index) i = 0xff;
  c.pg_index[3] = 0;
  return c;
}

}  // namespace

// The frame a marked clone becomes, byte for byte (IEEE 802.1Qbb, DESIGN.md §2).
TEST_F(PortPrograms, PfcFrameBytesAreExactlyTheStandardFrame) {
  set_config(pfc_config(100000, 90000));
  set_port_info(kPortA, {0x02, 0xc1, 0x00, 0x07, 0x00, 0x02}, 5120000);
  const std::vector<uint8_t> xoff3 = {
      0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, 0x02, 0xc1, 0x00, 0x07, 0x00, 0x02,  // dst, src
      0x88, 0x08, 0x01, 0x01, 0x00, 0x08,                                      // type, opcode, class 3
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00,              // quanta 0..4
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00,                                      // quanta 5..7
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};  // pad to 60
  rl_counters before = at(kPortA, 3);
  Result r = run(egress(), udp_frame(26, 2), kPortA, 1, RL_MARK_PFC(1, 3));
  EXPECT_EQ(r.retval, 0);
  EXPECT_EQ(r.out, xoff3);
  EXPECT_EQ(r.priority, static_cast<uint32_t>(RL_DIRECT_CLASSID)) << "ahead of every data queue";
  EXPECT_EQ(at(kPortA, 3).pfc_tx - before.pfc_tx, 1u);
  EXPECT_EQ(at(kPortA, 3).pfc_xon_tx - before.pfc_xon_tx, 0u) << "an XOFF";
  // XON: the same frame with pause time 0; another priority moves the class bit and slot.
  Result xon = run(egress(), udp_frame(26, 2), kPortA, 1, RL_MARK_PFC(0, 3));
  std::vector<uint8_t> want = xoff3;
  want[24] = want[25] = 0;
  EXPECT_EQ(xon.out, want);
  EXPECT_EQ(at(kPortA, 3).pfc_tx - before.pfc_tx, 2u);
  EXPECT_EQ(at(kPortA, 3).pfc_xon_tx - before.pfc_xon_tx, 1u) << "the XON counted as one";
  // A frame made elsewhere (the agent's XON and refreshes) is counted the same way.
  before = at(kPortA, 3);
  run(egress(), want, kPortA);
  run(egress(), xoff3, kPortA);
  EXPECT_EQ(at(kPortA, 3).pfc_tx - before.pfc_tx, 2u);
  EXPECT_EQ(at(kPortA, 3).pfc_xon_tx - before.pfc_xon_tx, 1u);
  Result p6 = run(egress(), udp_frame(0, 0), kPortA, 1, RL_MARK_PFC(1, 6));
  ASSERT_EQ(p6.out.size(), 60u);
  EXPECT_EQ(p6.out[17], 0x40);
  EXPECT_EQ(p6.out[30], 0xff);
  EXPECT_EQ(p6.out[31], 0xff);
  drain_events();
}

// A pause storm's frame (pfc_gen.py's -p vector -t quanta): every priority the vector names
// gets the storm's pause time, each counted as one XOFF sent; an all-zero vector names none.
TEST_F(PortPrograms, AStormFrameCarriesItsVectorAndQuantaForEachPriority) {
  set_config(pfc_config(100000, 90000));
  set_port_info(kPortA, {0x02, 0xc1, 0x00, 0x07, 0x00, 0x02}, 5120000);
  rl_counters b3 = at(kPortA, 3), b4 = at(kPortA, 4), b0 = at(kPortA, 0);
  Result r = run(egress(), udp_frame(26, 2), kPortA, 1, RL_MARK_PFC_STORM, 0, RL_STORM_PRIORITY(0x18, 0x1234));
  EXPECT_EQ(r.retval, 0);
  ASSERT_EQ(r.out.size(), 60u);
  EXPECT_EQ(r.out[12], 0x88);
  EXPECT_EQ(r.out[13], 0x08);
  EXPECT_EQ(r.out[15], 0x01) << "opcode 0x0101";
  EXPECT_EQ(r.out[16], 0x00);
  EXPECT_EQ(r.out[17], 0x18) << "class-enable vector: priorities 3 and 4";
  for (int p = 0; p < 8; ++p) {
    const bool named = p == 3 || p == 4;
    EXPECT_EQ(r.out[18 + 2 * p], named ? 0x12 : 0) << "priority " << p;
    EXPECT_EQ(r.out[19 + 2 * p], named ? 0x34 : 0) << "priority " << p;
  }
  EXPECT_EQ(r.priority, static_cast<uint32_t>(RL_DIRECT_CLASSID));
  EXPECT_EQ(at(kPortA, 3).pfc_tx - b3.pfc_tx, 1u);
  EXPECT_EQ(at(kPortA, 4).pfc_tx - b4.pfc_tx, 1u);
  EXPECT_EQ(at(kPortA, 4).pfc_xon_tx - b4.pfc_xon_tx, 0u) << "XOFF, not XON";
  EXPECT_EQ(at(kPortA, 0).pfc_tx - b0.pfc_tx, 0u) << "priority 0 not named";
  Result none = run(egress(), udp_frame(26, 2), kPortA, 1, RL_MARK_PFC_STORM, 0, RL_STORM_PRIORITY(0, 0xffff));
  ASSERT_EQ(none.out.size(), 60u);
  EXPECT_EQ(none.out[17], 0x00);
  EXPECT_EQ(at(kPortA, 3).pfc_tx - b3.pfc_tx, 1u) << "a frame naming no priority counts for none";
  drain_events();
}

// Every class-enable vector, each priority with its own pause time: one event and one
// counted frame per named priority, and the frame is consumed.
TEST_F(PortPrograms, PfcFramesAreParsedForEveryPriorityAndQuantaThenConsumed) {
  set_config(pfc_config(100000, 90000));
  drain_events();
  for (uint32_t vector = 0; vector < 256; ++vector) {
    std::vector<uint8_t> f(60, 0);
    const uint8_t head[] = {0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, 0x02, 0, 0, 0, 0, 9, 0x88, 0x08, 0x01, 0x01};
    std::copy(std::begin(head), std::end(head), f.begin());
    f[17] = static_cast<uint8_t>(vector);
    for (int p = 0; p < 8; ++p) {
      uint16_t q = static_cast<uint16_t>(vector * 8 + p);  // every priority a different time
      f[18 + 2 * p] = static_cast<uint8_t>(q >> 8);
      f[19 + 2 * p] = static_cast<uint8_t>(q);
    }
    std::array<uint64_t, 8> rx{};
    for (int p = 0; p < 8; ++p) rx[p] = at(kPortB, p).pfc_rx;
    Result r = run(lab().progs->ingress_fd(), f, kPortB);
    EXPECT_EQ(r.retval, 2) << "consumed, never forwarded";
    auto ev = drain_events();
    ASSERT_EQ(ev.size(), static_cast<size_t>(__builtin_popcount(vector))) << "vector " << vector;
    size_t i = 0;
    for (int p = 0; p < 8; ++p) {
      bool on = (vector >> p) & 1;
      EXPECT_EQ(at(kPortB, p).pfc_rx - rx[p], on ? 1u : 0u);
      if (!on) continue;
      EXPECT_EQ(ev[i].prio, p);
      EXPECT_EQ(ev[i].quanta, vector * 8 + p);
      EXPECT_EQ(ev[i].slot, 1u);
      ++i;
    }
  }
  // XON (pause time 0) and XOFF in one frame: both received, one counted as XON.
  std::vector<uint8_t> f(60, 0);
  const uint8_t head[] = {0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, 0x02, 0, 0, 0, 0, 9, 0x88, 0x08, 0x01, 0x01, 0x00, 0x48};
  std::copy(std::begin(head), std::end(head), f.begin());
  f[18 + 2 * 6 + 1] = 100;  // priority 6: 100 quanta; priority 3: 0
  const rl_counters b3 = at(kPortB, 3), b6 = at(kPortB, 6);
  run(lab().progs->ingress_fd(), f, kPortB);
  EXPECT_EQ(at(kPortB, 3).pfc_rx - b3.pfc_rx, 1u);
  EXPECT_EQ(at(kPortB, 3).pfc_xon_rx - b3.pfc_xon_rx, 1u);
  EXPECT_EQ(at(kPortB, 6).pfc_rx - b6.pfc_rx, 1u);
  EXPECT_EQ(at(kPortB, 6).pfc_xon_rx - b6.pfc_xon_rx, 0u);
  drain_events();
}

// Generation at the thresholds: a packet from port B joins port A's lossless queue. The
// XOFF clone really leaves B (test_run transmits), B's egress turns it into a frame, and A's
// ingress (the peer) takes it in.
TEST_F(PortPrograms, XoffAndXonAreDecidedAtTheThresholds) {
  const uint32_t xoff = 100000, xon = 90000, len = 128;
  set_config(pfc_config(xoff, xon));
  set_port_info(kPortA, {2, 0, 0, 0, 0, 1}, 5120000);
  set_port_info(kPortB, {2, 0, 0, 0, 0, 2}, 5120000);  // 65535 quanta = 335 ms, refresh 168 ms
  uint32_t key = 1 * RL_NUM_PRIO + 3;
  rl_pfc_tx_state clear{};
  ASSERT_EQ(bpf_map_update_elem(lab().progs->pfc_tx_state_fd(), &key, &clear, BPF_ANY), 0);
  drain_events();
  auto paused = [&] {
    rl_pfc_tx_state st{};
    bpf_map_lookup_elem(lab().progs->pfc_tx_state_fd(), &key, &st);
    return st.paused;
  };
  auto send_from_b = [&](uint32_t depth) {
    set_depth(3, depth);
    uint64_t tx = at(kPortB, 3).pfc_tx;
    EXPECT_EQ(run(egress(), udp_frame(26, 2), kPortA, 1, 0, kPortB).retval, 0) << "depth " << depth;
    auto ev = drain_events();
    EXPECT_EQ(ev.size(), at(kPortB, 3).pfc_tx - tx) << "every frame sent arrived at the peer";
    return ev;
  };
  EXPECT_TRUE(send_from_b(xoff - len - 1).empty()) << "below XOFF: nothing";
  auto ev = send_from_b(xoff - len);
  ASSERT_EQ(ev.size(), 1u) << "at XOFF: pause the ingress port";
  EXPECT_EQ(ev[0].quanta, 0xffff);
  EXPECT_EQ(ev[0].slot, 0u) << "received by B's peer, A";
  EXPECT_EQ(paused(), 1u);
  EXPECT_TRUE(send_from_b(2 * xoff).empty()) << "still congested, refresh not due: no new frame";
  EXPECT_TRUE(send_from_b(xon - len).empty()) << "at XON (not below): hold";
  ev = send_from_b(xon - len - 1);
  ASSERT_EQ(ev.size(), 1u) << "below XON while paused: resume";
  EXPECT_EQ(ev[0].quanta, 0);
  EXPECT_EQ(paused(), 0u);
  EXPECT_TRUE(send_from_b(0).empty()) << "not paused: no XON again";
  // A short quantum makes the refresh due at once: XOFF again while congested.
  set_port_info(kPortB, {2, 0, 0, 0, 0, 2}, 1);
  EXPECT_EQ(send_from_b(xoff).size(), 1u);
  EXPECT_EQ(send_from_b(xoff).size(), 1u) << "refreshed";
  // Lossy priorities never pause anyone.
  set_depth(0, 10 * xoff);
  uint64_t tx0 = at(kPortB, 0).pfc_tx;
  run(egress(), udp_frame(0, 0), kPortA, 1, 0, kPortB);
  EXPECT_EQ(at(kPortB, 0).pfc_tx, tx0);
}

// XON waits for every queue the ingress port congested: B's packets fill A's queue (XOFF);
// a packet of B's to C's idle queue must not resume B (that flapping let a paused spine
// keep sending); once A's queue is below XON, B is resumed.
TEST_F(PortPrograms, AnIdleQueueDoesNotResumeAPortAnotherQueueCongests) {
  const uint32_t xoff = 100000, xon = 90000;
  set_config(pfc_config(xoff, xon));
  set_port_info(kPortA, {2, 0, 0, 0, 0, 1}, 5120000);
  set_port_info(kPortB, {2, 0, 0, 0, 0, 2}, 5120000);
  set_port_info(kPortC, {2, 0, 0, 0, 0, 3}, 5120000);
  uint32_t key = 1 * RL_NUM_PRIO + 3;
  rl_pfc_tx_state clear{};
  ASSERT_EQ(bpf_map_update_elem(lab().progs->pfc_tx_state_fd(), &key, &clear, BPF_ANY), 0);
  drain_events();
  auto from_b_to = [&](int egress_port, uint32_t depth) {
    set_depth(3, depth);
    EXPECT_EQ(run(egress(), udp_frame(26, 2), egress_port, 1, 0, kPortB).retval, 0);
    return drain_events();
  };
  auto ev = from_b_to(kPortA, 2 * xoff);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].quanta, 0xffff);
  EXPECT_TRUE(from_b_to(kPortC, 0).empty()) << "C is idle, but A still holds B's packets at XOFF";
  EXPECT_TRUE(from_b_to(kPortC, 0).empty());
  rl_pfc_tx_state st{};
  ASSERT_EQ(bpf_map_lookup_elem(lab().progs->pfc_tx_state_fd(), &key, &st), 0);
  EXPECT_EQ(st.paused, 1u);
  EXPECT_EQ(st.congested, 1u) << "port A (the node's slot 0) congested";
  // Both congested: A draining alone resumes nothing; C draining as well resumes B.
  EXPECT_TRUE(from_b_to(kPortC, 2 * xoff).empty()) << "paused already, refresh not due";
  EXPECT_TRUE(from_b_to(kPortA, 0).empty()) << "C still congested";
  ev = from_b_to(kPortC, 0);
  ASSERT_EQ(ev.size(), 1u) << "every queue below XON: resume";
  EXPECT_EQ(ev[0].quanta, 0);
  ASSERT_EQ(bpf_map_lookup_elem(lab().progs->pfc_tx_state_fd(), &key, &st), 0);
  EXPECT_EQ(st.paused, 0u);
  EXPECT_EQ(st.congested, 0u);
}

namespace {
void set_pool(uint32_t prio, uint32_t depth, uint32_t pool_used) {
  rl_depth_override o{};
  o.enabled = 1;
  o.depth[prio] = depth;
  o.pool_used = pool_used;
  uint32_t zero = 0;
  ASSERT_EQ(bpf_map_update_elem(lab().progs->depth_override_fd(), &zero, &o, BPF_ANY), 0);
}
}  // namespace

// The shared buffer's dynamic threshold on a switch's lossy queue: it may hold
// alpha x (B - used), alpha = 2^dynamic_th; lossless queues are not governed by it.
TEST_F(PortPrograms, LossyQueuesHoldAlphaTimesTheFreePool) {
  const uint32_t kB = 1024, B = 256 * kB, len = 128;
  set_port_info(kPortA, {2, 0, 0, 0, 0, 1}, 5120000);  // a switch port (no host flag)
  struct Case {
    int th;
    uint32_t used, depth;
    bool admitted;
  };
  for (Case c : {Case{0, 100 * kB, 156 * kB - len, true}, Case{0, 100 * kB, 156 * kB - len + 1, false},
                 Case{1, 100 * kB, 312 * kB - len, true}, Case{1, 100 * kB, 312 * kB - len + 1, false},
                 Case{-1, 100 * kB, 78 * kB - len, true}, Case{-1, 100 * kB, 78 * kB - len + 1, false},
                 Case{0, B, 0, false}, Case{0, 0, 0, true}}) {
    rl_config cfg = base_config();
    cfg.buffer_size = B;
    cfg.dynamic_th = c.th;
    set_config(cfg);
    set_pool(0, c.depth, c.used);
    uint64_t before = at(kPortA, 0).drops[RL_DROP_BUFFER];
    Result r = run(egress(), udp_frame(0, 0), kPortA);
    EXPECT_EQ(r.retval, c.admitted ? 0 : 2) << "th " << c.th << " used " << c.used << " depth " << c.depth;
    EXPECT_EQ(at(kPortA, 0).drops[RL_DROP_BUFFER] - before, c.admitted ? 0u : 1u);
  }
  // A lossless queue deep into a full pool is not dropped for the pool.
  rl_config cfg = base_config();
  cfg.buffer_size = B;
  set_config(cfg);
  set_pool(3, 2 * B, B);
  EXPECT_EQ(run(egress(), udp_frame(26, 2), kPortA).retval, 0);
}

namespace {
// A frame of `len` bytes (Ethernet + IPv4 + UDP) in priority `dscp`'s class.
std::vector<uint8_t> sized_frame(uint8_t dscp, size_t len) {
  std::vector<uint8_t> f = udp_frame(dscp, 0);
  f.resize(len, 0);
  const auto ip_len = static_cast<uint16_t>(len - 14);
  f[16] = static_cast<uint8_t>(ip_len >> 8);
  f[17] = static_cast<uint8_t>(ip_len);
  f[24] = f[25] = 0;
  const uint16_t c = csum(f.data() + 14, 20);
  f[24] = static_cast<uint8_t>(c >> 8);
  f[25] = static_cast<uint8_t>(c);
  return f;
}
}  // namespace

// The pause watcher on a real port: packets leave through the kernel's HTB and TBF, and the
// watcher sees them at the dequeue. A priority marked paused whose queue is not paused
// leaks every packet, counted; a real pause lets at most its one-frame allowance out, queues
// full-size jumbo frames without dropping one, and sends them all once resumed.
TEST_F(PortPrograms, PauseWatchCountsWhatAPausedPortStillSends) {
  constexpr uint64_t kRate = 100'000'000;
  constexpr size_t kFrame = kJumbo + 14;
  const size_t c = kPortC - RL_FIRST_PORT_IFINDEX;
  netlink::Status st;
  auto sock = netlink::RouteSocket::open(st);
  ASSERT_TRUE(sock) << st.text;
  netlink::SchedulerSpec sched{kPortC, RL_HTB_MAJOR, RL_CLASS_BASE, kRate, kJumbo, {}, 1u << 3};
  sched.fifo_limit.fill(4 * kMB);
  const netlink::PauseSpec pause{kPortC, RL_HTB_MAJOR, RL_CLASS_BASE, 3, true, kRate, kJumbo, 4 * kMB};
  {
    netlink::Batch b(*sock);
    b.add_scheduler(sched);
    ASSERT_TRUE(b.flush().ok());
  }
  std::string why;
  auto watch = bpf::PauseWatch::start(lab().progs->port_info_fd(), {uint32_t(getpid())}, why);
  ASSERT_TRUE(watch) << why;
  sys::Fd tx(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0));
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_ifindex = kPortC;
  ASSERT_EQ(bind(tx.get(), reinterpret_cast<sockaddr*>(&sll), sizeof sll), 0) << std::strerror(errno);
  auto send_n = [&](uint8_t dscp, int n) {
    const auto f = sized_frame(dscp, kFrame);
    int sent = 0;
    for (int i = 0; i < n; ++i) sent += send(tx.get(), f.data(), f.size(), 0) == static_cast<ssize_t>(f.size());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // 10 frames at 100 Mbit/s: 7 ms
    return sent;
  };
  auto arrived = [&](uint32_t prio) { return at(kPortD, prio).rx_packets; };

  // Marked paused, never paused: all 10 leave, all 10 leaks; priority 6 is not watched.
  ASSERT_TRUE(watch->mark(c, 3, 1, 0));
  const uint64_t d3 = arrived(3), d6 = arrived(6);
  EXPECT_EQ(send_n(26, 10), 10);
  EXPECT_EQ(send_n(48, 3), 3);
  EXPECT_EQ(arrived(3) - d3, 10u);
  EXPECT_EQ(arrived(6) - d6, 3u);
  rl_pause_state s = watch->read(c, 3);
  EXPECT_EQ(s.leaked_packets, 10u);
  EXPECT_EQ(s.leaked_bytes, 10u * kFrame);
  EXPECT_EQ(s.tail_packets, 0u);
  EXPECT_EQ(watch->read(c, 6).leaked_packets + watch->read(c, 6).tail_packets, 0u);

  // Paused for real, as the agent does it: queued, not dropped, and no leak.
  {
    netlink::Batch b(*sock);
    b.set_pause(pause);
    ASSERT_TRUE(b.flush().ok());
  }
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  ASSERT_TRUE(watch->mark(c, 3, uint64_t(now.tv_sec) * 1'000'000'000 + uint64_t(now.tv_nsec),
                          kFrame + netlink::kPauseBucketMargin));
  EXPECT_EQ(send_n(26, 10), 10) << "a paused queue takes full-size frames";
  EXPECT_EQ(send_n(48, 3), 3);
  EXPECT_EQ(arrived(6) - d6, 6u) << "other priorities flow";
  s = watch->read(c, 3);
  EXPECT_EQ(s.leaked_packets, 10u) << "no leak beyond the allowance";
  EXPECT_LE(s.tail_packets, 1u);
  EXPECT_EQ(arrived(3) - d3, 10u + s.tail_packets);
  auto held = bpf::probe_depth(lab().progs->egress_fd(), kPortC, 3, why);
  ASSERT_TRUE(held) << why;
  EXPECT_EQ(*held, (10u - s.tail_packets) * kFrame) << "the rest waits in the queue";

  // Resumed: unmarked first, then the queue drains, every frame delivered, none a leak.
  ASSERT_TRUE(watch->mark(c, 3, 0));
  {
    netlink::Batch b(*sock);
    netlink::PauseSpec resume = pause;
    resume.paused = false;
    b.set_pause(resume);
    ASSERT_TRUE(b.flush().ok());
  }
  EXPECT_EQ(send_n(48, 1), 1);  // something to dequeue: HTB looks at the resumed class again
  EXPECT_EQ(arrived(3) - d3, 20u);
  EXPECT_EQ(watch->read(c, 3).leaked_packets, 10u);
}

namespace {
int64_t pg_of(int ifindex, uint32_t prio) {
  uint32_t key = uint32_t(ifindex - RL_FIRST_PORT_IFINDEX) * RL_NUM_PRIO + prio;
  int64_t v = 0;
  bpf_map_lookup_elem(lab().progs->pg_bytes_fd(), &key, &v);
  return v;
}
void clear_pg(int ifindex, uint32_t prio) {
  uint32_t key = uint32_t(ifindex - RL_FIRST_PORT_IFINDEX) * RL_NUM_PRIO + prio;
  int64_t zero = 0;
  rl_pfc_tx_state clear{};
  ASSERT_EQ(bpf_map_update_elem(lab().progs->pg_bytes_fd(), &key, &zero, BPF_ANY), 0);
  ASSERT_EQ(bpf_map_update_elem(lab().progs->pfc_tx_state_fd(), &key, &clear, BPF_ANY), 0);
}
}  // namespace

// Per ingress (the default): B's and C's packets join A's priority-3 queue; each port's PG
// counts only its own bytes; XOFF goes to B when B's PG reaches XOFF, however little C
// holds; when the queue drains (a sync sees it hold less), the oldest bytes leave first —
// B's, then C's — and B is resumed once its own PG falls below XON.
TEST_F(PortPrograms, PriorityGroupsCountPerIngressAndDrainInFifoOrder) {
  const uint32_t xoff = 100000, xon = 90000, len = 128;
  set_config(pg_config(xoff, xon));
  for (int p : {kPortA, kPortB, kPortC}) set_port_info(p, {2, 0, 0, 0, 0, uint8_t(p)}, 5120000);
  std::string why;
  for (uint32_t slot : {1u, 2u}) ASSERT_TRUE(lab().progs->set_port_headroom(slot, {3000, 50000, xoff + 50000, 0}, why));
  clear_pg(kPortB, 3);
  clear_pg(kPortC, 3);
  uint32_t row = 0;  // port A (slot 0), priority 3's row
  std::vector<uint8_t> empty(sizeof(rl_pg_ring), 0);
  ASSERT_EQ(bpf_map_update_elem(lab().progs->pg_ring_fd(), &row, empty.data(), BPF_ANY), 0);
  drain_events();
  set_depth(3, 1u << 30);  // the queue holds all it got: nothing has left
  const uint32_t below = xoff / len;  // 781 packets: 99,968 bytes
  EXPECT_EQ(run(egress(), udp_frame(26, 2), kPortA, below, 0, kPortB).retval, 0);
  EXPECT_EQ(pg_of(kPortB, 3), int64_t(below) * len);
  EXPECT_TRUE(drain_events().empty()) << "below XOFF: nothing";
  EXPECT_EQ(run(egress(), udp_frame(26, 2), kPortA, 10, 0, kPortC).retval, 0);
  EXPECT_EQ(pg_of(kPortC, 3), 10 * int64_t(len)) << "C's PG holds C's bytes only";
  EXPECT_TRUE(drain_events().empty()) << "the queue holds over XOFF, but no PG does: no pause";
  EXPECT_EQ(run(egress(), udp_frame(26, 2), kPortA, 1, 0, kPortB).retval, 0);
  auto ev = drain_events();
  ASSERT_EQ(ev.size(), 1u) << "B's PG at XOFF: pause B";
  EXPECT_EQ(ev[0].quanta, 0xffff);
  EXPECT_EQ(ev[0].slot, 0u) << "received by B's peer, A";
  const int64_t b = (below + 1) * len, c = 10 * len;
  ASSERT_EQ(pg_of(kPortB, 3), b);
  // The queue drained by 10,000 bytes, all of them B's oldest (a probe syncs, as the agent's).
  auto sync = [&](uint32_t depth) {
    set_depth(3, depth);
    EXPECT_EQ(run(egress(), udp_frame(26, 2), kPortA, 1, RL_MARK_PROBE(3)).retval, int(depth));
    return drain_events();
  };
  EXPECT_TRUE(sync(uint32_t(b + c - 10000)).empty()) << "B at 90,096: still at or above XON";
  EXPECT_EQ(pg_of(kPortB, 3), b - 10000);
  EXPECT_EQ(pg_of(kPortC, 3), c) << "C's bytes are the newest: none left yet";
  ev = sync(uint32_t(b + c - 10200));
  ASSERT_EQ(ev.size(), 1u) << "B's PG below XON: resume B";
  EXPECT_EQ(ev[0].quanta, 0);
  // The queue in order: B's first 781 packets, C's 10, B's 782nd. With 768 bytes left, B's
  // first 99,968 and C's first 640 have gone; B's last packet (after C's) is still there.
  EXPECT_TRUE(sync(uint32_t(c - 512)).empty());
  EXPECT_EQ(pg_of(kPortB, 3), int64_t(len)) << "B's newest packet came after C's";
  EXPECT_EQ(pg_of(kPortC, 3), c - 512 - int64_t(len));
  EXPECT_TRUE(sync(0).empty());
  EXPECT_EQ(pg_of(kPortB, 3), 0);
  EXPECT_EQ(pg_of(kPortC, 3), 0);
}

// A PG's limit is XOFF + its own port's headroom: one byte beyond is a headroom drop, and
// another port's PG is not affected.
TEST_F(PortPrograms, APriorityGroupStopsAtXoffPlusItsPortsHeadroom) {
  const uint32_t xoff = 100000, xon = 90000, len = 128, limit = xoff + 1000;
  set_config(pg_config(xoff, xon));
  std::string why;
  ASSERT_TRUE(lab().progs->set_port_headroom(1, {3000, 1000, limit, 0}, why));
  ASSERT_TRUE(lab().progs->set_port_headroom(2, {3000, 50000, xoff + 50000, 0}, why));
  clear_pg(kPortB, 3);
  clear_pg(kPortC, 3);
  uint32_t row = 0;
  std::vector<uint8_t> empty(sizeof(rl_pg_ring), 0);
  ASSERT_EQ(bpf_map_update_elem(lab().progs->pg_ring_fd(), &row, empty.data(), BPF_ANY), 0);
  set_depth(3, 1u << 30);
  const uint32_t fit = limit / len;  // 789 packets: 100,992 bytes
  rl_counters before = at(kPortA, 3);
  run(egress(), udp_frame(26, 2), kPortA, fit, 0, kPortB);
  EXPECT_EQ(pg_of(kPortB, 3), int64_t(fit) * len);
  EXPECT_EQ(run(egress(), udp_frame(26, 2), kPortA, 1, 0, kPortB).retval, 2) << "one more: beyond the PG's limit";
  EXPECT_EQ(at(kPortA, 3).drops[RL_DROP_HEADROOM] - before.drops[RL_DROP_HEADROOM], 1u);
  EXPECT_EQ(run(egress(), udp_frame(26, 2), kPortA, 1, 0, kPortC).retval, 0) << "C's PG has room";
  drain_events();
  for (uint32_t slot : {1u, 2u}) ASSERT_TRUE(lab().progs->set_port_headroom(slot, rl_port_headroom{}, why));
}

