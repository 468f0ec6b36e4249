/* The port_info map (one rl_port_info per port slot, sized by the loader), declared once for
 * every object that shares it: the port programs and the pause watcher. */
#ifndef ROCELAB_PORT_INFO_MAP_BPF_H
#define ROCELAB_PORT_INFO_MAP_BPF_H

#include "rocelab_abi.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rl_port_info);
} port_info SEC(".maps");

#endif
