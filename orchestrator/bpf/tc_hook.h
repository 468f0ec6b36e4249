// Where a port's programs hook into the device: a clsact qdisc with cls_bpf filters. A
// fabric's node puts all its ports' clsact hooks on two tc blocks of its namespace
// (kIngressBlock, kEgressBlock) with one filter each; ports in the machine's own namespace
// (rxe hosts) hold their own.
//
// Not tcx (6.6+), though it adds no tc block: measured here (6.18, 2 cores), every tcx attach
// waits for an RCU grace period under RTNL (~8 ms), so a k = 8 fat-tree came up in 16.7 s
// against 2.2 s with clsact, and its teardown held the next `up` for seconds.
#pragma once

#include <cstdint>
#include <string>

namespace rocelab::bpf {

enum class TcHook { kIngress, kEgress };

// The shared tc blocks of a node's namespace (block numbers are per namespace).
constexpr uint32_t kIngressBlock = 1, kEgressBlock = 2;

// The clsact qdisc both hooks live on, in the calling thread's network namespace; one that
// is there already is fine (the kernel then logs "Exclusivity flag on", hence once a port).
bool add_clsact(int ifindex, std::string& why);

// Attaches `prog_fd` at `hook` of `ifindex` (its clsact made first) in the calling thread's
// network namespace; a program already there (a retried step) is replaced in place. Errors
// name the interface.
bool attach_tc(int ifindex, TcHook hook, int prog_fd, std::string& why);

// The id of rocelab's program at `hook` of `ifindex`, on the port's own block or, where
// the kernel refuses per-device requests because the block is shared, on the namespace's
// shared block; 0 and `why` when there is none.
uint32_t attached_tc(int ifindex, TcHook hook, std::string& why);

// Removes both of rocelab's programs from `ifindex` by removing its clsact qdisc (a shared
// block's filter stays for the node's other ports): the benches' no-program baseline.
bool detach_port(int ifindex, std::string& why);

// Removes both programs from the calling thread's namespace's shared blocks: every port of
// that node keeps its clsact, with no filter on it.
bool detach_node(std::string& why);

}  // namespace rocelab::bpf
