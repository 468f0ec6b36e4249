#!/usr/bin/env python3
"""Runs one reference scenario with `rocelab run` and passes when its assertions do.

Usage: ROCELAB=path/to/rocelab run_scenario.py SCENARIO. Exit 77 (ctest: skipped) when the
scenario needs what this machine lacks (rocelab exit 4 with the reason printed). An invalid
run (exit 2: the machine did not keep up) is retried once at twice the scenario's time scale
D (DESIGN.md §3: half the emulated rates) before the test fails; nothing else is retried (a
testbed fault, exit 5, is a defect). Each retry is appended to $ROCELAB_RETRY_LOG (the end
of scripts/test.sh counts them) and recorded in the retry's junit.xml. Invalid again at 2 x D,
the scenario could not be judged here: exit 77, logged as UNJUDGED (retries.py).
"""
import json
import os

import retries  # tests/integration/retries.py, beside this script
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


def reason_of(run_dir):
    try:
        with open(os.path.join(run_dir, "results.json")) as f:
            return json.load(f).get("reason", "")
    except (OSError, ValueError):
        return ""


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
            why = reason_of(os.path.join(out, "run")) or "invalid run"
            print(f"invalid run (the machine did not keep up: {why}): retrying once at D = {d:g}", flush=True)
            retries.record(f"scenario {os.path.basename(scenario)}", why)
            rc = run_once(rocelab, scenario, os.path.join(out, "retry"), ["--scale", f"{d:g}", "--retry-of", why])
            if rc == 2:
                why = reason_of(os.path.join(out, "retry")) or "invalid run"
                retries.unjudged(f"scenario {os.path.basename(scenario)}", why)
                print(f"skipped: invalid at D = {d / 2:g} and again at D = {d:g}, the scenario could not be judged on "
                      f"this machine ({why})")
                return 77
        if rc == 4 and os.geteuid() != 0:
            print(f"skipped: {scenario} needs root or a capability this machine lacks")
            return 77
        return rc
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
