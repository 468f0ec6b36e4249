// `rocelab perf --engine rxe`: the real perftest (ib_write_bw) between two hosts' rxe devices,
// through the fabric that is up, its figures beside what the switch port toward the
// responder counted over the same stretch: with --iters, every message's bytes.
#pragma once

#include <string>

#include "fabric/testbed.h"
#include "model/scenario.h"

namespace rocelab::cli {

struct PerftestOptions {
  std::string from, to;  // HOST or HOST:NIC
  uint32_t size = 65536;
  double seconds = 4;        // perftest's -D (whole seconds), when iterations is 0
  uint64_t iterations = 0;   // perftest's -n: this many messages per QP
  int qps = 1;
  bool json = false;
};

// Returns the exit code; prints perftest's table and the comparison.
int run_perftest(const model::Scenario& s, fabric::Testbed& t, const PerftestOptions& o);

}  // namespace rocelab::cli
