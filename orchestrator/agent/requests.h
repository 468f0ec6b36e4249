// The agent's socket (`rocelab stats`, the run, storms; fabric/agent_protocol.h): one request
// line per connection, one reply line. Served from the PFC loop, which must never block on
// it: each connection's request is read and its reply sent as the socket takes them (a client
// stopped mid-reply holds only its own buffer), a connection past its time is dropped, and
// past the client limit new ones are closed at once. Nothing here needs root or a fabric.
#pragma once

#include <poll.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sys/netns.h"

namespace rocelab::agent {

struct RequestLimits {
  size_t max_clients = 16;
  size_t max_request = 4096;                // bytes before a newline; past it the request is ""
  uint64_t client_ns = 10'000'000'000ull;  // a connection's whole life: request, reply
};

class RequestServer {
 public:
  // The reply to one request line ("" for a line past the limit).
  using Answer = std::function<nlohmann::json(const std::string& line)>;
  // Listens on `path` (mode 0600: the agent acts on the fabric), replacing a stale socket
  // of the same path (a crashed agent's). nullptr with `why` when it cannot.
  static std::unique_ptr<RequestServer> listen(const std::string& path, Answer answer, std::string& why,
                                               RequestLimits limits = {});
  ~RequestServer();  // closes every connection and removes the socket's path

  // Appends the poll entries: the listener, then each connection's (reading until it has
  // its request, writing while its reply waits).
  void add_fds(std::vector<pollfd>& fds) const;
  // After poll, with `first` the index of the listener's entry: reads, answers, sends what
  // each socket takes now, drops the finished and the late, then accepts new connections.
  void serve(const std::vector<pollfd>& polled, size_t first);
  // While the agent stops: the replies still waiting, for `budget_ns` at most; then closes all.
  void flush(uint64_t budget_ns);
  size_t clients() const { return clients_.size(); }

 private:
  RequestServer(std::string path, Answer answer, RequestLimits limits)
      : path_(std::move(path)), answer_(std::move(answer)), limits_(limits) {}
  struct Client {
    sys::Fd fd;
    std::string in, out;
    uint64_t since_ns = 0;
    bool answered = false;
  };
  bool serve_one(Client& c, short revents, uint64_t now);  // false: done with it
  void accept_new();

  std::string path_;
  Answer answer_;
  RequestLimits limits_;
  sys::Fd listener_;
  std::vector<Client> clients_;
};

}  // namespace rocelab::agent
