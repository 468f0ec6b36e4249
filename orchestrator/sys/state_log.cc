#include "sys/state_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

namespace rocelab::sys {

namespace {
std::string err(const std::string& what) { return what + ": " + std::strerror(errno); }

bool write_all(int fd, const std::string& s) {
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}
}  // namespace

// Made 0755 if absent; an existing one is trusted only if it is a real directory of this
// user's that no one else may write to (a state file planted there would be replayed by
// `down` as root).
bool ensure_state_dir(std::string& why) {
  if (mkdir(kStateDir, 0755) != 0 && errno != EEXIST) {
    why = err(std::string("mkdir ") + kStateDir);
    return false;
  }
  struct stat st {};
  if (lstat(kStateDir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    why = std::string(kStateDir) + " is not a directory of this user's that only it may write to (a link, another "
          "owner, or group/other-writable): rocelab will not trust the state files in it";
    return false;
  }
  return true;
}

std::unique_ptr<StateLog> StateLog::create(const std::string& path, const std::string& first_lines,
                                           std::string& why) {
  std::string dir = path.substr(0, path.rfind('/'));
  Fd fd(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    why = err("create a state file in " + dir);
    return nullptr;
  }
  if (flock(fd.get(), LOCK_EX) != 0 || !write_all(fd.get(), first_lines)) {
    why = err("write state file " + path);
    return nullptr;
  }
  // The file appears under its name complete and locked, or not at all.
  std::string proc = "/proc/self/fd/" + std::to_string(fd.get());
  if (linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) != 0) {
    why = errno == EEXIST ? "state file " + path + " exists" : err("link state file " + path);
    return nullptr;
  }
  if (lseek(fd.get(), 0, SEEK_END) < 0) {
    why = err("seek " + path);
    return nullptr;
  }
  return std::unique_ptr<StateLog>(new StateLog(std::move(fd), path));
}

std::unique_ptr<StateLog> StateLog::open(const std::string& path, bool lock, std::string& why, int64_t wait_ms, bool* held) {
  Fd fd(::open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC));
  if (!fd.valid()) {
    why = err("open state file " + path);
    return nullptr;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + std::chrono::milliseconds(std::max<int64_t>(wait_ms, 0));
  while (lock && flock(fd.get(), LOCK_EX | (wait_ms >= 0 ? LOCK_NB : 0)) != 0) {
    if (errno == EWOULDBLOCK && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (errno == EWOULDBLOCK) {
      const std::string holder = flock_holder(fd.get());
      char waited[32];
      std::snprintf(waited, sizeof waited, "%.1f", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      why = "state file " + path + " is still held after " + waited + " s by " +
            (holder.empty() ? "a process in another PID namespace" : holder) +
            " (a run or up of this instance still going, or stuck): nothing was touched";
      if (held) *held = true;
      return nullptr;
    }
    if (errno != EINTR) {
      why = err("lock state file " + path);
      return nullptr;
    }
  }
  return std::unique_ptr<StateLog>(new StateLog(std::move(fd), path));
}

std::string flock_holder(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return "";
  // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a waiter's line has "->" after the
  // number. The device is major:minor in hex.
  char want[64];
  std::snprintf(want, sizeof want, "%02x:%02x:%lu", major(st.st_dev), minor(st.st_dev), static_cast<unsigned long>(st.st_ino));
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);) {
    std::istringstream in(line);
    std::string num, kind, mode, rw, pid, file;
    if (!(in >> num >> kind) || kind != "FLOCK" || !(in >> mode >> rw >> pid >> file) || file != want) continue;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid == "0") return "";
    std::ifstream cmd("/proc/" + pid + "/cmdline");
    std::string text((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    if (text.size() > 160) text = text.substr(0, 160) + "...";
    while (!text.empty() && text.back() == '\0') text.pop_back();
    for (char& ch : text)
      if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) > 0x7e) ch = ' ';
    return "PID " + pid + (text.empty() ? "" : " (" + text + ")");
  }
  return "";
}

bool StateLog::append(const std::vector<std::string>& lines, std::string& why) {
  std::string buf;
  for (const auto& l : lines) {
    // One record a line: a newline inside one would write a record nobody asked for
    // (`down` replays every line as root).
    if (l.find_first_of("\n\r") != std::string::npos) {
      why = "state file " + path_ + ": refused a record with a line break";
      return false;
    }
    buf += l + "\n";
  }
  if (!write_all(fd_.get(), buf)) {
    why = err("append to state file " + path_);
    return false;
  }
  return true;
}

std::vector<std::string> StateLog::lines() const {
  std::string text;
  char buf[65536];
  for (off_t off = 0;;) {
    ssize_t n = pread(fd_.get(), buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    off += n;
  }
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    out.push_back(text.substr(start, nl - start));
  return out;
}

bool StateLog::removed() const {
  struct stat st {};
  return fstat(fd_.get(), &st) == 0 && st.st_nlink == 0;
}

bool StateLog::remove(std::string& why) {
  if (unlink(path_.c_str()) != 0 && errno != ENOENT) {
    why = err("remove state file " + path_);
    return false;
  }
  return true;
}

}  // namespace rocelab::sys
