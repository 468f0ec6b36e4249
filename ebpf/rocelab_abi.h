/* The ABI between rocelab's BPF programs and its C++ side: map value layouts, counter
 * indices and named reasons. Included by both; fixed-width types only, no padding left
 * implicit (every struct is a multiple of 8 bytes and says so with a static assert). */
#ifndef ROCELAB_ABI_H
#define ROCELAB_ABI_H

#ifndef __VMLINUX_H__
#include <linux/bpf.h> /* struct bpf_spin_lock */
#include <linux/types.h>
#endif

/* doctor.bpf.c: what the capability probe saw (one array slot). */
struct rl_probe_stats {
	__u64 packets;    /* packets the classifier ran on */
	__u64 bytes;      /* their length as tc sees it */
	__u32 last_proto; /* skb->protocol of the last one, network byte order */
	__u32 pad;
};

/* A verdict the probe returns when everything worked: TC_ACT_OK. */
#define RL_PROBE_VERDICT 0

/* ---- port programs (egress.bpf.c, ingress.bpf.c) ------------------------------------ */

#define RL_NUM_PRIO 8
/* A queue (port slot, priority) by one key, in BPF and C++ alike: its index in every
 * per-queue array and map (counters, PFC transmit state, PG bytes) and the agent's name for
 * it. A priority past 7 is taken modulo 8, as the programs read the 3-bit PCP. */
static inline __u32 rl_queue_key(__u32 slot, __u32 prio)
{
	return slot * RL_NUM_PRIO + (prio & (RL_NUM_PRIO - 1));
}
static inline __u32 rl_queue_slot(__u32 key) { return key / RL_NUM_PRIO; }
static inline __u32 rl_queue_prio(__u32 key) { return key % RL_NUM_PRIO; }
/* Every testbed port has ifindex RL_FIRST_PORT_IFINDEX + slot, unique across the fabric,
 * so one loaded program serves all ports. (fabric/kernel_plan.h: kFirstPortIfindex.) */
#define RL_FIRST_PORT_IFINDEX 1000
/* A delayed link's two devices in the fabric's wire namespace (wire.bpf.c): link i's
 * toward its a end is RL_WIRE_FIRST_IFINDEX + 2i, toward its b end the next, so each
 * finds the other by flipping the lowest bit. (fabric/kernel_plan.h: WirePlan.) */
#define RL_WIRE_FIRST_IFINDEX 1000
/* HTB layout on every port: root 1:, parent class 1:1 at the emulated link rate, one leaf
 * class per priority 1:(RL_CLASS_BASE + prio). skb->priority = 1:0 is HTB's direct queue:
 * control frames (PFC, the agent's frames) go there, ahead of every data queue. */
#define RL_HTB_MAJOR 1
#define RL_CLASS_BASE 0x10
#define RL_CLASSID(prio) ((RL_HTB_MAJOR << 16) | (RL_CLASS_BASE + (prio)))
#define RL_DIRECT_CLASSID (RL_HTB_MAJOR << 16)

/* Why a packet was dropped: one list generates the enum and (for C++) the names that
 * results, stats and expect: use. X(ENUM, name, what it means). */
#define RL_DROP_REASONS(X)                                                                   \
	X(QUEUE_FULL, queue_full, "the queue held its limit (lossy tail drop)")                  \
	X(WRED, wred, "non-ECT packet on a lossy ECN queue, at the marking probability")         \
	X(HEADROOM, headroom, "lossless: beyond what the queue may hold (XOFF + headroom)")      \
	X(BUFFER, buffer, "lossy: over the shared buffer's dynamic threshold, alpha x free pool") \
	X(FAULT, fault_loss, "a loss fault on the port (seeded): a packet lost on the link")   \
	X(MTU, mtu, "larger than the MTU of the link's other end (an mtu_mismatch fault)")          \
	X(PFCWD, pfcwd, "leaving a queue the PFC watchdog found stormed (action drop): TX drop")   \
	X(PFCWD_RX, pfcwd_rx, "arriving on a port whose queue of its priority is stormed (drop): RX drop")

enum rl_drop_reason {
#define RL_DROP_ENUM(e, n, d) RL_DROP_##e,
	RL_DROP_REASONS(RL_DROP_ENUM)
#undef RL_DROP_ENUM
	RL_DROP__USED, /* reasons defined so far */
	RL_DROP__MAX = 8, /* room in rl_counters (its layout is fixed) */
};

#ifdef __cplusplus
/* Indexed by enum rl_drop_reason. */
inline constexpr const char *rl_drop_names[] = {
#define RL_DROP_NAME(e, n, d) #n,
	RL_DROP_REASONS(RL_DROP_NAME)
#undef RL_DROP_NAME
};
static_assert(sizeof(rl_drop_names) / sizeof(rl_drop_names[0]) == RL_DROP__USED, "a name per drop reason");
static_assert(RL_DROP__USED <= RL_DROP__MAX, "rl_counters has room for every drop reason");
#endif

