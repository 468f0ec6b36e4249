#!/usr/bin/env python3
"""Runs one reference scenario with `rocelab run` and passes when its assertions do.

Usage: ROCELAB=path/to/rocelab run_scenario.py SCENARIO. Exit 77 (ctest: skipped) when the
scenario needs what this machine lacks (rocelab exit 4 with the reason printed). An invalid
run (exit 2: the machine did not keep up) is retried once at twice the scenario's time scale
D (DESIGN.md §3: half the emulated rates) before the test fails.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def scale_of(rocelab, scenario):
    r = subprocess.run([rocelab, "validate", "--resolved", "-j", scenario], capture_output=True, text=True, check=True)
    return float(json.loads(r.stdout)["scale"])


def rxe_elsewhere(rocelab, scenario):
    """Why this machine runs the scenario's real rxe hosts only in the VM image (or None)."""
    r = subprocess.run([rocelab, "validate", "--resolved", "-j", scenario], capture_output=True, text=True, check=True)
    if json.loads(r.stdout).get("hosts", {}).get("engine") != "rxe":
        return None
    release = os.uname().release
    major, minor = (int(x) for x in release.split(".")[:2])
    if (major, minor) >= (7, 1) or os.environ.get("ROCELAB_DEDICATED_MACHINE") == "1":
        return None
    return (f"kernel {release} runs rxe only in the init namespace: this scenario runs in the vm tier "
            "(rocelab run --vm), or here with ROCELAB_DEDICATED_MACHINE=1 on a machine of the testbed's own")


def run_once(rocelab, scenario, run_dir, extra):
    # Its own instance name: the user may have this scenario up, or another test runs it.
    instance = f"t{os.getpid()}"
    r = subprocess.run([rocelab, "run", "--instance", instance, "--out", run_dir, *extra, scenario], timeout=540)
    if r.returncode != 0 and os.path.exists(os.path.join(run_dir, "junit.xml")):
        with open(os.path.join(run_dir, "junit.xml")) as f:
            sys.stdout.write(f.read())
    return r.returncode


def main():
    scenario = sys.argv[1]
    rocelab = os.environ["ROCELAB"]
    why = rxe_elsewhere(rocelab, scenario)
    if why:
        print(f"skipped: {why}")
        return 77
    out = tempfile.mkdtemp(prefix="rocelab-scenario-")
    try:
        rc = run_once(rocelab, scenario, os.path.join(out, "run"), [])
        if rc == 2:
            d = 2 * scale_of(rocelab, scenario)
            print(f"invalid run (the machine did not keep up): retrying once at D = {d:g}", flush=True)
            rc = run_once(rocelab, scenario, os.path.join(out, "retry"), ["--scale", f"{d:g}"])
        if rc == 4 and os.geteuid() != 0:
            print(f"skipped: {scenario} needs root or a capability this machine lacks")
            return 77
        return rc
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
