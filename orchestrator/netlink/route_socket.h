// RAII over libnl: a route socket bound to the namespace the calling thread is in, and
// errors as values (libnl's negative NLE codes, turned into words).
#pragma once

#include <memory>
#include <string>

struct nl_sock;

namespace rocelab::netlink {

// A libnl error: 0 is success. `text` says what was attempted and why it failed.
struct Status {
  int code = 0;  // libnl NLE_* (positive), 0 on success
  std::string text;
  bool ok() const { return code == 0; }
  static Status success() { return {}; }
  static Status from_nl(int nl_err, const std::string& what);
};

class RouteSocket {
 public:
  // Connects a NETLINK_ROUTE socket in the current network namespace.
  static std::unique_ptr<RouteSocket> open(Status& st);
  ~RouteSocket();
  RouteSocket(const RouteSocket&) = delete;
  RouteSocket& operator=(const RouteSocket&) = delete;
  nl_sock* get() const { return sock_; }

 private:
  explicit RouteSocket(nl_sock* s) : sock_(s) {}
  nl_sock* sock_;
};

}  // namespace rocelab::netlink
