# Sourced by scripts/test.sh and .ci/run: the retry log's lines in three kinds, one definition.
# - the machine's: the stall's reason names what held the machine (another program's stretch
#   on a CPU, the hypervisor's steal, the platform's own kernel thread) overlapping it;
# - the emulator's: a guest booted again for TCG's known code-patching fault ("Oops: int3"),
#   qemu's, not the guest's software nor this machine's load;
# - ours: the rest, which the budget counts (a monitor that cries wolf or a fault of ours).
# UNJUDGED lines (invalid at D and 2 x D) are counted apart by the callers.
retry_machine='meanwhile (another program held|the hypervisor took|the kernel.s own thread)'
retry_emulator='kernel: Oops: int3'
# retry_count KIND LOG: prints how many of LOG's retries are of KIND (ours|machine|emulator).
retry_count() {
  local judged
  judged=$(grep -v '^UNJUDGED' "$2" || true)
  [ -n "$judged" ] || { echo 0; return; }
  case "$1" in
    machine) grep -cE "$retry_machine" <<<"$judged" || true ;;
    emulator) grep -vE "$retry_machine" <<<"$judged" | grep -cE "$retry_emulator" || true ;;
    ours) grep -vE "$retry_machine|$retry_emulator" <<<"$judged" | grep -c . || true ;;
  esac
}
