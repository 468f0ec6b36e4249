// One libpcap capture into one file, apart from the rest of telemetry: pcap.h's struct
// bpf_insn collides with linux/bpf.h (the ABI header), so only pcap_tap.cc includes it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

struct pcap;
struct pcap_dumper;
struct pcap_pkthdr;

namespace rocelab::telemetry {

class PcapTap {
 public:
  struct Limits {
    uint32_t snaplen = 128;
    uint64_t packets = 0, bytes = 0;  // the file stops growing at either
  };
  // Opens `ifname` in the calling thread's network namespace (its socket stays bound there)
  // and `file` for writing: pcap with nanosecond timestamps.
  static std::unique_ptr<PcapTap> open(const std::string& ifname, const std::string& file, const Limits& l,
                                       std::string& why);
  ~PcapTap();
  PcapTap(const PcapTap&) = delete;
  PcapTap& operator=(const PcapTap&) = delete;

  int fd() const;     // poll() it for POLLIN
  void drain();       // writes what is waiting (non-blocking)
  void finish();      // a last drain, the kernel's drop count, the file closed (idempotent)
  uint64_t packets() const { return packets_; }
  bool full() const { return full_; }
  uint64_t kernel_drops() const { return kernel_drops_; }

 private:
  PcapTap() = default;
  static void on_packet(unsigned char* user, const ::pcap_pkthdr* h, const unsigned char* bytes);
  ::pcap* live_ = nullptr;
  ::pcap_dumper* dump_ = nullptr;
  Limits limits_;
  uint64_t packets_ = 0, kernel_drops_ = 0;
  bool full_ = false;
};

}  // namespace rocelab::telemetry
