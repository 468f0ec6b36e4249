// `port_counters`: every port's counters per priority at the end of the run, as counter
// metrics (only pairs that counted anything) and lossless_drops.
#include "telemetry/sink.h"

namespace rocelab::telemetry {

namespace {

using model::MetricKind;
using model::MetricValue;
using model::Sample;

void add_port_metrics(model::MetricSet& m, const std::vector<fabric::PortStats>& ports, uint8_t lossless_mask) {
  const char* names[] = {"tx_packets", "tx_bytes", "rx_packets", "rx_bytes", "ecn_marked",
                         "drops", "shaper_tx_bytes", "pfc_tx", "pfc_rx", "pfc_xoff_tx", "pfc_xon_tx",
                         "pfc_xoff_rx", "pfc_xon_rx", "pfc_refresh_tx", "corrupted"};
  for (const char* n : names) m[n] = MetricValue{MetricKind::kCounter, 0, {}};
  m["queue_max"] = MetricValue{MetricKind::kSeries, 0, {}};
  m["pfc_overshoot"] = MetricValue{MetricKind::kSeries, 0, {}};
  m["pfc_overshoot_max"] = MetricValue{MetricKind::kSeries, 0, {}};
  for (const char* n : {"pfc_xon_late", "pfc_xon_late_max", "pfc_refill", "pfc_refill_max", "pfc_resume_lag",
                        "pfc_resume_lag_max"})
    m[n] = MetricValue{MetricKind::kSeries, 0, {}};
  double lossless_drops = 0;
  for (const auto& p : ports)
    for (uint32_t prio = 0; prio < RL_NUM_PRIO; ++prio) {
      const fabric::PrioStats& s = p.prio[prio];
      std::map<std::string, std::string> labels{{"node", p.node}, {"port", p.port}, {"prio", std::to_string(prio)}};
      auto add = [&](const char* name, uint64_t v) {
        if (v) m[name].samples.push_back(Sample{labels, static_cast<double>(v)});
      };
      add("tx_packets", s.c.tx_packets);
      add("tx_bytes", s.c.tx_bytes);
      add("rx_packets", s.c.rx_packets);
      add("rx_bytes", s.c.rx_bytes);
      add("ecn_marked", s.c.ecn_marked);
      add("shaper_tx_bytes", s.shaper_bytes);
      add("pfc_tx", s.c.pfc_tx);
      add("pfc_rx", s.c.pfc_rx);
      add("pfc_xoff_tx", s.c.pfc_tx - s.c.pfc_xon_tx);
      add("pfc_xon_tx", s.c.pfc_xon_tx);
      add("pfc_xoff_rx", s.c.pfc_rx - s.c.pfc_xon_rx);
      add("pfc_xon_rx", s.c.pfc_xon_rx);
      add("pfc_refresh_tx", s.c.pfc_refresh_tx);
      add("corrupted", s.c.corrupted);
      add("queue_max", s.c.depth_max);
      if (s.c.pg_episodes) {
        m["pfc_overshoot"].samples.push_back(Sample{labels, double(s.c.pg_overshoot_sum) / double(s.c.pg_episodes)});
        m["pfc_overshoot_max"].samples.push_back(Sample{labels, double(s.c.pg_overshoot_max)});
      }
      if (s.c.pg_xons) {
        m["pfc_xon_late"].samples.push_back(Sample{labels, double(s.c.xon_late_sum) / double(s.c.pg_xons)});
        m["pfc_xon_late_max"].samples.push_back(Sample{labels, double(s.c.xon_late_max)});
      }
      if (s.c.pg_refills) {
        m["pfc_refill"].samples.push_back(Sample{labels, double(s.c.pg_refill_sum) / double(s.c.pg_refills)});
        m["pfc_refill_max"].samples.push_back(Sample{labels, double(s.c.pg_refill_max)});
      }
      if (s.c.pg_refills_timed) {
        m["pfc_resume_lag"].samples.push_back(
            Sample{labels, double(s.c.resume_lag_sum_ns) / double(s.c.pg_refills_timed) / 1e9});
        m["pfc_resume_lag_max"].samples.push_back(Sample{labels, double(s.c.resume_lag_max_ns) / 1e9});
      }
      for (size_t r = 0; r < size_t(RL_DROP__USED); ++r) {
        if (!s.c.drops[r]) continue;
        auto l = labels;
        l["reason"] = rl_drop_names[r];
        m["drops"].samples.push_back(Sample{l, static_cast<double>(s.c.drops[r])});
        // An injected loss is the wire's, and the watchdog's drops are its chosen action, not
        // a broken lossless guarantee (counted apart: pfcwd_tx_dropped, pfcwd_rx_dropped).
        if ((lossless_mask >> prio) & 1 && r != RL_DROP_FAULT && r != RL_DROP_PFCWD && r != RL_DROP_PFCWD_RX)
          lossless_drops += static_cast<double>(s.c.drops[r]);
      }
    }
  m["lossless_drops"] = MetricValue{MetricKind::kScalar, lossless_drops, {}};
}

}  // namespace

Sink port_counters_sink() {
  return {"port_counters", "every port's counters per priority at the end of the run", [](Collect& c) -> Status {
            auto stats = c.testbed.counters({});
            if (!stats) return error(Errc::kTestbedFault, "counters could not be read: " + stats.error().what);
            add_port_metrics(c.metrics, *stats, c.scenario.qos.lossless_mask);
            c.record = {{"ports", stats->size()}};
            return ok();
          }};
}

}  // namespace rocelab::telemetry
