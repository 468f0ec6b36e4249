// `capture`: the scenario's `capture:` ports recorded while the traffic runs, through
// libpcap in this process (no tcpdump): one capture-NODE-PORT.pcap per port in the run
// directory, nanosecond timestamps, each bounded by capture.packets and capture.size. The
// handle is opened inside the node's namespace, so its packet socket is bound there; the
// reading thread need not be. Both directions are kept: what the port sent (data, PFC frames
// its node generated, CNPs) and what it received before the ingress program (PFC it was
// sent). Wireshark names RoCEv2 CNPs, ECN and PFC with scripts/wireshark/rocelab.lua.
//
// libpcap 1.10 (Debian 12) writes pcap, not pcapng: the files are pcap with nanosecond
// timestamps (magic a1b23c4d), which every tool that reads pcapng also reads.
#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include "sys/netns.h"
#include "telemetry/pcap_tap.h"
#include "telemetry/sink.h"

namespace rocelab::telemetry {

namespace {

using nlohmann::ordered_json;

// "node:port" made safe for a file name (names are [a-z0-9-] already; ':' is not).
std::string file_for(const std::string& node, const std::string& port) { return "capture-" + node + "-" + port + ".pcap"; }

struct Tap {
  std::string node, port, file;
  std::unique_ptr<PcapTap> pcap;
};

class CaptureRecorder final : public Recorder {
 public:
  CaptureRecorder(const Start& s) {
    std::vector<fabric::PortRef> ports;
    for (const std::string& want : s.scenario.capture.ports) {
      auto sel = s.testbed.select(want == "all" ? "" : want);
      if (!sel) {
        failure_ = sel.error().what;
        return;
      }
      for (const auto& p : *sel)
        if (std::find(ports.begin(), ports.end(), p) == ports.end()) ports.push_back(p);
    }
    for (const auto& p : ports)
      if (!open(s, p)) return;
    thread_ = std::thread([this] { loop(); });
  }
  ~CaptureRecorder() override { stop(); }

  void stop() override {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (auto& t : taps_) t.pcap->finish();
  }

  const std::string& failure() const { return failure_; }
  const std::vector<Tap>& taps() const { return taps_; }

 private:
  bool open(const Start& s, const fabric::PortRef& p) {
    const auto& node = s.testbed.nodes().at(p.node);
    Tap t{node.name, node.ports.at(p.port).name, file_for(node.name, node.ports.at(p.port).name), nullptr};
    const auto& c = s.scenario.capture;
    std::string why;
    auto in = sys::NetnsScope::enter(s.testbed.netns_fd(p.node), why);
    if (!in) return failure_ = t.node + ": " + why, false;
    t.pcap = PcapTap::open(t.port, s.run_dir + "/" + t.file, {uint32_t(c.snaplen.n), c.packets, c.size.n}, why);
    if (!t.pcap) return failure_ = t.node + ":" + why, false;
    taps_.push_back(std::move(t));
    return true;
  }

  void loop() {
    std::vector<pollfd> fds;
    for (auto& t : taps_) fds.push_back({t.pcap->fd(), POLLIN, 0});
    while (!stop_) {
      if (poll(fds.data(), fds.size(), 50) <= 0) continue;
      for (size_t i = 0; i < fds.size(); ++i)
        if (fds[i].revents & POLLIN)
          taps_[i].pcap->drain();
    }
  }

  std::vector<Tap> taps_;
  std::string failure_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

Sink capture_sink() {
  Sink k{"capture", "packets of the capture: ports, through libpcap, into capture-NODE-PORT.pcap", [](Collect& c) -> Status {
           auto* r = dynamic_cast<CaptureRecorder*>(c.recorder);
           if (!r) return ok();
           r->stop();
           if (!r->failure().empty()) return error(Errc::kEnvironment, "capture: " + r->failure());
           model::MetricValue m{model::MetricKind::kCounter, 0, {}};
           ordered_json files = ordered_json::array();
           for (const auto& t : r->taps()) {
             const PcapTap& p = *t.pcap;
             m.samples.push_back({{{"node", t.node}, {"port", t.port}}, double(p.packets())});
             files.push_back({{"file", t.file}, {"packets", p.packets()}, {"full", p.full()}, {"kernel_drops", p.kernel_drops()}});
             if (p.full())
               c.notes.push_back(fmt::format("capture of {}:{} stopped at {} packets (capture.packets / capture.size)",
                                             t.node, t.port, p.packets()));
             if (p.kernel_drops())
               c.notes.push_back(fmt::format("capture of {}:{} missed {} packets (the socket buffer overflowed): the "
                                             "file is not every packet", t.node, t.port, p.kernel_drops()));
           }
           c.metrics["captured_packets"] = std::move(m);
           c.record["files"] = std::move(files);
           return ok();
         }};
  k.start = [](const Start& s) -> std::unique_ptr<Recorder> {
    if (s.scenario.capture.ports.empty() || s.run_dir.empty()) return nullptr;
    return std::make_unique<CaptureRecorder>(s);
  };
  return k;
}

}  // namespace rocelab::telemetry
