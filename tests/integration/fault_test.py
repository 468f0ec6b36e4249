#!/usr/bin/env python3
"""Faults I (issue 18) on real fabrics: `rocelab inject` against a fabric `up` made — a link
down reroutes exactly around it and `--clear` puts back the very routes, links and
neighbours `up` made; bad input exits 3 and changes nothing — and a flap moves a leaf's
traffic to its surviving uplink while every byte still arrives once. Needs root."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import harness  # tests/integration/harness.py, beside this script

ROCELAB = ""
SOURCE = ""

LEAF_SPINE = """name: {name}
seed: 3
scale: 1000
defaults: {{rate: 100G, mtu: 4200}}
fabric: {{type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 2}}
qos: {{profile: roce-lossless}}
"""
NODES = ["spine1", "spine2", "leaf1", "leaf2", "host1", "host2", "host3", "host4"]


def rocelab(*args, check=False):
    r = subprocess.run([ROCELAB, *args], capture_output=True, text=True, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"rocelab {' '.join(args)}: exit {r.returncode}: {r.stderr[-800:]}")
    return r


def kernel_state(instance):
    """Every node's routes (all tables), permanent neighbours and link states, as `ip` shows them."""
    state = {}
    for n in NODES:
        ns = f"rl-{instance}.{n}"
        def ip(*a):
            return subprocess.run(["ip", "-n", ns, "-j", *a], capture_output=True, text=True, check=True).stdout
        routes = sorted(json.dumps(r, sort_keys=True) for r in json.loads(ip("route", "show", "table", "all") or "[]")
                        if r.get("type", "unicast") == "unicast" and r.get("protocol") in ("static", "kernel"))
        neigh = sorted(json.dumps({k: r.get(k) for k in ("dst", "dev", "lladdr", "state")}, sort_keys=True)
                       for r in json.loads(ip("neigh", "show") or "[]"))
        links = sorted((l["ifname"], l["operstate"], "UP" in l.get("flags", [])) for l in json.loads(ip("link", "show") or "[]"))
        state[n] = {"routes": routes, "neigh": neigh, "links": links}
    return state


def nexthop_devs(instance, node, dst):
    ns = f"rl-{instance}.{node}"
    out = subprocess.run(["ip", "-n", ns, "-j", "route", "show", dst], capture_output=True, text=True, check=True).stdout
    devs = set()
    for r in json.loads(out or "[]"):
        if "dev" in r:
            devs.add(r["dev"])
        for h in r.get("nexthops", []):
            devs.add(h["dev"])
    return devs


