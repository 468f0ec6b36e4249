// RC transport on a fake clock through a seeded channel that drops, duplicates, reorders and
// corrupts: every message must arrive exactly once, byte-exact and in order.
#include "engine/transport.h"

#include <gtest/gtest.h>

#include <queue>
#include <random>

namespace rocelab::engine {
namespace {

struct Impairments {
  double drop = 0, duplicate = 0, corrupt = 0;
  Nanos delay = 2'000, jitter = 0;  // jitter > 0 reorders
};

// One direction: wire bytes in flight, ordered by arrival time.
class Channel {
 public:
  Channel(Impairments imp, uint64_t seed) : imp_(imp), rng_(seed) {}
  void send(std::vector<uint8_t> bytes, Nanos now) {
    if (coin(imp_.drop)) { ++dropped; return; }
    const int copies = coin(imp_.duplicate) ? 2 : 1;
    for (int i = 0; i < copies; ++i) {
      auto b = bytes;
      if (coin(imp_.corrupt)) b[std::uniform_int_distribution<size_t>(0, b.size() - 1)(rng_)] ^= 0x10;
      const Nanos at = now + imp_.delay + (imp_.jitter ? Nanos(rng_() % imp_.jitter) : 0);
      q_.push({at, seq_++, std::move(b)});
    }
  }
  bool due(Nanos now) const { return !q_.empty() && q_.top().at <= now; }
  std::vector<uint8_t> pop() { auto b = std::move(const_cast<Item&>(q_.top()).bytes); q_.pop(); return b; }
  uint64_t dropped = 0;

