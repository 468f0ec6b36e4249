#!/usr/bin/python3
"""Packet rate through a path of two switches with the port programs attached, against the
same path with the same qdiscs and no programs, in one run, as a ratio.

Path: h1 - sw1 - sw2 - h2, links at 100 Gbit/s emulated (D = 1), so the CPU, not the
shaper, is the limit. udp_blast sends 1024-byte datagrams with sendmmsg (batches of 32)
for SECONDS and the receiver counts what arrives. Rounds alternate the two setups on fresh
fabrics: with programs; then with the programs taken off the nodes' shared tc blocks (every
port's clsact hook still runs, empty); then with each port's clsact removed, no hook at all
(the ratio's baseline). HTB stays throughout.

Usage (root):  bench/dataplane_pps.py [--rocelab build/rocelab] [--rounds 3] [--seconds 3]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PID = os.getpid() % 100000


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd[:5])}... failed ({r.returncode}): {r.stderr.strip()[:400]}")
    return r


def measure(blast, name, dst, size, seconds):
    """Packets per second h1 -> h2 as the receiver counts them."""
    # Sender and receiver on their own cores: the sender's core also forwards the packets
    # through both switches (veth transmits synchronously), the receiver's drains them.
    recv = subprocess.Popen(["taskset", "-c", "1", blast, "recv", f"rl-{name}.h2", dst, str(seconds + 1.0)],
                            stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    send = run(["taskset", "-c", "0", blast, "send", f"rl-{name}.h1", dst, str(size), str(seconds)])
    out, _ = recv.communicate(timeout=seconds + 10)
    got = json.loads(out)["received"]
    return got / seconds, json.loads(send.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rocelab", default=os.path.join(HERE, "..", "build", "rocelab"))
    ap.add_argument("--blast", default=os.path.join(HERE, "..", "build", "bench", "udp_blast"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--settle", type=float, default=2.0, help="seconds after each up before measuring")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench: needs root (it makes network namespaces)", file=sys.stderr)
        sys.exit(77)
    rocelab, blast = os.path.abspath(args.rocelab), os.path.abspath(args.blast)
    detach = os.path.join(os.path.dirname(blast), "detach_programs")
    name = f"pps{PID}"
    tmp = tempfile.mkdtemp(prefix="rocelab-pps-")
    try:
        path = os.path.join(tmp, "path.yaml")
        with open(path, "w") as f:
            f.write(f"name: {name}\nscale: 1\ndefaults: {{rate: 100G}}\n"
                    "nodes:\n  - {name: h1, kind: host}\n  - {name: sw1, kind: switch}\n"
                    "  - {name: sw2, kind: switch}\n  - {name: h2, kind: host}\n"
                    "links:\n  - {endpoints: [h1, sw1]}\n  - {endpoints: [sw1, sw2]}\n  - {endpoints: [sw2, h2]}\n")
        doc = json.loads(run([rocelab, "validate", "--resolved", "-j", path]).stdout)
        nodes = doc["derived"]["nodes"]
        dst = nodes["h2"]["interfaces"][0]["address"].split("/")[0]
        ports = [(n, i["name"]) for n, d in nodes.items() for i in d["interfaces"]]
        with_p, hooks_p, without_p = [], [], []
        for r in range(args.rounds):
            run([rocelab, "up", path])
            # The kernel frees the last round's namespaces after its `down` returned: that
            # work would land on this arm alone, the first after every up.
            time.sleep(args.settle)
            pps, s = measure(blast, name, dst, args.size, args.seconds)
            with_p.append(pps)
            # Empty hooks: the programs off the nodes' shared blocks, every clsact kept.
            for node in nodes:
                run(["ip", "netns", "exec", f"rl-{name}.{node}", detach, "--filters"])
            pps1, _ = measure(blast, name, dst, args.size, args.seconds)
            hooks_p.append(pps1)
            # No hook at all: each port's clsact removed.
            for node in nodes:
                run(["ip", "netns", "exec", f"rl-{name}.{node}", detach] + [p for n, p in ports if n == node])
            pps0, s0 = measure(blast, name, dst, args.size, args.seconds)
            without_p.append(pps0)
            run([rocelab, "down", name])
            print(f"  round {r + 1}/{args.rounds}: with programs {pps / 1e3:.1f} k pps, empty hooks "
                  f"{pps1 / 1e3:.1f} k pps, no hook {pps0 / 1e3:.1f} k pps (sent {s['sent']} / {s0['sent']})", flush=True)
        a, h, b = statistics.median(with_p), statistics.median(hooks_p), statistics.median(without_p)
        print(f"\n{args.size}-byte UDP through 2 switches, median of {args.rounds}:")
        print(f"  HTB + port programs  {a / 1e3:8.1f} k pps  ({a * args.size * 8 / 1e9:.2f} Gbit/s payload)")
        print(f"  HTB, empty hooks     {h / 1e3:8.1f} k pps  (clsact without programs)")
        print(f"  HTB, no programs     {b / 1e3:8.1f} k pps  ({b * args.size * 8 / 1e9:.2f} Gbit/s payload)")
        print(f"  ratio {a / b:.2f}  (target >= 0.85; {a / h:.2f} against empty hooks)")
    finally:
        subprocess.run([rocelab, "down", name], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    import machine  # bench/machine.py: the machine these figures are of
    machine.announce()
    main()