/* Counters of one (port, priority): array slot rl_queue_key(port_slot, prio). tx counts
 * what egress admitted into the port's queue; the shaper's own count is HTB's. */
struct rl_counters {
	__u64 tx_packets;
	__u64 tx_bytes;
	__u64 rx_packets;
	__u64 rx_bytes;
	__u64 ecn_marked;
	__u64 drops[RL_DROP__MAX];
	__u64 pfc_tx;   /* PFC frames sent naming this priority, XOFF and XON */
	__u64 pfc_rx;   /* PFC frames received naming this priority, XOFF and XON */
	__u64 pfc_xon_tx; /* of pfc_tx, those with pause time 0 (XON); XOFF = the rest */
	__u64 pfc_xon_rx; /* of pfc_rx, likewise */
	__u64 depth_after; /* written, not added: the class backlog egress read for the last
	                    * packet, plus that packet if admitted (what tc shows right after) */
	__u64 depth_max;   /* the most the class held after an admitted packet joined it */
	__u64 pfc_refresh_tx; /* of pfc_tx, XOFFs that renewed a pause already in force */
	/* The pause clock of this port-priority, written by the agent (a 64-bit store each,
	 * through the mapping; the programs never touch them): since when a received XOFF holds
	 * it (CLOCK_MONOTONIC ns, 0: not paused), and how long pauses held it before. An RNIC's
	 * retransmission timer does not run while its own port cannot send. */
	__u64 paused_since_ns;
	__u64 paused_total_ns;
	__u64 pg_runs_full; /* packets of this queue its PG runs had no room for (attribution may
	                     * then go to the port before): must stay 0 */
	__u64 corrupted; /* RoCEv2 packets a corruption fault flipped a bit of as they left */
	/* The PFC watchdog (FAULTS.md), written by the agent through the mapping: nonzero while
	 * this queue is stormed with action drop. Egress then drops what would join the queue
	 * (reason pfcwd), ingress what arrives on the port with this priority (pfcwd_rx). */
	__u64 wd_drop;
	/* The most the class held after an admitted packet joined it since the time-series
	 * sampler last took it (it swaps in 0 through the mapping): each sample's peak. */
	__u64 depth_peak;
	/* Of an ingress port's priority group (ingress trigger): how far past XOFF it ran in each
	 * pause episode (XOFF sent -> the next XOFF that starts a pause), summed and the most,
	 * over the episodes closed so far. What arrived after XOFF: the pause's whole path. */
	__u64 pg_overshoot_sum;
	__u64 pg_overshoot_max;
	__u64 pg_episodes;
	/* With paused_since_ns, by the agent: when the XOFF that began the pause in force reached
	 * this port (the ingress program's clock; 0: none in force). A sender finishes the frame
	 * it had begun then (802.1Qbb), and begins none after. */
	__u64 paused_arrived_ns;
	/* Of an ingress port's PG, the other half of a pause cycle: how far below XON its PG had
	 * drained when the switch found it there and sent XON (its queues are synced at an
	 * enqueue or by the agent's probe, not at each dequeue), and when the first frame its
	 * sender sent after that XON arrived. On physical ports XON leaves at the dequeue that
	 * crosses XON, and the next frame arrives one frame's time and a round trip later: every
	 * byte more is time the emulation added to the cycle (its sender refills it), and PFC
	 * cycles that many fewer times (issue 48). Sums, the most, and how many. */
	__u64 xon_late_sum;
	__u64 xon_late_max;
	__u64 pg_xons;
	__u64 pg_refill_sum;
	__u64 pg_refill_max;
	__u64 pg_refills;
	/* The same refills in time: XON leaving the switch -> the sender's next frame joining the
	 * PG, less that frame's own time at the link's rate (ns, wall; the XON's way, the sender's
	 * resume, its frame's way back). On physical ports a round trip; summed (over
	 * pg_refills_timed) and the most. */
	__u64 resume_lag_sum_ns;
	__u64 resume_lag_max_ns;
	__u64 pg_refills_timed;
	/* When the last XON (pause time 0) naming this priority reached this port (the ingress
	 * program's clock): a sender resumes as XON arrives (802.1Qbb), whenever the agent's
	 * resume of its queue takes hold. */
	__u64 xon_arrived_ns;
};

/* The ECN curve of one priority: probability 0 below kmin, pmax * (q - kmin) / (kmax - kmin)
 * up to kmax, 1 above kmax; q = bytes queued ahead of the packet (DESIGN.md §2). */
struct rl_ecn_curve {
	__u32 kmin;     /* bytes */
	__u32 kmax;     /* bytes */
	__u32 pmax;     /* probability * 2^32, saturated at 0xffffffff */
	__u32 enabled;  /* 0: no marking (and no WRED drop) on this priority */
};

