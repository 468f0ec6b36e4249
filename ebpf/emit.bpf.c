/* The agent's frames (an XON, a refreshed XOFF, the kick after a resume) leave a port
 * through this program, run with BPF_PROG_TEST_RUN in the port's namespace with the ctx's
 * ifindex = the port and mark = RL_MARK_PFC(...) or RL_MARK_PFC_KICK: the clone goes out of
 * the port's egress, where rl_egress builds the frame. No packet socket per port (each
 * close of one waits an RCU grace period: an agent of 1,000 ports took seconds to exit). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "rocelab_abi.h"

#define TC_ACT_OK 0
#define TC_ACT_SHOT 2

SEC("tc")
int rl_emit(struct __sk_buff *skb)
{
	if (!RL_MARK_IS_PFC(skb->mark) || skb->ifindex < RL_FIRST_PORT_IFINDEX)
		return TC_ACT_SHOT;
	return bpf_clone_redirect(skb, skb->ifindex, 0) ? TC_ACT_SHOT : TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
