#!/usr/bin/env bash
# Install what is missing, build, and run every test tier (unit, bpf, integration, vm).
# Tiers that need root skip with a reason when not run as root; CI runs as root.
# Extra arguments go to ctest, e.g. scripts/test.sh -L unit
# Every retry a test made (only an invalid run, exit 2, once at 2 x D; a guest reboot for
# the known TCG fault) is logged to $ROCELAB_RETRY_LOG and counted at the end: target 0.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
export ROCELAB_RETRY_LOG=${ROCELAB_RETRY_LOG:-$PWD/$BUILD_DIR/retries.log}
: > "$ROCELAB_RETRY_LOG"
rc=0
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$(nproc)" "$@") || rc=$?
retried=$(grep -vc '^UNJUDGED' "$ROCELAB_RETRY_LOG" || true)
unjudged=$(grep -c '^UNJUDGED' "$ROCELAB_RETRY_LOG" || true)
echo "retries: $retried; not judged (invalid at D and 2 x D: the machine did not keep up): $unjudged"
sed 's/^/  /' "$ROCELAB_RETRY_LOG"
# A test the machine could not judge is skipped, not passed: past three, this suite judged
# too little of rocelab to call it green.
if [ "$unjudged" -gt 3 ] && [ "$rc" = 0 ]; then
  echo "more than three tests could not be judged on this machine (steal or load): not a pass; run it on a quieter one" >&2
  rc=1
fi
exit "$rc"
