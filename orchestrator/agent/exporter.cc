#include "agent/exporter.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <time.h>

#include "sys/netns.h"

namespace rocelab::agent {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

// One family, its samples added as they are read.
struct Family {
  MetricFamily f;
  Family(const char* name, const char* help, MetricType t) { f = {name, help, t, {}}; }
  void add(std::vector<ClientMetric::Label> labels, double v) {
    ClientMetric m;
    m.label = std::move(labels);
    if (f.type == MetricType::Counter) m.counter.value = v;
    else m.gauge.value = v;
    f.metric.push_back(std::move(m));
  }
};

}  // namespace

struct Exporter::Impl final : prometheus::Collectable {
  std::vector<ExportedPort> ports;
  const bpf::FabricMaps* maps = nullptr;
  double scale = 1;
  mutable std::mutex mu;  // guards stormed (the agent's loop writes, scrapes read)
  std::map<std::pair<uint32_t, uint32_t>, bool> stormed;

  std::vector<MetricFamily> Collect() const override {
    Family pfc_tx("sai_port_stat_pfc_tx_pkts", "PFC frames a port sent naming the priority (SAI_PORT_STAT_PFC_x_TX_PKTS)",
                  MetricType::Counter),
        pfc_rx("sai_port_stat_pfc_rx_pkts", "PFC frames a port received naming the priority (SAI_PORT_STAT_PFC_x_RX_PKTS)",
               MetricType::Counter),
        pause_us("sai_port_stat_pfc_rx_pause_duration_us",
                 "time the priority spent paused by received PFC, physical us (SAI_PORT_STAT_PFC_x_RX_PAUSE_DURATION_US)",
                 MetricType::Counter),
        occ("sai_queue_stat_curr_occupancy_bytes", "bytes the queue holds now (SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES)",
            MetricType::Gauge),
        wm("sai_queue_stat_watermark_bytes", "the most the queue held (SAI_QUEUE_STAT_WATERMARK_BYTES)", MetricType::Gauge),
        pkts("sai_queue_stat_packets", "packets the queue admitted (SAI_QUEUE_STAT_PACKETS)", MetricType::Counter),
        bytes("sai_queue_stat_bytes", "bytes the queue admitted (SAI_QUEUE_STAT_BYTES)", MetricType::Counter),
        dropped("sai_queue_stat_dropped_packets", "packets dropped at the queue, every reason (SAI_QUEUE_STAT_DROPPED_PACKETS)",
                MetricType::Counter),
        ecn("sai_queue_stat_wred_ecn_marked_packets", "packets CE-marked (SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS)",
            MetricType::Counter),
        reason("rocelab_queue_dropped_packets", "packets dropped at the queue, by reason (rocelab help metrics: drops)",
               MetricType::Counter),
        wd("pfc_wd_status", "the PFC watchdog on the queue: 1 stormed, 0 operational (SONiC PFC_WD_STATUS)", MetricType::Gauge),
        ib_tx_b("node_infiniband_port_data_transmitted_bytes_total", "bytes the host NIC sent (node_exporter's name)",
                MetricType::Counter),
        ib_rx_b("node_infiniband_port_data_received_bytes_total", "bytes the host NIC received (node_exporter's name)",
                MetricType::Counter),
        ib_tx_p("node_infiniband_port_packets_transmitted_total", "packets the host NIC sent (node_exporter's name)",
                MetricType::Counter),
        ib_rx_p("node_infiniband_port_packets_received_total", "packets the host NIC received (node_exporter's name)",
                MetricType::Counter);
    std::map<std::pair<uint32_t, uint32_t>, bool> storm;
    {
      std::lock_guard lk(mu);
      storm = stormed;
    }
    const uint64_t now = now_ns();
    std::string why;
    for (const auto& p : ports) {
      uint64_t tx_b = 0, rx_b = 0, tx_p = 0, rx_p = 0;
      std::optional<sys::NetnsScope> in;
      for (uint32_t q = 0; q < RL_NUM_PRIO; ++q) {
        const rl_counters c = maps->counters().read(p.slot, q);
        tx_b += c.tx_bytes, rx_b += c.rx_bytes, tx_p += c.tx_packets, rx_p += c.rx_packets;
        if (!(c.tx_packets || c.rx_packets || c.pfc_tx || c.pfc_rx)) continue;  // a queue nothing used
        const std::vector<ClientMetric::Label> pl{{"node", p.node}, {"port", p.port}, {"priority", std::to_string(q)}};
        const std::vector<ClientMetric::Label> ql{{"node", p.node}, {"port", p.port}, {"queue", std::to_string(q)}};
        pfc_tx.add(pl, double(c.pfc_tx));
        pfc_rx.add(pl, double(c.pfc_rx));
        pause_us.add(pl, double(maps->counters().paused_ns(p.slot, q, now)) / 1e3 / scale);
        uint64_t depth = 0;
        if (c.depth_after) {  // exact, by the egress program's probe in the node's namespace
          if (!in)
            if (auto s = sys::NetnsScope::enter(p.netns, why)) in.emplace(std::move(*s));
          if (in)
            if (auto d = bpf::probe_depth(maps->egress_program(), p.ifindex, q, why)) depth = *d;
        }
        occ.add(ql, double(depth));
        wm.add(ql, double(c.depth_max));
        pkts.add(ql, double(c.tx_packets));
        bytes.add(ql, double(c.tx_bytes));
        ecn.add(ql, double(c.ecn_marked));
        uint64_t all = 0;
        for (size_t r = 0; r < size_t(RL_DROP__USED); ++r) {
          all += c.drops[r];
          if (c.drops[r]) {
            auto l = ql;
            l.push_back({"reason", rl_drop_names[r]});
            reason.add(l, double(c.drops[r]));
          }
        }
        dropped.add(ql, double(all));
        if (auto it = storm.find({p.slot, q}); it != storm.end()) wd.add(ql, it->second ? 1 : 0);
      }
      if (p.host) {
        const std::vector<ClientMetric::Label> ib{{"device", p.node + "_" + p.port}, {"port", std::to_string(p.index)}};
        ib_tx_b.add(ib, double(tx_b));
        ib_rx_b.add(ib, double(rx_b));
        ib_tx_p.add(ib, double(tx_p));
        ib_rx_p.add(ib, double(rx_p));
      }
    }
    std::vector<MetricFamily> out;
    for (Family* f : {&pfc_tx, &pfc_rx, &pause_us, &occ, &wm, &pkts, &bytes, &dropped, &ecn, &reason, &wd, &ib_tx_b,
                      &ib_rx_b, &ib_tx_p, &ib_rx_p})
      if (!f->f.metric.empty()) out.push_back(std::move(f->f));
    return out;
  }
};

