#include "run/vm.h"

#include <fmt/format.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "run/results.h"
#include "sys/files.h"
#include "sys/process.h"

namespace rocelab::run {

namespace fs = std::filesystem;

namespace {

bool holds_image(const fs::path& d) {
  std::error_code ec;
  return fs::exists(d / "vmlinuz", ec) && fs::exists(d / "initrd.img", ec);
}

}  // namespace

std::string vm_image_dir() {
  if (const char* env = getenv("ROCELAB_VM_IMAGE"); env && *env) return holds_image(env) ? env : "";
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    // Next to this binary's tree only: a path relative to where the command runs would boot
    // whatever kernel someone left there.
    if (const fs::path d = exe.parent_path().parent_path() / "images" / "out"; holds_image(d)) return d.string();
  return "";
}

std::string guest_kernel_death(const std::string& console) {
  for (const char* mark : {"Oops:", "Kernel panic", "BUG:"})
    if (const size_t at = console.find(mark); at != std::string::npos) {
      const size_t end = console.find('\n', at);
      std::string line = console.substr(at, end == std::string::npos ? std::string::npos : end - at);
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      return line;
    }
  return "";
}

// mapped-xattr: what the guest's root makes in the job directory is this user's plain files
// here (its owners, modes and device nodes live in xattrs), never a set-uid file or a device
// on the host. A file system without user xattrs (tmpfs before Linux 6.6) falls back to none,
// where qemu makes them as asked; the job directory is 0700 either way.
namespace {
std::string share_model(const std::string& job_dir) {
  const char probe[] = "user.rocelab.probe";
  if (setxattr(job_dir.c_str(), probe, "1", 1, 0) != 0) return "none";
  (void)removexattr(job_dir.c_str(), probe);
  return "mapped-xattr";
}
}  // namespace

VmBoot boot_vm(const std::string& image_dir, const std::string& job_dir, const std::string& accel, int timeout_ms) {
  VmBoot b;
  const bool kvm = accel.rfind("kvm", 0) == 0;
  // The console goes into a directory of its own, not the job's (the guest's root writes
  // there), and not at a name beside it in /tmp (another user could plant a link there first).
  char dir[] = "/tmp/rocelab-console-XXXXXX";
  if (!mkdtemp(dir)) {
    b.why = std::string("no temporary directory for the guest's console: ") + std::strerror(errno);
    return b;
  }
  const std::string console = std::string(dir) + "/console";
  const std::vector<std::string> args{
      "-machine", "q35", "-accel", accel, "-cpu", kvm ? "host" : "max", "-m", "2048", "-smp", "2",
      "-nographic", "-no-reboot", "-nodefaults", "-serial", "file:" + console, "-kernel", image_dir + "/vmlinuz",
      "-initrd", image_dir + "/initrd.img", "-append", "console=ttyS0 quiet panic=-1",
      "-virtfs", "local,path=" + job_dir + ",mount_tag=job,security_model=" + share_model(job_dir) + ",id=job"};
  const auto t0 = std::chrono::steady_clock::now();
  std::string why;
  const bool exited = sys::run_with_input("/usr/bin/qemu-system-x86_64", args, "", timeout_ms, why);
  b.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string console_why;
  b.console = sys::read_file(console, 1u << 20, console_why).value_or("");
  unlink(console.c_str());
  rmdir(dir);
  if (b.console.size() > 16384) b.console = b.console.substr(b.console.size() - 16384);
  // What the guest wrote is read without following links and within bounds (the guest's
  // root owns the job directory).
  std::string rc_why;
  const auto rc = sys::read_file(job_dir + "/job.rc", 64, rc_why);
  char* end = nullptr;
  const long code = rc ? std::strtol(rc->c_str(), &end, 10) : 0;
  if (rc && end != rc->c_str() && code >= 0 && code < 256) {
    b.job_rc = int(code);
    b.ran = true;
  } else {
    const std::string died = guest_kernel_death(b.console);
    b.why = !died.empty() ? "the guest's kernel died before its job ended: " + died
            : exited      ? "the guest powered off without running its job"
                          : why;
  }
  return b;
}

namespace {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool image_has_rocelab(const std::string& image) {
  std::ifstream m(image + "/manifest.txt");
  for (std::string line; std::getline(m, line);)
    if (line.rfind("rocelab ", 0) == 0) return true;
  return false;
}

}  // namespace

// What is copied back from the guest, at most (its root could write anything there).
constexpr size_t kMaxGuestLog = 16u << 20, kMaxGuestFile = 1u << 30, kMaxGuestRun = 4ull << 30;

Result<VmRun> run_in_vm(const VmRunOptions& o) {
  const std::string image = vm_image_dir();
  if (image.empty())
    return error(Errc::kEnvironment, "no VM image: build it with `sudo images/build.sh --rocelab build/rocelab` "
                                     "(or set ROCELAB_VM_IMAGE)");
  if (!image_has_rocelab(image))
    return error(Errc::kEnvironment, image + " was built without rocelab's libraries: rebuild it with "
                                             "`sudo images/build.sh --rocelab build/rocelab`");
  if (access("/usr/bin/qemu-system-x86_64", X_OK) != 0)
    return error(Errc::kEnvironment, "qemu-system-x86_64 is not installed (scripts/setup.sh installs it)");
  VmRun r;
  std::error_code ec;
  const fs::path dir = o.out_dir.empty() ? fs::path("runs") / (o.instance_name + "-" + utc_timestamp(
                                                                   std::chrono::system_clock::now(), true))
                                         : fs::path(o.out_dir);
  {  // judged before the guest boots, as `run` judges --out (sys/files.h); made when copied back
    struct stat st {};
    if (lstat(dir.c_str(), &st) == 0)
      if (auto s = sys::make_private_dir(dir.string()); !s) return s.error();
  }
  char tmpl[] = "/tmp/rocelab-vm-XXXXXX";
  if (!mkdtemp(tmpl)) return error(Errc::kEnvironment, "no temporary directory for the guest's job");
  const fs::path job = tmpl;
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(p, e);
    }
  } cleanup{job};
  // This binary and the scenario go to the guest; what the guest runs is exactly this build.
  fs::copy_file("/proc/self/exe", job / "rocelab", ec);
  if (ec) return error(Errc::kEnvironment, "preparing the guest's job: " + ec.message());
  std::string write_why;  // the bytes loaded here, not the path read again (Scenario::source)
  if (!sys::write_file((job / "scenario.yaml").string(), o.scenario_source, write_why))
    return error(Errc::kEnvironment, "preparing the guest's job: " + write_why);
  std::string cmd = "exec /job/rocelab run --no-report --out /job/run";
  for (const auto& a : o.run_args) cmd += " " + shell_quote(a);
  {
    std::ofstream f(job / "job.sh");
    f << "#!/bin/sh\ncd /job\n" << cmd << " /job/scenario.yaml\n";
  }
  fs::permissions(job / "job.sh", fs::perms::owner_all);
  r.accel = probe_kvm().ok ? "kvm" : "tcg,thread=multi";
  VmBoot b = boot_vm(image, job.string(), r.accel, o.timeout_s * 1000);
  if (!b.ran && r.accel.rfind("tcg", 0) == 0 && b.console.find(kTcgOops) != std::string::npos) {
    // The emulator's known fault, not the guest's software: one more boot, said. Anything
    // else that killed the guest's kernel is reported with its console.
    r.rebooted = b.why;
    for (const char* left : {"job.log", "job.rc", "run"}) fs::remove_all(job / left, ec);
    b = boot_vm(image, job.string(), r.accel, o.timeout_s * 1000);
  }
  r.seconds = b.seconds;
  auto g = take_guest_run(job.string(), b.ran ? dir.string() : "");  // a guest that did not run: its log only
  if (!g) return g.error();
  r.output = std::move(g->output);
  if (!b.ran)
    return error(Errc::kEnvironment, "the VM did not run the scenario (" + b.why + ")\n" + r.output +
                                         (b.console.empty() ? "" : "\nthe guest's console, its end:\n" +
                                                                       b.console.substr(b.console.size() - std::min<size_t>(b.console.size(), 3000))));
  r.exit_code = b.job_rc;
  if (g->copied) r.run_dir = dir.string();
  return r;
}

