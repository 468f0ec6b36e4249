/* tp_btf/qdisc_dequeue: watches the pause mechanism from outside it. Every packet a port's
 * root qdisc hands to the device is checked against the agent's record of the pauses in
 * effect (pause_state); a data packet of a paused priority beyond the one-frame reaction
 * allowance is a leak and is counted. The
 * tracepoint fires for every qdisc of the machine, so a port is recognised by its ifindex
 * and by the very root qdisc its egress program recorded (port_info.root_qdisc): another
 * instance, or the machine's own interfaces, never match. Loaded by the agent. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "rocelab_abi.h"

/* Shared with the port programs (the agent hands over the fabric's map). */
#include "port_info_map.bpf.h"

/* Sized by the agent: port slots x RL_NUM_PRIO. Mmapable: the agent stores since_ns in place
 * while this program adds to the counts (a map update would write back stale counts). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, RL_NUM_PRIO);
	__type(key, __u32);
	__type(value, struct rl_pause_state);
} pause_state SEC(".maps");

/* Per port slot: its line against its rate (rl_line_dequeue). Mmapable: the agent sets
 * paused_mask in place and reads what was lost. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rl_line_state);
} line_state SEC(".maps");

static __always_inline void check(__u32 slot, struct sk_buff *skb, __u64 now)
{
	__u32 classid = skb->priority; /* BTF pointers of tp_btf: plain loads, no helper call */
	__u32 minor = classid & 0xffff;

	/* Data classes only: PFC frames and the agent's frames leave through the direct queue. */
	if ((classid >> 16) != RL_HTB_MAJOR || minor < RL_CLASS_BASE || minor >= RL_CLASS_BASE + RL_NUM_PRIO)
		return;
	__u32 key = rl_queue_key(slot, minor - RL_CLASS_BASE);
	struct rl_pause_state *st = bpf_map_lookup_elem(&pause_state, &key);

	if (!st)
		return;
	__sync_fetch_and_add(&st->dequeued, 1);
	if (!st->since_ns || now < st->since_ns)
		return;
	__s64 len = skb->len;

	/* Signed: once spent the allowance stays below zero, however many packets follow. */
	if (__sync_fetch_and_add(&st->allowance, -len) >= len) {
		__sync_fetch_and_add(&st->tail_packets, 1);
		return;
	}
	__sync_fetch_and_add(&st->leaked_packets, 1);
	__sync_fetch_and_add(&st->leaked_bytes, len);
}

SEC("tp_btf/qdisc_dequeue")
int BPF_PROG(rl_pause_watch, struct Qdisc *q, const struct netdev_queue *txq, int packets, struct sk_buff *skb)
{
	if (!skb || !txq)
		return 0;
	__u32 ifindex = txq->dev->ifindex;

	if (ifindex < RL_FIRST_PORT_IFINDEX)
		return 0;
	__u32 slot = ifindex - RL_FIRST_PORT_IFINDEX;
	struct rl_port_info *info = bpf_map_lookup_elem(&port_info, &slot);

	if (!info || info->root_qdisc != (__u64)q)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 bytes = 0;
	/* A bulk dequeue hands over a list (skb->next); veth takes one at a time, but count all. */
	for (int i = 0; i < 16 && skb; i++) {
		check(slot, skb, now);
		bytes += skb->len;
		skb = skb->next;
	}
	struct rl_line_state *line = bpf_map_lookup_elem(&line_state, &slot);
	if (line && info->quantum_ps)
		rl_line_dequeue(line, now, bytes, q->qstats.backlog, info->quantum_ps,
				(__u32)txq->dev->carrier_up_count.counter + (__u32)txq->dev->carrier_down_count.counter);
	return 0;
}

/* Per CPU (sized by the agent): who held it (rl_hold_switch). Mmapable: the agent reads the
 * rings in place. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rl_cpu_holds);
} cpu_holds SEC(".maps");

/* Our processes (the agent's, the one that started it), written by the agent before attach. */
__u32 ours[RL_HOLD_OURS];

/* The PFC loop's thread (written by the agent once the loop runs; 0: none yet) and when it
 * was last woken (0: it ran since). */
__u32 loop_tid;
__u64 loop_woke_ns;

/* The kernel's threads that do the fabric's work: softirq work deferred (ksoftirqd), queued
 * work (kworker: a qdisc's or a namespace's teardown, among everybody's), threaded NAPI. */
static __always_inline int fabric_kthread(const char *c)
{
	return (c[0] == 'k' && c[1] == 's' && c[2] == 'o' && c[3] == 'f' && c[4] == 't') ||
	       (c[0] == 'k' && c[1] == 'w' && c[2] == 'o' && c[3] == 'r' && c[4] == 'k') ||
	       (c[0] == 'n' && c[1] == 'a' && c[2] == 'p' && c[3] == 'i' && c[4] == '/');
}

