// The split run's all-gather, three parts on loopback in threads: every part gets every
// part's message in part order whatever order they offer in, a spoke started before the hub
// still gets through, an abort or a closed connection reaches the others with its reason,
// and a missing part is named when the wait runs out.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>

#include <cstring>

#include <chrono>
#include <random>
#include <thread>

#include "sys/rendezvous.h"

namespace rocelab::sys {
namespace {

// A port per test process, so parallel ctest runs do not meet.
std::string hub_address(int k) {
  return "127.0.0.1:" + std::to_string(20000 + (getpid() * 7 + k) % 20000);
}

// Every part on this machine's loopback address.
std::vector<uint32_t> loopback(size_t parts) { return std::vector<uint32_t>(parts, 0x7f000001); }

std::vector<std::unique_ptr<Rendezvous>> open_all(const std::string& hub, size_t parts) {
  std::vector<std::unique_ptr<Rendezvous>> rs;
  for (size_t i = parts; i-- > 0;) {  // spokes first: they connect before the hub listens
    auto r = Rendezvous::open(i, parts, hub, loopback(parts));
    EXPECT_TRUE(r) << (r ? "" : r.error().what);
    if (r) rs.insert(rs.begin(), std::move(*r));
  }
  return rs;
}

TEST(Rendezvous, EveryPartGetsEveryMessageInPartOrder) {
  auto rs = open_all(hub_address(1), 3);
  ASSERT_EQ(rs.size(), 3u);
  std::vector<std::vector<std::string>> got(3);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      std::this_thread::sleep_for(std::chrono::milliseconds(40 * (2 - i)));  // the hub offers last
      for (int round = 0; round < 3; ++round) {
        auto r = rs[i]->exchange("round" + std::to_string(round), "from " + std::to_string(i) + " r" + std::to_string(round), 10'000);
        ASSERT_TRUE(r) << r.error().what;
        for (auto& m : *r) got[i].push_back(m);
      }
    });
  for (auto& t : threads) t.join();
  const std::vector<std::string> want{"from 0 r0", "from 1 r0", "from 2 r0", "from 0 r1", "from 1 r1",
                                      "from 2 r1", "from 0 r2", "from 1 r2", "from 2 r2"};
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(got[i], want) << "part " << i;
}

TEST(Rendezvous, OfferNeverWaitsAndCarriesLargeMessages) {
  auto rs = open_all(hub_address(2), 2);
  ASSERT_EQ(rs.size(), 2u);
  auto first = rs[0]->offer("t", "hub");
  ASSERT_TRUE(first);
  EXPECT_FALSE(*first) << "part 1 has not offered yet";
  const std::string big(3 << 20, 'x');
  std::optional<std::vector<std::string>> a, b;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((!a || !b) && std::chrono::steady_clock::now() < until) {
    if (!a) {
      auto r = rs[0]->offer("t", "hub");
      ASSERT_TRUE(r) << r.error().what;
      a = *r;
    }
    if (!b) {
      auto r = rs[1]->offer("t", big);
      ASSERT_TRUE(r) << r.error().what;
      b = *r;
    }
  }
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, (std::vector<std::string>{"hub", big}));
  EXPECT_EQ(*b, *a);
}

