// The agent's request socket (agent/requests.h), without root or a fabric: what the PFC
// loop relies on is that serving never blocks it, whatever a client does.
#include "agent/requests.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

namespace rocelab::agent {
namespace {

class Requests : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rocelab-requests-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/agent.sock";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A blocking client connected to the server's path.
  sys::Fd connect_client() const {
    sys::Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path_.c_str(), path_.size() + 1);
    EXPECT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
    return fd;
  }
  // One turn of the loop: poll (10 ms at most), then serve.
  static void turn(RequestServer& s) {
    std::vector<pollfd> fds;
    s.add_fds(fds);
    poll(fds.data(), fds.size(), 10);
    s.serve(fds, 0);
  }
  // What the client has been sent so far (without waiting).
  static std::string take(const sys::Fd& fd) {
    std::string got;
    char buf[65536];
    for (ssize_t n; (n = recv(fd.get(), buf, sizeof buf, MSG_DONTWAIT)) > 0;) got.append(buf, size_t(n));
    return got;
  }

  // Turns of the loop until the client has a whole reply line (a second at most).
  static std::string reply(RequestServer& s, const sys::Fd& c) {
    std::string got;
    for (int i = 0; i < 100 && got.find('\n') == std::string::npos; ++i) {
      turn(s);
      got += take(c);
    }
    return got;
  }

  std::string dir_, path_;
};

nlohmann::json echo(const std::string& line) {
  if (line == "big") return {{"blob", std::string(8 << 20, 'x')}};  // far past any socket buffer
  return {{"line", line}};
}

TEST_F(Requests, OneLineInOneLineOutThenTheConnectionIsDone) {
  std::string why;
  auto s = RequestServer::listen(path_, echo, why);
  ASSERT_TRUE(s) << why;
  EXPECT_EQ(std::filesystem::status(path_).permissions() & std::filesystem::perms::others_all,
            std::filesystem::perms::none);
  auto c = connect_client();
  ASSERT_EQ(send(c.get(), "{\"request\":\"ping\"}\n", 19, 0), 19);
  const std::string got = reply(*s, c);
  EXPECT_EQ(got, "{\"line\":\"{\\\"request\\\":\\\"ping\\\"}\"}\n");
  turn(*s);
  EXPECT_EQ(s->clients(), 0u);  // answered and sent: closed
  s.reset();
  EXPECT_FALSE(std::filesystem::exists(path_));  // the socket's path goes with the server
}

TEST_F(Requests, AClientThatStopsReadingHoldsOnlyItsOwnReply) {
  std::string why;
  auto s = RequestServer::listen(path_, echo, why, {16, 4096, 1'000'000'000});
  ASSERT_TRUE(s) << why;
  auto stuck = connect_client();
  ASSERT_EQ(send(stuck.get(), "big\n", 4, 0), 4);  // and never reads its 8 MB reply
  for (int i = 0; i < 5; ++i) turn(*s);
  auto other = connect_client();
  ASSERT_EQ(send(other.get(), "hello\n", 6, 0), 6);
  const std::string got = reply(*s, other);
  EXPECT_EQ(got, "{\"line\":\"hello\"}\n");
  EXPECT_EQ(s->clients(), 1u);  // the stuck one, its reply still waiting
  usleep(1'100'000);            // past its second
  turn(*s);
  EXPECT_EQ(s->clients(), 0u);
}

TEST_F(Requests, PastTheClientLimitANewConnectionIsClosedAtOnce) {
  std::string why;
  auto s = RequestServer::listen(path_, echo, why, {2, 4096, 10'000'000'000ull});
  ASSERT_TRUE(s) << why;
  auto a = connect_client(), b = connect_client(), c = connect_client();
  for (int i = 0; i < 3; ++i) turn(*s);
  EXPECT_EQ(s->clients(), 2u);
  char byte;
  EXPECT_EQ(recv(c.get(), &byte, 1, 0), 0);  // closed by the server: end of file, no wait
}

TEST_F(Requests, ARequestPastTheLimitIsAnsweredAsAnEmptyLine) {
  std::string why;
  auto s = RequestServer::listen(path_, echo, why, {16, 100, 10'000'000'000ull});
  ASSERT_TRUE(s) << why;
  auto c = connect_client();
  const std::string junk(200, 'a');  // no newline
  ASSERT_EQ(send(c.get(), junk.data(), junk.size(), 0), ssize_t(junk.size()));
  const std::string got = reply(*s, c);
  EXPECT_EQ(got, "{\"line\":\"\"}\n");
}

TEST_F(Requests, AStaleSocketOfTheSamePathIsReplaced) {
  std::string why;
  { auto first = RequestServer::listen(path_, echo, why); }  // removed on its way out...
  ASSERT_EQ(close(creat(path_.c_str(), 0600)), 0);          // ...so plant one, as a crash leaves
  auto s = RequestServer::listen(path_, echo, why);
  ASSERT_TRUE(s) << why;
  auto c = connect_client();
  EXPECT_TRUE(c.valid());
}

}  // namespace
}  // namespace rocelab::agent
