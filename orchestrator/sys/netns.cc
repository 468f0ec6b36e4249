#include "sys/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "sys/host_info.h"

namespace rocelab::sys {

namespace {
std::string err(const std::string& what) { return what + ": " + std::strerror(errno); }
std::string path_of(const std::string& name) { return std::string(kNetnsDir) + "/" + name; }
// The calling thread's own namespace: /proc/self would name the thread group leader's.
constexpr const char* kThreadNetns = "/proc/thread-self/ns/net";
}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.release();
  }
  return *this;
}
Fd::~Fd() {
  if (fd_ >= 0) close(fd_);
}
int Fd::release() {
  int f = fd_;
  fd_ = -1;
  return f;
}

std::optional<NetnsScope> NetnsScope::enter(int netns_fd, std::string& why) {
  Fd home(open(kThreadNetns, O_RDONLY | O_CLOEXEC));
  if (!home.valid()) {
    why = err(std::string("open ") + kThreadNetns);
    return std::nullopt;
  }
  if (setns(netns_fd, CLONE_NEWNET) != 0) {
    why = err("setns");
    return std::nullopt;
  }
  const int fd = home.get();
  return NetnsScope(std::move(home), fd);
}

std::optional<NetnsScope> NetnsScope::enter(int netns_fd, int home_fd, std::string& why) {
  if (home_fd < 0) return enter(netns_fd, why);
  if (setns(netns_fd, CLONE_NEWNET) != 0) {
    why = err("setns");
    return std::nullopt;
  }
  return NetnsScope(Fd(), home_fd);
}

NetnsScope::~NetnsScope() {
  // Returning home cannot fail for a namespace we were in a moment ago; if it ever did, the
  // thread would act in a testbed namespace, which is why this aborts rather than goes on.
  if (home_ >= 0 && setns(home_, CLONE_NEWNET) != 0) std::abort();
}

std::optional<Fd> open_thread_netns(std::string& why) {
  Fd fd(open(kThreadNetns, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    why = err(std::string("open ") + kThreadNetns);
    return std::nullopt;
  }
  return fd;
}

bool prepare_netns_dir(std::string& why) {
  if (mkdir(kNetnsDir, 0755) != 0 && errno != EEXIST) {
    why = err(std::string("mkdir ") + kNetnsDir);
    return false;
  }
  if (mount("", kNetnsDir, "none", MS_SHARED | MS_REC, nullptr) == 0) return true;
  if (errno != EINVAL) {
    why = err(std::string("make ") + kNetnsDir + " shared");
    return false;
  }
  // Not a mount point yet: bind it onto itself first (what iproute2 does).
  if (mount(kNetnsDir, kNetnsDir, "none", MS_BIND | MS_REC, nullptr) != 0 ||
      mount("", kNetnsDir, "none", MS_SHARED | MS_REC, nullptr) != 0) {
    why = err(std::string("bind-mount ") + kNetnsDir);
    return false;
  }
  return true;
}

std::optional<Fd> create_named_netns(const std::string& name, const std::function<bool(std::string&)>& inside,
                                     std::string& why) {
  const std::string path = path_of(name);
  {
    Fd f(open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0));
    if (!f.valid()) {
      why = errno == EEXIST ? "namespace " + name + " exists already" : err("create " + path);
      return std::nullopt;
    }
  }
  Fd home(open(kThreadNetns, O_RDONLY | O_CLOEXEC));
  if (!home.valid() || unshare(CLONE_NEWNET) != 0) {
    why = err("new network namespace " + name);
    unlink(path.c_str());
    return std::nullopt;
  }
  // From here the thread is in the new namespace; every exit path goes home first.
  auto go_home = [&] {
    if (setns(home.get(), CLONE_NEWNET) != 0) std::abort();
  };
  if (mount(kThreadNetns, path.c_str(), "none", MS_BIND, nullptr) != 0) {
    why = err("bind-mount namespace on " + path);
    go_home();
    unlink(path.c_str());
    return std::nullopt;
  }
  Fd self(open(kThreadNetns, O_RDONLY | O_CLOEXEC));
  bool ok = self.valid();
  if (!ok) why = err(std::string("open ") + kThreadNetns);
  if (ok && inside) ok = inside(why);
  go_home();
  if (!ok) {
    std::string ignored;
    remove_named_netns(name, ignored);
    return std::nullopt;
  }
  return self;
}

std::optional<Fd> open_named_netns(const std::string& name, std::string& why) {
  Fd f(open(name.empty() ? "/proc/self/ns/net" : path_of(name).c_str(), O_RDONLY | O_CLOEXEC));
  if (!f.valid()) {
    why = err("open namespace " + name);
    return std::nullopt;
  }
  return f;
}

bool remove_named_netns(const std::string& name, std::string& why) {
  const std::string path = path_of(name);
  // EINVAL: the file is there but nothing is mounted on it (a crash between the two steps).
  if (umount2(path.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
    why = err("unmount " + path);
    return false;
  }
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    why = err("remove " + path);
    return false;
  }
  return true;
}

bool named_netns_exists(const std::string& name) {
  struct stat st {};
  return lstat(path_of(name).c_str(), &st) == 0;
}

std::vector<std::string> list_named_netns(const std::string& prefix) {
  std::vector<std::string> out;
  for (auto& n : list_dir(kNetnsDir))
    if (n.rfind(prefix, 0) == 0) out.push_back(std::move(n));
  return out;
}

bool write_sysctl(const std::string& key, const std::string& value, std::string& why) {
  const std::string path = "/proc/sys/" + key;
  Fd f(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!f.valid()) {
    why = err("sysctl " + key);
    return false;
  }
  if (write(f.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    why = err("sysctl " + key + " = " + value);
    return false;
  }
  return true;
}

bool sysctl_exists(const std::string& key) { return access(("/proc/sys/" + key).c_str(), F_OK) == 0; }

std::optional<std::string> read_sysctl(const std::string& key) {
  Fd f(open(("/proc/sys/" + key).c_str(), O_RDONLY | O_CLOEXEC));
  if (!f.valid()) return std::nullopt;
  char buf[256];
  const ssize_t n = read(f.get(), buf, sizeof buf - 1);
  if (n <= 0) return std::nullopt;
  std::string v(buf, size_t(n));
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
  return v;
}

void raise_fd_limit() {
  struct rlimit rl {};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace rocelab::sys
