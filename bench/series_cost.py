#!/usr/bin/python3
"""What the time series costs a run (issue 20, done-when 4): the same incast with
`telemetry.series` on and off, alternating, in one invocation.

Each round runs scenarios/incast-dcqcn.yaml (7:1 at 100G, D = 1000) twice: series off, then
on (the order alternates by round). Per run: bottleneck utilization and Jain's index (must
not move beyond the spread between runs), the run's whole CPU time (user + sys of rocelab
and its threads) and, with series on, the sampling thread's own CPU time (measured in the
thread, CLOCK_THREAD_CPUTIME_ID) against the traffic phase's wall time.

Usage (root):  bench/series_cost.py [--rocelab build/rocelab] [--rounds 3] [--scenario FILE]
Exit 77 (skipped) when not root.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def one_run(a, tmp, series, i):
    src = open(a.scenario).read()
    path = os.path.join(tmp, f"s{i}-{series}.yaml")
    with open(path, "w") as f:
        f.write(src + f"\ntelemetry: {{series: {series}}}\n")
    out = os.path.join(tmp, f"run{i}-{series}")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([a.rocelab, "run", "--no-report", "--instance", f"sc{os.getpid() % 10000}", "--out", out, path],
                       capture_output=True, text=True, timeout=900)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 1):
        sys.exit(f"bench: rocelab run exit {r.returncode}: {r.stderr.strip()[-400:]}")
    res = json.load(open(os.path.join(out, "results.json")))
    m = {k: v for k, v in res["metrics"].items()}
    util = min(s["value"] for s in m["bottleneck_utilization"])
    jain = min(s["value"] for s in m["jain_index"])
    traffic = next(p["seconds"] for p in res["phases"] if p["name"] == "traffic")
    cpu_series = 0.0
    for line in open(os.path.join(out, "events.jsonl")):
        e = json.loads(line)
        if e.get("event") == "collected" and e.get("sink") == "series":
            cpu_series = e["record"].get("cpu_seconds", 0.0)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"series": series, "utilization": util, "jain": jain, "traffic_s": traffic, "cpu_s": cpu,
            "sampler_cpu_s": cpu_series}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rocelab", default=os.path.join(HERE, "..", "build", "rocelab"))
    ap.add_argument("--scenario", default=os.path.join(HERE, "..", "scenarios", "incast-dcqcn.yaml"))
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("bench: needs root (network namespaces); skipped", file=sys.stderr)
        return 77
    tmp = tempfile.mkdtemp(prefix="rocelab-bench-")
    rows = []
    try:
        for i in range(a.rounds):
            for series in (("off", "on") if i % 2 == 0 else ("on", "off")):
                row = one_run(a, tmp, series, i)
                rows.append(row)
                print(f"round {i + 1} series {series}: utilization {row['utilization']:.4f}, jain {row['jain']:.4f}, "
                      f"run CPU {row['cpu_s']:.2f} s, sampler CPU {row['sampler_cpu_s']:.3f} s over "
                      f"{row['traffic_s']:.1f} s of traffic", file=sys.stderr)
    finally:
        subprocess.run(["rm", "-rf", tmp])
    on = [r for r in rows if r["series"] == "on"]
    off = [r for r in rows if r["series"] == "off"]
    med = lambda rs, k: statistics.median(r[k] for r in rs)
    spread = lambda rs, k: max(r[k] for r in rs) - min(r[k] for r in rs)
    print(json.dumps({
        "bench": "series_cost", "rounds": a.rounds,
        "utilization_on": med(on, "utilization"), "utilization_off": med(off, "utilization"),
        "utilization_spread_off": spread(off, "utilization"),
        "jain_on": med(on, "jain"), "jain_off": med(off, "jain"), "jain_spread_off": spread(off, "jain"),
        "run_cpu_ratio_on_off": med(on, "cpu_s") / med(off, "cpu_s"),
        "sampler_cpu_share_of_one_core": med(on, "sampler_cpu_s") / med(on, "traffic_s"),
    }, indent=1))
    return 0


if __name__ == "__main__":
    import machine  # bench/machine.py: the machine these figures are of
    machine.announce()
    sys.exit(main())
