"""The suite's retry log: every test that runs something a second time (only an invalid run,
exit 2, at 2 x D) says so here, so the end of scripts/test.sh and .ci/run can print how many
retries a green suite needed (the target is 0). A test whose run was invalid at 2 x D too
could not be judged on this machine (it neither passed nor failed): it says so here as
UNJUDGED, is skipped, and scripts/test.sh fails a suite that could not judge more than
three. The log is $ROCELAB_RETRY_LOG; without it a retry is only printed."""
import os
import sys
import time


def record(test, why, kind="RETRY"):
    line = f"{time.strftime('%H:%M:%S')} {test}: {' '.join(str(why).split())}"
    print(f"{kind} {line}", file=sys.stderr, flush=True)
    path = os.environ.get("ROCELAB_RETRY_LOG")
    if path:
        with open(path, "a") as f:
            f.write((f"{kind} " if kind != "RETRY" else "") + line + "\n")


def unjudged(test, why):
    """The run was invalid at D and at 2 x D: the machine did not keep up either time."""
    record(test, why, "UNJUDGED")
