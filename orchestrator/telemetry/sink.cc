#include "telemetry/sink.h"

namespace rocelab::telemetry {

const Registry<Sink>& sinks() {
  // One line per sink; the agent's reads what the counters' found.
  static const Registry<Sink> s({
      port_counters_sink(),
      agent_sink(),
      series_sink(),
      capture_sink(),
  });
  return s;
}

}  // namespace rocelab::telemetry
