#include "telemetry/pcap_tap.h"

#include <pcap/pcap.h>
#include <unistd.h>

#include <cstdio>

#include "model/scenario.h"
#include "sys/files.h"

namespace rocelab::telemetry {

std::unique_ptr<PcapTap> PcapTap::open(const std::string& ifname, const std::string& file, const Limits& l,
                                       std::string& why) {
  std::unique_ptr<PcapTap> t(new PcapTap);
  t->limits_ = l;
  char err[PCAP_ERRBUF_SIZE] = {};
  t->live_ = pcap_create(ifname.c_str(), err);
  if (!t->live_) return why = ifname + ": " + err, nullptr;
  pcap_set_snaplen(t->live_, int(l.snaplen));
  pcap_set_immediate_mode(t->live_, 1);
  pcap_set_buffer_size(t->live_, int(model::kCaptureRingBytes));  // a burst at line rate while the reader sleeps
  pcap_set_tstamp_precision(t->live_, PCAP_TSTAMP_PRECISION_NANO);
  if (pcap_activate(t->live_) < 0) return why = ifname + ": " + pcap_geterr(t->live_), nullptr;
  if (pcap_setnonblock(t->live_, 1, err) != 0) return why = ifname + ": " + err, nullptr;
  // The file is opened without following links (sys/files.h), then handed to libpcap.
  const int fd = sys::open_for_write(file, why);
  if (fd < 0) return nullptr;
  std::FILE* f = fdopen(fd, "wb");
  if (!f) {
    close(fd);
    return why = file + ": fdopen failed", nullptr;
  }
  t->dump_ = pcap_dump_fopen(t->live_, f);
  if (!t->dump_) {
    std::fclose(f);
    return why = file + ": " + pcap_geterr(t->live_), nullptr;
  }
  return t;
}

PcapTap::~PcapTap() {
  finish();
  if (live_) pcap_close(live_);
}

int PcapTap::fd() const { return pcap_get_selectable_fd(live_); }

void PcapTap::on_packet(unsigned char* user, const pcap_pkthdr* h, const unsigned char* bytes) {
  auto* t = reinterpret_cast<PcapTap*>(user);
  if (t->full_) return;
  const long at = pcap_dump_ftell(t->dump_);
  if (t->packets_ >= t->limits_.packets ||
      (at > 0 && uint64_t(at) + sizeof(pcap_pkthdr) + h->caplen > t->limits_.bytes)) {
    t->full_ = true;
    return;
  }
  pcap_dump(reinterpret_cast<unsigned char*>(t->dump_), h, bytes);
  ++t->packets_;
}

void PcapTap::drain() {
  if (dump_) pcap_dispatch(live_, -1, on_packet, reinterpret_cast<unsigned char*>(this));
}

void PcapTap::finish() {
  if (!dump_) return;
  while (pcap_dispatch(live_, -1, on_packet, reinterpret_cast<unsigned char*>(this)) > 0) {
  }
  pcap_stat st{};
  if (pcap_stats(live_, &st) == 0) kernel_drops_ = st.ps_drop;
  pcap_dump_close(dump_);
  dump_ = nullptr;
}

}  // namespace rocelab::telemetry
