#include "sys/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "sys/netns.h"  // Fd

namespace rocelab::sys {

namespace {

Error refused(const std::string& path, const std::string& why) {
  return error(Errc::kEnvironment, "run directory " + path + ": " + why);
}

bool empty_dir(const std::string& path) {
  DIR* d = opendir(path.c_str());
  if (!d) return false;
  bool empty = true;
  while (dirent* e = readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      empty = false;
      break;
    }
  closedir(d);
  return empty;
}

Status make_dir(const std::string& path, bool must_be_empty);

}  // namespace

Status make_private_dir(const std::string& path) { return make_dir(path, true); }
Status make_own_dir(const std::string& path) { return make_dir(path, false); }

namespace {

Status make_dir(const std::string& path, bool must_be_empty) {
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) return refused(path, "is a symbolic link (give the directory itself)");
    if (!S_ISDIR(st.st_mode)) return refused(path, "exists and is not a directory");
    if (st.st_uid != geteuid())
      return refused(path, "exists and belongs to uid " + std::to_string(st.st_uid) +
                               ", not to this user (another user could replace what the run writes there)");
    if (st.st_mode & (S_IWGRP | S_IWOTH))
      return refused(path, "exists and others may write to it (mode " + [&] {
        char m[8];
        std::snprintf(m, sizeof m, "%04o", unsigned(st.st_mode & 07777));
        return std::string(m);
      }() + ")");
    if (must_be_empty && !empty_dir(path)) return refused(path, "already exists and is not empty (choose another --out)");
    return ok();
  }
  if (errno != ENOENT) return refused(path, std::strerror(errno));
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) return refused(path, "cannot create its parent: " + ec.message());
  if (mkdir(path.c_str(), 0755) != 0) {
    // Made by someone else between the check and now: judged like any existing one.
    if (errno == EEXIST) return refused(path, "appeared while it was being made (run again)");
    return refused(path, std::string("cannot create it: ") + std::strerror(errno));
  }
  return ok();
}

}  // namespace

HeldDir::HeldDir(int fd, std::string path)
    : fd_(fd), path_(std::move(path)), at_("/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(fd)) {}

HeldDir::~HeldDir() {
  if (fd_ >= 0) close(fd_);
}

bool HeldDir::still_named() const {
  struct stat held {}, named {};
  return fstat(fd_, &held) == 0 && lstat(path_.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
         held.st_ino == named.st_ino;
}

Result<std::shared_ptr<HeldDir>> hold_private_dir(const std::string& path) {
  if (auto st = make_private_dir(path); !st) return st.error();
  Fd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid())
    return refused(path, errno == ELOOP || errno == ENOTDIR ? "was replaced by a link or a file as it was made (run again)"
                                                             : std::string("cannot open it: ") + std::strerror(errno));
  // Judged again on what is held: a parent swapped between the check and the open could
  // have led elsewhere.
  struct stat st {};
  if (fstat(fd.get(), &st) != 0 || st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))
    return refused(path, "was replaced as it was made by a directory not this user's alone (run again)");
  auto held = std::make_shared<HeldDir>(fd.release(), path);
  if (!empty_dir(held->at())) return refused(path, "was filled by someone else as it was made (run again)");
  return held;
}

namespace {

// Opens `path` with `flags` (O_CREAT among them) never through a symbolic link (the last
// component) and never a FIFO or device; `st` is what it opened. Invalid and `why` otherwise.
Fd open_regular_for_write(const std::string& path, int flags, mode_t mode, struct stat& st, std::string& why) {
  Fd fd(open(path.c_str(), flags | O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode));
  if (!fd.valid()) {
    why = "cannot write " + path + ": " + (errno == ELOOP ? std::string("it is a symbolic link") : std::strerror(errno));
    return Fd();
  }
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "cannot write " + path + ": not a regular file";
    return Fd();
  }
  const int f = fcntl(fd.get(), F_GETFL);
  if (f >= 0) (void)fcntl(fd.get(), F_SETFL, f & ~O_NONBLOCK);  // O_NONBLOCK only kept a FIFO from blocking open
  return fd;
}

}  // namespace

int open_for_write(const std::string& path, std::string& why, bool append) {
  struct stat st {};
  return open_regular_for_write(path, append ? O_APPEND : O_TRUNC, 0644, st, why).release();
}