/* Settings shared by every port: one slot. */
struct rl_config {
	__u8 dscp_to_prio[64];
	__u8 lossless_mask;  /* bit p: priority p is lossless (never dropped for ECN) */
	__u8 pfc_mask;       /* bit p: PFC generated and honoured for priority p */
	__u16 pfc_quanta;    /* pause time sent with XOFF, in quanta */
	__u8 pfc_trigger;    /* RL_PFC_TRIGGER_*: what XOFF counts */
	__u8 ecn_marking;    /* RL_ECN_AT_*: where the mark is decided */
	__u8 pad[2];
	struct rl_ecn_curve ecn[RL_NUM_PRIO];
	__u32 queue_limit[RL_NUM_PRIO]; /* bytes a queue may hold (tail drop beyond) */
	__u32 pfc_xoff;      /* bytes queued in a lossless egress queue that pause its senders */
	__u32 pfc_xon;       /* ... and below which they resume */
	__u32 buffer_size;   /* the shared pool of every switch, bytes (0: no pool) */
	__s32 dynamic_th;    /* alpha = 2^dynamic_th */
	__u8 pg_index[RL_NUM_PRIO]; /* priority -> its row in pg_ring (PFC priorities), else 0xff */
	__u32 pg_rows;       /* PFC priorities: the rows of pg_ring per port */
	__u32 draw_key;      /* keys each packet's ECN draw (the scenario's seed): a run's marks repeat */
};

/* What XOFF counts (DESIGN.md §2). INGRESS, the default and what switches do: the bytes a
 * switch holds from one ingress port per lossless priority (its priority group, SONiC's
 * buffer PG), wherever they are queued. EGRESS, what rocelab did first: the bytes in the
 * egress queue a packet joins, from every ingress. */
#define RL_PFC_TRIGGER_INGRESS 0
#define RL_PFC_TRIGGER_EGRESS 1

/* Where the ECN mark is decided (DESIGN.md §2, qos.ecn.marking). ENQUEUE: by the bytes ahead
 * of the packet as it joins the queue (the egress program). DEQUEUE, the default, as HPCC's
 * ns-3 and the ASICs sonic-mgmt's dequeue-ECN test covers: by the bytes left behind it as it
 * leaves. tc egress runs before the qdisc, so the packet's next port decides it: its ingress
 * program reads the queue the packet just left (its rl_port_info.peer), exactly, and counts
 * the mark on that queue. A port whose peer is not on this machine (rl_port_info.peer 0: a
 * link cut between machines) marks at enqueue. */
#define RL_ECN_AT_ENQUEUE 0
#define RL_ECN_AT_DEQUEUE 1

/* ---- PFC (IEEE 802.1Qbb) ------------------------------------------------------------ */

#define RL_PFC_ETHERTYPE 0x8808
#define RL_PFC_OPCODE 0x0101
#define RL_PFC_FRAME_LEN 60
#define RL_PFC_DST {0x01, 0x80, 0xc2, 0x00, 0x00, 0x01}

/* The 802.1Qbb frame on the wire (no FCS): the BPF programs build and parse it, tests
 * check it byte for byte. Multi-byte fields are big-endian. */
struct rl_pfc_frame {
	__u8 dst[6];        /* 01:80:C2:00:00:01 */
	__u8 src[6];        /* the sending port's MAC */
	__be16 ethertype;   /* 0x8808: MAC control */
	__be16 opcode;      /* 0x0101: priority-based flow control */
	__be16 class_enable; /* bit n (of the low byte): priority n's time is valid */
	__be16 time[8];     /* pause time per priority, in quanta of 512 bit-times; 0 = XON */
	__u8 pad[26];       /* zero, to the 60-byte minimum */
};

/* A clone on its way to become a PFC frame carries this mark: magic in the top 16 bits,
 * bit 8 set for XOFF (clear: XON), bit 9 for a kick (a frame naming no priority), bit 10
 * for an XOFF that renews a pause in force (counted apart), priority in the low 3 bits.
 * Egress of the port it was redirected to rewrites it into the frame. */
#define RL_MARK_PFC_MAGIC 0x5246u
#define RL_MARK_PFC(xoff, prio) ((RL_MARK_PFC_MAGIC << 16) | ((xoff) ? 0x100u : 0u) | ((prio) & 7u))
#define RL_MARK_PFC_KICK ((RL_MARK_PFC_MAGIC << 16) | 0x200u)
#define RL_MARK_PFC_REFRESH ((RL_MARK_PFC_MAGIC << 16) | 0x500u)
#define RL_MARK_PFC_SLOW ((RL_MARK_PFC_MAGIC << 16) | 0x900u) /* XOFF, pause time rl_port_info.slow_quanta */
/* A pause storm's frame (FAULTS.md, pfc_gen.py): the class-enable vector and the pause time
 * ride in the clone's skb->priority, RL_STORM_PRIORITY(vector, quanta); every priority the
 * vector names gets that time (a vector of 0 names none and pauses nothing). */