 private:
  struct Item {
    Nanos at;
    uint64_t seq;
    std::vector<uint8_t> bytes;
    bool operator>(const Item& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  bool coin(double p) { return p > 0 && std::uniform_real_distribution<>(0, 1)(rng_) < p; }
  Impairments imp_;
  std::mt19937_64 rng_;
  uint64_t seq_ = 0;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> q_;
};

struct PumpResult {
  uint64_t bad_icrc = 0, packets = 0;
  Nanos finished = 0;
};

// A sends to B; both QPs move one packet per `gap` ns at most (a crude line rate).
PumpResult pump(RcQp& a, RcQp& b, Channel& ab, Channel& ba, FakeClock& clock, Nanos limit) {
  const Flow fab{0xC6120002, 0xC6120004, 0xC001, kRoceUdpPort}, fba{0xC6120004, 0xC6120002, 0xC002, kRoceUdpPort};
  PumpResult r;
  std::vector<uint8_t> buf;
  auto emit = [&](RcQp& q, Channel& ch, const Flow& f) {
    if (auto t = q.next_tx(clock.now())) {
      build(t->bth, t->reth, t->aeth, t->payload, f, buf);
      ch.send(buf, clock.now());
      ++r.packets;
    }
  };
  auto deliver = [&](RcQp& q, Channel& ch, const Flow& f) {
    while (ch.due(clock.now())) {
      auto bytes = ch.pop();
      auto p = parse(bytes, f);
      if (!p) { ++r.bad_icrc; continue; }  // a corrupted packet is a counted drop
      q.on_rx(*p.packet, clock.now());
    }
  };
  while (clock.now() < limit) {
    emit(a, ab, fab);
    emit(b, ba, fba);
    deliver(b, ab, fab);
    deliver(a, ba, fba);
    a.on_timer(clock.now());
    b.on_timer(clock.now());
    if (a.idle() && b.idle() && !ab.due(LLONG_MAX) && !ba.due(LLONG_MAX)) break;
    clock.advance(500);
  }
  r.finished = clock.now();
  return r;
}

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 g(seed);
  for (auto& x : v) x = uint8_t(g());
  return v;
}

class Lossy : public testing::TestWithParam<uint64_t> {};

TEST_P(Lossy, EveryMessageExactlyOnceByteExactInOrder) {
  const uint64_t seed = GetParam();
  FakeClock clock;
  RcConfig cfg{.mtu = 1024, .window = 64, .ack_req_every = 8, .rto = 200'000, .retry_limit = 50};
  // PSNs start near the top of the 24-bit space so the run wraps.
  RcQp a(0x11, 0x22, 0xFFFF00 + seed, 0x100, cfg), b(0x22, 0x11, 0x100, 0xFFFF00 + seed, cfg);
  std::vector<uint8_t> memory(256 * 1024, 0);
  b.register_memory(0xBEEF, 0x10000, memory);
  Channel ab({.drop = 0.05, .duplicate = 0.03, .corrupt = 0.02, .delay = 3'000, .jitter = 6'000}, seed);
  Channel ba({.drop = 0.05, .duplicate = 0.03, .corrupt = 0.02, .delay = 3'000, .jitter = 6'000}, seed * 7 + 1);

  std::vector<std::vector<uint8_t>> sends;
  std::vector<uint64_t> ids;
  std::vector<uint8_t> expect_mem(memory.size(), 0);
  std::mt19937 g{uint32_t(seed)};
  const size_t sizes[] = {0, 1, 3, 1023, 1024, 1025, 4096, 30000};
  for (int i = 0; i < 40; ++i) {
    const size_t n = i < 8 ? sizes[i] : g() % 20000;
    auto data = pattern(n, uint32_t(seed * 1000 + i));
    if (i % 3 == 2) {
      const uint64_t off = g() % (memory.size() - n);
      std::copy(data.begin(), data.end(), expect_mem.begin() + off);
      ids.push_back(a.post_write(std::move(data), 0x10000 + off, 0xBEEF));
    } else {
      sends.push_back(data);
      ids.push_back(a.post_send(std::move(data)));
    }
  }
  PumpResult r = pump(a, b, ab, ba, clock, 2'000'000'000);

  ASSERT_TRUE(a.idle()) << "not finished by " << r.finished << " ns";
  auto done = a.take_completions();
  ASSERT_EQ(done.size(), ids.size());
  for (size_t i = 0; i < done.size(); ++i) {
    EXPECT_EQ(done[i].wr_id, ids[i]);
    EXPECT_TRUE(done[i].ok) << done[i].error;
  }
  auto& got = b.received();
  ASSERT_EQ(got.size(), sends.size());
  for (size_t i = 0; i < sends.size(); ++i) EXPECT_EQ(got[i], sends[i]) << "message " << i;
  EXPECT_EQ(memory, expect_mem);
  EXPECT_EQ(b.stats().messages_received, sends.size());
  // The impairments were exercised, and recovered from.
  EXPECT_GT(ab.dropped + ba.dropped, 0u);
  EXPECT_GT(r.bad_icrc, 0u);
  EXPECT_GT(a.stats().retransmitted, 0u);
  EXPECT_GT(b.stats().duplicates + b.stats().out_of_sequence, 0u);
}

INSTANTIATE_TEST_SUITE_P(Seeds, Lossy, testing::Range<uint64_t>(1, 21));

TEST(Transport, CleanChannelNeedsNoRetransmissionAndCoalescesAcks) {
  FakeClock clock;
  RcQp a(1, 2, 0, 0, {.mtu = 1024, .window = 128, .ack_req_every = 16}), b(2, 1, 0, 0, {});
  Channel ab({}, 1), ba({}, 2);
  a.post_send(pattern(1024 * 100, 3));
  pump(a, b, ab, ba, clock, 1'000'000'000);
  ASSERT_EQ(b.received().size(), 1u);
  EXPECT_EQ(b.received()[0], pattern(1024 * 100, 3));
  EXPECT_EQ(a.stats().retransmitted, 0u);
  EXPECT_EQ(a.stats().tx_packets, 100u);
  EXPECT_LE(b.stats().acks_sent, 100u / 16 + 1);  // one per AckReq, not one per packet
  EXPECT_GE(b.stats().acks_sent, 1u);
}

TEST(Transport, GapIsNakedOnceAndRecoveredByGoBackN) {
  FakeClock clock;
  RcQp a(1, 2, 10, 10, {.mtu = 256}), b(2, 1, 10, 10, {.mtu = 256});
  a.post_send(pattern(256 * 4, 9));
  std::vector<TxPacket> sent;
  std::vector<std::vector<uint8_t>> copies;
  while (auto t = a.next_tx(0)) copies.emplace_back(t->payload.begin(), t->payload.end()), sent.push_back(*t);
  ASSERT_EQ(sent.size(), 4u);
  auto packet = [&](size_t i) { Packet p; p.bth = sent[i].bth; p.payload = copies[i]; return p; };
  b.on_rx(packet(0), 1);
  b.on_rx(packet(2), 2);  // packet 1 lost
  b.on_rx(packet(3), 3);
  EXPECT_EQ(b.stats().out_of_sequence, 2u);
  auto nak = b.next_tx(4);
  ASSERT_TRUE(nak && nak->aeth && nak->aeth->is_nak());
  EXPECT_EQ(nak->bth.psn, 11u);
  EXPECT_FALSE(b.next_tx(4)) << "one NAK per gap";
  Packet n;
  n.bth = nak->bth;
  n.aeth = nak->aeth;
  a.on_rx(n, 5);
  auto again = a.next_tx(6);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->bth.psn, 11u) << "go back to the PSN the NAK names";
  EXPECT_EQ(a.stats().retransmitted, 1u);
}

// The adaptive timer never backs off (an RNIC retries at its timeout): each timeout without
// progress comes one period after the last, and retry_limit + 1 of them fail the QP.
TEST(Transport, TimeoutRetransmitsAtTheSamePeriodAndGivesUpAfterTheRetryLimit) {
  RcQp a(1, 2, 0, 0, {.rto = 1000, .retry_limit = 2});
  a.post_write(pattern(100, 1), 0, 1);
  ASSERT_TRUE(a.next_tx(0));
  EXPECT_EQ(a.next_timer(), 1000);
  a.on_timer(999);
  EXPECT_FALSE(a.next_tx(999));
  a.on_timer(1000);
  EXPECT_TRUE(a.next_tx(1000));  // resent; the same timeout again
  EXPECT_EQ(a.next_timer(), 2000);
  a.on_timer(1999);
  EXPECT_FALSE(a.next_tx(1999));
  a.on_timer(2000);
  EXPECT_TRUE(a.next_tx(2000));
  EXPECT_EQ(a.next_timer(), 3000);
  EXPECT_FALSE(a.failed());
  a.on_timer(3000);
  auto c = a.take_completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_FALSE(c[0].ok);
  EXPECT_TRUE(a.failed());
  EXPECT_EQ(a.failed_at(), 3000);
  EXPECT_EQ(a.stats().timeouts, 3u);
}

// hosts.rc {timeout, retry_cnt}: an RNIC's fixed timer. Each timeout is the same period
// (no back-off, no RTT estimate), and after retry_cnt + 1 of them without progress the WR
// completes with the retry-exceeded error and the QP is in the error state: the failure
// time is predictable, (retry_cnt + 1) x the period after the last progress.
TEST(Transport, FixedTimerFailsAfterRetryCntPlusOnePeriods) {
  RcQp a(1, 2, 0, 0, {.rto = 1000, .retry_limit = 3, .fixed_timeout = true});
  a.post_write(pattern(100, 1), 0, 1);
  a.post_write(pattern(100, 2), 0, 1);
  ASSERT_TRUE(a.next_tx(0));
  for (Nanos t = 1000; t <= 3000; t += 1000) {
    EXPECT_EQ(a.next_timer(), t) << "the same period every time";
    a.on_timer(t - 1);
    EXPECT_FALSE(a.failed());
    a.on_timer(t);
    EXPECT_TRUE(a.next_tx(t)) << "go back N at " << t;
  }
  EXPECT_FALSE(a.failed());
  a.on_timer(4000);  // the fourth timeout: retry_cnt 3 exhausted
  EXPECT_TRUE(a.failed());
  EXPECT_EQ(a.failed_at(), 4000);
  EXPECT_EQ(a.failure(), kRetryExceeded);
  auto c = a.take_completions();
  ASSERT_EQ(c.size(), 2u) << "every outstanding WR completes in error";
  EXPECT_FALSE(c[0].ok);
  EXPECT_EQ(c[1].error, kRetryExceeded);
  EXPECT_EQ(a.stats().timeouts, 4u);
  EXPECT_EQ(a.next_timer(), LLONG_MAX);
}

TEST(Transport, FixedTimerZeroNeverTimesOut) {
  RcQp a(1, 2, 0, 0, {.rto = 0, .retry_limit = 0, .fixed_timeout = true});
  a.post_write(pattern(100, 1), 0, 1);
  ASSERT_TRUE(a.next_tx(0));
  EXPECT_EQ(a.next_timer(), LLONG_MAX);
  a.on_timer(1'000'000'000'000);
  EXPECT_FALSE(a.failed());
  EXPECT_EQ(a.stats().timeouts, 0u);
}

TEST(Transport, TimeoutFollowsTheMeasuredRoundTrip) {
  RcQp a(1, 2, 0, 0, {.rto = 1000}), b(2, 1, 0, 0, {});
  std::vector<uint8_t> mem(4096);
  b.register_memory(1, 0, mem);
  for (int i = 0; i < 20; ++i) {
    const Nanos t0 = i * 100'000;
    a.post_write(pattern(100, 1), 0, 1);
    auto t = a.next_tx(t0);
    ASSERT_TRUE(t);
    Packet p;
    p.bth = t->bth;
    p.reth = t->reth;
    p.payload = t->payload;
    b.on_rx(p, t0);
    auto ack = b.next_tx(t0);
    ASSERT_TRUE(ack && ack->aeth);
    Packet q;
    q.bth = ack->bth;
    q.aeth = ack->aeth;
    a.on_rx(q, t0 + 50'000);  // a 50 us round trip, far above the 1 us floor
  }
  a.post_write(pattern(100, 1), 0, 1);
  ASSERT_TRUE(a.next_tx(2'000'000));
  EXPECT_GE(a.next_timer() - 2'000'000, 50'000) << "no spurious timeout below the round trip";
  EXPECT_EQ(a.stats().timeouts, 0u);
}

TEST(Transport, WriteOutsideTheRegionIsNakedAsRemoteAccessError) {
  RcQp a(1, 2, 0, 0, {}), b(2, 1, 0, 0, {});
  std::vector<uint8_t> mem(64);
  b.register_memory(5, 0x1000, mem);
  a.post_write(pattern(100, 1), 0x1000, 5);
  auto t = a.next_tx(0);
  Packet p;
  p.bth = t->bth;
  p.reth = t->reth;
  p.payload = t->payload;
  b.on_rx(p, 1);
  auto nak = b.next_tx(2);
  ASSERT_TRUE(nak && nak->aeth);
  EXPECT_EQ(nak->aeth->syndrome, Aeth::kNakRemoteAccess);
  Packet n;
  n.bth = nak->bth;
  n.aeth = nak->aeth;
  a.on_rx(n, 3);
  auto c = a.take_completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_FALSE(c[0].ok);
  EXPECT_EQ(c[0].error, "remote access error");
}

}  // namespace
}  // namespace rocelab::engine