int open_private_for_write(const std::string& path, std::string& why) {
  struct stat st {};
  Fd fd = open_regular_for_write(path, 0, 0600, st, why);
  if (!fd.valid()) return -1;
  if (st.st_uid != geteuid() || st.st_nlink != 1) {
    why = "will not write a secret into " + path + ": " +
          (st.st_uid != geteuid() ? "it is another user's file" : "it has another name (a hard link)") +
          " (remove it, or name a new file)";
    return -1;
  }
  if (fchmod(fd.get(), 0600) != 0 || ftruncate(fd.get(), 0) != 0) {
    why = "cannot write " + path + ": " + std::strerror(errno);
    return -1;
  }
  return fd.release();
}

bool write_file(const std::string& path, std::string_view text, std::string& why) {
  Fd fd(open_for_write(path, why));
  if (!fd.valid()) return false;
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      why = "cannot write " + path + ": " + std::strerror(errno);
      return false;
    }
    done += size_t(n);
  }
  return true;
}

std::optional<std::string> read_file(const std::string& path, size_t max_bytes, std::string& why) {
  Fd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!fd.valid() || fstat(fd.get(), &st) != 0) {
    why = path + ": " + (errno == ELOOP ? std::string("a symbolic link (not followed)") : std::strerror(errno));
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    why = path + ": not a regular file";
    return std::nullopt;
  }
  std::string out;
  char buf[65536];
  while (out.size() < max_bytes) {
    const ssize_t n = read(fd.get(), buf, std::min(sizeof buf, max_bytes - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, size_t(n));
  }
  return out;
}

namespace {

// One regular file, streamed (a guest's pcap can be a GiB): at most `left` bytes, never
// through a link. The bytes copied; nullopt (nothing left at `dst`) when `src` is no regular
// file or is, or grew meanwhile, past `left`.
Result<std::optional<size_t>> copy_one(const std::string& src, const std::string& dst, size_t left) {
  Fd in(open(src.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!in.valid() || fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode) || size_t(st.st_size) > left)
    return std::optional<size_t>();
  std::string why;
  Fd out(open_for_write(dst, why));
  if (!out.valid()) return error(Errc::kEnvironment, why);
  char buf[65536];
  for (size_t done = 0;;) {
    const ssize_t n = read(in.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return error(Errc::kEnvironment, src + ": " + std::strerror(errno));
    if (n == 0) return std::optional<size_t>(done);
    if ((done += size_t(n)) > left) {
      unlink(dst.c_str());
      return std::optional<size_t>();
    }
    for (ssize_t put = 0; put < n;) {
      const ssize_t k = write(out.get(), buf + put, size_t(n - put));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return error(Errc::kEnvironment, "cannot write " + dst + ": " + std::strerror(errno));
      put += k;
    }
  }
}

Status copy_tree_in(const std::string& from, const std::string& to, size_t max_file, size_t max_total, size_t& total,
                    size_t& skipped, int depth) {
  if (auto st = make_private_dir(to); !st) return st;
  DIR* d = opendir(from.c_str());
  if (!d) return error(Errc::kEnvironment, from + ": " + std::strerror(errno));
  std::vector<std::string> names;
  while (dirent* e = readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
  closedir(d);
  for (const std::string& n : names) {
    const std::string src = from + "/" + n, dst = to + "/" + n;
    struct stat st {};
    if (lstat(src.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode) && depth > 0) {
      if (auto s = copy_tree_in(src, dst, max_file, max_total, total, skipped, depth - 1); !s) return s;
      continue;
    }
    const size_t left = std::min(max_file, max_total - total);
    auto copied = S_ISREG(st.st_mode) ? copy_one(src, dst, left) : Result<std::optional<size_t>>(std::optional<size_t>());
    if (!copied) return copied.error();
    if (!*copied) {
      ++skipped;
      continue;
    }
    total += **copied;
  }
  return ok();
}

}  // namespace

// The caps hold for the whole tree (each directory's files count against one total).
Status copy_tree(const std::string& from, const std::string& to, size_t max_file, size_t max_total, size_t& skipped,
                 int depth) {
  size_t total = 0;
  return copy_tree_in(from, to, max_file, max_total, total, skipped, depth);
}

size_t json_depth(std::string_view text) {
  size_t depth = 0, most = 0;
  bool in_string = false, escaped = false;
  for (char ch : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    else if (ch == '[' || ch == '{') most = std::max(most, ++depth);
    else if ((ch == ']' || ch == '}') && depth) --depth;
  }
  return most;
}

}  // namespace rocelab::sys
