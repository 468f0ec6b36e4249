/* The middle of a link with a propagation delay (DESIGN.md §3, issue 16). Such a link runs
 * through the fabric's wire namespace: each end's veth meets a device there, and what
 * arrives on one device leaves by the other, whose netem root delays it toward its end.
 * Data and PFC frames alike cross it unchanged (a bridge would drop 01:80:C2:00:00:01), so
 * a pause reaches the sender one delay after it left, as on a cable. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "rocelab_abi.h"

#define TC_ACT_SHOT 2

SEC("tc")
int rl_wire(struct __sk_buff *skb)
{
	if (skb->ifindex < RL_WIRE_FIRST_IFINDEX)
		return TC_ACT_SHOT;
	return bpf_redirect(skb->ifindex ^ 1, 0);
}

char LICENSE[] SEC("license") = "GPL";
