// Loading and running rocelab's BPF programs: the capability probe.
#pragma once

#include <string>

namespace rocelab::bpf {

// Routes libbpf's own log lines into spdlog (debug level; warnings as warnings).
void route_libbpf_logs();

struct ProbeResult {
  bool loaded = false;     // the skeleton opened, loaded and passed the verifier
  bool ran = false;        // BPF_PROG_TEST_RUN ran it on a packet and the map saw it
  std::string why;         // what failed, or what was checked
};

// Loads doctor.bpf.c and runs it once on a 60-byte frame through BPF_PROG_TEST_RUN.
// Needs CAP_BPF (root); touches no interface.
ProbeResult probe_bpf();

}  // namespace rocelab::bpf
