/* tc egress of every port (switch ports and host NICs), which runs before the qdisc
 * enqueue: classify DSCP -> priority into the port's HTB class, admit against the queue
 * limit, WRED-drop non-ECT on lossy ECN queues (and mark ECN, where it is decided at
 * enqueue) by the exact depth of the class the packet is about to join, and count. DESIGN.md §2; depth per §4. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "queue_depth.bpf.h"

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

/* Sized by the loader: one entry per port slot. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rl_port_headroom);
} port_headroom SEC(".maps");

/* Sized by the loader: port slots x RL_NUM_PRIO; mmapable, so the agent reads PGs. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, RL_NUM_PRIO);
	__type(key, __u32);
	__type(value, __s64);
} pg_bytes SEC(".maps");

/* Sized by the loader: port slots x PFC priorities (rl_config.pg_rows). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rl_pg_ring);
} pg_ring SEC(".maps");

/* What one sync took off a queue's runs: at most RL_PG_POPS runs (the rest next time). */
#define RL_PG_POPS 16
#define RL_NO_PG 0xffffffffu /* a run of packets no PG holds (made on this node) */
struct rl_pg_pops {
	__u32 n;
	__u32 slot[RL_PG_POPS];
	__u32 bytes[RL_PG_POPS];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rl_pg_pops);
} pg_scratch SEC(".maps");

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
		used += qdisc_at(p->root_qdisc)->qstats.backlog;
	}
	return used;
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
	int kick = (skb->mark & 0x200) != 0, refresh = (skb->mark & 0x400) != 0;
	__u16 quanta = (skb->mark & 0x100) ? cfg->pfc_quanta : 0;
	struct rl_port_info *info = bpf_map_lookup_elem(&port_info, &slot);
	struct rl_pfc_frame f = {.dst = RL_PFC_DST};

	if (!info || bpf_skb_change_tail(skb, RL_PFC_FRAME_LEN, 0))
		return TC_ACT_SHOT;
	if (skb->mark & 0x800) /* a slow receiver's XOFF: as long as its buffer needs to drain */
		quanta = (__u16)info->slow_quanta;
	/* One priority, or a storm's vector (each of its priorities with the storm's time). */
	__u32 vector = kick ? 0 : 1u << prio;
	if ((skb->mark & RL_MARK_PFC_STORM) == RL_MARK_PFC_STORM) {
		vector = (skb->priority >> 16) & 0xff;
		quanta = (__u16)skb->priority;
	}
	__builtin_memcpy(f.src, info->mac, 6);
	f.ethertype = bpf_htons(RL_PFC_ETHERTYPE);
	f.opcode = bpf_htons(RL_PFC_OPCODE);
	f.class_enable = bpf_htons(vector);
	for (int p = 0; p < RL_NUM_PRIO; p++)
		if (vector & (1u << p))
			f.time[p] = bpf_htons(quanta);
	if (bpf_skb_store_bytes(skb, 0, &f, sizeof f, 0))
		return TC_ACT_SHOT;
	skb->mark = 0;
	skb->priority = RL_DIRECT_CLASSID;
	for (int p = 0; p < RL_NUM_PRIO; p++) {
		struct rl_counters *cnt = (vector & (1u << p)) ? counters_of(skb->ifindex, p) : 0;
		if (!cnt)
			continue;
		__sync_fetch_and_add(&cnt->pfc_tx, 1);
		if (!quanta)
			__sync_fetch_and_add(&cnt->pfc_xon_tx, 1);
		else if (refresh)
			__sync_fetch_and_add(&cnt->pfc_refresh_tx, 1);
	}
	return TC_ACT_OK;
}

/* Sends a PFC frame for `prio` out of port `ifindex`: a clone of this packet, marked, is
 * redirected there and rewritten by that port's egress (emit_pfc). */
static __always_inline void send_pfc(struct __sk_buff *skb, __u32 ifindex, __u32 prio, __u32 kind)
{
	__u32 mark = skb->mark;
	skb->mark = kind | (prio & 7);
	bpf_clone_redirect(skb, ifindex, 0);
	skb->mark = mark;
}

