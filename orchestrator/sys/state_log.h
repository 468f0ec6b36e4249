// The state file of a running instance: a write-ahead log of text lines. Whoever makes a
// kernel object appends its line first, so after a crash at any instant the log names a
// superset of what exists, and teardown replays it. The file is created already locked
// (O_TMPFILE + flock + linkat), so no other process ever sees it unlocked while `up` runs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sys/netns.h"

namespace rocelab::sys {

inline constexpr const char* kStateDir = "/run/rocelab";

class StateLog {
 public:
  // Creates PATH holding `first_lines`; fails (EEXIST in `why`) if PATH exists.
  static std::unique_ptr<StateLog> create(const std::string& path, const std::string& first_lines, std::string& why);
  // Opens an existing log. With `lock`, waits for its exclusive lock (a running `up` holds
  // it; a killed one released it when it died): as long as it takes with `wait_ms` < 0, else
  // at most that long, then fails naming the process that holds it (`why`, `held` true).
  static std::unique_ptr<StateLog> open(const std::string& path, bool lock, std::string& why, int64_t wait_ms = -1,
                                        bool* held = nullptr);

  // One write(2) of the lines (each gets a '\n'); they are on disk before this returns.
  bool append(const std::vector<std::string>& lines, std::string& why);
  // The complete lines; a torn last line (a crash mid-write) is dropped: what it named was
  // never started, since appending comes first.
  std::vector<std::string> lines() const;
  // True when another process removed the file while we waited for the lock.
  bool removed() const;
  bool remove(std::string& why);
  const std::string& path() const { return path_; }

 private:
  StateLog(Fd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  Fd fd_;
  std::string path_;
};

bool ensure_state_dir(std::string& why);

// "PID N (its command line)" of whoever holds an flock on FD's file, from /proc/locks; empty
// when no process does (or the holder is in another PID namespace).
std::string flock_holder(int fd);

}  // namespace rocelab::sys