@unittest.skipUnless(os.geteuid() == 0, "needs root: makes network namespaces")
class Inject(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rocelab-fault-")
        self.instance = f"inj{os.getpid() % 100000}"
        self.path = os.path.join(self.tmp, "s.yaml")
        with open(self.path, "w") as f:
            f.write(LEAF_SPINE.format(name=self.instance))
        rocelab("up", self.path, check=True)

    def tearDown(self):
        rocelab("down", self.instance)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_link_down_reroutes_around_the_link_and_clear_restores_exactly(self):
        before = kernel_state(self.instance)
        leaf1_lo = "198.18.0.3"  # leaf1's loopback (spines 1-2, then leaves)
        self.assertEqual(nexthop_devs(self.instance, "leaf2", leaf1_lo), {"spine1", "spine2"})
        r = rocelab("inject", "--instance", self.instance, "link_down", "leaf1:spine1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("in force", r.stdout)
        # It finds the programs on the nodes' shared tc blocks without a word from the kernel
        # (a per-port query of a shared block is refused, and libbpf would log that).
        self.assertNotIn("warning", r.stderr)
        # Carrier off at both ends; leaf2 reaches leaf1 through spine2 only; leaf1 uses spine2 only.
        during = kernel_state(self.instance)
        self.assertIn(("spine1", "DOWN", False), during["leaf1"]["links"])
        self.assertIn(("leaf1", "DOWN", False), during["spine1"]["links"])
        self.assertEqual(nexthop_devs(self.instance, "leaf2", leaf1_lo), {"spine2"})
        self.assertEqual(nexthop_devs(self.instance, "leaf1", "198.18.0.4"), {"spine2"})
        # A flap of the other uplink runs to its end and leaves the first fault as it was.
        r = rocelab("inject", "--instance", self.instance, "link_flap", "leaf1:spine2", "period=2ms", "count=2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(kernel_state(self.instance), during)
        r = rocelab("inject", "--instance", self.instance, "--clear")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("link leaf1:spine1 up", r.stdout)
        self.assertEqual(kernel_state(self.instance), before, "routes, neighbours and links as up made them")
        r = rocelab("inject", "--instance", self.instance, "--clear")
        self.assertIn("no fault was in force", r.stdout)

    def test_bad_input_exits_3_and_changes_nothing(self):
        before = kernel_state(self.instance)
        for args in (["loss", "leaf1:host1", "probability=1.5"], ["link_down", "leaf9:spine1"],
                     ["link_down", "leaf1:spine7"], ["lnk_down", "leaf1:spine1"],
                     ["link_down", "leaf1:spine1", "duration=-1ms"], ["node_crash", "leaf1:spine1"],
                     ["link_flap", "leaf1:spine1", "period=1ms"], ["link_down", "leaf1:spine1", "at=1s"],
                     ["link_down", "leaf1:spine1", "colour=red"], ["link_down", "leaf1:spine1", "=1"]):
            r = rocelab("inject", "--instance", self.instance, *args)
            self.assertEqual(r.returncode, 3, f"{args}: {r.stdout} {r.stderr}")
            self.assertTrue(r.stderr.strip(), args)
        r = rocelab("inject", "--instance", "nosuchinstance", "link_down", "leaf1:spine1")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("is not up", r.stderr)
        self.assertEqual(kernel_state(self.instance), before)


ECMP = """name: {name}
seed: 5
scale: 1000
defaults: {{rate: 100G, mtu: 4200}}
fabric: {{type: leaf-spine, spines: 4, leaves: 2, hosts_per_leaf: 1}}
qos: {{profile: roce-lossless, ecmp_groups: {groups}}}
"""


@unittest.skipUnless(os.geteuid() == 0, "needs root: makes network namespaces")
class EcmpGroups(unittest.TestCase):
    """qos.ecmp_groups: with plain multipath routes (Linux's hash-threshold) an uplink going
    down moves flows that were on other uplinks too; through a resilient next-hop group only
    the flows on the dead uplink move. 256 RoCEv2 flows (UDP source ports) from leaf1 to the
    host on leaf2, looked up in leaf1's kernel before and during the fault."""

    def paths(self, instance, dst):
        out = {}
        for sport in range(0xC000, 0xC100):
            r = subprocess.run(["ip", "-n", f"rl-{instance}.leaf1", "-j", "route", "get", dst, "ipproto", "udp",
                                "sport", str(sport), "dport", "4791"], capture_output=True, text=True, check=True)
            out[sport] = json.loads(r.stdout)[0]["dev"]
        return out

    def moved(self, groups):
        tmp = tempfile.mkdtemp(prefix="rocelab-ecmp-")
        instance = f"ecmp{groups[0]}{os.getpid() % 10000}"
        path = os.path.join(tmp, "s.yaml")
        with open(path, "w") as f:
            f.write(ECMP.format(name=instance, groups=groups))
        try:
            rocelab("up", path, check=True)
            nodes = json.loads(rocelab("validate", "--resolved", "-j", path, check=True).stdout)["derived"]["nodes"]
            dst = nodes["host2"]["interfaces"][0]["address"].split("/")[0]
            before = self.paths(instance, dst)
            rocelab("inject", "--instance", instance, "link_down", "leaf1:spine2", check=True)
            during = self.paths(instance, dst)
            if groups == "resilient":
                nh = subprocess.run(["ip", "-n", f"rl-{instance}.leaf1", "-j", "nexthop", "show"], capture_output=True,
                                    text=True, check=True).stdout
                self.assertTrue(any(g.get("type") == "resilient" for g in json.loads(nh)), nh)
            rocelab("inject", "--instance", instance, "--clear", check=True)
            after = self.paths(instance, dst)
        finally:
            rocelab("down", instance)
            shutil.rmtree(tmp, ignore_errors=True)
        on_dead = [p for p, d in before.items() if d == "spine2"]
        others = [p for p, d in before.items() if d != "spine2"]
        self.assertTrue(on_dead and len(set(before.values())) == 4, before)
        self.assertNotIn("spine2", during.values())
        if groups == "plain":
            self.assertEqual(after, before, "the same four next hops: the same split")
        else:  # spine2 is back in the group; its buckets return as they fall idle (kernel: 120 s)
            self.assertTrue(set(after.values()) <= {"spine1", "spine2", "spine3", "spine4"}, after)
        return len(on_dead), sum(1 for p in others if during[p] != before[p]), len(others)

    def test_only_a_resilient_group_keeps_the_other_flows_on_their_paths(self):
        dead_p, moved_p, n_p = self.moved("plain")
        dead_r, moved_r, n_r = self.moved("resilient")
        print(f"\nleaf1:spine2 down, 256 flows: plain multipath moved {moved_p} of the {n_p} flows on other uplinks "
              f"(besides the {dead_p} on spine2); a resilient group moved {moved_r} of {n_r} (besides {dead_r})",
              file=sys.stderr)
        # Hash-threshold splits the hash space in equal ranges in next-hop order; with the second
        # of four gone, [2/3, 3/4) changes hands (spine3 -> spine4): 1/12 of all flows, ~21.
        self.assertGreater(moved_p, 256 // 24, "hash-threshold re-splits the hash space over three next hops")
        self.assertEqual(moved_r, 0, "only the dead member's buckets moved")


@unittest.skipUnless(os.geteuid() == 0, "needs root: makes network namespaces")
class Flap(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rocelab-flap-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_flows(self, faults, tag):
        path = os.path.join(self.tmp, f"{tag}.yaml")
        with open(path, "w") as f:
            f.write(LEAF_SPINE.format(name=f"flap{os.getpid() % 10000}") + "workloads:\n" +
                    "".join(f"  - {{name: {n}, type: write_bw, from: {a}, to: {b}, qps: 4, message: 1MB, iterations: 8}}\n"
                            for n, a, b in (("a", "host1", "host3"), ("b", "host2", "host4"),
                                            ("c", "host3", "host1"), ("d", "host4", "host2"))) + faults)
        out = os.path.join(self.tmp, tag)
        r, res, _ = harness.run_valid(ROCELAB, path, out, test=f"faults {tag}")
        self.assertEqual(r.returncode, 0, res.get("error"))
        return res["metrics"]

    def test_a_downed_uplink_moves_its_traffic_and_every_byte_arrives_once(self):
        def tx(m, node, port):
            return sum(s["value"] for s in m["tx_bytes"] if s["labels"]["node"] == node and s["labels"]["port"] == port)
        base = self.run_flows("", "base")
        # spine1 gone from 300 us for 2 ms of the ~4 ms the flows take.
        flap = self.run_flows("faults:\n  - {type: link_flap, target: 'leaf1:spine1', at: 300us, train: [2ms]}\n", "flap")
        b1, b2, f1, f2 = tx(base, "leaf1", "spine1"), tx(base, "leaf1", "spine2"), tx(flap, "leaf1", "spine1"), tx(flap, "leaf1", "spine2")
        print(f"\nleaf1 uplinks, MB: no fault spine1 {b1 / 1e6:.1f} spine2 {b2 / 1e6:.1f}; spine1 down 2 ms: "
              f"spine1 {f1 / 1e6:.1f} spine2 {f2 / 1e6:.1f}; retransmits {flap['retransmits']:.0f}, "
              f"path changes {flap['path_changes']:.0f}", file=sys.stderr)
        self.assertLess(f1 / (f1 + f2), b1 / (b1 + b2) - 0.1, "spine1's share fell")
        self.assertEqual(flap["flows_failed"], 0)
        self.assertEqual(flap["digest_errors"], 0)
        self.assertGreater(flap["path_changes"], 0)
        self.assertGreater(flap["retransmits"], 0)


if __name__ == "__main__":
    harness.run(globals())
