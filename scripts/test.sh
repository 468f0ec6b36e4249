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
# The kernel's log before and after (issue 48): the suite must leave no RT throttling of the
# PFC agent's loop and no netlink request with an attribute the kernel had to take as it
# could (both silent otherwise). Where dmesg cannot be read (not root), said and not checked.
# Lines are told apart by their timestamps (the ring buffer may wrap meanwhile).
kernel_log() {
  dmesg 2>/dev/null | awk -v after="$1" '{ t = $0; sub(/^\[ */, "", t); sub(/\].*/, "", t) }
    t + 0 > after + 0 && /sched: RT throttling activated|netlink: .rocelab.:/' || true
}
if dmesg >/dev/null 2>&1; then
  log_before=$(dmesg | tail -n 1 | sed -E 's/^\[ *([0-9.]+)\].*/\1/')
  case "$log_before" in ''|*[!0-9.]*) log_before=0 ;; esac
else
  log_before=-1
fi
rc=0
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$(nproc)" "$@") || rc=$?
if [ "$log_before" != -1 ]; then
  new_lines=$(kernel_log "$log_before")
  if [ -n "$new_lines" ]; then
    echo "the kernel logged during the suite (RT throttling of the PFC loop, or a netlink request it had to fix):" >&2
    echo "$new_lines" | sed 's/^/  /' >&2
    rc=1
  else
    echo "kernel log: no RT throttling and no netlink warning about rocelab's requests during the suite"
  fi
else
  echo "kernel log: not readable here (dmesg), not checked"
fi
# A retry whose reason names what held the machine, or the emulator's known fault, is counted
# apart (scripts/retry-count.sh); the rest count against the budget below.
. scripts/retry-count.sh
retried=$(retry_count ours "$ROCELAB_RETRY_LOG")
evidenced=$(retry_count machine "$ROCELAB_RETRY_LOG")
emulated=$(retry_count emulator "$ROCELAB_RETRY_LOG")
unjudged=$(grep -c '^UNJUDGED' "$ROCELAB_RETRY_LOG" || true)
echo "retries: $retried; $evidenced the machine's (another program, the kernel's own thread or the hypervisor held a CPU through the stall);" \
  "$emulated the emulator's (a guest booted again for TCG's 'Oops: int3');" \
  "not judged (invalid at D and 2 x D: the machine did not keep up): $unjudged"
sed 's/^/  /' "$ROCELAB_RETRY_LOG"
# A test the machine could not judge is skipped, not passed: past three, this suite judged
# too little of rocelab to call it green. Likewise past three retries with no evidence of
# the machine's (issue 48's budget): a suite that needed more second runs at 2 x D, none
# beside another program or steal, measured a monitor that cries wolf or a fault of ours,
# to be looked at, not passed.
if [ "$unjudged" -gt 3 ] && [ "$rc" = 0 ]; then
  echo "more than three tests could not be judged on this machine (steal or load): not a pass; run it on a quieter one" >&2
  rc=1
fi
if [ "$retried" -gt "${ROCELAB_RETRY_BUDGET:-3}" ] && [ "$rc" = 0 ]; then
  echo "$retried retries, past the budget of ${ROCELAB_RETRY_BUDGET:-3}: the runs above were invalid at their D (read why); not a pass" >&2
  rc=1
fi
exit "$rc"
