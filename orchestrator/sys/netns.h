// Named network namespaces the way iproute2 keeps them (a bind mount of the namespace on
// /run/netns/NAME, so `ip netns exec NAME ...` works), and per-thread entry into them.
// Errors are values: false/nullopt with `why` set.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rocelab::sys {

inline constexpr const char* kNetnsDir = "/run/netns";

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();

 private:
  int fd_ = -1;
};

// The calling thread in another network namespace until destruction, then back where it was.
class NetnsScope {
 public:
  static std::optional<NetnsScope> enter(int netns_fd, std::string& why);
  // Back to `home_fd` (the caller's, held open: the thread's namespace now) instead of one
  // opened for the scope: a path lookup in /proc that cost the PFC agent's loop a fifth of
  // its CPU where it enters a node's namespace for every frame it sends (issue 48).
  static std::optional<NetnsScope> enter(int netns_fd, int home_fd, std::string& why);
  NetnsScope(NetnsScope&& o) noexcept : owned_(std::move(o.owned_)), home_(std::exchange(o.home_, -1)) {}
  NetnsScope(const NetnsScope&) = delete;
  ~NetnsScope();

 private:
  NetnsScope(Fd owned, int home) : owned_(std::move(owned)), home_(home) {}
  Fd owned_;      // the home opened for this scope, if the caller held none
  int home_ = -1;
};

// The calling thread's network namespace, held open (a home for NetnsScope::enter).
std::optional<Fd> open_thread_netns(std::string& why);

// Makes /run/netns a shared mount point, as `ip netns add` does, so namespaces mounted
// there are visible from every mount namespace. Idempotent.
bool prepare_netns_dir(std::string& why);

// Creates /run/netns/NAME holding a new namespace. `inside` runs in the new namespace on
// the calling thread (sockets it opens stay bound there), then the thread returns home.
// On failure nothing named is left behind. Returns the namespace's fd.
std::optional<Fd> create_named_netns(const std::string& name, const std::function<bool(std::string&)>& inside,
                                     std::string& why);
// An empty name: the process's own namespace (where a testbed's hosts may live, DESIGN.md "Real rxe").
std::optional<Fd> open_named_netns(const std::string& name, std::string& why);
// Unmounts and unlinks /run/netns/NAME; a name that is not there is not an error.
bool remove_named_netns(const std::string& name, std::string& why);
bool named_netns_exists(const std::string& name);
std::vector<std::string> list_named_netns(const std::string& prefix);

// Writes /proc/sys/KEY (e.g. "net/ipv4/ip_forward") in the calling thread's namespace.
bool write_sysctl(const std::string& key, const std::string& value, std::string& why);
bool sysctl_exists(const std::string& key);
// A sysctl's value as one token (trailing whitespace gone); nullopt when it cannot be read.
std::optional<std::string> read_sysctl(const std::string& key);

// Raises the soft open-files limit to the hard one (a fabric holds several fds per node).
void raise_fd_limit();

}  // namespace rocelab::sys