/* Another program's: not ours, not idle, and not the fabric's kernel threads. The kernel's
 * other threads are the machine's own (kdamond, the platform's DAMON, held the PFC loop's CPU
 * 1.2 ms in its kernel loop here; kswapd, kcompactd, khugepaged). */
static __always_inline __u32 is_other(struct task_struct *t)
{
	__u32 tgid = t->tgid;

	if (!t->pid)
		return 0;
	if (t->flags & 0x00200000 /* PF_KTHREAD */) {
		char c[8];

		__builtin_memcpy(c, t->comm, sizeof c);
		return !fabric_kthread(c);
	}
	for (int i = 0; i < RL_HOLD_OURS; i++)
		if (ours[i] == tgid)
			return 0;
	return 1;
}

/* The CPU's steal clock (ns): what its runqueue's clock has left out as stolen, brought up to
 * date at every schedule() (update_rq_clock, before the switch). Local types: a kernel
 * without paravirt time accounting or group scheduling builds and reads 0 (no steal seen);
 * kernel_cpustat's per-CPU figure is no typed ksym without KALLSYMS_ALL. */
struct rq___rl {
	__u64 prev_steal_time_rq;
} __attribute__((preserve_access_index));
struct cfs_rq___rl {
	struct rq___rl *rq;
} __attribute__((preserve_access_index));
struct sched_entity___rl {
	struct cfs_rq___rl *cfs_rq;
} __attribute__((preserve_access_index));
struct task_struct___rl {
	struct sched_entity___rl se;
} __attribute__((preserve_access_index));

static __always_inline __u64 cpu_steal(struct task_struct *task)
{
	struct task_struct___rl *t = (void *)task;

	if (!bpf_core_field_exists(t->se.cfs_rq) || !bpf_core_field_exists(((struct cfs_rq___rl *)0)->rq) ||
	    !bpf_core_field_exists(((struct rq___rl *)0)->prev_steal_time_rq))
		return 0;
	return BPF_CORE_READ(t, se.cfs_rq, rq, prev_steal_time_rq);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(rl_cpu_hold, bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct rl_cpu_holds *h = bpf_map_lookup_elem(&cpu_holds, &cpu);

	if (!h)
		return 0;
	char comm[16];
	__u64 woke = 0;

	if (loop_tid && next->pid == loop_tid) {
		woke = loop_woke_ns;
		loop_woke_ns = 0;
	}
	__builtin_memcpy(comm, prev->comm, sizeof comm);
	rl_hold_switch(h, bpf_ktime_get_ns(), cpu_steal(prev), cpu, comm, prev->tgid, is_other(prev),
		       (prev->flags & 0x00200000 /* PF_KTHREAD */) ? RL_HOLD_F_KTHREAD : 0, woke);
	return 0;
}

/* The PFC loop woken (from its poll: a PFC event, a request, its timeout): from now on it waits
 * for its CPU until the switch to it. */
SEC("tp_btf/sched_waking")
int BPF_PROG(rl_loop_waking, struct task_struct *p)
{
	if (loop_tid && p->pid == loop_tid)
		loop_woke_ns = bpf_ktime_get_ns();
	return 0;
}

/* Which work a kworker ran (a namespace's teardown, a link's events, the platform's free-page
 * reporting): the witness names the longest item of a stretch it keeps. */
SEC("tp_btf/workqueue_execute_start")
int BPF_PROG(rl_work_start_prog, struct work_struct *work)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct rl_cpu_holds *h = bpf_map_lookup_elem(&cpu_holds, &cpu);

	if (h)
		rl_work_start(h, bpf_ktime_get_ns(), (__u64)work->func);
	return 0;
}

SEC("tp_btf/workqueue_execute_end")
int BPF_PROG(rl_work_end_prog, struct work_struct *work, work_func_t function)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct rl_cpu_holds *h = bpf_map_lookup_elem(&cpu_holds, &cpu);

	if (h)
		rl_work_end(h, bpf_ktime_get_ns());
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(rl_softirq_entry_prog, unsigned int vec_nr)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct rl_cpu_holds *h = bpf_map_lookup_elem(&cpu_holds, &cpu);

	if (h)
		rl_softirq_entry(h, bpf_ktime_get_ns());
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(rl_softirq_exit_prog, unsigned int vec_nr)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct rl_cpu_holds *h = bpf_map_lookup_elem(&cpu_holds, &cpu);

	if (h)
		rl_softirq_exit(h, bpf_ktime_get_ns(), cpu);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
