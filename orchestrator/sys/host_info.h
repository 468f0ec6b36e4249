// Facts about the machine and primitives every layer above may use. No libnl, no libbpf.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
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
// Time the hypervisor ran something else on this machine's CPUs (steal, /proc/stat), summed
// over CPUs, and how many CPUs that is over.
struct MachineSteal {
  uint64_t steal_ns = 0;
  unsigned cpus = 0;
};
std::optional<MachineSteal> machine_steal();
// The kernel has a module available: built in, loaded, or on disk for this release.
bool kernel_has_module(const std::string& name);

// Runs `fn` in a child process inside a new, unnamed network namespace that vanishes with
// the child: nothing is ever made in the machine's own namespace. `fn` returns text that the
// parent receives. nullopt with `why` set when the child could not be started or crashed.
std::optional<std::string> run_in_private_netns(const std::function<std::string()>& fn, std::string& why,
                                                int timeout_ms = 10000);

}  // namespace rocelab::sys