/* PFC generation by egress occupancy (qos.pfc.trigger: egress, the option rocelab began
 * with; the default is per ingress, below). A packet that joins a lossless queue holding
 * XOFF or more pauses the port it came in on, again every Q/2 while it keeps coming; a
 * packet that finds its queue below XON resumes it once no other queue of the node holds
 * the port's packets at XOFF. Ports that send nothing while paused are resumed by their
 * pause expiring, or by the agent. */
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
	__u32 in_slot = slot_of(in), key = rl_queue_key(in_slot, prio);
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
	send_pfc(skb, in, prio, action == RL_PFC_XON ? RL_MARK_PFC(0, 0) : st->paused ? RL_MARK_PFC_REFRESH : RL_MARK_PFC(1, 0));
	st->paused = action == RL_PFC_XOFF;
	if (action == RL_PFC_XOFF)
		st->last_sent_ns = now;
}

/* ---- PFC by priority group (qos.pfc.trigger: ingress, the default) --------------------
 * A switch counts, per ingress port and lossless priority, the bytes it holds that came in
 * through that port, in whichever egress queue (802.1Qbb; SONiC's buffer PGs). XOFF goes
 * out of the ingress port when its PG reaches XOFF (again every Q/2 while it stays at or
 * above XON), XON when it falls below XON. A packet adds itself to its PG when it joins an
 * egress queue; what left a queue is taken off the PGs when that queue is next synced: at
 * its next enqueue, or by the agent's probe (a paused port sends nothing to sync with). */

static __always_inline struct rl_pg_ring *ring_of(const struct rl_config *cfg, __u32 slot, __u32 prio)
{
	__u32 row = cfg->pg_index[prio & (RL_NUM_PRIO - 1)];
	if (row == 0xff)
		return 0;
	__u32 key = slot * cfg->pg_rows + row;
	return bpf_map_lookup_elem(&pg_ring, &key);
}

/* Takes what left the queue (the queue holds `depth` now, exactly) off its oldest runs,
 * and off the PGs of the ports those bytes came in through; XON to a paused port whose PG
 * fell below XON. At most RL_PG_POPS runs a call: nonzero when runs that left remain. */
static __always_inline int pg_sync(struct __sk_buff *skb, const struct rl_config *cfg, struct rl_pg_ring *r,
				   __u32 prio, __u32 depth)
{
	__u32 zero = 0;
	struct rl_pg_pops *pops = bpf_map_lookup_elem(&pg_scratch, &zero);

	if (!pops)
		return 0;
	pops->n = 0;
	bpf_spin_lock(&r->lock);
	__u64 excess = r->bytes > depth ? r->bytes - depth : 0;
	for (int k = 0; k < RL_PG_POPS && excess; k++) {
		if (r->head == r->tail) {
			r->bytes = 0; /* nothing left to take: the runs and the queue agree again */
			break;
		}
		struct rl_pg_run *run = &r->run[r->head & (RL_PG_RUNS - 1)];
		__u32 take = run->bytes < excess ? run->bytes : (__u32)excess;
		run->bytes -= take;
		excess -= take;
		r->bytes -= take;
		pops->slot[k] = run->in_slot;
		pops->bytes[k] = take;
		pops->n = k + 1;
		if (!run->bytes)
			r->head++;
	}
	int owed = r->bytes > depth;
	bpf_spin_unlock(&r->lock);
	for (int k = 0; k < RL_PG_POPS; k++) {
		if (k >= pops->n)
			break;
		if (pops->slot[k] == RL_NO_PG)
			continue;
		__u32 key = rl_queue_key(pops->slot[k], prio);
		struct rl_pfc_tx_state *st = bpf_map_lookup_elem(&pfc_tx_state, &key);
		__s64 *pgb = bpf_map_lookup_elem(&pg_bytes, &key);
		if (!st || !pgb)
			continue;
		__s64 left = __sync_add_and_fetch(pgb, -(__s64)pops->bytes[k]);
		if (st->paused && left < (__s64)cfg->pfc_xon) {
			st->paused = 0;
			st->refill = 1;
			st->xon_ns = bpf_ktime_get_ns();
			send_pfc(skb, RL_FIRST_PORT_IFINDEX + pops->slot[k], prio, RL_MARK_PFC(0, 0));
			struct rl_counters *c = counters_of(RL_FIRST_PORT_IFINDEX + pops->slot[k], prio);
			if (c) {
				__u64 late = (__u64)((__s64)cfg->pfc_xon - left);
				__sync_fetch_and_add(&c->xon_late_sum, late);
				__sync_fetch_and_add(&c->pg_xons, 1);
				if (late > c->xon_late_max)
					c->xon_late_max = late; /* racy between CPUs: within one sync */
			}
		}
	}
	return owed;
}

