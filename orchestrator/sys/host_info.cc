#include "sys/host_info.h"

#include <cstdio>

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

namespace rocelab::sys {

KernelInfo kernel_info() {
  KernelInfo k;
  struct utsname u {};
  if (uname(&u) == 0) {
    k.release = u.release;
    k.version = u.version;
    k.machine = u.machine;
    std::sscanf(u.release, "%d.%d", &k.major, &k.minor);
  }
  return k;
}

bool is_root() { return geteuid() == 0; }

bool path_exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> out;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    closedir(d);
  }
  return out;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<uint32_t> resolve_ipv4(const std::string& name, std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(name.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) {
    why = "'" + name + "' has no IPv4 address: " + (rc ? gai_strerror(rc) : "none");
    return std::nullopt;
  }
  const uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr.s_addr);
  freeaddrinfo(res);
  return a;
}

std::optional<uint64_t> memory_available() {
  auto text = read_file("/proc/meminfo");
  if (!text) return std::nullopt;
  const auto at = text->find("MemAvailable:");
  if (at == std::string::npos) return std::nullopt;
  uint64_t kb = 0;
  if (std::sscanf(text->c_str() + at, "MemAvailable: %lu kB", &kb) != 1) return std::nullopt;
  return kb * 1024;
}

std::optional<ThreadCpu> thread_cpu() {
  auto text = read_file("/proc/thread-self/schedstat");
  ThreadCpu t;
  if (!text || std::sscanf(text->c_str(), "%lu %lu", &t.on_cpu_ns, &t.waiting_ns) != 2) return std::nullopt;
  return t;
}

std::optional<MachineSteal> machine_steal() {
  auto text = read_file("/proc/stat");
  if (!text) return std::nullopt;
  // "cpu  user nice system idle iowait irq softirq steal ..." in USER_HZ ticks; then cpuN lines.
  unsigned long v[8] = {};
  if (std::sscanf(text->c_str(), "cpu %lu %lu %lu %lu %lu %lu %lu %lu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                  &v[7]) != 8)
    return std::nullopt;
  const long hz = sysconf(_SC_CLK_TCK);
  if (hz <= 0) return std::nullopt;
  MachineSteal m;
  m.steal_ns = uint64_t(v[7]) * (1'000'000'000ull / uint64_t(hz));
  for (size_t at = text->find("\ncpu"); at != std::string::npos; at = text->find("\ncpu", at + 1)) ++m.cpus;
  if (!m.cpus) return std::nullopt;
  return m;
}

bool kernel_has_module(const std::string& name) {
  if (path_exists("/sys/module/" + name)) return true;
  KernelInfo k = kernel_info();
  for (const char* f : {"/modules.builtin", "/modules.dep"}) {
    auto text = read_file("/lib/modules/" + k.release + f);
    if (text && text->find("/" + name + ".ko") != std::string::npos) return true;
  }
  return false;
}

std::optional<std::string> run_in_private_netns(const std::function<std::string()>& fn, std::string& why,
                                                int timeout_ms) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    why = std::string("pipe: ") + std::strerror(errno);
    return std::nullopt;
  }
  pid_t pid = fork();
  if (pid < 0) {
    why = std::string("fork: ") + std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    if (unshare(CLONE_NEWNET) != 0) out = std::string("!unshare(CLONE_NEWNET): ") + std::strerror(errno);
    else out = fn();
    const char* p = out.data();
    size_t left = out.size();
    while (left > 0) {
      ssize_t n = write(fds[1], p, left);
      if (n <= 0) break;
      p += n;
      left -= static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd pfd {fds[0], POLLIN, 0};
    int pr = poll(&pfd, 1, static_cast<int>(left));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) {
      timed_out = pr == 0;
      break;
    }
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);  // our own child, by PID
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    why = "the probe did not finish in time";
    return std::nullopt;
  }
  if (!WIFEXITED(status)) {
    why = "the probe crashed";
    return std::nullopt;
  }
  if (!out.empty() && out[0] == '!') {
    why = out.substr(1);
    return std::nullopt;
  }
  return out;
}

}  // namespace rocelab::sys
