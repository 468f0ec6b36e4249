#!/usr/bin/python3
"""How bring-up and teardown grow with the fabric: fat-trees of increasing k, lossless (the
default roce-lossless profile: every port's HTB, queues and programs), up and down, with the
per-port up time as the ratio against the smallest k's in the same run (issue 22, done-when
1: within 1.5x at k = 16 of k = 4's). Memory per namespace comes from MemAvailable before
and after each up (the kernel's share: namespaces, veths, qdiscs, routes, maps).

The kernel frees a namespace after `down` returns (its cleanup_net work runs later and holds
RTNL), so each up waits SETTLE seconds first: an up never pays for the last one's teardown.

Usage (root):  bench/fabric_scale.py [--rocelab build/rocelab] [--k 4 8 12] [--settle 15]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rocelab", default=os.path.join(HERE, "..", "build", "rocelab"))
    ap.add_argument("--k", type=int, nargs="+", default=[4, 8, 12])
    ap.add_argument("--settle", type=float, default=15.0, help="seconds to wait before each up")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("fabric_scale: needs root (makes network namespaces)", file=sys.stderr)
        sys.exit(77)
    rocelab = os.path.abspath(args.rocelab)
    tmp = tempfile.mkdtemp(prefix="rocelab-scale-")
    rows = []
    name = ""
    try:
        for k in args.k:
            name = f"bs{k}x{os.getpid() % 10000}"
            path = os.path.join(tmp, f"ft{k}.yaml")
            with open(path, "w") as f:
                f.write(f"name: {name}\nscale: 1000\nfabric: {{type: fat-tree, k: {k}}}\n")
            doc = json.loads(subprocess.run([rocelab, "validate", "--resolved", "-j", path], capture_output=True,
                                            text=True, check=True).stdout)
            nodes = doc["derived"]["nodes"]
            ports = sum(len(d["interfaces"]) for d in nodes.values())
            time.sleep(args.settle)
            mem0 = mem_available()
            t0 = time.monotonic()
            r = subprocess.run([rocelab, "up", path], capture_output=True, text=True)
            t_up = time.monotonic() - t0
            if r.returncode != 0:
                sys.exit(f"fabric_scale: up of k = {k} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
            mem1 = mem_available()
            routes = int(m.group(1)) if (m := re.search(r"(\d+) routes", r.stdout + r.stderr)) else 0
            t0 = time.monotonic()
            subprocess.run([rocelab, "down", name], capture_output=True, text=True, check=True)
            t_down = time.monotonic() - t0
            row = {"k": k, "namespaces": len(nodes), "ports": ports, "routes": routes, "up_s": round(t_up, 3),
                   "down_s": round(t_down, 3), "up_ms_per_port": round(t_up * 1e3 / ports, 3),
                   "mib_per_namespace": round((mem0 - mem1) / len(nodes) / 2**20, 2)}
            rows.append(row)
            print(f"  k = {k:2d}: {len(nodes):5d} namespaces, {ports:5d} ports, up {t_up:7.2f} s "
                  f"({row['up_ms_per_port']:.2f} ms a port), down {t_down:5.2f} s, "
                  f"{row['mib_per_namespace']:.2f} MiB a namespace", flush=True)
            name = ""
    finally:
        if name:
            subprocess.run([rocelab, "down", name], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    base = rows[0]["up_ms_per_port"]
    print(f"\nfat-tree bring-up, lossless, per port against k = {rows[0]['k']} in the same run:")
    for r in rows:
        print(f"  k = {r['k']:2d}  {r['up_ms_per_port'] / base:5.2f}x  (target <= 1.5x at k = 16)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bench": "fabric_scale", "rows": rows}, f, indent=1)


if __name__ == "__main__":
    import machine  # bench/machine.py: the machine these figures are of
    machine.announce()
    main()
