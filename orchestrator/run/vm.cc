#include "run/vm.h"

#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

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
    for (const fs::path& d : {exe.parent_path().parent_path() / "images" / "out", fs::path("images") / "out"})
      if (holds_image(d)) return fs::absolute(d, ec).string();
  return "";
}

VmBoot boot_vm(const std::string& image_dir, const std::string& job_dir, const std::string& accel, int timeout_ms) {
  VmBoot b;
  const bool kvm = accel.rfind("kvm", 0) == 0;
  const std::vector<std::string> args{
      "-machine", "q35", "-accel", accel, "-cpu", kvm ? "host" : "max", "-m", "2048", "-smp", "2",
      "-nographic", "-no-reboot", "-nodefaults", "-serial", "null", "-kernel", image_dir + "/vmlinuz",
      "-initrd", image_dir + "/initrd.img", "-append", "console=ttyS0 quiet panic=-1",
      "-virtfs", "local,path=" + job_dir + ",mount_tag=job,security_model=none,id=job"};
  const auto t0 = std::chrono::steady_clock::now();
  std::string why;
  const bool exited = sys::run_with_input("/usr/bin/qemu-system-x86_64", args, "", timeout_ms, why);
  b.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ifstream rc(job_dir + "/job.rc");
  if (rc >> b.job_rc) b.ran = true;
  else b.why = exited ? "the guest powered off without running its job" : why;
  return b;
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