/* The packet joins the queue's runs; `in_slot` RL_NO_PG: a packet no PG holds (made here). */
static __always_inline int ring_push(struct rl_pg_ring *r, __u32 in_slot, __u32 len)
{
	int full = 0;
	bpf_spin_lock(&r->lock);
	struct rl_pg_run *last = &r->run[(r->tail - 1) & (RL_PG_RUNS - 1)];
	if (r->tail != r->head && last->in_slot == in_slot) {
		last->bytes += len;
	} else if (r->tail - r->head < RL_PG_RUNS) {
		struct rl_pg_run *next = &r->run[r->tail & (RL_PG_RUNS - 1)];
		next->in_slot = in_slot;
		next->bytes = len;
		r->tail++;
	} else {
		last->bytes += len;
		r->full++;
		full = 1;
	}
	r->bytes += len;
	bpf_spin_unlock(&r->lock);
	return full;
}

/* A dscp_remap misconfiguration: the port writes the fault's DSCP into every IPv4 packet it
 * sends (ECN bits kept; the IPv4 checksum fixed; the RoCE ICRC masks the TOS byte). */
static __always_inline void rewrite_dscp(struct __sk_buff *skb, __u32 ifindex)
{
	__u32 slot = slot_of(ifindex);
	struct rl_port_info *p = bpf_map_lookup_elem(&port_info, &slot);
	if (!p || !p->dscp_set)
		return;
	int tos = ipv4_tos(skb);
	if (tos < 0)
		return;
	__u8 old = (__u8)tos, now = (__u8)((((p->dscp_set - 1) & 63) << 2) | (tos & 3));
	if (old == now)
		return;
	/* TOS is the low byte of the header's first 16-bit word (version/IHL, TOS). */
	bpf_l3_csum_replace(skb, ETH_HLEN + 10, bpf_htons(old), bpf_htons(now), 2);
	bpf_skb_store_bytes(skb, ETH_HLEN + 1, &now, 1, 0);
}

/* The packet's bytes join its PG; XOFF out of its ingress port when the PG reached XOFF,
 * renewed every Q/2 while the PG stays there. */
