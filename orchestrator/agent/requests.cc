#include "agent/requests.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rocelab::agent {

namespace {

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

// Sends what the socket takes now. False when the connection failed.
bool send_some(int fd, std::string& out) {
  const ssize_t n = send(fd, out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n > 0) out.erase(0, size_t(n));
  return n >= 0 || errno == EAGAIN || errno == EINTR;
}

}  // namespace

std::unique_ptr<RequestServer> RequestServer::listen(const std::string& path, Answer answer, std::string& why,
                                                     RequestLimits limits) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) return why = "socket path too long: " + path, nullptr;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  std::unique_ptr<RequestServer> s(new RequestServer(path, std::move(answer), limits));
  s->listener_ = sys::Fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  unlink(path.c_str());  // this instance's own path (a crashed agent's socket)
  const mode_t old = umask(0077);
  const bool ok = s->listener_.valid() && bind(s->listener_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::listen(s->listener_.get(), 16) == 0;
  umask(old);
  if (!ok) {
    why = "listen on " + path + ": " + std::strerror(errno);
    s->path_.clear();  // not ours to remove
    return nullptr;
  }
  return s;
}

RequestServer::~RequestServer() {
  clients_.clear();
  listener_ = sys::Fd();
  if (!path_.empty()) unlink(path_.c_str());
}

void RequestServer::add_fds(std::vector<pollfd>& fds) const {
  fds.push_back({listener_.get(), POLLIN, 0});
  for (const Client& c : clients_)
    fds.push_back({c.fd.get(), short((c.answered ? 0 : POLLIN) | (c.out.empty() ? 0 : POLLOUT)), 0});
}

bool RequestServer::serve_one(Client& c, short ev, uint64_t now) {
  if (now - c.since_ns > limits_.client_ns || (ev & (POLLERR | POLLNVAL))) return false;
  if (!c.answered && (ev & (POLLIN | POLLHUP))) {
    char buf[1024];
    const ssize_t n = recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    bool gone = false;
    if (n > 0) c.in.append(buf, size_t(n));
    else if (n == 0 || (errno != EAGAIN && errno != EINTR)) gone = true;
    if (const size_t nl = c.in.find('\n'); nl != std::string::npos || c.in.size() > limits_.max_request) {
      c.out = answer_(nl == std::string::npos ? std::string() : c.in.substr(0, nl)).dump() + "\n";
      c.answered = true;
      gone = false;  // its request came whole before it shut its side: the reply still goes
    }
    if (gone) return false;
  }
  if (!c.out.empty() && !send_some(c.fd.get(), c.out)) return false;
  return !(c.answered && c.out.empty());
}

void RequestServer::serve(const std::vector<pollfd>& polled, size_t first) {
  const uint64_t now = now_ns();
  std::vector<Client> kept;
  kept.reserve(clients_.size());
  for (size_t i = 0; i < clients_.size(); ++i) {
    const size_t at = first + 1 + i;
    if (serve_one(clients_[i], at < polled.size() ? polled[at].revents : 0, now)) kept.push_back(std::move(clients_[i]));
  }
  clients_ = std::move(kept);
  if (first < polled.size() && (polled[first].revents & POLLIN)) accept_new();
}

void RequestServer::accept_new() {
  for (;;) {
    sys::Fd c(accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!c.valid()) return;
    if (clients_.size() >= limits_.max_clients) continue;  // closed: the loop serves a few at a time
    clients_.push_back({std::move(c), {}, {}, now_ns(), false});
  }
}

void RequestServer::flush(uint64_t budget_ns) {
  const uint64_t until = now_ns() + budget_ns;
  for (Client& c : clients_)
    while (!c.out.empty() && now_ns() < until) {
      pollfd p{c.fd.get(), POLLOUT, 0};
      if (poll(&p, 1, 10) < 0 || !send_some(c.fd.get(), c.out)) break;
    }
  clients_.clear();
}

}  // namespace rocelab::agent
