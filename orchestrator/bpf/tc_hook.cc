#include "bpf/tc_hook.h"

#include <bpf/libbpf.h>

#include <cstring>

namespace rocelab::bpf {

namespace {

std::string err(const std::string& what, int e) { return what + ": " + std::strerror(e < 0 ? -e : e); }
const char* name(TcHook h) { return h == TcHook::kIngress ? "ingress" : "egress"; }
bpf_tc_attach_point point(TcHook h) { return h == TcHook::kIngress ? BPF_TC_INGRESS : BPF_TC_EGRESS; }

}  // namespace

bool add_clsact(int ifindex, std::string& why) {
  LIBBPF_OPTS(bpf_tc_hook, h, .ifindex = ifindex, .attach_point = BPF_TC_INGRESS);
  if (int e = bpf_tc_hook_create(&h); e && e != -EEXIST) {
    why = err("clsact on interface " + std::to_string(ifindex), e);
    return false;
  }
  return true;
}

bool attach_tc(int ifindex, TcHook hook, int prog_fd, std::string& why) {
  LIBBPF_OPTS(bpf_tc_hook, h, .ifindex = ifindex, .attach_point = point(hook));
  LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = prog_fd, .flags = BPF_TC_F_REPLACE, .handle = 1, .priority = 1);
  if (int e = bpf_tc_attach(&h, &opts); e) {
    why = err(std::string("attach ") + name(hook) + " program to interface " + std::to_string(ifindex), e);
    return false;
  }
  return true;
}

uint32_t attached_tc(int ifindex, TcHook hook, std::string& why) {
  LIBBPF_OPTS(bpf_tc_hook, h, .ifindex = ifindex, .attach_point = point(hook));
  LIBBPF_OPTS(bpf_tc_opts, opts, .handle = 1, .priority = 1);
  if (int e = bpf_tc_query(&h, &opts); e) {
    why = err("no rocelab program on interface " + std::to_string(ifindex), e);
    return 0;
  }
  return opts.prog_id;
}

bool detach_tc(int ifindex, TcHook hook, std::string& why) {
  LIBBPF_OPTS(bpf_tc_hook, h, .ifindex = ifindex, .attach_point = point(hook));
  LIBBPF_OPTS(bpf_tc_opts, opts, .handle = 1, .priority = 1);
  if (int e = bpf_tc_detach(&h, &opts); e) {
    why = err(std::string("detach the ") + name(hook) + " program of interface " + std::to_string(ifindex), e);
    return false;
  }
  return true;
}

}  // namespace rocelab::bpf
