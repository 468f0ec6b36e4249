#!/usr/bin/python3
"""Up/down speed of a fabric: rocelab (netlink) beside an iproute2 `ip -batch` script that
builds the same namespaces, links, addresses, neighbours and routes, and Mininet 2.3, in one
run, as ratios (machines are noisy). Not the same work: the script makes no qdiscs, tc
filters or BPF programs, which every rocelab port has (HTB, its classes, the port programs:
a third of rocelab's up is the verifier loading the egress program), so the up ratio is
rocelab's whole up against the plain topology's, not like for like.

The fabric: leaf-spine, 4 spines x 8 leaves x 4 hosts per leaf (44 namespaces, 64 links,
their addresses, permanent neighbours and every ECMP route). Each tool does CYCLES
back-to-back up/down cycles, rocelab and ip -batch interleaved; medians are reported.
Mininet runs inside a namespace this bench makes, so nothing touches the machine's own.

Usage (root):  bench/fabric_updown.py [--rocelab build/rocelab] [--cycles 5] [--no-mininet]
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
        sys.exit(f"bench: {' '.join(cmd[:4])}... failed ({r.returncode}): {r.stderr.strip()[:500]}")
    return r


def timed(fn):
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


class IpBatch:
    """The same fabric as an iproute2 script: one batch for namespaces and veth pairs (made
    straight into their namespaces), then one `ip -n NS -batch` per namespace."""

    def __init__(self, resolved, tmp, prefix):
        self.prefix = prefix
        self.tmp = tmp
        nodes = resolved["derived"]["nodes"]
        self.namespaces = [prefix + n for n in nodes]
        mac = {}
        for i, (node, d) in enumerate(nodes.items()):
            for j, itf in enumerate(d["interfaces"]):
                mac[f"{node}:{itf['name']}"] = f"02:42:{i >> 8:02x}:{i & 255:02x}:{j >> 8:02x}:{j & 255:02x}"
        root = [f"netns add {ns}" for ns in self.namespaces]
        made_here = set()
        for link in resolved["links"]:
            (a, ai), (b, bi) = (e.split(":") for e in link["endpoints"])
            made_here.add(f"{a}:{ai}")
            root.append(f"link add {ai} address {mac[a + ':' + ai]} mtu {link['mtu']} netns {prefix}{a} up "
                        f"type veth peer name {bi} address {mac[b + ':' + bi]} mtu {link['mtu']} netns {prefix}{b}")
        self.root = self.write("root.batch", root)
        self.per_ns = []
        self.counts = {"addresses": 0, "routes": 0, "neighbours": 0}
        loopback = {n["name"]: n["loopback"] for n in resolved["nodes"]}
        for node, d in nodes.items():
            lines = ["link set lo up", f"addr add {loopback[node]} dev lo"]
            for itf in d["interfaces"]:
                name = f"{node}:{itf['name']}"
                if name not in made_here:
                    lines.append(f"link set {itf['name']} up")
                lines.append(f"addr add {itf['address']} dev {itf['name']}")
                peer_addr = self.peer_address(itf["address"])
                lines.append(f"neigh add {peer_addr} lladdr {mac[itf['peer']]} dev {itf['name']} nud permanent")
            lines += [f"route add {r}" for r in d["routes"]]
            lines += [f"rule add from {r['from']} table {r['table']} pref {100 + i}" for i, r in enumerate(d.get("rules", []))]
            self.counts["addresses"] += len(d["interfaces"]) + 1
            self.counts["neighbours"] += len(d["interfaces"])
            self.counts["routes"] += len(d["routes"])
            self.per_ns.append((prefix + node, self.write(f"{node}.batch", lines)))
        self.down_file = self.write("down.batch", [f"netns del {ns}" for ns in self.namespaces])

    @staticmethod
    def peer_address(cidr):
        addr = cidr.split("/")[0]
        a, b, c, d = (int(x) for x in addr.split("."))
        return f"{a}.{b}.{c}.{d ^ 1}"

    def write(self, name, lines):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def up(self):
        run(["ip", "-batch", self.root])
        for ns, path in self.per_ns:
            run(["ip", "-n", ns, "-batch", path])

    def down(self):
        run(["ip", "-batch", self.down_file])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rocelab", default=os.path.join(HERE, "..", "build", "rocelab"))
    ap.add_argument("--cycles", type=int, default=5)
    ap.add_argument("--spines", type=int, default=4)
    ap.add_argument("--leaves", type=int, default=8)
    ap.add_argument("--hosts-per-leaf", type=int, default=4)
    ap.add_argument("--no-mininet", action="store_true", help="skip Mininet (it takes ~8 s a cycle)")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench: needs root (it makes network namespaces)", file=sys.stderr)
        sys.exit(77)  # ctest: skipped
    rocelab = os.path.abspath(args.rocelab)
    name = f"bench{PID}"
    tmp = tempfile.mkdtemp(prefix="rocelab-bench-")
    mn_ns = f"rl-{name}-mn.bench"
    try:
        scenario = os.path.join(tmp, "fabric.yaml")
        with open(scenario, "w") as f:
            f.write(f"name: {name}\nscale: 1000\nfabric: {{type: leaf-spine, spines: {args.spines}, "
                    f"leaves: {args.leaves}, hosts_per_leaf: {args.hosts_per_leaf}}}\n")
        resolved = json.loads(run([rocelab, "validate", "--resolved", "-j", scenario]).stdout)
        ip = IpBatch(resolved, tmp, f"rl-{name}-ip.")
        counts = resolved["derived"]["counts"]
        print(f"fabric: leaf-spine {args.spines} spines x {args.leaves} leaves x {args.hosts_per_leaf} hosts per leaf: "
              f"{counts['namespaces']} namespaces, {counts['links']} links, {ip.counts['addresses']} addresses, "
              f"{ip.counts['neighbours']} neighbours, {ip.counts['routes']} routes", flush=True)

        times = {"rocelab": {"up": [], "down": []}, "ip -batch": {"up": [], "down": []}}
        for c in range(args.cycles):
            times["rocelab"]["up"].append(timed(lambda: run([rocelab, "up", scenario])))
            times["rocelab"]["down"].append(timed(lambda: run([rocelab, "down", name])))
            times["ip -batch"]["up"].append(timed(ip.up))
            times["ip -batch"]["down"].append(timed(ip.down))
            print(f"  cycle {c + 1}/{args.cycles}: rocelab {times['rocelab']['up'][-1]:.3f}/"
                  f"{times['rocelab']['down'][-1]:.3f} s, ip -batch {times['ip -batch']['up'][-1]:.3f}/"
                  f"{times['ip -batch']['down'][-1]:.3f} s (up/down)", flush=True)
        if not args.no_mininet:
            if not os.path.exists("/usr/lib/python3/dist-packages/mininet"):
                sys.exit("bench: Mininet is not installed: apt-get install --no-install-recommends mininet "
                         "bridge-utils (or --no-mininet)")
            run(["ip", "netns", "add", mn_ns])
            print(f"  mininet: {args.cycles} cycles inside namespace {mn_ns} ...", flush=True)
            out = run(["ip", "netns", "exec", mn_ns, "/usr/bin/python3", os.path.join(HERE, "mininet_leafspine.py"),
                       str(args.spines), str(args.leaves), str(args.hosts_per_leaf), str(args.cycles)],
                      timeout=1800).stdout
            cycles = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
            times["mininet 2.3"] = {"up": [c["up"] for c in cycles], "down": [c["down"] for c in cycles]}

        med = {tool: {k: statistics.median(v) for k, v in t.items()} for tool, t in times.items()}
        print(f"\nmedian of {args.cycles} cycles        up (s)   down (s)")
        for tool, m in med.items():
            print(f"  {tool:<22} {m['up']:8.3f} {m['down']:9.3f}")
        r = med["rocelab"]
        ratios = {"rocelab / ip -batch": {k: r[k] / med["ip -batch"][k] for k in ("up", "down")}}
        print(f"\nrocelab / ip -batch:  up {ratios['rocelab / ip -batch']['up']:.2f}  "
              f"down {ratios['rocelab / ip -batch']['down']:.2f}   (target <= 1.0)")
        if "mininet 2.3" in med:
            ratios["mininet / rocelab"] = {k: med["mininet 2.3"][k] / r[k] for k in ("up", "down")}
            print(f"mininet / rocelab:    up {ratios['mininet / rocelab']['up']:.1f}x "
                  f"down {ratios['mininet / rocelab']['down']:.1f}x  (target >= 9x)")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"fabric": counts, "times": times, "median": med, "ratios": ratios}, f, indent=2)
    finally:
        subprocess.run([rocelab, "down", name], capture_output=True)
        for ns in os.listdir("/run/netns") if os.path.isdir("/run/netns") else []:
            if ns.startswith(f"rl-{name}-"):
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    import machine  # bench/machine.py: the machine these figures are of
    machine.announce()
    main()
