// The project's VM image (images/build.sh: Debian's 6.12 kernel with rdma_rxe and a small
// initramfs) booted with qemu. The guest runs the job.sh of a directory shared as 9p tag
// `job`, leaves job.log and job.rc there, and powers off (images/build.sh writes its /init).
#pragma once

#include <string>
#include <vector>

#include "sys/error.h"

namespace rocelab::run {

// Where the image is: $ROCELAB_VM_IMAGE, else images/out beside the binary's source tree
// (BUILD/rocelab -> images/out), else ./images/out. Empty when none holds vmlinuz and initrd.img.
std::string vm_image_dir();

struct VmBoot {
  bool ran = false;      // the guest ran the job and wrote job.rc
  int job_rc = -1;
  double seconds = 0;
  std::string why;       // when it did not run: how qemu ended, or how the guest's kernel died
  std::string console;   // the guest's console, its end (the kernel boots quiet: errors only)
};

// TCG's multi-threaded code patching kills a guest's kernel now and then ("Oops: int3", in
// sched_clock_cpu mid-job in CI): the emulator's fault, not the guest's software.
inline constexpr const char* kTcgOops = "Oops: int3";
// The first line of a guest's console that says its kernel died (an Oops, a panic, a BUG),
// or "".
std::string guest_kernel_death(const std::string& console);

// Boots `image_dir` with `accel` ("kvm" or "tcg,thread=multi"), the job in `job_dir`.
VmBoot boot_vm(const std::string& image_dir, const std::string& job_dir, const std::string& accel, int timeout_ms);

// `rocelab run --vm`: the scenario run inside the image by this very binary (shared with the
// guest over 9p with the scenario; the image supplies the kernel with rxe and the libraries,
// images/build.sh --rocelab), the run directory copied back to `out_dir` (or
// runs/NAME-TIMESTAMP). KVM where a test boot works, TCG otherwise.
struct VmRunOptions {
  std::string scenario_path, instance_name;  // instance_name: the scenario's name, for the run directory
  std::string scenario_source;               // the file's bytes as loaded (Scenario::source): what the guest runs
  std::string out_dir;
  std::vector<std::string> run_args;         // --scale, --seed, --instance as given
  int timeout_s = 3600;
};
struct VmRun {
  int exit_code = 4;     // the guest's `rocelab run` exit code
  std::string run_dir;   // on this machine
  std::string output;    // what rocelab printed in the guest
  std::string accel;
  double seconds = 0;
  std::string rebooted;  // why the guest was booted a second time (kTcgOops); empty: once
};
Result<VmRun> run_in_vm(const VmRunOptions& o);

// What a guest left in its job directory, taken as untrusted (its root writes there over 9p,
// links and devices included): job.log read without following a link, capped; run/ only if
// a real directory, copied to `out_dir` without links or special files and within caps.
// `copied`: whether run/ came back; `skipped`: the entries left behind. An empty `out_dir`:
// the log only (a guest that did not run leaves no run directory here).
struct GuestRun {
  std::string output;
  bool copied = false;
  size_t skipped = 0;
};
Result<GuestRun> take_guest_run(const std::string& job_dir, const std::string& out_dir);

// Whether KVM can run the image here, by a test boot of a job that only exits: "yes" needs
// a guest that ran, not a /dev/kvm that opens.
struct KvmProbe {
  bool ok = false;
  std::string why;
};
KvmProbe probe_kvm();

}  // namespace rocelab::run
