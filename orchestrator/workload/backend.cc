#include "workload/backend.h"

namespace rocelab::workload {

const Registry<BackendKind>& backends() {
  // One line per backend.
  static const Registry<BackendKind> b({
      builtin_backend(),
      rxe_backend(),
  });
  return b;
}

}  // namespace rocelab::workload
