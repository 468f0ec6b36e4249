#!/usr/bin/python3
"""Built-in engine goodput against raw UDP on the same path, on one core, in one run, as a
ratio (issue 6: target >= 70 %).

Path: h1 - h2, one veth, the port programs and qdiscs attached, 100 Gbit/s at D = 1 so the
CPU is the limit. Each round runs build/bench/engine_goodput, which measures raw UDP
(sendmmsg/recvmmsg, 32 per batch, datagrams the size of a RoCE WRITE MIDDLE packet) and
then the engine's RDMA WRITE (64 KiB messages, MTU 1024, DCQCN off) for SECONDS each, all
in one thread pinned to CPU 0. Rounds alternate on one fabric; the median ratio is reported.

Usage (root):  bench/engine_goodput.py [--rocelab build/rocelab] [--rounds 3] [--seconds 3]
Exit 77 (skipped) when not root.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rocelab", default=os.path.join(HERE, "..", "build", "rocelab"))
    ap.add_argument("--tool", default=os.path.join(HERE, "..", "build", "bench", "engine_goodput"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("bench: needs root (network namespaces); skipped", file=sys.stderr)
        return 77
    name = f"eg{os.getpid() % 100000}"
    tmp = tempfile.mkdtemp(prefix="rocelab-bench-")
    path = os.path.join(tmp, "pair.yaml")
    with open(path, "w") as f:
        f.write(f"name: {name}\nscale: 1\ndefaults: {{rate: 100G}}\n"
                "nodes:\n  - {name: h1, kind: host}\n  - {name: h2, kind: host}\nlinks:\n  - {endpoints: [h1, h2]}\n")
    up = subprocess.run([a.rocelab, "up", path], capture_output=True, text=True)
    if up.returncode != 0:
        sys.exit(f"bench: rocelab up failed: {up.stderr.strip()}")
    rows = []
    try:
        for i in range(a.rounds):
            r = subprocess.run([a.tool, path, "h1", "h2", str(a.seconds)], capture_output=True, text=True,
                               timeout=a.seconds * 4 + 60)
            if r.returncode != 0:
                sys.exit(f"bench: engine_goodput failed: {r.stderr.strip()}")
            row = json.loads(r.stdout)
            rows.append(row)
            print(f"round {i + 1}: raw UDP {row['raw_udp_gbps']:.3f} Gb/s, engine {row['engine_gbps']:.3f} Gb/s, "
                  f"ratio {row['ratio']:.3f} (retransmitted {row['retransmitted']})", file=sys.stderr)
    finally:
        subprocess.run([a.rocelab, "down", name], capture_output=True)
        subprocess.run(["rm", "-rf", tmp])
    ratio = statistics.median(r["ratio"] for r in rows)
    print(json.dumps({"bench": "engine_goodput", "rounds": len(rows), "datagram_bytes": rows[0]["datagram_bytes"],
                      "raw_udp_gbps": [r["raw_udp_gbps"] for r in rows],
                      "engine_gbps": [r["engine_gbps"] for r in rows], "ratio_median": ratio, "target": 0.7}))
    return 0


if __name__ == "__main__":
    import machine  # bench/machine.py: the machine these figures are of
    machine.announce()
    sys.exit(main())
