// `loss`: each data packet leaving the target port is lost with `probability`, drawn at the
// port's egress before it takes any buffer (drop reason fault_loss); PFC frames never are.
#include "fault/registry.h"

namespace rocelab::fault {

Kind loss_kind() {
  return per_packet_kind("loss", "seeded per-packet loss on a port's egress (probability)",
                         &fabric::Testbed::set_loss, 0x6c6f7373ull);
}

}  // namespace rocelab::fault
