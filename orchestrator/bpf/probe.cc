#include "bpf/probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <memory>

#include "doctor.skel.h"
#include "rocelab_abi.h"

namespace rocelab::bpf {

namespace {
// Whole messages: libbpf hands the verifier's log over in one call, and its reason for
// refusing a program is at the end.
int log_to_spdlog(enum libbpf_print_level level, const char* fmt, va_list args) {
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, args);
  std::string line(n > 0 ? size_t(n) + 1 : 1, '\0');
  if (n > 0) std::vsnprintf(line.data(), line.size(), fmt, again);
  va_end(again);
  line.resize(n > 0 ? size_t(n) : 0);
  while (!line.empty() && line.back() == '\n') line.pop_back();
  if (level == LIBBPF_WARN) spdlog::warn("libbpf: {}", line);
  else spdlog::debug("libbpf: {}", line);
  return n;
}

struct SkelDeleter {
  void operator()(doctor* s) const { doctor__destroy(s); }
};
}  // namespace

void route_libbpf_logs() { libbpf_set_print(log_to_spdlog); }

ProbeResult probe_bpf() {
  ProbeResult r;
  std::unique_ptr<doctor, SkelDeleter> skel(doctor__open_and_load());
  if (!skel) {
    r.why = std::string("loading doctor.bpf.o failed: ") + std::strerror(errno);
    return r;
  }
  r.loaded = true;
  // An Ethernet frame carrying IPv4, zero-padded to the 60-byte minimum.
  unsigned char frame[60] = {0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45};
  LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame, .data_size_in = sizeof frame, .repeat = 1);
  int err = bpf_prog_test_run_opts(bpf_program__fd(skel->progs.probe_classifier), &opts);
  if (err) {
    r.why = std::string("BPF_PROG_TEST_RUN failed: ") + std::strerror(errno);
    return r;
  }
  __u32 key = 0;
  rl_probe_stats stats{};
  if (bpf_map__lookup_elem(skel->maps.probe_stats, &key, sizeof key, &stats, sizeof stats, 0) != 0) {
    r.why = std::string("reading the probe map failed: ") + std::strerror(errno);
    return r;
  }
  if (opts.retval != RL_PROBE_VERDICT || stats.packets != 1 || stats.bytes != sizeof frame) {
    r.why = "the program ran but returned " + std::to_string(opts.retval) + " and counted " +
            std::to_string(stats.packets) + " packets / " + std::to_string(stats.bytes) + " bytes";
    return r;
  }
  r.ran = true;
  r.why = "loaded a tc classifier with a BTF map and ran it on a packet (BPF_PROG_TEST_RUN)";
  return r;
}

}  // namespace rocelab::bpf
