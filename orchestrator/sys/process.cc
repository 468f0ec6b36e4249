#include "sys/process.h"

#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <algorithm>
#include <spawn.h>

namespace rocelab::sys {

std::optional<uint64_t> process_starttime(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  if (!std::getline(f, s)) return std::nullopt;
  // The command name may hold spaces and parentheses: fields count from the last ')'.
  size_t close = s.rfind(')');
  if (close == std::string::npos || close + 2 >= s.size()) return std::nullopt;
  // A zombie (or a dead task) has exited: only its parent's reaping is left, which for a
  // detached process is init's business, not ours.
  if (s[close + 2] == 'Z' || s[close + 2] == 'X') return std::nullopt;
  std::istringstream in(s.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(in >> field)) return std::nullopt;
    if (i == 22) return std::stoull(field);
  }
  return std::nullopt;
}

std::optional<Spawned> spawn_self(const std::vector<std::string>& args, std::string& why) {
  int p[2];  // p[0]: the child's end, p[1]: ours
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) != 0) {
    why = std::string("socketpair: ") + std::strerror(errno);
    return std::nullopt;
  }
  pid_t pid = fork();
  if (pid < 0) {
    why = std::string("fork: ") + std::strerror(errno);
    close(p[0]);
    close(p[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    // Child: its own session, no terminal, stdio to /dev/null, the read end kept open.
    setsid();
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
    }
    int go = dup(p[0]);  // without O_CLOEXEC: survives exec
    std::vector<std::string> a = {"rocelab"};
    a.insert(a.end(), args.begin(), args.end());
    a.push_back("--go-fd");
    a.push_back(std::to_string(go));
    std::vector<char*> argv;
    for (auto& s : a) argv.push_back(s.data());
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  close(p[0]);
  // The start time identifies the child for `down`; /proc has it as soon as fork returns.
  auto st = process_starttime(pid);
  if (!st) {
    why = "the agent exited at once";
    close(p[1]);
    waitpid(pid, nullptr, 0);
    return std::nullopt;
  }
  return Spawned{pid, *st, p[1]};
}

bool write_all(int fd, std::string_view data, std::string& why) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      why = std::string("write: ") + std::strerror(errno);
      return false;
    }
    data.remove_prefix(size_t(n));
  }
  return true;
}

std::vector<std::string> process_args(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::vector<std::string> out;
  for (std::string a; std::getline(f, a, '\0');) out.push_back(a);
  return out;
}

bool stop_process(int pid, uint64_t starttime, int grace_ms, std::string& why, const std::vector<std::string>& args) {
  if (pid <= 1) return true;
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return errno == ESRCH;  // gone
  // Checked after taking the pidfd: the PID cannot be reused while we hold it.
  auto st = process_starttime(pid);
  if (!st || *st != starttime) {
    close(pidfd);
    return true;  // not ours any more (our process ended long ago)
  }
  if (!args.empty()) {
    const auto have = process_args(pid);
    if (std::search(have.begin(), have.end(), args.begin(), args.end()) == have.end()) {
      close(pidfd);
      return true;  // not the process the record says: left alone
    }
  }
  // The pidfd turns readable once the process has exited (a zombie counts: only its
  // reaping is left, ours when it is our child).
  auto exited_within = [&](int ms) {
    pollfd p{pidfd, POLLIN, 0};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      const int r = poll(&p, 1, int(std::max<long>(0, left.count())));
      if (r > 0) return true;
      if (r == 0 || errno != EINTR) return false;
    }
  };
  syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, nullptr, 0);
  if (!exited_within(grace_ms)) {
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
    exited_within(30'000);
  }
  waitpid(pid, nullptr, WNOHANG);  // reap it if it is our child
  close(pidfd);
  if (process_starttime(pid) == starttime) {
    why = "process " + std::to_string(pid) + " did not stop";
    return false;
  }
  return true;
}

bool run_with_input(const std::string& path, const std::vector<std::string>& args, std::string_view input,
                    int timeout_ms, std::string& why) {
  int in[2];
  if (pipe2(in, O_CLOEXEC) != 0) return why = std::string("pipe: ") + std::strerror(errno), false;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> argv{const_cast<char*>(path.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, path.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  if (rc != 0) {
    close(in[1]);
    return why = path + ": " + std::strerror(rc), false;
  }
  signal(SIGPIPE, SIG_IGN);  // a helper that exits early must not take us with it
  const bool wrote = write_all(in[1], input, why);
  close(in[1]);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return why = std::string("waitpid: ") + std::strerror(errno), false;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return why = path + " took longer than " + std::to_string(timeout_ms) + " ms", false;
    }
    usleep(10'000);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return wrote;
  why = path + (WIFEXITED(status) ? " exited " + std::to_string(WEXITSTATUS(status))
                                  : " ended by signal " + std::to_string(WTERMSIG(status)));
  return false;
}

}  // namespace rocelab::sys
