#include "bpf/tc_hook.h"

#include <arpa/inet.h>
#include <bpf/libbpf.h>
#include <linux/if_ether.h>
#include <linux/netlink.h>
#include <linux/pkt_cls.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <unistd.h>

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

namespace {

// rocelab's BPF filter (handle 1, priority 1, every protocol) on a port's own hook
// (`ifindex`, its clsact `parent`) or on a shared block (TCM_IFINDEX_MAGIC_BLOCK, the block
// index as `parent`), in the calling thread's namespace, by raw netlink: libbpf cannot name
// a block, and its query of a port on a shared block logs the kernel's refusal as a
// warning. RTM_GETTFILTER returns the program id, RTM_DELTFILTER 1; 0 with `why` and
// `error` (the kernel's errno) on failure.
uint32_t tc_filter(uint16_t type, int ifindex, uint32_t parent, std::string& why, int* error = nullptr) {
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) {
    why = err("netlink socket", errno);
    return 0;
  }
  struct {
    nlmsghdr h;
    tcmsg t;
  } req{};
  req.h.nlmsg_len = sizeof req;
  req.h.nlmsg_type = type;
  req.h.nlmsg_flags = NLM_F_REQUEST | (type == RTM_DELTFILTER ? NLM_F_ACK : 0);
  req.t.tcm_family = AF_UNSPEC;
  req.t.tcm_ifindex = ifindex;
  req.t.tcm_parent = parent;  // tcm_block_index for a block
  req.t.tcm_handle = 1;
  req.t.tcm_info = TC_H_MAKE(1u << 16, htons(ETH_P_ALL));
  const std::string where = ifindex == int(TCM_IFINDEX_MAGIC_BLOCK) ? "tc block " + std::to_string(parent)
                                                                     : "interface " + std::to_string(ifindex);
  alignas(nlmsghdr) char buf[8192];
  uint32_t id = 0;
  ssize_t n = send(fd, &req, sizeof req, 0) == ssize_t(sizeof req) ? recv(fd, buf, sizeof buf, 0) : -1;
  if (n < 0) why = err(where, errno);
  for (auto* h = reinterpret_cast<nlmsghdr*>(buf); n > 0 && NLMSG_OK(h, size_t(n)); h = NLMSG_NEXT(h, n)) {
    if (h->nlmsg_type == NLMSG_ERROR) {
      const int e = reinterpret_cast<nlmsgerr*>(NLMSG_DATA(h))->error;
      if (e) {
        why = err("no rocelab program on " + where, e);
        if (error) *error = e;
      } else {
        id = 1;  // the delete's acknowledgement
      }
      break;
    }
    if (h->nlmsg_type != RTM_NEWTFILTER) continue;
    int len = int(h->nlmsg_len) - int(NLMSG_LENGTH(sizeof(tcmsg)));
    for (auto* a = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(NLMSG_DATA(h)) + NLMSG_ALIGN(sizeof(tcmsg)));
         RTA_OK(a, len); a = RTA_NEXT(a, len)) {
      if (a->rta_type != TCA_OPTIONS) continue;
      int olen = int(RTA_PAYLOAD(a));
      for (auto* o = reinterpret_cast<rtattr*>(RTA_DATA(a)); RTA_OK(o, olen); o = RTA_NEXT(o, olen))
        if (o->rta_type == TCA_BPF_ID && RTA_PAYLOAD(o) >= sizeof(uint32_t)) std::memcpy(&id, RTA_DATA(o), sizeof id);
    }
    if (!id) why = where + " holds no BPF program";
    break;
  }
  close(fd);
  return id;
}

}  // namespace

uint32_t attached_tc(int ifindex, TcHook hook, std::string& why) {
  const bool in = hook == TcHook::kIngress;
  int e = 0;
  const uint32_t id = tc_filter(RTM_GETTFILTER, ifindex, TC_H_MAKE(TC_H_CLSACT, in ? TC_H_MIN_INGRESS : TC_H_MIN_EGRESS), why, &e);
  if (e != -EOPNOTSUPP) return id;  // the kernel refuses per-device requests on a shared block
  return tc_filter(RTM_GETTFILTER, int(TCM_IFINDEX_MAGIC_BLOCK), in ? kIngressBlock : kEgressBlock, why);
}

bool detach_port(int ifindex, std::string& why) {
  LIBBPF_OPTS(bpf_tc_hook, h, .ifindex = ifindex, .attach_point = bpf_tc_attach_point(BPF_TC_INGRESS | BPF_TC_EGRESS));
  if (int e = bpf_tc_hook_destroy(&h); e) {
    why = err("remove the clsact of interface " + std::to_string(ifindex), e);
    return false;
  }
  return true;
}

bool detach_node(std::string& why) {
  const int block = int(TCM_IFINDEX_MAGIC_BLOCK);
  return tc_filter(RTM_DELTFILTER, block, kIngressBlock, why) && tc_filter(RTM_DELTFILTER, block, kEgressBlock, why);
}

}  // namespace rocelab::bpf
