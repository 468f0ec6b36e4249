/* The ABI between rocelab's BPF programs and its C++ side: map value layouts and counter
 * indices. Included by both; fixed-width types only, no padding left implicit. */
#ifndef ROCELAB_ABI_H
#define ROCELAB_ABI_H

#include <linux/types.h>

/* doctor.bpf.c: what the capability probe saw (one array slot). */
struct rl_probe_stats {
	__u64 packets;    /* packets the classifier ran on */
	__u64 bytes;      /* their length as tc sees it */
	__u32 last_proto; /* skb->protocol of the last one, network byte order */
	__u32 pad;
};

/* A verdict the probe returns when everything worked: TC_ACT_OK. */
#define RL_PROBE_VERDICT 0

#endif /* ROCELAB_ABI_H */