#define RL_MARK_PFC_STORM ((RL_MARK_PFC_MAGIC << 16) | 0x1000u)
#define RL_STORM_PRIORITY(vector, quanta) ((((vector) & 0xffu) << 16) | ((quanta) & 0xffffu))
#define RL_MARK_IS_PFC(m) (((m) >> 16) == RL_MARK_PFC_MAGIC)

/* `rocelab stats` runs the egress program (BPF_PROG_TEST_RUN, nothing is sent) with this
 * mark to read a class's occupancy now, through the same code the marking decision uses;
 * the program returns the byte count. Only rocelab's own tools set it. */
#define RL_MARK_PROBE_MAGIC 0x5250u
#define RL_MARK_PROBE(prio) ((RL_MARK_PROBE_MAGIC << 16) | ((prio) & 7u))

/* Per port slot: what a PFC frame needs to know about its port. */
#define RL_PORT_HOST 1u /* a host NIC: never drops its own lossless traffic (backpressure) */
/* Misconfiguration faults (FAULTS.md), set and cleared by the Testbed: */
#define RL_PORT_NO_PFC 2u /* PFC off: its ingress PGs send no XOFF, PFC it receives is ignored */
#define RL_PORT_NO_ECN 4u /* ECN off: nothing it queues is CE-marked */

struct rl_port_info {
	__u8 mac[6];
	__u16 flags;      /* RL_PORT_* */
	__u32 quantum_ps; /* one pause quantum, 512 bit-times at the emulated rate, in ps */
	__u32 node_first_slot; /* the ports of a node have consecutive slots: its shared pool */
	__u32 node_ports;
	__u64 root_qdisc; /* written by egress: this port's root qdisc, whose backlog (all its
	                   * queues) it adds to the node's pool occupancy */
	__u32 loss;       /* loss fault: probability x 2^32 that a data packet leaving this port
	                   * is lost (0: none); PFC frames are never lost */
	__u32 corrupt;    /* corruption fault: probability x 2^32 that a RoCEv2 packet leaving
	                   * this port has a bit flipped (its ICRC then fails at the receiver) */
	__u64 loss_rng;   /* the fault's xorshift64 state, seeded by the scenario: the same seed
	                   * and packet order lose the same packets (never 0 while loss is set) */
	__u64 corrupt_rng; /* the corruption fault's own stream, likewise */
	__u32 dscp_set;   /* misconfiguration: DSCP + 1 written into every IPv4 packet leaving
	                   * (a host's wrong DSCP map: its traffic takes another priority); 0: none */
	__u32 slow_xoff;  /* slow_receiver: the NIC's RX buffer XOFF; it pauses down to half of it */
	/* slow_receiver (a host NIC whose RX pipeline backs up): what arrives on PFC priorities
	 * fills a virtual RX buffer that drains at slow_drain_bps (emulated); reaching slow_xoff
	 * it sends XOFF out of the NIC with the pause time that drains it to half (ingress). */
	__u64 slow_drain_bps; /* 0: off */
	__u64 slow_occ;       /* the buffer's bytes as of slow_last_ns */
	__u64 slow_last_ns;
	__u64 slow_paused_until_ns;
	__u32 slow_quanta;    /* the pause time of the XOFF it is sending (emit_pfc reads it) */
	__u32 mtu_limit;      /* mtu_mismatch: the other end's MTU; a longer IP packet leaving
	                       * here is dropped (reason mtu), as that end would (0: none) */
	/* Written by egress: each priority's HTB class under leaf_root (0: not found yet), so a
	 * packet reads its queue's backlog through the class's current leaf in two loads instead
	 * of walking HTB's class hash. The class, not its leaf qdisc: a qdisc grafted under the
	 * class (set-up replaces HTB's default leaf) frees the old one. A new root clears them. */
	__u64 leaf_root;
	__u64 leaf_class[8];
	/* The port at the link's other end, whose ingress decides a dequeue mark for what
	 * leaves this port: its slot + 1; 0 when it is not on this machine (zeroed info: none).
	 * Written at `up`. */
	__u32 peer;
	__u32 pad;
};

/* Per port slot: its PFC headroom (DESIGN.md §2) and what its lossless queues may hold.
 * PFC is triggered by egress occupancy, so every other port of the node may still be
 * sending into a queue after its XOFF went out: the limit is XOFF plus the sum of their
 * headroom, capped at the node's buffer. Beyond it: drop reason "headroom". Written at
 * `up`; the agent raises the budget when its measured reaction time outgrows it (§3). */
