#include "run/capabilities.h"

#include <unistd.h>

#include "bpf/probe.h"
#include "netlink/datapath_probe.h"
#include "sys/host_info.h"

namespace rocelab::run {

bool Capabilities::has(const std::string& name) const {
  for (const auto& c : items)
    if (c.name == name) return c.ok;
  return false;
}

bool Capabilities::all_required() const {
  for (const auto& c : items)
    if (c.required && !c.ok) return false;
  return true;
}

nlohmann::ordered_json Capabilities::to_json() const {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& c : items) j[c.name] = {{"ok", c.ok}, {"required", c.required}, {"why", c.why}};
  return j;
}

Capabilities detect_capabilities() {
  Capabilities caps;
  auto add = [&](std::string name, bool ok, bool required, std::string why) {
    caps.items.push_back({std::move(name), ok, required, std::move(why)});
  };
  const bool root = sys::is_root();
  add("root", root, true, root ? "running as uid 0" : "running as uid " + std::to_string(geteuid()) +
                                                       ": namespaces, qdiscs and BPF need root");
  // Datapath pieces the fabric uses (required) and those a stock distro kernel may add.
  const std::vector<std::pair<std::string, bool>> qdiscs = {
      {"htb", true}, {"tbf", true}, {"clsact", true}, {"bfifo", false}, {"netem", false},
      {"fq", false}, {"prio", false}, {"red", false}, {"ets", false}};
  if (root) {
    std::string why;
    std::vector<std::string> kinds;
    for (const auto& [k, _] : qdiscs) kinds.push_back(k);
    auto text = sys::run_in_private_netns([&] { return netlink::encode(netlink::probe_datapath(kinds)); }, why);
    if (!text) {
      add("netns", false, true, "could not make a private network namespace: " + why);
    } else {
      add("netns", true, true, "made a private network namespace (unshare CLONE_NEWNET)");
      auto probes = netlink::decode(*text);
      for (const auto& p : probes) {
        if (p.name.rfind("qdisc:", 0) == 0) {
          std::string k = p.name.substr(6);
          bool required = false;
          for (const auto& [qk, req] : qdiscs)
            if (qk == k) required = req;
          add(k, p.ok, required, p.why);
        } else {
          add(p.name, p.ok, true, p.why);
        }
      }
    }
  } else {
    add("netns", false, true, "not probed: needs root");
    add("veth", false, true, "not probed: needs root");
    for (const auto& [k, req] : qdiscs) add(k, false, req, "not probed: needs root");
  }
  bool btf = sys::path_exists("/sys/kernel/btf/vmlinux");
  add("btf", btf, true, btf ? "/sys/kernel/btf/vmlinux is present (CO-RE works)"
                            : "/sys/kernel/btf/vmlinux is missing: the kernel was built without BTF");
  if (root) {
    auto b = bpf::probe_bpf();
    add("bpf", b.ran, true, b.why);
  } else {
    add("bpf", false, true, "not probed: loading BPF programs needs root");
  }
  const sys::KernelInfo k = sys::kernel_info();
  bool rxe = sys::kernel_has_module("rdma_rxe");
  add("rxe", rxe, false, rxe ? "the rdma_rxe module is available" : "this kernel has no rdma_rxe module (real soft-RoCE needs a kernel that has it)");
  // rxe binds its UDP socket and routes in init_net before Linux 7.1 (DESIGN.md §4).
  bool in_netns = rxe && k.at_least(7, 1);
  add("rxe_in_netns", in_netns, false,
      !rxe ? "no rdma_rxe on this kernel"
           : in_netns ? "kernel " + k.release + " has rxe network-namespace support (7.1+)"
                      : "kernel " + k.release + " predates 7.1: rxe traffic fails inside a namespace");
  // Whether KVM really boots a guest is doctor's to find out (a test boot takes seconds):
  // here only whether the device is there.
  bool kvm = sys::path_exists("/dev/kvm");
  add("kvm", kvm, false, kvm ? "/dev/kvm is present (not tried: rocelab doctor tries a boot)"
                             : "no /dev/kvm: the VM tier runs under TCG (slow)");
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  add("cpus", cpus >= 2, false, std::to_string(cpus) + " online CPUs (emulated rates must fit in them)");
  return caps;
}

}  // namespace rocelab::run
