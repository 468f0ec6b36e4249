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

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RL_NUM_PRIO);
	__type(key, __u32);
	__type(value, struct rl_pfc_tx_state);
} pfc_tx_state SEC(".maps");

/* Sized by the loader: one entry per port slot. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rl_port_headroom);
} port_headroom SEC(".maps");

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

/* The node's shared pool in use: every port's root qdisc backlog (HTB sums its classes
 * exactly), each port having recorded its root qdisc when it last sent. */
static __always_inline __u32 pool_used(const struct rl_port_info *self)
{
	__u32 zero = 0, used = 0;
	struct rl_depth_override *o = bpf_map_lookup_elem(&depth_override, &zero);

	if (o && o->enabled)
		return o->pool_used;
	for (__u32 i = 0; i < 64 && i < self->node_ports; i++) {
		__u32 s = self->node_first_slot + i;
		struct rl_port_info *p = bpf_map_lookup_elem(&port_info, &s);
		if (!p || !p->root_qdisc)
			continue;
		struct Qdisc *q = (struct Qdisc *)p->root_qdisc;
		used += BPF_CORE_READ(q, qstats.backlog);
	}
	return used;
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

/* A clone marked RL_MARK_PFC(xoff, prio) (or RL_MARK_PFC_KICK), redirected here: becomes
 * the 60-byte 802.1Qbb frame of this port (struct rl_pfc_frame: the class bit and pause
 * time of the priority; a kick names none) and leaves through HTB's direct queue. The only
 * place PFC frames are built: the agent's XON, refresh and kick frames come here too. */
static __always_inline int emit_pfc(struct __sk_buff *skb, const struct rl_config *cfg)
{
	__u32 prio = skb->mark & 7, slot = slot_of(skb->ifindex);
	int kick = (skb->mark & 0x200) != 0;
	__u16 quanta = (skb->mark & 0x100) ? cfg->pfc_quanta : 0;
	struct rl_port_info *info = bpf_map_lookup_elem(&port_info, &slot);
	struct rl_pfc_frame f = {.dst = RL_PFC_DST};

	if (!info || bpf_skb_change_tail(skb, RL_PFC_FRAME_LEN, 0))
		return TC_ACT_SHOT;
	__builtin_memcpy(f.src, info->mac, 6);
	f.ethertype = bpf_htons(RL_PFC_ETHERTYPE);
	f.opcode = bpf_htons(RL_PFC_OPCODE);
	if (!kick) {
		f.class_enable = bpf_htons(1u << prio);
		f.time[prio] = bpf_htons(quanta);
	}
	if (bpf_skb_store_bytes(skb, 0, &f, sizeof f, 0))
		return TC_ACT_SHOT;
	skb->mark = 0;
	skb->priority = RL_DIRECT_CLASSID;
	struct rl_counters *cnt = kick ? 0 : counters_of(skb->ifindex, prio);
	if (cnt) {
		__sync_fetch_and_add(&cnt->pfc_tx, 1);
		if (!quanta)
			__sync_fetch_and_add(&cnt->pfc_xon_tx, 1);
	}
	return TC_ACT_OK;
}

/* PFC generation, triggered by egress occupancy (DESIGN.md §2 allows it: ingress-port
 * accounting drifts on this kernel). A packet that joins a lossless queue holding XOFF or
 * more pauses the port it came in on, again every Q/2 while it keeps coming; a packet that
 * finds its queue below XON resumes it once no other queue of the node holds the port's
 * packets at XOFF (a packet to an idle port must not resume a congested one: that flapping
 * let a spine send through its pauses). Ports that send nothing while paused are resumed
 * by their pause expiring, or by the agent. */
enum rl_pfc_action { RL_PFC_NONE = 0, RL_PFC_XOFF = 1, RL_PFC_XON = 2 };

static __always_inline int pfc_decide(__u32 occupancy, const struct rl_config *cfg, struct rl_pfc_tx_state *st,
				      __u64 bit, __u64 since_ns, __u64 refresh_ns)
{
	if (occupancy >= cfg->pfc_xoff) {
		if (!(st->congested & bit))
			__sync_fetch_and_or(&st->congested, bit);
		return (!st->paused || since_ns >= refresh_ns) ? RL_PFC_XOFF : RL_PFC_NONE;
	}
	if (occupancy >= cfg->pfc_xon)
		return RL_PFC_NONE;
	__u64 rest = st->congested;
	if (rest & bit)
		rest = __sync_fetch_and_and(&st->congested, ~bit);
	return st->paused && !(rest & ~bit) ? RL_PFC_XON : RL_PFC_NONE;
}

static __always_inline void pfc_generate(struct __sk_buff *skb, const struct rl_config *cfg, __u32 prio,
					 __u32 occupancy, const struct rl_port_info *self)
{
	__u32 in = skb->ingress_ifindex;

	if (in < RL_FIRST_PORT_IFINDEX || in == skb->ifindex)
		return; /* made here (a host's own traffic): no ingress port to pause */
	__u32 in_slot = slot_of(in), key = in_slot * RL_NUM_PRIO + prio;
	struct rl_pfc_tx_state *st = bpf_map_lookup_elem(&pfc_tx_state, &key);
	struct rl_port_info *info = bpf_map_lookup_elem(&port_info, &in_slot);

	if (!st || !info)
		return;
	__u64 bit = 1ull << ((slot_of(skb->ifindex) - (self ? self->node_first_slot : 0)) & 63);
	__u64 now = bpf_ktime_get_ns();
	__u64 refresh_ns = (__u64)info->quantum_ps * cfg->pfc_quanta / 2000;
	int action = pfc_decide(occupancy, cfg, st, bit, now - st->last_sent_ns, refresh_ns);

	if (action == RL_PFC_NONE)
		return;
	__u32 mark = skb->mark;
	skb->mark = RL_MARK_PFC(action == RL_PFC_XOFF, prio);
	bpf_clone_redirect(skb, in, 0);
	skb->mark = mark;
	st->paused = action == RL_PFC_XOFF;
	if (action == RL_PFC_XOFF)
		st->last_sent_ns = now;
}

/* One draw of the port's loss fault: xorshift64 (13, 7, 17) on the seeded state in the
 * map. Not atomic: two CPUs on one port at once may draw the same number, which only
 * repeats a draw (the probability holds; exact replay needs one packet at a time). */
static __always_inline int fault_lost(struct rl_port_info *p)
{
	__u64 x = p->loss_rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	p->loss_rng = x;
	return (__u32)(x >> 32) < p->loss;
}

SEC("tc")
int rl_egress(struct __sk_buff *skb)
{
	struct rl_config *cfg = port_cfg();
	__u16 proto = 0;

	if (!cfg || skb->ifindex < RL_FIRST_PORT_IFINDEX)
		return TC_ACT_OK;
	if (RL_MARK_IS_PFC(skb->mark))
		return emit_pfc(skb, cfg);
	if ((skb->mark >> 16) == RL_MARK_PROBE_MAGIC)
		return class_backlog(skb, RL_CLASSID(skb->mark & 7));
	bpf_skb_load_bytes(skb, 12, &proto, sizeof proto);
	/* MAC control from elsewhere (a PFC frame someone wrote to a packet socket) never
	 * queues behind data, and is counted like the frames made here. */
	if (proto == bpf_htons(RL_PFC_ETHERTYPE)) {
		struct rl_pfc_frame f = {};
		skb->priority = RL_DIRECT_CLASSID;
		bpf_skb_load_bytes(skb, 0, &f, sizeof f);
		__u16 vector = bpf_ntohs(f.class_enable);
		for (int p = 0; p < RL_NUM_PRIO; p++) {
			struct rl_counters *c = (vector >> p) & 1 ? counters_of(skb->ifindex, p) : 0;
			if (!c)
				continue;
			__sync_fetch_and_add(&c->pfc_tx, 1);
			if (!f.time[p])
				__sync_fetch_and_add(&c->pfc_xon_tx, 1);
		}
		return TC_ACT_OK;
	}
	int tos = ipv4_tos(skb);
	__u32 prio = tos < 0 ? 0 : cfg->dscp_to_prio[(tos >> 2) & 63] & (RL_NUM_PRIO - 1);
	struct rl_counters *cnt = counters_of(skb->ifindex, prio);

	skb->priority = RL_CLASSID(prio);
	__u32 depth = queue_depth(skb, prio);
	int lossless = (cfg->lossless_mask >> prio) & 1;

	__u32 slot = slot_of(skb->ifindex);
	struct rl_port_info *self = bpf_map_lookup_elem(&port_info, &slot);
	int host_lossless = lossless && self && (self->flags & RL_PORT_HOST);

	if (self)
		self->root_qdisc = (__u64)BPF_CORE_READ((struct sk_buff *)bpf_cast_to_kern_ctx(skb), dev, qdisc);
	/* A loss fault: the packet is lost on the link, before it takes any buffer. */
	if (self && self->loss && fault_lost(self)) {
		if (cnt)
			cnt->depth_after = depth;
		return drop(cnt, RL_DROP_FAULT);
	}
	/* A switch's lossy queue may hold alpha x what is free in the switch's shared pool
	 * (dynamic threshold); lossless queues are governed by XOFF and their limit. */
	if (!lossless && self && !(self->flags & RL_PORT_HOST) && cfg->buffer_size) {
		__u32 used = pool_used(self);
		__u32 free = used < cfg->buffer_size ? cfg->buffer_size - used : 0;
		__u64 allowed = cfg->dynamic_th >= 0 ? (__u64)free << (cfg->dynamic_th & 15) : free >> (-cfg->dynamic_th & 15);
		if (depth + skb->len > allowed) {
			if (cnt)
				cnt->depth_after = depth;
			return drop(cnt, RL_DROP_BUFFER);
		}
	}

	/* A host NIC holds its own lossless traffic however long it is paused: the sender's
	 * socket buffer fills and blocks it, as an RNIC's send queue backpressures. */
	__u32 limit = cfg->queue_limit[prio];
	if (lossless && self) {
		struct rl_port_headroom *h = bpf_map_lookup_elem(&port_headroom, &slot);
		if (h && h->lossless_limit)
			limit = h->lossless_limit;
	}
	if (!host_lossless && depth + skb->len > limit) {
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
	if ((cfg->pfc_mask >> prio) & 1)
		pfc_generate(skb, cfg, prio, depth + skb->len, self);
	if (cnt) {
		cnt->depth_after = depth + skb->len;
		__sync_fetch_and_add(&cnt->tx_packets, 1);
		__sync_fetch_and_add(&cnt->tx_bytes, skb->len);
	}
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
