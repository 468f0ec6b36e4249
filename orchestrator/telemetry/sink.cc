#include "telemetry/sink.h"

namespace rocelab::telemetry {

const std::vector<Sink>& sinks() {
  // One line per sink; the agent's reads what the counters' found.
  static const std::vector<Sink> s = {
      port_counters_sink(),
      agent_sink(),
  };
  return s;
}

const Sink* find(std::string_view type) {
  for (const Sink& s : sinks())
    if (s.type == type) return &s;
  return nullptr;
}

}  // namespace rocelab::telemetry