struct Exporter::Server {
  std::unique_ptr<prometheus::Exposer> exposer;
};

std::unique_ptr<Exporter> Exporter::start(uint16_t port, std::vector<ExportedPort> ports, const bpf::FabricMaps& maps,
                                          double scale, std::string& why) {
  std::unique_ptr<Exporter> e(new Exporter);
  e->impl_ = std::make_shared<Impl>();
  e->impl_->ports = std::move(ports);
  e->impl_->maps = &maps;
  e->impl_->scale = scale;
  e->server_ = std::make_unique<Server>();
  try {
    // Loopback only: the metrics are the fabric's, never offered to the machine's network.
    e->server_->exposer = std::make_unique<prometheus::Exposer>("127.0.0.1:" + std::to_string(port), 1);
  } catch (const std::exception& ex) {
    why = "metrics port " + std::to_string(port) + ": cannot listen on 127.0.0.1 (" + ex.what() + ")";
    return nullptr;
  }
  e->server_->exposer->RegisterCollectable(e->impl_);
  return e;
}

Exporter::~Exporter() {
  if (server_) server_->exposer.reset();  // no scrape runs past the maps it reads
}

void Exporter::set_stormed(uint32_t slot, uint32_t prio, bool stormed) {
  std::lock_guard lk(impl_->mu);
  impl_->stormed[{slot, prio}] = stormed;
}

}  // namespace rocelab::agent
