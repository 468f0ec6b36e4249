#include "fault/registry.h"

namespace rocelab::fault {

const Registry<Kind>& kinds() {
  // One line per kind.
  static const Registry<Kind> k({
      loss_kind(),
  });
  return k;
}

}  // namespace rocelab::fault