Result<GuestRun> take_guest_run(const std::string& job_dir, const std::string& out_dir) {
  const fs::path job = job_dir;
  GuestRun g;
  std::string log_why;
  g.output = sys::read_file((job / "job.log").string(), kMaxGuestLog, log_why).value_or("(no job.log: " + log_why + ")");
  struct stat run_st {};
  if (out_dir.empty() || lstat((job / "run").c_str(), &run_st) != 0 || !S_ISDIR(run_st.st_mode)) return g;
  if (auto s = sys::copy_tree((job / "run").string(), out_dir, kMaxGuestFile, kMaxGuestRun, g.skipped); !s)
    return error(Errc::kEnvironment, "copying the run directory back: " + s.error().what);
  if (g.skipped)
    g.output += "\nrocelab: " + std::to_string(g.skipped) +
                " entries of the guest's run directory were not copied back (links, special files, or over the size caps)\n";
  g.copied = true;
  return g;
}

KvmProbe probe_kvm() {
  if (access("/dev/kvm", R_OK | W_OK) != 0) return {false, "no usable /dev/kvm: the VM tier runs under TCG (slow)"};
  if (access("/usr/bin/qemu-system-x86_64", X_OK) != 0)
    return {false, "/dev/kvm is present, but qemu-system-x86_64 is not installed to try a boot"};
  const std::string image = vm_image_dir();
  if (image.empty()) return {false, "/dev/kvm is present; not tried: no VM image (images/build.sh builds it)"};
  char tmpl[] = "/tmp/rocelab-kvm-XXXXXX";
  if (!mkdtemp(tmpl)) return {false, "/dev/kvm is present; no temporary directory for a test boot"};
  const std::string job = tmpl;
  {
    std::ofstream f(job + "/job.sh");
    f << "#!/bin/sh\nexit 0\n";
  }
  fs::permissions(job + "/job.sh", fs::perms::owner_all);
  const VmBoot b = boot_vm(image, job, "kvm", 60'000);
  std::error_code ec;
  fs::remove_all(job, ec);
  if (b.ran) return {true, fmt::format("a test boot of the VM image under KVM ran its job in {:.1f} s", b.seconds)};
  return {false, "/dev/kvm opens, but a test boot under KVM failed (" + b.why +
                     "): the VM tier runs under TCG (slow)"};
}

}  // namespace rocelab::run
