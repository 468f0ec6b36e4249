/* Reading a port's queue depth exactly (DESIGN.md §4), and the ECN curve: shared by the
 * egress program (marks at enqueue, admits, syncs PGs) and the ingress program (marks at
 * dequeue, reading the queue the packet just left on the link's other end). */
#ifndef ROCELAB_QUEUE_DEPTH_BPF_H
#define ROCELAB_QUEUE_DEPTH_BPF_H

#include <bpf/bpf_core_read.h>

#include "port_maps.bpf.h"

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

/* A qdisc pointer kept in a map, readable with plain (fault-safe) loads instead of a
 * bpf_probe_read_kernel call a field. */
static __always_inline struct Qdisc *qdisc_at(__u64 p)
{
	return bpf_rdonly_cast((void *)p, bpf_core_type_id_kernel(struct Qdisc));
}

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rl_depth_override);
} depth_override SEC(".maps");

/* HTB class `classid` under `root`, found through HTB's class hash; 0 when the root is not
 * HTB or has no such class (yet: never cached, so a class made later is found). */
static __always_inline struct htb_class *htb_class_of(struct Qdisc *root, __u32 classid)
{
	char id[4] = {};

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
		if (BPF_CORE_READ(c, classid) == classid)
			return container_of(c, struct htb_class, common);
		n = BPF_CORE_READ(n, next);
	}
	return 0;
}

/* Bytes queued in priority `prio`'s HTB leaf on the packet's device (root qdisc `root`): the
 * exact backlog of the class's leaf qdisc (counting enqueues and dequeues drifts on this
 * kernel). The class is looked up once and kept in the port's info; its leaf is read each
 * time (a probe read: htb_class may be a module's type, which bpf_rdonly_cast cannot take). */
static __always_inline __u32 class_backlog(struct Qdisc *root, struct rl_port_info *self, __u32 prio)
{
	__u32 p = prio & (RL_NUM_PRIO - 1);
	struct htb_class *cl = 0;

	if (!root)
		return 0;
	if (self && self->leaf_root == (__u64)root)
		cl = (struct htb_class *)self->leaf_class[p];
	if (!cl) {
		cl = htb_class_of(root, RL_CLASSID(p));
		if (!cl)
			return 0;
		if (self) {
			if (self->leaf_root != (__u64)root) {
				for (int i = 0; i < RL_NUM_PRIO; i++)
					self->leaf_class[i] = 0;
				self->leaf_root = (__u64)root;
			}
			self->leaf_class[p] = (__u64)cl;
		}
	}
	struct Qdisc *leaf = BPF_CORE_READ(cl, leaf.q);
	return leaf ? qdisc_at((__u64)leaf)->qstats.backlog : 0;
}

static __always_inline __u32 queue_depth(struct Qdisc *root, struct rl_port_info *self, __u32 prio)
{
	__u32 zero = 0;
	struct rl_depth_override *o = bpf_map_lookup_elem(&depth_override, &zero);

	if (o && o->enabled)
		return o->depth[prio & (RL_NUM_PRIO - 1)];
	return class_backlog(root, self, prio);
}

static __always_inline __u64 draw_mix(__u64 h, __u32 w)
{
	h = (h ^ w) * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

/* The marking draw of one IPv4 packet at one queue: a hash of the run's key (from the
 * scenario's seed), the queue, and what names the packet end to end: its addresses,
 * protocol, length and IP ID, and the 20 bytes past its IP header (UDP's ports and
 * RoCEv2's BTH, whose QP and PSN no other packet of the run shares; TCP's ports and
 * sequence numbers). TTL, checksum and the ECN bits, which change hop by hop, are left
 * out. A per-CPU random draw gave each run its own marks (one flow's rate cut by an
 * unlucky run of them set a fat-tree all-to-all's busbw, 34-54 Gbit/s at one seed); keyed
 * by the packet, a mark moves run to run only where the queue it meets does. A packet
 * resent through the same queue at the same depth draws the same, as a replay does. */
static __always_inline __u32 mark_draw(struct __sk_buff *skb, __u32 key, __u32 queue)
{
	__u32 ip[5] = {}, l4[5] = {};
	__u8 vihl = 0;

	bpf_skb_load_bytes(skb, ETH_HLEN, ip, sizeof ip);
	bpf_skb_load_bytes(skb, ETH_HLEN, &vihl, 1);
	if (bpf_skb_load_bytes(skb, ETH_HLEN + (vihl & 15) * 4, l4, sizeof l4) < 0)
		bpf_skb_load_bytes(skb, ETH_HLEN + (vihl & 15) * 4, l4, 8);
	__u64 h = draw_mix(draw_mix(0x726f63656c616221ull, key), queue);
	h = draw_mix(h, ip[0] & bpf_htonl(0xff00ffff)); /* version, IHL, total length: not the TOS */
	h = draw_mix(h, ip[1]);                         /* IP ID, flags, fragment */
	h = draw_mix(h, ip[2] & bpf_htonl(0x00ff0000)); /* the protocol: not TTL nor checksum */
	h = draw_mix(h, ip[3]);
	h = draw_mix(h, ip[4]);
	for (int i = 0; i < 5; i++)
		h = draw_mix(h, l4[i]);
	h ^= h >> 32;
	h *= 0xd6e8feb86659fd93ull;
	return (__u32)(h >> 32);
}

/* Mark with probability 0 below kmin, pmax * (q - kmin) / (kmax - kmin) to kmax, 1 above;
 * decided by the packet's own draw (mark_draw). */
static __always_inline int ecn_hit(const struct rl_ecn_curve *c, __u32 q, struct __sk_buff *skb, __u32 key,
				   __u32 queue)
{
	if (q < c->kmin)
		return 0;
	if (q > c->kmax)
		return 1;
	__u64 span = c->kmax - c->kmin;
	__u64 p = span ? (__u64)c->pmax * (q - c->kmin) / span : c->pmax;
	return mark_draw(skb, key, queue) < p;
}

#endif