struct rl_port_headroom {
	__u32 base;           /* physical headroom: qos.pfc.headroom, or 2 x MTU */
	__u32 headroom;       /* base + emulated rate x reaction budget */
	__u32 lossless_limit; /* bytes a lossless queue of this port may hold (0: queue_limit) */
	__u32 budget_us;      /* the reaction budget that headroom allows for, microseconds */
};

/* Per (port slot, priority) of an ingress port: the XOFF this switch sent out of it. Its
 * priority group's bytes are apart (map pg_bytes, an __s64 per key: the bytes from this
 * port queued anywhere in the switch, exact as of the last sync of each queue), written by
 * the programs alone: the agent rewrites this state, never the count. */
struct rl_pfc_tx_state {
	__u64 last_sent_ns; /* bpf_ktime_get_ns() of the last XOFF (refreshes go every Q/2) */
	__u64 congested;    /* egress trigger: bit i, the node's port node_first_slot + i last saw
	                     * this port's packets join its queue at >= XOFF (cleared below XON) */
	__u32 paused;       /* an XOFF is in force at the peer, as far as we know */
	__u32 refill;       /* XON went out: the next frame to join the PG is its sender's first
	                     * after it (rl_counters.pg_refill_*) */
	__s64 episode_max;  /* the most its PG held since the XOFF that began this pause */
	__u64 xon_ns;       /* bpf_ktime_get_ns() of the last XON (0: the agent's, untimed) */
};

/* The order of the bytes in one egress queue (port slot, PFC priority) by the ingress port
 * they came from, oldest first: runs of {ingress slot, bytes}. A class is FIFO, so when the
 * queue holds D bytes (read exactly from the class) the oldest (bytes - D) have left: they
 * are taken off the runs' heads and off their ingress PGs. Synced at every enqueue and by
 * the agent's probe, never counted at dequeue (that drifts on this kernel, DESIGN.md §4). */
#define RL_PG_RUNS 4096
struct rl_pg_run {
	__u32 in_slot;
	__u32 bytes;
};
struct rl_pg_ring {
	struct bpf_spin_lock lock;
	__u32 head, tail;     /* runs [head, tail), indices mod RL_PG_RUNS */
	__u32 pad;
	__u64 bytes;          /* the runs' bytes: what the queue holds plus what left unsynced */
	__u64 full;           /* packets joined to the last run because the ring was full
	                       * (their PG attribution may be another port's): counted, visible */
	struct rl_pg_run run[RL_PG_RUNS];
};

/* A PFC frame received: one event per priority it names, for the agent (ring buffer). */
struct rl_pfc_event {
	__u64 ts_ns;  /* bpf_ktime_get_ns() at reception */
	__u32 slot;   /* the port that received it: its egress must pause */
	__u16 prio;
	__u16 quanta; /* 0 = XON */
	__u64 decided_ns; /* when the link's other end last decided XOFF for this priority (its
	                   * rl_pfc_tx_state.last_sent_ns; 0: not a port of this fabric here) */
};

/* Per (port slot, priority) of a port that honours PFC: pause_watch.bpf.c's view of the
 * pause mechanism. The agent writes since_ns once the pause is in effect (the qdisc change
 * acknowledged) and zeroes it before it resumes. A data packet of that priority the port
 * dequeues in between is within the reaction allowance while it fits in one max-size frame
 * (802.1Qbb lets a transmitter react within a bounded delay; the TBF that pauses refills
 * its one-frame bucket at the change), and a leak beyond it: a paused priority stops. */
struct rl_pause_state {
	__u64 since_ns;       /* bpf_ktime_get_ns() the pause took effect; 0: not paused */
	__s64 allowance;      /* bytes this pause may still let out (the agent sets one frame) */
	__u64 tail_packets;   /* sent within the allowance */
	__u64 leaked_packets; /* sent beyond it */
	__u64 leaked_bytes;
	__u64 dequeued;       /* every data packet of this queue the port sent, paused or not:
	                       * the PFC watchdog's TX OK (did the queue send anything this poll) */
};

/* A port's line against its rate (pause_watch, one per port slot): a shaper whose timer the
 * machine runs late loses line time it cannot make up past its bucket, while packets wait —
 * time a real port never loses, and which no CPU probe of ours sees (CI read a 7:1
 * bottleneck 98.4 % busy with the agent's loop held 0.4 % of the phase). From one dequeue
 * that left packets behind to the next, the line should not idle: a run of such dequeues is
 * due at the rate from its first (bytes x quantum_ps / 64000 ns), and the last one's
 * lateness (the dequeue that left the queue empty) is what the run lost. Past two of its largest frames (what the shapers' buckets
 * make up), it is counted. A priority in pause holds its packets legitimately: while any is
 * (paused_mask, the agent's), no run begins, and none spans a pause's start or end (the
 * agent counts them in pause_changes) nor a carrier change (a link fault: the device's
 * carrier up or down count moved, and the kernel flushed its queue). A backlog can last the
 * whole phase (a bottleneck never paused), so a run's loss may sum many stalls: the longest
 * wait between two of a run's dequeues is kept apart (gap_ns), the one stall to name. */
