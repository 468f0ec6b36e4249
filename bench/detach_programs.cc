// Removes rocelab's port programs from the named interfaces of the calling network namespace
// (run under `ip netns exec`): the no-program baseline of bench/dataplane_pps.py. A port's
// clsact goes with them (its programs sit on the node's shared blocks), so the baseline has
// no tc hook at all.
#include <net/if.h>

#include <cstdio>
#include <string>

#include "bpf/tc_hook.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: detach_programs IFNAME...\n");
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    const int ifindex = int(if_nametoindex(argv[i]));
    if (!ifindex) {
      std::fprintf(stderr, "detach_programs: no interface %s here\n", argv[i]);
      return 1;
    }
    std::string why;
    if (!rocelab::bpf::detach_port(ifindex, why)) {
      std::fprintf(stderr, "detach_programs: %s: %s\n", argv[i], why.c_str());
      return 1;
    }
  }
  return 0;
}