TEST(Rendezvous, AnAbortReachesTheOtherPartsWithItsReason) {
  auto rs = open_all(hub_address(3), 3);
  ASSERT_EQ(rs.size(), 3u);
  // Part 1 is known to the hub once it offered something.
  std::thread hello([&] { (void)rs[1]->exchange("hello", "", 10'000); });
  std::thread hello2([&] { (void)rs[2]->exchange("hello", "", 10'000); });
  ASSERT_TRUE(rs[0]->exchange("hello", "", 10'000));
  hello.join();
  hello2.join();
  rs[2]->abort("up failed: no such device");
  auto at_hub = rs[0]->exchange("up", "", 10'000);
  ASSERT_FALSE(at_hub);
  EXPECT_EQ(at_hub.error().what, "part 2 stopped: up failed: no such device");
  auto at_spoke = rs[1]->exchange("up", "", 10'000);
  ASSERT_FALSE(at_spoke);
  EXPECT_EQ(at_spoke.error().what, "part 2 stopped: up failed: no such device");
}

TEST(Rendezvous, APartThatClosesFailsTheNextExchangeButNotTheOneItFinished) {
  auto rs = open_all(hub_address(6), 2);
  ASSERT_EQ(rs.size(), 2u);
  std::thread t([&] {
    ASSERT_TRUE(rs[1]->exchange("last", "bye", 10'000));
    rs[1].reset();  // the spoke's process ends
  });
  auto last = rs[0]->exchange("last", "hub", 10'000);
  t.join();
  ASSERT_TRUE(last) << last.error().what;
  EXPECT_EQ((*last)[1], "bye");
  auto next = rs[0]->exchange("next", "", 10'000);
  ASSERT_FALSE(next);
  EXPECT_EQ(next.error().what, "part 1 closed its connection (it stopped)");
}

TEST(Rendezvous, AMissingPartIsNamedWhenTheWaitRunsOut) {
  auto hub = Rendezvous::open(0, 3, hub_address(4), loopback(3));
  ASSERT_TRUE(hub) << hub.error().what;
  auto spoke = Rendezvous::open(1, 3, hub_address(4), loopback(3));
  ASSERT_TRUE(spoke);
  std::thread t([&] { (void)(*spoke)->exchange("x", "", 3'000); });
  auto r = (*hub)->exchange("x", "", 1'000);
  t.join();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().what.find("for part 2 "), std::string::npos) << r.error().what;
  auto lone = Rendezvous::open(1, 2, "127.0.0.1:1", loopback(2));  // nobody listens: the spoke names part 0
  ASSERT_TRUE(lone);
  auto w = (*lone)->exchange("x", "", 300);
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().what.find("part 0 (127.0.0.1:1)"), std::string::npos) << w.error().what;
}

TEST(Rendezvous, BadArgumentsAndABusyPortAreErrors) {
  EXPECT_FALSE(Rendezvous::open(2, 2, "127.0.0.1:5000", loopback(2)));
  EXPECT_FALSE(Rendezvous::open(0, 1, "127.0.0.1:5000", loopback(1)));
  EXPECT_FALSE(Rendezvous::open(0, 2, "127.0.0.1:5000", loopback(3))) << "an address per part";
  for (const char* bad : {"127.0.0.1", "127.0.0.1:0", "localhost:5000", "127.0.0.1:70000"}) {
    auto r = Rendezvous::open(1, 2, bad, loopback(2));
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().what.find("expected IPV4:PORT"), std::string::npos) << r.error().what;
  }
  auto a = Rendezvous::open(0, 2, hub_address(5), loopback(2));
  ASSERT_TRUE(a);
  auto b = Rendezvous::open(0, 2, hub_address(5), loopback(2));
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().what.find("cannot listen on " + hub_address(5)), std::string::npos) << b.error().what;
}

}  // namespace

namespace {

const std::string kKey = "a run key of thirty-two bytes...";

void put32(std::string& s, uint32_t v) {
  v = htonl(v);
  s.append(reinterpret_cast<const char*>(&v), 4);
}

// A frame's body as the rendezvous lays it out: tag, count, each datum (u32 length first).
std::string body_of(const std::string& tag, const std::vector<std::string>& data) {
  std::string b;
  put32(b, uint32_t(tag.size()));
  b += tag;
  put32(b, uint32_t(data.size()));
  for (const auto& d : data) {
    put32(b, uint32_t(d.size()));
    b += d;
  }
  return b;
}

// A frame signed as the wire format says (docs/multi-machine.md), written here from that
// description: HMAC-SHA256 under the key of "rocelab rendezvous 1", the nonce, 's' (a
// spoke's) or 'h', the 64-bit sequence number, the body.
std::string signed_frame(const std::string& key, const std::string& nonce, char dir, uint64_t seq, const std::string& body) {
  std::string msg = "rocelab rendezvous 1" + nonce + dir;
  for (int i = 7; i >= 0; --i) msg += char(seq >> (8 * i));
  msg += body;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), int(key.size()), reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), md, &n);
  std::string out;
  put32(out, uint32_t(body.size()));
  return out + body + std::string(reinterpret_cast<const char*>(md), n);
}

int connect_from(uint32_t src, const std::string& hub_at) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in own{};
  own.sin_family = AF_INET;
  own.sin_addr.s_addr = htonl(src);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&own), sizeof own), 0) << std::strerror(errno);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(uint16_t(std::stoi(hub_at.substr(hub_at.rfind(':') + 1))));
  to.sin_addr.s_addr = htonl(0x7f000001);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0) << std::strerror(errno);
  return fd;
}

// A listening socket at the hub's address: a fake hub, or a squatter of its port.
int listen_at(const std::string& hub_at) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(uint16_t(std::stoi(hub_at.substr(hub_at.rfind(':') + 1))));
  at.sin_addr.s_addr = htonl(0x7f000001);
  if (bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 || listen(fd, 4) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads `n` bytes from `fd` while pumping the hub; empty when they do not come in time.
std::string read_pumping(int fd, size_t n, Rendezvous& hub) {
  std::string got;
  for (int i = 0; i < 400 && got.size() < n; ++i) {
    (void)hub.offer("tick", "x");
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5) == 1) {
      char buf[4096];
      const ssize_t k = read(fd, buf, std::min(sizeof buf, n - got.size()));
      if (k <= 0) break;
      got.append(buf, size_t(k));
    }
  }
  return got.size() == n ? got : std::string();
}

// The hub's challenge on a fresh connection: its nonce (the frame's last datum).
std::string challenge_nonce(int fd, Rendezvous& hub) {
  const std::string len = read_pumping(fd, 4, hub);
  if (len.size() != 4) return {};
  uint32_t n;
  std::memcpy(&n, len.data(), 4);
  const std::string rest = read_pumping(fd, ntohl(n) + 32, hub);
  return rest.size() < 48 ? std::string() : rest.substr(ntohl(n) - 16, 16);
}

}  // namespace

// With a run key, parts exchange as without one; a connection from a part's own address
// that cannot sign (an impostor hello, an abort, 10 MB of tiny frames, a flood of idle
// connections past the waiting limit) is closed and counted, and the real part gets in.
TEST(Rendezvous, WithARunKeyOnlyPartsThatSignGetIn) {
  const std::string hub_at = hub_address(7);
  const std::vector<uint32_t> peers{0x7f000001, 0x7f000002};
  auto hub = Rendezvous::open(0, 2, hub_at, peers, kKey);
  ASSERT_TRUE(hub) << hub.error().what;
  std::vector<int> fds;
  for (int i = 0; i < 12; ++i) fds.push_back(connect_from(0x7f000002, hub_at));  // idle: more than may wait
  (void)(*hub)->offer("tick", "x");
  // A burst faster than a round trip: the first 8 wait, the newcomers past them go.
  EXPECT_EQ((*hub)->strays(), 4u) << (*hub)->last_stray();
  EXPECT_NE((*hub)->last_stray().find("all of them just come"), std::string::npos) << (*hub)->last_stray();
  for (int i = 0; i < 50; ++i) {  // past 200 ms: the oldest waiting may now go for a newcomer
    (void)(*hub)->offer("tick", "x");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int impostor = connect_from(0x7f000002, hub_at);
  ASSERT_EQ(challenge_nonce(impostor, **hub).size(), 16u);
  std::string unsigned_hello;
  put32(unsigned_hello, uint32_t(body_of("!hello", {"1"}).size()));
  unsigned_hello += body_of("!hello", {"1"}) + std::string(32, 'x') + body_of("!abort", {"stop"});
  (void)!write(impostor, unsigned_hello.data(), unsigned_hello.size());
  const int flood = connect_from(0x7f000002, hub_at);
  std::string tiny;
  while (tiny.size() < (10u << 20)) tiny += std::string("\0\0\0\x08\0\0\0\0\0\0\0\0", 12);
  (void)!send(flood, tiny.data(), tiny.size(), MSG_DONTWAIT);
  for (int i = 0; i < 40; ++i) {
    (void)(*hub)->offer("tick", "x");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE((*hub)->strays(), 6u) << (*hub)->last_stray();
  auto spoke = Rendezvous::open(1, 2, hub_at, peers, kKey);
  ASSERT_TRUE(spoke);
  std::thread t([&] {
    auto r = (*spoke)->exchange("figures", "part 1", 10'000);
    EXPECT_TRUE(r) << (r ? "" : r.error().what);
  });
  auto all = (*hub)->exchange("figures", "part 0", 10'000);
  t.join();
  ASSERT_TRUE(all) << all.error().what;
  EXPECT_EQ((*all)[1], "part 1");
  for (int fd : fds) close(fd);
  close(impostor);
  close(flood);
}

// The signature binds the connection's nonce and the frame's place: a hello signed for
// another connection's nonce (a recording replayed) or out of sequence is a stray; signed
// as the format says, it is part 1, and the hub answers it signed.
TEST(Rendezvous, ASignatureHoldsOnlyForItsConnectionAndPlace) {
  const std::string hub_at = hub_address(8);
  const std::vector<uint32_t> peers{0x7f000001, 0x7f000002};
  auto hub = Rendezvous::open(0, 2, hub_at, peers, kKey);
  ASSERT_TRUE(hub) << hub.error().what;
  const std::string hello = body_of("!hello", {"1"});
  const int replay = connect_from(0x7f000002, hub_at);
  const std::string recorded = challenge_nonce(replay, **hub);
  ASSERT_EQ(recorded.size(), 16u);
  const int second = connect_from(0x7f000002, hub_at);
  const std::string nonce2 = challenge_nonce(second, **hub);
  ASSERT_EQ(nonce2.size(), 16u);
  EXPECT_NE(recorded, nonce2) << "each connection its own nonce";
  const size_t before = (*hub)->strays();
  const std::string wrong_nonce = signed_frame(kKey, recorded, 's', 0, hello);
  (void)!write(second, wrong_nonce.data(), wrong_nonce.size());
  const int third = connect_from(0x7f000002, hub_at);
  const std::string nonce3 = challenge_nonce(third, **hub);
  const std::string wrong_seq = signed_frame(kKey, nonce3, 's', 1, hello);
  (void)!write(third, wrong_seq.data(), wrong_seq.size());
  for (int i = 0; i < 20; ++i) {
    (void)(*hub)->offer("tick", "x");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ((*hub)->strays(), before + 2) << (*hub)->last_stray();
  EXPECT_NE((*hub)->last_stray().find("not signed with the run key"), std::string::npos) << (*hub)->last_stray();
  // On the first connection, signed right: the spoke's nonce (0, over the hub's alone), then
  // over both nonces hello (1) and the figures (2).
  const std::string mine = "the spoke's nonc";
  const std::string both = recorded + mine;
  const std::string good = signed_frame(kKey, recorded, 's', 0, body_of("!nonce", {mine})) +
                           signed_frame(kKey, both, 's', 1, hello) +
                           signed_frame(kKey, both, 's', 2, body_of("figures", {"part 1, by hand"}));
  (void)!write(replay, good.data(), good.size());
  auto all = (*hub)->exchange("figures", "part 0", 5'000);
  ASSERT_TRUE(all) << all.error().what;
  EXPECT_EQ((*all)[1], "part 1, by hand");
  const std::string answer =
      signed_frame(kKey, both, 'h', 1, body_of("!welcome", {})) + signed_frame(kKey, both, 'h', 2, body_of("figures", *all));
  EXPECT_EQ(read_pumping(replay, answer.size(), **hub), answer)
      << "the hub's welcome and answer, signed over both nonces (its challenge was 0)";
  for (int fd : {replay, second, third}) close(fd);
}

// A hub's recorded stream replayed to a spoke of a later run with the same key (whoever
// took the hub's address first plays it back) is refused: the challenge verifies, as it was
// the hub's, but the spoke drew a nonce of its own and nothing recorded was signed over it.
TEST(Rendezvous, ARecordedHubStreamDoesNotReplayIntoAnotherRun) {
  const std::string hub_at = hub_address(11);
  const std::vector<uint32_t> peers{0x7f000001, 0x7f000002};
  std::string recording;
  {  // Run 1: the test is part 1 by hand, and records all the hub says.
    auto hub = Rendezvous::open(0, 2, hub_at, peers, kKey);
    ASSERT_TRUE(hub) << hub.error().what;
    const int fd = connect_from(0x7f000002, hub_at);
    const std::string len = read_pumping(fd, 4, **hub);
    ASSERT_EQ(len.size(), 4u);
    uint32_t n;
    std::memcpy(&n, len.data(), 4);
    const std::string rest = read_pumping(fd, ntohl(n) + 32, **hub);
    ASSERT_EQ(rest.size(), ntohl(n) + 32);
    const std::string nonce = rest.substr(ntohl(n) - 16, 16), mine = "run one's nonce.";
    const std::string frames = signed_frame(kKey, nonce, 's', 0, body_of("!nonce", {mine})) +
                               signed_frame(kKey, nonce + mine, 's', 1, body_of("!hello", {"1"})) +
                               signed_frame(kKey, nonce + mine, 's', 2, body_of("figures", {"run one's"}));
    (void)!write(fd, frames.data(), frames.size());
    auto all = (*hub)->exchange("figures", "run one's hub", 5'000);
    ASSERT_TRUE(all) << all.error().what;
    const std::string answer = signed_frame(kKey, nonce + mine, 'h', 1, body_of("!welcome", {})) +
                               signed_frame(kKey, nonce + mine, 'h', 2, body_of("figures", *all));
    ASSERT_EQ(read_pumping(fd, answer.size(), **hub), answer);
    recording = len + rest + answer;
    close(fd);
  }
  // Run 2, same key: a fake hub plays the recording to the real part 1.
  const int listener = listen_at(hub_at);
  ASSERT_GE(listener, 0) << std::strerror(errno);
  auto spoke = Rendezvous::open(1, 2, hub_at, peers, kKey);
  ASSERT_TRUE(spoke) << spoke.error().what;
  std::thread fake([&] {
    pollfd p{listener, POLLIN, 0};
    if (poll(&p, 1, 5'000) != 1) return;
    const int fd = accept(listener, nullptr, nullptr);
    (void)!write(fd, recording.data(), recording.size());
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    close(fd);
  });
  auto r = (*spoke)->exchange("figures", "run two's part 1", 3'000);
  fake.join();
  close(listener);
  ASSERT_FALSE(r) << "the recorded figures were taken: " << (*r)[0];
  EXPECT_NE(r.error().what.find("is not signed with the run key"), std::string::npos) << r.error().what;
}

// Parts that do not share a key stop at once and say so, instead of waiting out --part-wait.
TEST(Rendezvous, PartsWithoutTheSameKeySaySo) {
  {
    auto hub = Rendezvous::open(0, 2, hub_address(9), loopback(2), kKey);
    auto spoke = Rendezvous::open(1, 2, hub_address(9), loopback(2), "another key, also long enough");
    ASSERT_TRUE(hub && spoke);
    std::thread t([&] { (void)(*hub)->exchange("x", "", 1'500); });
    auto r = (*spoke)->exchange("x", "", 10'000);
    t.join();
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().what.find("challenge is not signed with this part's run key"), std::string::npos) << r.error().what;
  }
  {
    auto hub = Rendezvous::open(0, 2, hub_address(10), loopback(2), kKey);
    auto spoke = Rendezvous::open(1, 2, hub_address(10), loopback(2));
    ASSERT_TRUE(hub && spoke);
    std::thread t([&] { (void)(*hub)->exchange("x", "", 1'500); });
    auto r = (*spoke)->exchange("x", "", 10'000);
    t.join();
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().what.find("asks for a run key"), std::string::npos) << r.error().what;
  }
  {  // a keyed part and an unkeyed hub (--insecure-no-key): both stop at once, each saying why
    auto hub = Rendezvous::open(0, 2, hub_address(12), loopback(2));
    auto spoke = Rendezvous::open(1, 2, hub_address(12), loopback(2), kKey);
    ASSERT_TRUE(hub && spoke);
    Result<std::vector<std::string>> at_hub = std::vector<std::string>{};
    std::thread t([&] { at_hub = (*hub)->exchange("x", "", 10'000); });
    const auto t0 = std::chrono::steady_clock::now();
    auto r = (*spoke)->exchange("x", "", 10'000);
    t.join();
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().what.find("has a run key and part 0"), std::string::npos) << r.error().what;
    ASSERT_FALSE(at_hub);
    EXPECT_NE(at_hub.error().what.find("a part at 127.0.0.1 stopped: part 1 has a run key"), std::string::npos)
        << at_hub.error().what;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(9)) << "neither waited out its 10 s";
  }
}

// Before the hub's challenge verifies, a keyed part takes nothing larger than a challenge
// (whoever squats the hub's port could otherwise make it buffer 256 MiB).
TEST(Rendezvous, AKeyedPartTakesNoLargeFrameBeforeItsChallenge) {
  const std::string hub_at = hub_address(13);
  const int listener = listen_at(hub_at);
  ASSERT_GE(listener, 0) << std::strerror(errno);
  auto spoke = Rendezvous::open(1, 2, hub_at, loopback(2), kKey);
  ASSERT_TRUE(spoke) << spoke.error().what;
  std::thread squatter([&] {
    pollfd p{listener, POLLIN, 0};
    if (poll(&p, 1, 5'000) != 1) return;
    const int fd = accept(listener, nullptr, nullptr);
    std::string frame;
    put32(frame, 65);  // one byte more than any challenge, and only its length is sent
    (void)!write(fd, frame.data(), frame.size());
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    close(fd);
  });
  auto r = (*spoke)->exchange("x", "", 3'000);
  squatter.join();
  close(listener);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().what.find("first frame is 65 bytes, no challenge"), std::string::npos) << r.error().what;
}

// A part that sends message after message part 0 never reaches (a bug, another build, a
// compromised peer with the key) stops the run, named, before part 0 holds them all: at most
// 4,096 waiting tags (a lock-step job's round each) and 256 MiB a part.
TEST(Rendezvous, APartRunningFarAheadIsStoppedNotBuffered) {
  for (const bool by_bytes : {false, true}) {
    auto rs = open_all(hub_address(by_bytes ? 15 : 14), 2);
    ASSERT_EQ(rs.size(), 2u);
    std::thread spoke([&] {
      const std::string big(by_bytes ? 100u << 20 : 8, 'x');
      for (int i = 0; i < (by_bytes ? 3 : 4097); ++i) (void)rs[1]->offer("ahead-" + std::to_string(i), big);
      (void)rs[1]->exchange("never", "", 5'000);
    });
    auto r = rs[0]->exchange("never", "", 10'000);
    spoke.join();
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().what.find(by_bytes ? "part 1 sent 3 messages (300 MiB) that part 0 has not reached"
                                           : "part 1 sent 4097 messages (0 MiB) that part 0 has not reached"),
              std::string::npos)
        << r.error().what;
  }
}

// A stray connection (a port scan's connect-and-close, an HTTP request, a huge length prefix,
// an impostor's hello, an abort from nobody) is closed and counted; the parts' exchange goes
// on as if it never came. The impostor comes from 127.0.0.3, no part's address.
TEST(Rendezvous, StrayConnectionsAreClosedAndTheRunGoesOn) {
  const std::string hub_at = hub_address(6);
  const std::vector<uint32_t> peers{0x7f000001, 0x7f000002};
  auto hub = Rendezvous::open(0, 2, hub_at, peers);
  ASSERT_TRUE(hub) << hub.error().what;
  auto connect_from = [&](uint32_t src) {
    const int fd = rocelab::sys::connect_from(src, hub_at);
    (void)(*hub)->offer("tick", "x");  // the hub pumps between them, as it does while it waits
    return fd;
  };
  auto frame = [](const std::string& tag, const std::string& datum) {
    const std::string body = body_of(tag, {datum});
    std::string out;
    put32(out, uint32_t(body.size()));
    return out + body;
  };
  auto pump = [&] { (void)(*hub)->offer("tick", "x"); };
  std::vector<int> fds;
  fds.push_back(connect_from(0x7f000001));  // from a part's address: connect and close (a scan)
  close(fds.back());
  fds.back() = connect_from(0x7f000002);     // a part's address, an HTTP request
  (void)!write(fds.back(), "GET / HTTP/1.0\r\n\r\n", 18);
  fds.push_back(connect_from(0x7f000002));   // a 1 GiB length prefix
  const uint32_t huge = htonl(1u << 30);
  (void)!write(fds.back(), &huge, 4);
  fds.push_back(connect_from(0x7f000003));   // not a part's address, an impostor hello and an abort
  const std::string impostor = frame("!hello", "1") + frame("!abort", "stop everything");
  (void)!write(fds.back(), impostor.data(), impostor.size());
  fds.push_back(connect_from(0x7f000001));   // a part's address claiming part 1, whose is .2
  const std::string wrong = frame("!hello", "1") + frame("!abort", "stop");
  (void)!write(fds.back(), wrong.data(), wrong.size());
  for (int i = 0; i < 20; ++i) {
    pump();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE((*hub)->strays(), 5u) << (*hub)->last_stray();
  // The real part 1 still gets through, from its own address.
  auto spoke = Rendezvous::open(1, 2, hub_at, peers);
  ASSERT_TRUE(spoke);
  std::thread t([&] {
    auto r = (*spoke)->exchange("figures", "part 1", 10'000);
    EXPECT_TRUE(r) << (r ? "" : r.error().what);
  });
  auto all = (*hub)->exchange("figures", "part 0", 10'000);
  t.join();
  ASSERT_TRUE(all) << all.error().what;
  EXPECT_EQ((*all)[1], "part 1");
  for (int fd : fds) close(fd);
}

}  // namespace rocelab::sys