struct rl_line_state {
	__u64 paused_mask;    /* written by the agent: bit p while priority p's pause is in effect */
	__u64 pause_changes;  /* written by the agent: pauses begun or ended on the port so far */
	__u64 run_start_ns;   /* the dequeue that began the run (bpf_ktime_get_ns()); 0: none */
	__u64 run_bytes;      /* bytes of the run's dequeues so far */
	__u64 run_max_len;    /* the run's largest packet */
	__u64 lost_ns;        /* summed over the runs ended so far, each past its slack */
	__u64 runs;           /* runs ended */
	__u64 longest_ns;     /* the most one run lost (past its slack) */
	__u64 run_epoch;      /* carrier changes + pause_changes when the run began */
	__u64 run_last_ns;    /* the run's latest dequeue */
	__u64 gap_ns;         /* the longest wait between two dequeues of a run: one stall at most
	                       * (a run's loss sums every stall of a backlog that can last the phase) */
	__u64 gap_at_ns;      /* when that wait began (bpf_ktime_get_ns()): to name the moment */
};

/* One packet of `len` bytes leaving the port at `now`, `backlog` bytes behind it in the
 * port's queues; `quantum_ps`: 512 bit-times at the port's rate (rl_port_info); `carrier`:
 * the device's carrier changes so far. */
static inline void rl_line_dequeue(struct rl_line_state *s, __u64 now, __u64 len, __u64 backlog, __u64 quantum_ps,
				   __u64 carrier)
{
	int waiting = backlog > 0 && !s->paused_mask;

	__u64 epoch = carrier + s->pause_changes;

	if (s->run_start_ns && s->run_epoch != epoch)
		s->run_start_ns = 0; /* a pause or a link fault came within the run: not the machine's */
	if (s->run_start_ns) {
		if (len > s->run_max_len)
			s->run_max_len = len;
		if (now - s->run_last_ns > s->gap_ns) {
			s->gap_ns = now - s->run_last_ns;
			s->gap_at_ns = s->run_last_ns;
		}
		s->run_last_ns = now;
		if (waiting) { /* the common case: the run goes on */
			s->run_bytes += len;
			return;
		}
		__u64 due = s->run_start_ns + s->run_bytes * quantum_ps / 64000;
		__u64 late = now > due ? now - due : 0;
		__u64 slack = 2 * s->run_max_len * quantum_ps / 64000;
		if (late > slack) {
			__u64 lost = late - slack;
			s->lost_ns += lost;
			if (lost > s->longest_ns)
				s->longest_ns = lost;
		}
		s->runs += 1;
		s->run_start_ns = 0;
		return;
	}
	if (!waiting)
		return;
	s->run_start_ns = now;
	s->run_last_ns = now;
	s->run_epoch = epoch;
	s->run_bytes = len;
	s->run_max_len = len;
}

/* Who held the CPUs (pause_watch's sched_switch program, one record per CPU): a line that
 * stalled, or a loop that was late, is the machine's doing when another program or the
 * hypervisor held the CPU meanwhile (issue 48: a nice -10 thread of the sandbox's own service
 * held CPU 0 for 2 ms, no timer of ours fired, and a receiver's line waited 2.7 ms; CI's
 * stalls of 3-11 ms with no other program beside them came in one minute's burst). A stretch
 * is what one task ran on a CPU between two switches, kept (the last RL_HOLD_RING per CPU:
 * seconds of a compiler's or another run's) when
 *  - another program's task ran it for RL_HOLD_MIN_NS or more (about what a shaper's bucket
 *    makes up) — idle and the kernel's threads that do the fabric's work (ksoftirqd, kworker,
 *    threaded NAPI) are not other programs, the kernel's others are (the machine's own:
 *    kdamond, kswapd; RL_HOLD_F_KTHREAD); ours are the agent and the process that started it
 *    (`ours`) — or
 *  - the hypervisor took RL_HOLD_MIN_NS or more of it, whatever task was current, idle
 *    included: the CPU's steal clock (the runqueue's, brought up to date at each schedule())
 *    moved that much between the two switches.
 * Beside them, each run of softirq work of RL_HOLD_MIN_NS or more on a CPU (handlers closer
 * than RL_SOFTIRQ_GAP_NS one run: one __do_softirq, up to its 2 ms budget and past it): no
 * task, a real-time one included, runs on that CPU meanwhile, and the fabric's packets are
 * most of that work (CI's PFC loop, runnable, waited 2.1-2.5 ms with no other program and no
 * steal beside it).
 * And whatever ran on the PFC loop's CPU while the loop, woken, waited RL_HOLD_MIN_NS or more
 * to run (RL_HOLD_LOOP), ours, the kernel's thread or idle: a kernel that preempts no kernel
 * code (PREEMPT_NONE, as here) lets a thread in a system call keep the CPU from a real-time
 * task until it returns (the loop waited 2.4-3.3 ms runnable, the witness naming nothing). */
