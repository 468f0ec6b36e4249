#!/usr/bin/python3
"""The built-in engine on one thread against two (ROCELAB_ENGINE_THREADS), in one run, as a
ratio: two independent write_bw pairs (host1 -> host2, host3 -> host4) through one switch at
100 Gbit/s and D = 20 (5 Gbit/s emulated a link: more than the machine carries, so the
machine sets the pace), DCQCN off. The figure is what both pairs together carried, all bytes
over the time until the last one finished, on the wall clock; rounds alternate 1 and 2
threads on fresh fabrics.

Usage (root):  bench/engine_threads.py [--rocelab build/rocelab] [--rounds 3] [--megabytes 200]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
D = 20

SCENARIO = """name: {name}
seed: 1
scale: {d}
defaults: {{rate: 100G, mtu: 4200}}
nodes:
  - {{name: sw, kind: switch}}
  - {{name: host1, kind: host}}
  - {{name: host2, kind: host}}
  - {{name: host3, kind: host}}
  - {{name: host4, kind: host}}
links:
  - {{endpoints: [host1, sw]}}
  - {{endpoints: [host2, sw]}}
  - {{endpoints: [host3, sw]}}
  - {{endpoints: [host4, sw]}}
qos: {{profile: roce-lossless}}
hosts: {{dcqcn: off}}
workloads:
  - {{name: a, type: write_bw, from: host1, to: host2, message: 1MB, iterations: {n}}}
  - {{name: b, type: write_bw, from: host3, to: host4, message: 1MB, iterations: {n}}}
"""


def carried(rocelab, path, out, threads):
    """Wall-clock Gbit/s of both pairs together, and the per-pair figures."""
    env = dict(os.environ, ROCELAB_ENGINE_THREADS=str(threads))
    r = subprocess.run([rocelab, "run", "--no-report", "--out", out, path], capture_output=True, text=True,
                       env=env, timeout=600)
    try:
        with open(os.path.join(out, "results.json")) as f:
            res = json.load(f)
        flows = res["workloads"]["flows"]
    except (OSError, KeyError, ValueError):
        sys.exit(f"bench: the run failed (exit {r.returncode}): {r.stderr.strip()[-600:]}")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    end = max(f["start_s"] + f["fct_s"] for f in flows) * D  # wall seconds
    start = min(f["start_s"] for f in flows) * D
    total = sum(f["bytes"] for f in flows) * 8 / (end - start) / 1e9
    return total, [f["goodput_bps"] / D / 1e9 for f in flows]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rocelab", default=os.path.join(HERE, "..", "build", "rocelab"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--megabytes", type=int, default=200, help="each pair's transfer")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("engine_threads: needs root (the bench makes network namespaces)", file=sys.stderr)
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="rocelab-threads-")
    try:
        path = os.path.join(tmp, "pairs.yaml")
        with open(path, "w") as f:
            f.write(SCENARIO.format(name=f"thr{os.getpid() % 100000}", d=D, n=args.megabytes))
        got = {1: [], 2: []}
        for i in range(args.rounds):
            for t in (1, 2):
                total, pairs = carried(args.rocelab, path, os.path.join(tmp, "run"), t)
                got[t].append(total)
                print(f"  round {i + 1}: {t} thread{'s' if t > 1 else ''}: {total:.2f} Gbit/s together "
                      f"(pairs {', '.join(f'{p:.2f}' for p in pairs)})", flush=True)
        one, two = statistics.median(got[1]), statistics.median(got[2])
        print(f"\ntwo write_bw pairs through one switch, D = {D}, median of {args.rounds}:")
        print(f"  1 engine thread     {one:.2f} Gbit/s (wall clock, both pairs)")
        print(f"  2 engine threads    {two:.2f} Gbit/s")
        print(f"  ratio {two / one:.2f}  (target >= 1.7)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    import machine  # bench/machine.py: the machine these figures are of
    machine.announce()
    main()
