/* Maps shared by the port programs (egress.bpf.c, ingress.bpf.c). Each object declares
 * them; the loader creates them once, with the egress object, and hands the same maps to
 * the ingress object (bpf_map__reuse_fd), so one set serves every port of the fabric. */
#ifndef ROCELAB_PORT_MAPS_BPF_H
#define ROCELAB_PORT_MAPS_BPF_H

#include "rocelab_abi.h"

#define TC_ACT_OK 0
#define TC_ACT_SHOT 2
#define ETH_P_IP 0x0800
#define ETH_HLEN 14

/* max_entries is set by the loader: ports in the fabric * RL_NUM_PRIO. Mmapable, so the
 * agent and `rocelab stats` read counters without syscalls. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, RL_NUM_PRIO);
	__type(key, __u32);
	__type(value, struct rl_counters);
} port_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rl_config);
} port_config SEC(".maps");

#include "port_info_map.bpf.h"

/* Per (port slot, priority) of an ingress port: the XOFF it sent (egress decides; ingress
 * reads when the peer's frame arrives, to time the pause's path). Sized by the loader;
 * mmapable, so the agent's loop reads it without a syscall every 200 us. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, RL_NUM_PRIO);
	__type(key, __u32);
	__type(value, struct rl_pfc_tx_state);
} pfc_tx_state SEC(".maps");

static __always_inline __u32 slot_of(__u32 ifindex)
{
	return ifindex - RL_FIRST_PORT_IFINDEX;
}

static __always_inline struct rl_counters *counters_of(__u32 ifindex, __u32 prio)
{
	__u32 slot = ifindex - RL_FIRST_PORT_IFINDEX; /* wraps for ifindex < base: no entry */
	__u32 key;

	if (ifindex < RL_FIRST_PORT_IFINDEX || slot > (1u << 20))
		return 0;
	key = rl_queue_key(slot, prio);
	return bpf_map_lookup_elem(&port_counters, &key);
}

static __always_inline struct rl_config *port_cfg(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&port_config, &zero);
}

/* The IPv4 TOS byte of an Ethernet frame, or -1 when it is not IPv4. */
static __always_inline int ipv4_tos(struct __sk_buff *skb)
{
	__u16 proto;
	__u8 tos;

	if (bpf_skb_load_bytes(skb, 12, &proto, sizeof proto) < 0 || proto != bpf_htons(ETH_P_IP))
		return -1;
	if (bpf_skb_load_bytes(skb, ETH_HLEN + 1, &tos, sizeof tos) < 0)
		return -1;
	return tos;
}

#endif
