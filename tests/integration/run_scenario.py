#!/usr/bin/env python3
"""Runs one reference scenario with `rocelab run` and passes when its assertions do.

Usage: ROCELAB=path/to/rocelab run_scenario.py SCENARIO. Exit 77 (ctest: skipped) when the
scenario needs what this machine lacks (rocelab exit 4 with the reason printed).
"""
import os
import shutil
import subprocess
import sys
import tempfile


def main():
    scenario = sys.argv[1]
    rocelab = os.environ["ROCELAB"]
    out = tempfile.mkdtemp(prefix="rocelab-scenario-")
    try:
        run_dir = os.path.join(out, "run")
        # Its own instance name: the user may have this scenario up, or another test runs it.
        instance = f"t{os.getpid()}"
        r = subprocess.run([rocelab, "run", "--instance", instance, "--out", run_dir, scenario], timeout=540)
        if r.returncode != 0 and os.path.exists(os.path.join(run_dir, "junit.xml")):
            with open(os.path.join(run_dir, "junit.xml")) as f:
                sys.stdout.write(f.read())
        if r.returncode == 4 and os.geteuid() != 0:
            print(f"skipped: {scenario} needs root or a capability this machine lacks")
            return 77
        return r.returncode
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
