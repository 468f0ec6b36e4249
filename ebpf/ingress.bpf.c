/* tc ingress of every port: count what arrives per priority, decide the ECN mark of what
 * just left the link's other end (qos.ecn.marking: dequeue), and take in PFC frames:
 * count them per priority, hand each named priority to the agent (which pauses this port's
 * egress for that priority), and consume them: a PFC frame is never forwarded. */
#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "queue_depth.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 18);
} pfc_events SEC(".maps");

static __always_inline int take_pfc(struct __sk_buff *skb)
{
	struct rl_pfc_frame f;

	if (bpf_skb_load_bytes(skb, 0, &f, __builtin_offsetof(struct rl_pfc_frame, pad)) < 0)
		return TC_ACT_SHOT;
	if (f.opcode != bpf_htons(RL_PFC_OPCODE))
		return TC_ACT_SHOT; /* other MAC control (802.3x PAUSE): consumed, not honoured */
	__u16 vector = bpf_ntohs(f.class_enable);
	__u64 now = bpf_ktime_get_ns();
	__u32 slot = slot_of(skb->ifindex);
	struct rl_port_info *self = bpf_map_lookup_elem(&port_info, &slot);
	if (self && (self->flags & RL_PORT_NO_PFC))
		vector = 0; /* PFC off on this port: consumed, never honoured */

	for (int p = 0; p < RL_NUM_PRIO; p++) {
		if (!((vector >> p) & 1))
			continue;
		struct rl_counters *cnt = counters_of(skb->ifindex, p);
		__u16 quanta = bpf_ntohs(f.time[p]);
		if (cnt) {
			__sync_fetch_and_add(&cnt->pfc_rx, 1);
			if (!quanta) {
				__sync_fetch_and_add(&cnt->pfc_xon_rx, 1);
				cnt->xon_arrived_ns = now;
			}
		}
		struct rl_pfc_event *e = bpf_ringbuf_reserve(&pfc_events, sizeof *e, 0);
		if (!e)
			continue;
		e->ts_ns = now;
		e->slot = slot_of(skb->ifindex);
		e->prio = p;
		e->quanta = quanta;
		e->decided_ns = 0;
		if (self && self->peer) {
			__u32 key = rl_queue_key(self->peer - 1, p);
			struct rl_pfc_tx_state *st = bpf_map_lookup_elem(&pfc_tx_state, &key);
			if (st)
				e->decided_ns = st->last_sent_ns;
		}
		bpf_ringbuf_submit(e, 0);
	}
	return TC_ACT_SHOT;
}

/* A slow receiver (FAULTS.md): its RX buffer fills with what arrives on PFC priorities and
 * drains at slow_drain_bps; at slow_xoff the NIC sends XOFF out of itself (a clone of this
 * packet, turned into the frame by the port's egress) pausing for as long as the buffer
 * takes to drain to half, and again once that ran out if it is still full. Bursty pause, as
 * a NIC whose PCIe or RX pipeline backs up sends. The packet itself is delivered. */
static __always_inline void slow_rx(struct __sk_buff *skb, struct rl_port_info *p, __u32 prio)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 dt = now - p->slow_last_ns;
	__u64 occ = p->slow_occ;
	if (dt > 1000000000ull) {
		occ = 0; /* a second's drain empties any buffer */
	} else {
		__u64 drained = (p->slow_drain_bps >> 3) * dt / 1000000000ull;
		occ = occ > drained ? occ - drained : 0;
	}
	occ += skb->len;
	p->slow_occ = occ;
	p->slow_last_ns = now;
	if (occ < p->slow_xoff || now < p->slow_paused_until_ns || !p->quantum_ps)
		return;
	__u64 drain_ns = (occ - p->slow_xoff / 2) * 8000000000ull / p->slow_drain_bps;
	__u64 quanta = drain_ns * 1000 / p->quantum_ps + 1;
	if (quanta > 65535)
		quanta = 65535;
	p->slow_quanta = (__u32)quanta;
	p->slow_paused_until_ns = now + quanta * p->quantum_ps / 1000;
	__u32 mark = skb->mark;
	skb->mark = RL_MARK_PFC_SLOW | (prio & 7);
	bpf_clone_redirect(skb, skb->ifindex, 0);
	skb->mark = mark;
}

/* ECN at dequeue (RL_ECN_AT_DEQUEUE): the packet has just left its queue on the peer port,
 * whose backlog now is what it left behind (ns-3's egress bytes after the dequeue); an ECT
 * packet is marked by that on the peer's curve, counted on the peer's queue. A veth hands
 * the packet over within the shaper's one dequeue, so the reading is one packet's time late
 * at most (a delayed link's: the delay later). */
static __always_inline void mark_at_dequeue(struct __sk_buff *skb, const struct rl_config *cfg, __u32 prio, int tos)
{
	if (!(tos & 3) || !cfg->ecn[prio].enabled)
		return;
	__u32 slot = slot_of(skb->ifindex);
	struct rl_port_info *self = bpf_map_lookup_elem(&port_info, &slot);
	if (!self || !self->peer)
		return;
	__u32 from = self->peer - 1;
	struct rl_port_info *peer = bpf_map_lookup_elem(&port_info, &from);
	if (!peer || (peer->flags & RL_PORT_NO_ECN))
		return;
	__u32 q = queue_depth(peer->root_qdisc ? qdisc_at(peer->root_qdisc) : 0, peer, prio);
	if (!ecn_hit(&cfg->ecn[prio], q, skb, cfg->draw_key, rl_queue_key(from, prio)))
		return;
	struct rl_counters *cnt = counters_of(RL_FIRST_PORT_IFINDEX + from, prio);
	if (bpf_skb_ecn_set_ce(skb) && cnt)
		__sync_fetch_and_add(&cnt->ecn_marked, 1);
}

SEC("tc")
int rl_ingress(struct __sk_buff *skb)
{
	struct rl_config *cfg = port_cfg();
	__u16 proto = 0;

	if (!cfg)
		return TC_ACT_OK;
	bpf_skb_load_bytes(skb, 12, &proto, sizeof proto);
	if (proto == bpf_htons(RL_PFC_ETHERTYPE))
		return take_pfc(skb);
	int tos = ipv4_tos(skb);
	__u32 prio = tos < 0 ? 0 : cfg->dscp_to_prio[(tos >> 2) & 63] & (RL_NUM_PRIO - 1);
	struct rl_counters *cnt = counters_of(skb->ifindex, prio);

	if (cnt) {
		__sync_fetch_and_add(&cnt->rx_packets, 1);
		__sync_fetch_and_add(&cnt->rx_bytes, skb->len);
		/* The PFC watchdog stormed this port's queue of the priority (action drop): what the
		 * storming peer sends on it is dropped too, as SONiC's drop handler does. */
		if (cnt->wd_drop) {
			__sync_fetch_and_add(&cnt->drops[RL_DROP_PFCWD_RX], 1);
			return TC_ACT_SHOT;
		}
	}
	if (tos >= 0 && cfg->ecn_marking == RL_ECN_AT_DEQUEUE)
		mark_at_dequeue(skb, cfg, prio, tos);
	if ((cfg->pfc_mask >> prio) & 1) {
		__u32 slot = slot_of(skb->ifindex);
		struct rl_port_info *p = bpf_map_lookup_elem(&port_info, &slot);
		if (p && p->slow_drain_bps)
			slow_rx(skb, p, prio);
	}
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
