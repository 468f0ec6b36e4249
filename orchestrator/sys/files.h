// Files rocelab writes as root where other users may reach: run directories (`--out`, the
// VM's job directory) and what goes in them. A directory is ours only if we made it, or it
// is an existing, empty, real directory this user owns that no one else may write to; files
// in it are opened without following links, so nothing planted redirects a write.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sys/error.h"

namespace rocelab::sys {

// Makes `path` (and any missing parents) a directory of this user's, mode 0755, or accepts
// an existing one that is empty, not a link, owned by this user and not group- or
// other-writable. The error says which rule refused it (Errc::kEnvironment).
Status make_private_dir(const std::string& path);

// A run directory held open (hold_private_dir): made or accepted as make_private_dir does,
// opened without following a link and judged again on the descriptor. A run makes its files
// through at(), the descriptor's path in /proc: the kernel resolves the directory it holds, not
// the name, so whoever owns a parent directory and renames this one mid-run, leaving a link
// in its place, redirects nothing (the names below still open with O_NOFOLLOW). `path` is the
// name it was made under, for what is printed.
class HeldDir {
 public:
  HeldDir(int fd, std::string path);
  HeldDir(const HeldDir&) = delete;
  HeldDir& operator=(const HeldDir&) = delete;
  ~HeldDir();
  const std::string& path() const { return path_; }
  // /proc/PID/fd/N of this process, not /proc/self: a child it starts (gnuplot for the
  // report's plots) writes through it too.
  const std::string& at() const { return at_; }
  // Whether `path` still names the directory held (not renamed, no link in its place).
  bool still_named() const;

 private:
  int fd_;
  std::string path_, at_;
};
Result<std::shared_ptr<HeldDir>> hold_private_dir(const std::string& path);

// Makes `path` a directory of this user's, or accepts an existing one on the same terms as
// make_private_dir except emptiness (a directory rocelab writes into again: report plots).
Status make_own_dir(const std::string& path);

// Opens `path` for writing, created 0644 or truncated, never through a symbolic link (the
// last component) and never a FIFO or device: -1 and `why` otherwise. O_CLOEXEC.
int open_for_write(const std::string& path, std::string& why, bool append = false);

// open_for_write for a file that will hold a secret: created 0600, and an existing one is
// taken only if it is this user's with no other name (a file another user made beforehand,
// or a hard link to one, would keep them a way to read it); made 0600 before it is emptied.
int open_private_for_write(const std::string& path, std::string& why);

// Writes `text` to `path` through open_for_write.
bool write_file(const std::string& path, std::string_view text, std::string& why);

// Reads at most `max_bytes` of a regular file, never through a link (what a guest or a peer
// left in a directory rocelab reads as root): nullopt and `why` otherwise.
std::optional<std::string> read_file(const std::string& path, size_t max_bytes, std::string& why);

// Copies the regular files of `from` (and of its subdirectories, `depth` levels down) into
// `to`, made with make_private_dir; links, devices and FIFOs are skipped and counted in
// `skipped`, every file is capped at `max_file` bytes and the whole at `max_total`.
Status copy_tree(const std::string& from, const std::string& to, size_t max_file, size_t max_total, size_t& skipped,
                 int depth = 2);

// The deepest nesting of arrays and objects in JSON text (strings skipped), in one pass:
// what rocelab checks before parsing JSON it did not write (a peer's figures, a results.json
// handed to `report`), since copying and printing nested values recurse.
size_t json_depth(std::string_view text);
inline constexpr size_t kMaxJsonDepth = 64;

}  // namespace rocelab::sys