#define RL_HOLD_RING 1024
#define RL_HOLD_MIN_NS 500000ull
#define RL_HOLD_OURS 4
#define RL_SOFTIRQ_GAP_NS 5000ull
#define RL_HOLD_TASK 0     /* ours, the fabric's kernel thread, or idle: kept for its steal */
#define RL_HOLD_OTHER 1    /* another program's task, or the machine's kernel thread */
#define RL_HOLD_SOFTIRQ 2  /* softirq work */
#define RL_HOLD_LOOP 3     /* not another program's, and the PFC loop waited runnable through it */
#define RL_HOLD_F_KTHREAD 1u /* flags: the task was a kernel thread */
struct rl_cpu_hold {
	__u64 start_ns;  /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) the task came on the CPU */
	__u64 dur_ns;
	__u64 steal_ns;  /* of it, the hypervisor's */
	__u32 tgid;      /* 0: the CPU was idle, or softirq work */
	__u32 cpu;
	__u32 kind;      /* RL_HOLD_* */
	__u32 flags;     /* RL_HOLD_F_* */
	char comm[16];   /* the thread's name ("softirq" for softirq work) */
	__u64 waited_ns; /* RL_HOLD_LOOP: of it, from the loop's wake-up to the switch to it */
	__u64 work_fn;   /* a kworker's: the function of the longest work item it ran (0: none) */
	__u64 work_ns;   /* and how long that item ran */
};
struct rl_cpu_holds {
	__u64 since_ns;     /* the CPU's last switch: the current task's stretch began (0: not seen yet) */
	__u64 since_steal;  /* the CPU's steal clock then */
	__u64 next;         /* stretches kept so far: ring[next % RL_HOLD_RING] is the next slot */
	__u64 softirq_since, softirq_last;  /* the current run of softirq work: began, its last handler's end */
	__u64 softirq_rec;  /* its record: ring[(softirq_rec - 1) % RL_HOLD_RING] (0: none yet) */
	__u64 work_fn, work_since;    /* the work item running on this CPU (workqueue_execute_start), 0: none */
	__u64 work_long_fn, work_long_ns;  /* the longest item that ran since the CPU's last switch */
	struct rl_cpu_hold ring[RL_HOLD_RING];
};

/* A switch on `cpu` at `now`, the CPU's steal clock at `steal`: the task leaving (process
 * prev_tgid, thread prev_comm, prev_other: another program's, prev_flags RL_HOLD_F_*) ends
 * the stretch begun at the CPU's last switch, kept as above; the next stretch begins.
 * `loop_woke`: the switch is to the PFC loop, woken then (0: it is not, or not woken). */
static inline void rl_hold_switch(struct rl_cpu_holds *h, __u64 now, __u64 steal, __u32 cpu, const char *prev_comm,
				  __u32 prev_tgid, __u32 prev_other, __u32 prev_flags, __u64 loop_woke)
{
	if (h->since_ns && now > h->since_ns) {
		const __u64 dur = now - h->since_ns;
		const __u64 stolen = steal > h->since_steal ? steal - h->since_steal : 0;
		const __u64 from = loop_woke > h->since_ns ? loop_woke : h->since_ns;
		const int held_loop = !prev_other && loop_woke && now > from && now - from >= RL_HOLD_MIN_NS;
		__u64 work_fn = h->work_long_fn, work_ns = h->work_long_ns;

		if (h->work_since && now > h->work_since && now - h->work_since > work_ns)
			work_fn = h->work_fn, work_ns = now - h->work_since;  /* still running: so far */
		if ((prev_other && dur >= RL_HOLD_MIN_NS) || stolen >= RL_HOLD_MIN_NS || held_loop ||
		    work_ns >= RL_HOLD_MIN_NS) {
			struct rl_cpu_hold *r = &h->ring[h->next % RL_HOLD_RING];

			r->start_ns = h->since_ns;
			r->dur_ns = dur;
			r->steal_ns = stolen < dur ? stolen : dur;
			r->tgid = prev_tgid;
			r->cpu = cpu;
			r->kind = prev_other ? RL_HOLD_OTHER : held_loop ? RL_HOLD_LOOP : RL_HOLD_TASK;
			r->flags = prev_flags;
			r->waited_ns = held_loop ? now - from : 0;
			r->work_fn = work_ns >= RL_HOLD_MIN_NS ? work_fn : 0;
			r->work_ns = work_ns >= RL_HOLD_MIN_NS ? work_ns : 0;
			for (int i = 0; i < 16; i++)
				r->comm[i] = prev_comm[i];
			h->next += 1;
		}
	}
	h->since_ns = now;
	h->since_steal = steal;
	/* An item the switch interrupted is the leaving task's, not the next one's: timed so far
	 * above, no further (its end, after the kworker runs again, is not seen as its). */
	h->work_long_fn = 0;
	h->work_long_ns = 0;
	h->work_since = 0;
}

