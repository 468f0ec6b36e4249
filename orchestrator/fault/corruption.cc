// `corruption`: each RoCEv2 packet leaving the target port gets one bit flipped with
// `probability`, after it was queued (on the link); the receiver's ICRC check drops it
// (bad_icrc) and RC goes back N. The UDP checksum is kept valid: only the ICRC finds it.
#include "fault/registry.h"

namespace rocelab::fault {

Kind corruption_kind() {
  return per_packet_kind("corruption", "seeded bit flips in RoCEv2 packets leaving a port (probability); the ICRC drops them",
                         &fabric::Testbed::set_corruption, 0x636f7272ull);
}

}  // namespace rocelab::fault
