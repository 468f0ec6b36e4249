"""The suite's retry log: every test that runs something a second time (only an invalid run,
exit 2, at 2 x D) says so here, so the end of scripts/test.sh and .ci/run can print how many
retries a green suite needed (the target is 0). The log is $ROCELAB_RETRY_LOG; without it a
retry is only printed."""
import os
import sys
import time


def record(test, why):
    line = f"{time.strftime('%H:%M:%S')} {test}: {' '.join(str(why).split())}"
    print(f"RETRY {line}", file=sys.stderr, flush=True)
    path = os.environ.get("ROCELAB_RETRY_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")
