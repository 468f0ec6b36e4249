// `pause_storm` (FAULTS.md, sonic-mgmt's pfc_gen.py): a host NIC or a switch port sends PFC
// XOFF for `priority` (or a class-enable `vector`; default: every PFC priority of the
// fabric) with pause time `quanta` (default 65535), `frame_rate` frames per physical second
// (default two per pause time at the port's rate, as the snappi generator paces), for
// `duration` or `count` frames. Its peer stops sending those priorities, its buffers fill
// and PFC spreads upstream; the watchdog's business. Ending it stops the frames only.
#include "fault/registry.h"

namespace rocelab::fault {

namespace {

uint8_t storm_vector(const model::Fault& f, const model::Scenario* s) {
  if (f.vector) return uint8_t(*f.vector);
  if (f.priority) return uint8_t(1u << *f.priority);
  return s ? s->qos.pfc_mask : 0;
}

// A storm of `count` frames lasts count / frame_rate; with the default rate the length
// depends on the port's rate, so the storm ends itself after its frames and the fault's
// piece runs on to `duration` (or the end of the run).
std::vector<Piece> storm_pieces(const model::Fault& f) {
  if (f.count && f.frame_rate && !f.duration)
    return {{model::Duration{0}, model::Duration{int64_t(double(*f.count) / *f.frame_rate * 1e9)}}};
  return {{model::Duration{0}, f.duration}};
}

}  // namespace

Kind pause_storm_kind() {
  Kind k = port_kind(
      "pause_storm",
      "a port sends PFC XOFF for priority (or vector) with quanta (65535), frame_rate per second (two per pause time), "
      "for duration or count frames (NODE:PORT)",
      [](fabric::Testbed& t, const fabric::PortRef& p, const Start& s) -> Result<fabric::Change> {
        const uint8_t vector = storm_vector(s.fault, nullptr);
        if (!vector) return error(Errc::kBadInput, "a pause_storm needs priority or vector here");
        return t.pause_storm(p, vector, uint16_t(s.fault.quanta.value_or(65535)), s.fault.frame_rate.value_or(0),
                             s.fault.count ? uint64_t(*s.fault.count) : 0);
      });
  k.takes = {"priority", "vector", "quanta", "frame_rate", "count"};
  k.pieces = storm_pieces;
  also_validate(k, [](const model::Fault& f, const model::Scenario& s) {
    std::vector<std::string> out;
    if (f.priority && f.vector) out.push_back("a pause_storm takes priority or vector, not both");
    else if (!storm_vector(f, &s))
      out.push_back("a pause_storm names no priority: give priority (0-7) or vector, or give the fabric a PFC priority");
    if (f.quanta && *f.quanta == 0 && !f.frame_rate)
      out.push_back("a pause_storm of quanta 0 (XON) needs frame_rate: its default is two per pause time");
    return out;
  });
  return k;
}

}  // namespace rocelab::fault
