// bpf tier: rocelab's probe program through BPF_PROG_TEST_RUN. Needs root (CAP_BPF).
#include <gtest/gtest.h>
#include <unistd.h>

#include "bpf/probe.h"

TEST(BpfProbe, LoadsAndCountsOnePacket) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (CAP_BPF) to load BPF programs; run the bpf tier as root";
  auto r = rocelab::bpf::probe_bpf();
  EXPECT_TRUE(r.loaded) << r.why;
  EXPECT_TRUE(r.ran) << r.why;
}
