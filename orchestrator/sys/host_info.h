// Facts about the machine and primitives every layer above may use. No libnl, no libbpf.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace rocelab::sys {

struct KernelInfo {
  std::string release;  // uname -r
  std::string version;  // uname -v
  std::string machine;  // uname -m
  int major = 0, minor = 0;
  bool at_least(int maj, int min) const { return major > maj || (major == maj && minor >= min); }
};

KernelInfo kernel_info();
bool is_root();
bool path_exists(const std::string& path);
// Names in a directory (no "." or ".."); empty when it cannot be read.
std::vector<std::string> list_dir(const std::string& path);
std::optional<std::string> read_file(const std::string& path);
// A machine's IPv4 address (host order) by its name, through the resolver (/etc/hosts, DNS);
// the first one. nullopt, with the resolver's reason, when it has none.
std::optional<uint32_t> resolve_ipv4(const std::string& name, std::string& why);
// MemAvailable from /proc/meminfo, in bytes; nullopt when it cannot be read.
std::optional<uint64_t> memory_available();
// The calling thread's scheduler times since it started (/proc/thread-self/schedstat): time on
// a CPU and time runnable but waiting for one. nullopt when the kernel keeps no schedstat.
struct ThreadCpu {
  uint64_t on_cpu_ns = 0, waiting_ns = 0;
};
std::optional<ThreadCpu> thread_cpu();
// How much of each period real-time threads of this process may run before the kernel
// stops them for the rest of it (sched_rt_runtime_us of sched_rt_period_us; within a v1 cpu
// cgroup with RT group scheduling, its cpu.rt_runtime_us if smaller). runtime_ns 0: no limit.
struct RtBandwidth {
  uint64_t period_ns = 1'000'000'000, runtime_ns = 0;
};
RtBandwidth rt_bandwidth();
// Time the hypervisor ran something else on this machine's CPUs (steal, /proc/stat), summed
// over CPUs, and how many CPUs that is over.
struct MachineSteal {
  uint64_t steal_ns = 0;
  unsigned cpus = 0;
};
std::optional<MachineSteal> machine_steal();
// CPU time of every user process on this machine but `ours` (kernel threads left out: the
// fabric's own softirq work runs in ksoftirqd), summed, from /proc/PID/stat: two readings
// around a phase tell what other programs took from it. nullopt when /proc cannot be read.
std::optional<uint64_t> other_processes_cpu_ns(const std::vector<int>& ours);
// The kernel's function names at these addresses (/proc/kallsyms; root sees the addresses),
// the ones found; an address not a symbol's start, or unreadable, is left out.
std::map<uint64_t, std::string> kernel_symbols(const std::set<uint64_t>& addrs);
// The machine's facts a measured figure depends on (bench output, results.json): CPU model,
// logical CPUs, clocksource, kernel release, HZ-independent.
struct MachineId {
  std::string cpu_model, clocksource, kernel;
  unsigned cpus = 0;
  std::string text() const;  // "AMD EPYC, 2 CPUs, clocksource tsc, kernel 6.18.44"
};
MachineId machine_id();
// The kernel has a module available: built in, loaded, or on disk for this release.
bool kernel_has_module(const std::string& name);

// Runs `fn` in a child process inside a new, unnamed network namespace that vanishes with
// the child: nothing is ever made in the machine's own namespace. `fn` returns text that the
// parent receives. nullopt with `why` set when the child could not be started or crashed.
std::optional<std::string> run_in_private_netns(const std::function<std::string()>& fn, std::string& why,
                                                int timeout_ms = 10000);

}  // namespace rocelab::sys
