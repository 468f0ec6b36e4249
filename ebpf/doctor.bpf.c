/* A tc classifier used by `rocelab doctor` and the bpf test tier to prove that this kernel
 * loads, verifies and runs rocelab-style programs (cls_bpf, direct action, array maps,
 * BTF-described maps) before any fabric depends on it. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "rocelab_abi.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rl_probe_stats);
} probe_stats SEC(".maps");

SEC("tc")
int probe_classifier(struct __sk_buff *skb)
{
	__u32 key = 0;
	struct rl_probe_stats *s = bpf_map_lookup_elem(&probe_stats, &key);

	if (!s)
		return TC_ACT_SHOT;
	__sync_fetch_and_add(&s->packets, 1);
	__sync_fetch_and_add(&s->bytes, skb->len);
	s->last_proto = skb->protocol;
	return RL_PROBE_VERDICT;
}

char LICENSE[] SEC("license") = "GPL";
