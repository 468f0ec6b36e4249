// Removes rocelab's port programs in the calling network namespace (run under `ip netns
// exec`): the no-program baselines of bench/dataplane_pps.py. `--filters` takes the programs
// off the node's shared blocks, every port keeping an empty clsact hook; IFNAME... removes
// those ports' clsact qdiscs, and the programs with them, so no tc hook runs at all.
#include <net/if.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "bpf/tc_hook.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: detach_programs --filters | IFNAME...\n");
    return 2;
  }
  std::string why;
  if (std::strcmp(argv[1], "--filters") == 0) {
    if (argc != 2 || !rocelab::bpf::detach_node(why)) {
      std::fprintf(stderr, "detach_programs: %s\n", argc != 2 ? "--filters takes no interface" : why.c_str());
      return 1;
    }
    return 0;
  }
  for (int i = 1; i < argc; ++i) {
    const int ifindex = int(if_nametoindex(argv[i]));
    if (!ifindex) {
      std::fprintf(stderr, "detach_programs: no interface %s here\n", argv[i]);
      return 1;
    }
    if (!rocelab::bpf::detach_port(ifindex, why)) {
      std::fprintf(stderr, "detach_programs: %s: %s\n", argv[i], why.c_str());
      return 1;
    }
  }
  return 0;
}
