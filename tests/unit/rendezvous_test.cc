// The split run's all-gather, three parts on loopback in threads: every part gets every
// part's message in part order whatever order they offer in, a spoke started before the hub
// still gets through, an abort or a closed connection reaches the others with its reason,
// and a missing part is named when the wait runs out.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

// A stray connection (a port scan's connect-and-close, an HTTP request, a huge length prefix,
// an impostor's hello, an abort from nobody) is closed and counted; the parts' exchange goes
// on as if it never came. The impostor comes from 127.0.0.3, no part's address.
TEST(Rendezvous, StrayConnectionsAreClosedAndTheRunGoesOn) {
  const std::string hub_at = hub_address(6);
  const std::vector<uint32_t> peers{0x7f000001, 0x7f000002};
  auto hub = Rendezvous::open(0, 2, hub_at, peers);
  ASSERT_TRUE(hub) << hub.error().what;
  const uint16_t port = uint16_t(std::stoi(hub_at.substr(hub_at.rfind(':') + 1)));
  auto connect_from = [&](uint32_t src) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in own{};
    own.sin_family = AF_INET;
    own.sin_addr.s_addr = htonl(src);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&own), sizeof own), 0) << std::strerror(errno);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(0x7f000001);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0) << std::strerror(errno);
    (void)(*hub)->offer("tick", "x");  // the hub pumps between them, as it does while it waits
    return fd;
  };
  auto frame = [](const std::string& tag, const std::string& datum) {
    std::string body, out;
    auto put = [](std::string& s, uint32_t v) {
      v = htonl(v);
      s.append(reinterpret_cast<const char*>(&v), 4);
    };
    put(body, uint32_t(tag.size()));
    body += tag;
    put(body, 1);
    put(body, uint32_t(datum.size()));
    body += datum;
    put(out, uint32_t(body.size()));
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
