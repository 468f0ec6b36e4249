/* tc ingress of every port: count what arrives per priority. (PFC reception and the
 * ingress-port byte accounting of XOFF/XON come with the next issue.) */
#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "port_maps.bpf.h"

SEC("tc")
int rl_ingress(struct __sk_buff *skb)
{
	struct rl_config *cfg = port_cfg();

	if (!cfg)
		return TC_ACT_OK;
	int tos = ipv4_tos(skb);
	__u32 prio = tos < 0 ? 0 : cfg->dscp_to_prio[(tos >> 2) & 63] & (RL_NUM_PRIO - 1);
	struct rl_counters *cnt = counters_of(skb->ifindex, prio);

	if (cnt) {
		__sync_fetch_and_add(&cnt->rx_packets, 1);
		__sync_fetch_and_add(&cnt->rx_bytes, skb->len);
	}
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
