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

#include <algorithm>
#include <cerrno>
#include <cstdlib>
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

namespace {

// A share from a period and a runtime file (microseconds; runtime -1: unlimited).
std::optional<RtBandwidth> rt_pair(const std::string& period_path, const std::string& runtime_path) {
  auto p = read_file(period_path), r = read_file(runtime_path);
  long long period = 0, runtime = 0;
  if (!p || !r || std::sscanf(p->c_str(), "%lld", &period) != 1 || std::sscanf(r->c_str(), "%lld", &runtime) != 1 ||
      period <= 0)
    return std::nullopt;
  return RtBandwidth{uint64_t(period) * 1000, runtime < 0 ? 0 : uint64_t(runtime) * 1000};
}

// This process's v1 cpu cgroup directory ("N:cpu,cpuacct:/path" in /proc/self/cgroup), if any.
std::optional<std::string> cpu_cgroup_v1() {
  auto text = read_file("/proc/self/cgroup");
  if (!text) return std::nullopt;
  size_t at = 0;
  while (at < text->size()) {
    const size_t end = std::min(text->find('\n', at), text->size());
    const std::string line = text->substr(at, end - at);
    at = end + 1;
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string ctl = "," + line.substr(a + 1, b - a - 1) + ",";
    if (ctl.find(",cpu,") == std::string::npos) continue;
    for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"})
      if (path_exists(std::string(mount) + line.substr(b + 1) + "/cpu.rt_runtime_us")) return mount + line.substr(b + 1);
  }
  return std::nullopt;
}

}  // namespace

RtBandwidth rt_bandwidth() {
  RtBandwidth out = rt_pair("/proc/sys/kernel/sched_rt_period_us", "/proc/sys/kernel/sched_rt_runtime_us")
                        .value_or(RtBandwidth{});
  if (auto dir = cpu_cgroup_v1())
    if (auto g = rt_pair(*dir + "/cpu.rt_period_us", *dir + "/cpu.rt_runtime_us")) {
      // The smaller share of a period binds (the group's own runtime 0: no RT at all).
      const double mine = out.runtime_ns ? double(out.runtime_ns) / double(out.period_ns) : 1.0;
      const double group = double(g->runtime_ns) / double(g->period_ns);
      if (group < mine) out = *g;
    }
  return out;
}

std::map<uint64_t, std::string> kernel_symbols(const std::set<uint64_t>& addrs) {
  std::map<uint64_t, std::string> out;
  if (addrs.empty()) return out;
  std::ifstream in("/proc/kallsyms");
  std::string line;
  while (out.size() < addrs.size() && std::getline(in, line)) {
    char type = 0, name[128] = {};
    unsigned long long addr = 0;
    if (std::sscanf(line.c_str(), "%llx %c %127s", &addr, &type, name) == 3 && addrs.count(addr) &&
        (type == 't' || type == 'T'))
      out.emplace(addr, name);
  }
  return out;
}

std::optional<uint64_t> other_processes_cpu_ns(const std::vector<int>& ours) {
  const long hz = sysconf(_SC_CLK_TCK);
  DIR* d = opendir("/proc");
  if (!d || hz <= 0) {
    if (d) closedir(d);
    return std::nullopt;
  }
  uint64_t ticks = 0;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end || std::find(ours.begin(), ours.end(), int(pid)) != ours.end()) continue;
    auto st = read_file("/proc/" + std::string(e->d_name) + "/stat");
    if (!st) continue;  // gone meanwhile
    // "pid (comm) state ppid ..." : the fields after the comm's last ')', 3 = state.
    const size_t close = st->rfind(')');
    if (close == std::string::npos) continue;
    unsigned long flags = 0, utime = 0, stime = 0;
    if (std::sscanf(st->c_str() + close + 2, "%*c %*d %*d %*d %*d %*d %lu %*u %*u %*u %*u %lu %lu", &flags, &utime,
                    &stime) != 3)
      continue;
    if (flags & 0x00200000) continue;  // PF_KTHREAD
    ticks += utime + stime;
  }
  closedir(d);
  return ticks * (1'000'000'000ull / uint64_t(hz));
}

std::string MachineId::text() const {
  return (cpu_model.empty() ? std::string("unknown CPU") : cpu_model) + ", " + std::to_string(cpus) + " CPUs, clocksource " +
         (clocksource.empty() ? "unknown" : clocksource) + ", kernel " + kernel;
}

MachineId machine_id() {
  MachineId m;
  if (auto c = read_file("/proc/cpuinfo"))
    if (size_t at = c->find("model name"); at != std::string::npos)
      if (size_t colon = c->find(':', at); colon != std::string::npos) {
        const size_t end = c->find('\n', colon);
        m.cpu_model = c->substr(colon + 2, end == std::string::npos ? std::string::npos : end - colon - 2);
      }
  if (auto cs = read_file("/sys/devices/system/clocksource/clocksource0/current_clocksource"))
    m.clocksource = cs->substr(0, cs->find('\n'));
  m.kernel = kernel_info().release;
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  m.cpus = n > 0 ? unsigned(n) : 0;
  return m;
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
