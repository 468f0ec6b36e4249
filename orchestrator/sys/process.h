// Processes the testbed starts and stops: only its own, by PID checked against the start
// time recorded with it (a PID alone may have been reused by the time `down` runs).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rocelab::sys {

// The kernel's start time of a process (field 22 of /proc/PID/stat), or nullopt if it is
// gone or has exited (a zombie).
std::optional<uint64_t> process_starttime(int pid);

struct Spawned {
  int pid = 0;
  uint64_t starttime = 0;
  int handshake_fd = -1;  // a stream socket to the child: what it needs, then its answer;
                          // closing it before writing anything makes the child exit
};

// Starts /proc/self/exe with `args` in a new session, detached from our stdio, holding it at
// a handshake: the child reads from the socket named by "--go-fd N" (appended to args) until
// the parent shuts its side, and exits if it read nothing, so a parent killed before
// recording it leaves nothing.
std::optional<Spawned> spawn_self(const std::vector<std::string>& args, std::string& why);

// Runs `path` with `args` (argv[1..]) and `input` on its standard input, its output to
// /dev/null, and waits up to `timeout_ms` for it (then kills it). True when it exited 0;
// else `why` says how it ended. For helper programs (gnuplot), never for the fabric.
bool run_with_input(const std::string& path, const std::vector<std::string>& args, std::string_view input,
                    int timeout_ms, std::string& why);

// Writes all of `data` (retrying short writes and EINTR).
bool write_all(int fd, std::string_view data, std::string& why);

// SIGTERM, then SIGKILL after `grace_ms`, to PID if and only if it still has `starttime`,
// waiting on its pidfd until it has exited (a killed process may still take a while to
// close its files). True when the process is gone (or was never there).
// With `args`, the process is ours only if its command line holds them in order (a state
// file's PID and start time alone could be forged): otherwise it is left alone.
bool stop_process(int pid, uint64_t starttime, int grace_ms, std::string& why,
                  const std::vector<std::string>& args = {});

// The command line of a process, one entry per argument (empty when it is gone).
std::vector<std::string> process_args(int pid);

}  // namespace rocelab::sys