static __always_inline void pg_add(struct __sk_buff *skb, const struct rl_config *cfg, __u32 prio, __u32 in_slot,
				   struct rl_pfc_tx_state *st, __s64 *pgb)
{
	__s64 pg = __sync_add_and_fetch(pgb, (__s64)skb->len);
	if (st->paused && pg > st->episode_max)
		st->episode_max = pg; /* racy between CPUs: within one packet */
	if (st->refill && !st->paused) {
		/* Its sender's first frame since XON: how far below XON the PG had drained. */
		st->refill = 0;
		__s64 before = pg - (__s64)skb->len;
		__u64 below = before < (__s64)cfg->pfc_xon ? (__u64)((__s64)cfg->pfc_xon - before) : 0;
		struct rl_counters *c = counters_of(RL_FIRST_PORT_IFINDEX + in_slot, prio);
		if (c) {
			__sync_fetch_and_add(&c->pg_refill_sum, below);
			__sync_fetch_and_add(&c->pg_refills, 1);
			if (below > c->pg_refill_max)
				c->pg_refill_max = below;
		}
		struct rl_port_info *info = bpf_map_lookup_elem(&port_info, &in_slot);
		if (c && info && info->quantum_ps && st->xon_ns) {
			/* The frame's own time at the link's rate: len x 8 bits, a quantum per 512. */
			__u64 frame_ns = (__u64)skb->len * 8 * info->quantum_ps / 512 / 1000;
			__u64 now = bpf_ktime_get_ns(), waited = now - st->xon_ns;
			__u64 lag = waited > frame_ns ? waited - frame_ns : 0;
			__sync_fetch_and_add(&c->resume_lag_sum_ns, lag);
			__sync_fetch_and_add(&c->pg_refills_timed, 1);
			if (lag > c->resume_lag_max_ns)
				c->resume_lag_max_ns = lag;
		}
		st->xon_ns = 0;
	}
	if (pg < (__s64)cfg->pfc_xoff)
		return;
	struct rl_port_info *info = bpf_map_lookup_elem(&port_info, &in_slot);
	if (!info || (info->flags & RL_PORT_NO_PFC))
		return; /* PFC off on the ingress port: its PG fills past XOFF into its headroom */
	__u64 now = bpf_ktime_get_ns();
	__u64 refresh_ns = (__u64)info->quantum_ps * cfg->pfc_quanta / 2000;
	if (st->paused && now - st->last_sent_ns < refresh_ns)
		return;
	send_pfc(skb, RL_FIRST_PORT_IFINDEX + in_slot, prio, st->paused ? RL_MARK_PFC_REFRESH : RL_MARK_PFC(1, 0));
	if (!st->paused) {
		/* A new pause: the last one's episode closes with what its PG reached past XOFF. */
		struct rl_counters *c = counters_of(RL_FIRST_PORT_IFINDEX + in_slot, prio);
		if (c && st->episode_max >= (__s64)cfg->pfc_xoff) {
			__u64 over = (__u64)(st->episode_max - (__s64)cfg->pfc_xoff);
			__sync_fetch_and_add(&c->pg_overshoot_sum, over);
			__sync_fetch_and_add(&c->pg_episodes, 1);
			if (over > c->pg_overshoot_max)
				c->pg_overshoot_max = over;
		}
		st->episode_max = pg;
	}
	st->paused = 1;
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

/* One draw of a fault stream (xorshift64 as above) against `threshold`. */
static __always_inline int fault_draw(__u64 *rng, __u32 threshold)
{
	__u64 x = *rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*rng = x;
	return (__u32)(x >> 32) < threshold;
}

/* A corruption fault: one bit flipped in the last 16-bit word before a RoCEv2 packet's
 * ICRC (payload or header, both under the ICRC), as a bad link would. The UDP checksum is
 * fixed to match (left alone when it is 0 or not yet computed), so only the ICRC check at
 * the receiver can find it: the RNIC drops the packet, RC recovers by going back N.
 * Returns 1 when the packet was corrupted. */
static __always_inline int fault_corrupt(struct __sk_buff *skb, struct rl_port_info *self)
{
	__u8 vihl, proto;
	__u16 dport;

	if (bpf_skb_load_bytes(skb, ETH_HLEN, &vihl, 1) < 0 || bpf_skb_load_bytes(skb, ETH_HLEN + 9, &proto, 1) < 0 ||
	    proto != IPPROTO_UDP)
		return 0;
	__u32 udp = ETH_HLEN + (vihl & 15) * 4;
	if (bpf_skb_load_bytes(skb, udp + 2, &dport, 2) < 0 || dport != bpf_htons(4791))
		return 0;
	/* UDP header 8, BTH 12, ICRC 4: the word must lie after the BTH, before the ICRC, and
	 * on an even offset from the UDP header (the checksum's 16-bit words). */
	if (skb->len < udp + 8 + 12 + 4 + 2 || udp > 60)
		return 0;
	__u32 off = udp + ((skb->len - 4 - 2 - udp) & ~1u);
	if (!fault_draw(&self->corrupt_rng, self->corrupt))
		return 0;
	__u16 word, flipped;
	if (off > 0xffff || bpf_skb_load_bytes(skb, off, &word, 2) < 0)
		return 0;
	flipped = word ^ bpf_htons(1 << ((self->corrupt_rng >> 8) & 15));
	if (bpf_l4_csum_replace(skb, udp + 6, word, flipped, BPF_F_MARK_MANGLED_0 | 2) < 0 ||
	    bpf_skb_store_bytes(skb, off, &flipped, 2, 0) < 0)
		return 0;
	return 1;
}

/* A drop by `reason`, with the depth it met. */
static __always_inline int drop_at(struct rl_counters *cnt, __u32 depth, int reason)
{
	if (cnt)
		cnt->depth_after = depth;
	return drop(cnt, reason);
}

/* What a lossless packet may add before it is a headroom drop: its PG's limit (XOFF + the
 * ingress port's headroom) with the ingress trigger, else the queue's (egress trigger:
 * XOFF + every other port's headroom). The node's pool bounds both. */
static __always_inline int lossless_fits(struct __sk_buff *skb, const struct rl_config *cfg, struct rl_port_info *self,
					 __u32 slot, __u32 prio, __u32 depth, __s64 *pgb, __u32 in_slot)
{
	__u32 owner = pgb ? in_slot : slot;
	struct rl_port_headroom *h = bpf_map_lookup_elem(&port_headroom, &owner);
	__u32 limit = h && h->lossless_limit ? h->lossless_limit : cfg->queue_limit[prio];
	__s64 held = pgb ? *pgb : (__s64)depth;

	if (held + (__s64)skb->len > (__s64)limit)
		return 0;
	/* Lossless traffic stays within the node's buffer: this queue at once, the whole pool
	 * for a PG in its headroom (past XOFF; the read walks every port of the node). */
	if (pgb && cfg->buffer_size &&
	    (depth + skb->len > cfg->buffer_size ||
	     (held + (__s64)skb->len > (__s64)cfg->pfc_xoff && pool_used(self) + skb->len > cfg->buffer_size)))
		return 0;
	return 1;
}

SEC("tc")
int rl_egress(struct __sk_buff *skb)
{
	struct rl_config *cfg = port_cfg();
	__u16 proto = 0;
	/* Context fields read once: the verifier refuses a ctx pointer the compiler offset on
	 * one path and not another. */
	const __u32 ifindex = skb->ifindex, mark = skb->mark, in = skb->ingress_ifindex, len = skb->len;

	if (!cfg || ifindex < RL_FIRST_PORT_IFINDEX)
		return TC_ACT_OK;
	if (RL_MARK_IS_PFC(mark))
		return emit_pfc(skb, cfg);
	bpf_skb_load_bytes(skb, 12, &proto, sizeof proto);
	/* MAC control from elsewhere (a PFC frame someone wrote to a packet socket) never
	 * queues behind data, and is counted like the frames made here. */
	if (proto == bpf_htons(RL_PFC_ETHERTYPE) && (mark >> 16) != RL_MARK_PROBE_MAGIC) {
		struct rl_pfc_frame f = {};
		skb->priority = RL_DIRECT_CLASSID;
		bpf_skb_load_bytes(skb, 0, &f, sizeof f);
		__u16 vector = bpf_ntohs(f.class_enable);
		for (int p = 0; p < RL_NUM_PRIO; p++) {
			struct rl_counters *c = (vector >> p) & 1 ? counters_of(ifindex, p) : 0;
			if (!c)
				continue;
			__sync_fetch_and_add(&c->pfc_tx, 1);
			if (!f.time[p])
				__sync_fetch_and_add(&c->pfc_xon_tx, 1);
		}
		return TC_ACT_OK;
	}
	int probe = (mark >> 16) == RL_MARK_PROBE_MAGIC;
	if (!probe)
		rewrite_dscp(skb, ifindex);
	int tos = ipv4_tos(skb);
	__u32 prio = probe ? mark & 7 : tos < 0 ? 0 : cfg->dscp_to_prio[(tos >> 2) & 63] & (RL_NUM_PRIO - 1);
	struct rl_counters *cnt = counters_of(ifindex, prio);
	__u32 slot = slot_of(ifindex);
	struct rl_port_info *self = bpf_map_lookup_elem(&port_info, &slot);
	struct Qdisc *root = ((struct sk_buff *)bpf_cast_to_kern_ctx(skb))->dev->qdisc; /* BTF loads, no helper */
	__u32 depth = queue_depth(root, self, prio);
	int lossless = (cfg->lossless_mask >> prio) & 1;
	int host = self && (self->flags & RL_PORT_HOST);
	int pfc = (cfg->pfc_mask >> prio) & 1;

	/* By priority group: sync the queue first (what left it leaves its PGs). A probe (the
	 * agent, `rocelab stats`) syncs and says how much the queue holds. */
	struct rl_pg_ring *ring = pfc && !host && cfg->pfc_trigger == RL_PFC_TRIGGER_INGRESS ? ring_of(cfg, slot, prio) : 0;
	int owed = ring ? pg_sync(skb, cfg, ring, prio, depth) : 0;
	if (probe) {
		/* What the agent reads to skip queues that are empty. An empty queue whose runs are
		 * not all synced yet (a long drain: RL_PG_POPS a sync) still holds PG bytes that must
		 * go: it reads 1, so the agent probes it again (else those PGs stayed paused for good). */
		if (cnt)
			cnt->depth_after = depth ? depth : owed;
		return depth;
	}
	skb->priority = RL_CLASSID(prio);
	__u32 in_slot = RL_NO_PG;
	struct rl_pfc_tx_state *pg = 0;
	__s64 *pgb = 0;
	if (ring && in >= RL_FIRST_PORT_IFINDEX && in != ifindex) {
		in_slot = slot_of(in);
		__u32 key = rl_queue_key(in_slot, prio);
		pg = bpf_map_lookup_elem(&pfc_tx_state, &key);
		pgb = bpf_map_lookup_elem(&pg_bytes, &key);
		if (!pg || !pgb) {
			pg = 0;
			pgb = 0;
			in_slot = RL_NO_PG;
		}
	}
	/* Written only when it changed: a store per packet would move the cache line between
	 * the CPUs that send on this port. */
	if (self && self->root_qdisc != (__u64)root)
		self->root_qdisc = (__u64)root;
	/* The PFC watchdog stormed this queue (action drop): nothing joins it. */
	if (cnt && cnt->wd_drop)
		return drop_at(cnt, depth, RL_DROP_PFCWD);
	/* A loss fault: the packet is lost on the link, before it takes any buffer. */
	if (self && self->loss && fault_lost(self))
		return drop_at(cnt, depth, RL_DROP_FAULT);
	if (self && self->mtu_limit && len > ETH_HLEN + self->mtu_limit)
		return drop_at(cnt, depth, RL_DROP_MTU);
	/* A switch's lossy queue may hold alpha x what is free in the switch's shared pool
	 * (dynamic threshold); lossless queues are governed by XOFF and their limit. */
	if (!lossless && self && !host && cfg->buffer_size) {
		__u32 used = pool_used(self);
		__u32 free = used < cfg->buffer_size ? cfg->buffer_size - used : 0;
		__u64 allowed = cfg->dynamic_th >= 0 ? (__u64)free << (cfg->dynamic_th & 15) : free >> (-cfg->dynamic_th & 15);
		if (depth + len > allowed)
			return drop_at(cnt, depth, RL_DROP_BUFFER);
	}
	/* A host NIC holds its own lossless traffic however long it is paused: the sender's
	 * socket buffer fills and blocks it, as an RNIC's send queue backpressures. */
	if (lossless && self && !host && !lossless_fits(skb, cfg, self, slot, prio, depth, pgb, in_slot))
		return drop_at(cnt, depth, RL_DROP_HEADROOM);
	if (!lossless && depth + len > cfg->queue_limit[prio])
		return drop_at(cnt, depth, RL_DROP_QUEUE_FULL);
	int ecn_on = !(self && (self->flags & RL_PORT_NO_ECN));
	/* Marked at dequeue, an ECT packet is decided by the port it arrives at; what is not
	 * ECT meets WRED here, at admission, in both modes (a drop takes no buffer). */
	int dequeue = cfg->ecn_marking == RL_ECN_AT_DEQUEUE && self && self->peer;
	if (tos >= 0 && ecn_on && cfg->ecn[prio].enabled && !(dequeue && (tos & 3)) && ecn_hit(&cfg->ecn[prio], depth, skb, cfg->draw_key, rl_queue_key(slot, prio))) {
		if (tos & 3) {
			/* ECT(0), ECT(1) or already CE: CE set, IPv4 checksum fixed by the helper. */
			if (bpf_skb_ecn_set_ce(skb) && cnt)
				__sync_fetch_and_add(&cnt->ecn_marked, 1);
		} else if (!lossless) {
			return drop_at(cnt, depth, RL_DROP_WRED);
		}
	}
	if (ring) {
		if (ring_push(ring, in_slot, len) && cnt)
			__sync_fetch_and_add(&cnt->pg_runs_full, 1);
		if (pg)
			pg_add(skb, cfg, prio, in_slot, pg, pgb);
	} else if (pfc && cfg->pfc_trigger == RL_PFC_TRIGGER_EGRESS) {
		pfc_generate(skb, cfg, prio, depth + len, self);
	}
	if (cnt) {
		__u32 after = depth + len;
		cnt->depth_after = after;
		if (after > cnt->depth_max)
			cnt->depth_max = after; /* racy between CPUs: within one packet */
		if (after > cnt->depth_peak)
			cnt->depth_peak = after;
		__sync_fetch_and_add(&cnt->tx_packets, 1);
		__sync_fetch_and_add(&cnt->tx_bytes, len);
	}
	/* Admitted: what a corruption fault does happens on the link, after the queue. */
	if (self && self->corrupt && fault_corrupt(skb, self) && cnt)
		__sync_fetch_and_add(&cnt->corrupted, 1);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
