// Processes the testbed starts and stops: only its own, by PID checked against the start
// time recorded with it (a PID alone may have been reused by the time `down` runs).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rocelab::sys {

// The kernel's start time of a process (field 22 of /proc/PID/stat), or nullopt if it is
// gone or has exited (a zombie).
std::optional<uint64_t> process_starttime(int pid);

struct Spawned {
  int pid = 0;
  uint64_t starttime = 0;
  int go_fd = -1;  // write one byte to let the child run; closing it unwritten makes it exit
};

// Starts /proc/self/exe with `args` in a new session, detached from our stdio, holding it at
// a handshake: the child reads one byte from the fd named by "--go-fd N" (appended to args)
// and exits if it gets EOF instead, so a parent killed before recording it leaves nothing.
std::optional<Spawned> spawn_self(const std::vector<std::string>& args, std::string& why);

// SIGTERM, then SIGKILL after `grace_ms`, to PID if and only if it still has `starttime`.
// True when the process is gone (or was never there).
bool stop_process(int pid, uint64_t starttime, int grace_ms, std::string& why);

}  // namespace rocelab::sys
