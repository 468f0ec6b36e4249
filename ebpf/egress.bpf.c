/* tc egress of every port (switch ports and host NICs), which runs before the qdisc
 * enqueue: classify DSCP -> priority into the port's HTB class, admit against the queue
 * limit, mark ECN (or WRED-drop non-ECT on lossy ECN queues) by the exact depth of the
 * class the packet is about to join, and count. DESIGN.md §2; depth per §4. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "port_maps.bpf.h"

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rl_depth_override);
} depth_override SEC(".maps");

/* Bytes queued in the HTB leaf class `classid` of the packet's device: the exact backlog
 * of the leaf qdisc, found through HTB's class hash (counting enqueues and dequeues drifts
 * on this kernel). 0 when the device's root qdisc is not HTB. */
static __always_inline __u32 class_backlog(struct __sk_buff *skb, __u32 classid)
{
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);
	struct Qdisc *root = BPF_CORE_READ(kskb, dev, qdisc);
	char id[4] = {};

	if (!root)
		return 0;
	bpf_probe_read_kernel(id, sizeof id, BPF_CORE_READ(root, ops, id));
	if (id[0] != 'h' || id[1] != 't' || id[2] != 'b' || id[3] != 0)
		return 0;
	struct htb_sched *q = (void *)root + bpf_core_field_offset(struct Qdisc, privdata);
	struct hlist_head *hash = BPF_CORE_READ(q, clhash.hash);
	__u32 mask = BPF_CORE_READ(q, clhash.hashmask);
	__u32 h = classid;

	h ^= h >> 8; /* qdisc_class_hash() */
	h ^= h >> 4;
	h &= mask;
	struct hlist_node *n = BPF_CORE_READ(hash + h, first);
	for (int i = 0; i < 8 && n; i++) {
		struct Qdisc_class_common *c = container_of(n, struct Qdisc_class_common, hnode);
		if (BPF_CORE_READ(c, classid) == classid) {
			struct htb_class *cl = container_of(c, struct htb_class, common);
			return BPF_CORE_READ(cl, leaf.q, qstats.backlog);
		}
		n = BPF_CORE_READ(n, next);
	}
	return 0;
}

static __always_inline __u32 queue_depth(struct __sk_buff *skb, __u32 prio)
{
	__u32 zero = 0;
	struct rl_depth_override *o = bpf_map_lookup_elem(&depth_override, &zero);

	if (o && o->enabled)
		return o->depth[prio & (RL_NUM_PRIO - 1)];
	return class_backlog(skb, RL_CLASSID(prio));
}

/* Mark with probability 0 below kmin, pmax * (q - kmin) / (kmax - kmin) to kmax, 1 above. */
static __always_inline int ecn_hit(const struct rl_ecn_curve *c, __u32 q)
{
	if (q < c->kmin)
		return 0;
	if (q > c->kmax)
		return 1;
	__u64 span = c->kmax - c->kmin;
	__u64 p = span ? (__u64)c->pmax * (q - c->kmin) / span : c->pmax;
	return bpf_get_prandom_u32() < p;
}

static __always_inline int drop(struct rl_counters *cnt, int reason)
{
	if (cnt)
		__sync_fetch_and_add(&cnt->drops[reason], 1);
	return TC_ACT_SHOT;
}

SEC("tc")
int rl_egress(struct __sk_buff *skb)
{
	struct rl_config *cfg = port_cfg();
	__u16 proto = 0;

	if (!cfg || skb->ifindex < RL_FIRST_PORT_IFINDEX)
		return TC_ACT_OK;
	bpf_skb_load_bytes(skb, 12, &proto, sizeof proto);
	/* MAC control (PFC) never queues behind data. */
	if (proto == bpf_htons(0x8808)) {
		skb->priority = RL_DIRECT_CLASSID;
		return TC_ACT_OK;
	}
	int tos = ipv4_tos(skb);
	__u32 prio = tos < 0 ? 0 : cfg->dscp_to_prio[(tos >> 2) & 63] & (RL_NUM_PRIO - 1);
	struct rl_counters *cnt = counters_of(skb->ifindex, prio);

	skb->priority = RL_CLASSID(prio);
	__u32 depth = queue_depth(skb, prio);
	int lossless = (cfg->lossless_mask >> prio) & 1;

	if (depth + skb->len > cfg->queue_limit[prio]) {
		if (cnt)
			cnt->depth_after = depth;
		return drop(cnt, lossless ? RL_DROP_HEADROOM : RL_DROP_QUEUE_FULL);
	}
	if (tos >= 0 && cfg->ecn[prio].enabled && ecn_hit(&cfg->ecn[prio], depth)) {
		if (tos & 3) {
			/* ECT(0), ECT(1) or already CE: CE set, IPv4 checksum fixed by the helper. */
			if (bpf_skb_ecn_set_ce(skb) && cnt)
				__sync_fetch_and_add(&cnt->ecn_marked, 1);
		} else if (!lossless) {
			if (cnt)
				cnt->depth_after = depth;
			return drop(cnt, RL_DROP_WRED);
		}
	}
	if (cnt) {
		cnt->depth_after = depth + skb->len;
		__sync_fetch_and_add(&cnt->tx_packets, 1);
		__sync_fetch_and_add(&cnt->tx_bytes, skb->len);
	}
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