/* A work item begins (`fn`, workqueue_execute_start) or ends (workqueue_execute_end) on this
 * CPU at `now`: the longest since the CPU's last switch is kept for the stretch's record (a
 * kworker's: only a kworker runs work items). */
static inline void rl_work_start(struct rl_cpu_holds *h, __u64 now, __u64 fn)
{
	h->work_fn = fn;
	h->work_since = now;
}

static inline void rl_work_end(struct rl_cpu_holds *h, __u64 now)
{
	if (h->work_since && now > h->work_since && now - h->work_since > h->work_long_ns) {
		h->work_long_ns = now - h->work_since;
		h->work_long_fn = h->work_fn;
	}
	h->work_since = 0;
}

/* A softirq handler begins at `now` on this CPU: within RL_SOFTIRQ_GAP_NS of the last one's
 * end it continues that run, else a new run begins. */
static inline void rl_softirq_entry(struct rl_cpu_holds *h, __u64 now)
{
	if (!h->softirq_since || now < h->softirq_last || now - h->softirq_last > RL_SOFTIRQ_GAP_NS) {
		h->softirq_since = now;
		h->softirq_rec = 0;
	}
}

/* A softirq handler ended at `now`: a run of RL_HOLD_MIN_NS or more is kept, its record
 * stretched as the run goes on (while the ring has not come round to it). */
static inline void rl_softirq_exit(struct rl_cpu_holds *h, __u64 now, __u32 cpu)
{
	h->softirq_last = now;
	if (!h->softirq_since || now < h->softirq_since || now - h->softirq_since < RL_HOLD_MIN_NS)
		return;
	if (h->softirq_rec && h->next - h->softirq_rec >= RL_HOLD_RING)
		return;
	struct rl_cpu_hold *r;

	if (h->softirq_rec) {
		r = &h->ring[(h->softirq_rec - 1) % RL_HOLD_RING];
	} else {
		r = &h->ring[h->next % RL_HOLD_RING];
		h->next += 1;
		h->softirq_rec = h->next;
		r->start_ns = h->softirq_since;
		r->steal_ns = 0;
		r->tgid = 0;
		r->cpu = cpu;
		r->kind = RL_HOLD_SOFTIRQ;
		r->flags = 0;
		r->waited_ns = 0;
		r->work_fn = 0;
		r->work_ns = 0;
		const char name[16] = "softirq";
		for (int i = 0; i < 16; i++)
			r->comm[i] = name[i];
	}
	r->dur_ns = now - h->softirq_since;
}

/* bpf test tier only: BPF_PROG_TEST_RUN runs on loopback (no HTB), so the queue depth the
 * egress program would read from the port's HTB class is injected here instead. */
struct rl_depth_override {
	__u32 enabled;
	__u32 depth[RL_NUM_PRIO];
	__u32 pool_used; /* the shared pool's occupancy, likewise */
};

#ifdef __cplusplus
static_assert(sizeof(struct rl_counters) == 40 * 8, "rl_counters layout");
static_assert(sizeof(struct rl_config) == 72 + 16 * RL_NUM_PRIO + 4 * RL_NUM_PRIO + 16 + RL_NUM_PRIO + 8, "rl_config layout");
static_assert(sizeof(struct rl_port_info) == 184, "rl_port_info layout");
static_assert(sizeof(struct rl_pfc_tx_state) == 40, "rl_pfc_tx_state layout");
static_assert(sizeof(struct rl_pg_ring) == 32 + 8 * RL_PG_RUNS, "rl_pg_ring layout");
static_assert(sizeof(struct rl_pfc_event) == 24, "rl_pfc_event layout");
static_assert(sizeof(struct rl_port_headroom) == 16, "rl_port_headroom layout");
static_assert(sizeof(struct rl_pause_state) == 48, "rl_pause_state layout");
static_assert(sizeof(struct rl_line_state) == 96, "rl_line_state layout");
static_assert(sizeof(struct rl_depth_override) == 40, "rl_depth_override layout");
static_assert(sizeof(struct rl_cpu_hold) == 80, "rl_cpu_hold layout");
static_assert(sizeof(struct rl_cpu_holds) == 80 + 80 * RL_HOLD_RING, "rl_cpu_holds layout");
static_assert(sizeof(struct rl_pfc_frame) == RL_PFC_FRAME_LEN, "rl_pfc_frame layout");
#else
_Static_assert(sizeof(struct rl_pfc_frame) == RL_PFC_FRAME_LEN, "rl_pfc_frame layout");
#endif

#endif /* ROCELAB_ABI_H */
