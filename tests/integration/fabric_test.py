#!/usr/bin/env python3
"""Fabrics in the kernel (root): up, reachability checked independently of rocelab, seeded
ECMP, crash safety of the write-ahead state file, and teardown that leaves nothing.

Usage: fabric_test.py --rocelab PATH --source REPO_DIR
Every instance name carries this process's PID, so parallel tests never share objects, and
every test takes its instance down in tearDown, even when it fails.
"""
import csv
import ctypes
import fcntl
import ipaddress
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import harness  # tests/integration/harness.py and retries.py, beside this script
import retries

# The run key every split run of these tests signs its rendezvous with (a split run needs one).
SPLIT_KEY = "the split tests' run key, 32 bytes"
FLOOD_RATE = "3000"  # connections a second the flood test opens (each held 0.25 s)
ROCELAB = ""
SOURCE = ""
PID = os.getpid()
IS_ROOT = os.geteuid() == 0
STATE_DIR = "/run/rocelab"
NETNS_DIR = "/run/netns"

libc = ctypes.CDLL("libc.so.6", use_errno=True)
CLONE_NEWNET = 0x40000000


def rocelab(*args, timeout=300):
    return subprocess.run([ROCELAB, *args], capture_output=True, text=True, timeout=timeout)


def gro_on(ifname):
    """GRO on a veth (the ethtool ioctl): its NAPI mode, one receive ring, so a flow's packets
    stay in order as a NIC's RSS queue keeps them (without it each joins the backlog of the
    CPU that sent it, and two CPUs can swap a pair)."""
    value = ctypes.create_string_buffer(struct.pack("II", 0x2C, 1))  # ETHTOOL_SGRO, on
    ifr = struct.pack("16sP", ifname.encode(), ctypes.addressof(value)) + bytes(16)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s.fileno(), 0x8946, ifr)  # SIOCETHTOOL


class InNetns:
    """This (single-threaded) process inside a testbed namespace, and back afterwards."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        fd = os.open(os.path.join(NETNS_DIR, self.name), os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns {self.name}")
        finally:
            os.close(fd)

    def __exit__(self, *exc):
        if libc.setns(self.home, CLONE_NEWNET) != 0:
            os._exit(99)  # never go on in the wrong namespace
        os.close(self.home)


def leftovers(instance):
    """Everything of an instance visible from the machine's namespace."""
    left = [n for n in os.listdir(NETNS_DIR) if n.startswith(f"rl-{instance}.")] if os.path.isdir(NETNS_DIR) else []
    if os.path.exists(f"{STATE_DIR}/{instance}.state"):
        left.append("state file")
    if os.path.exists(f"{STATE_DIR}/{instance}.agent.sock"):
        left.append("agent socket")
    # An agent of this instance still alive (zombies have exited: only reaping is left).
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            continue
        if not zombie and b"agent" in args and instance.encode() in args:
            left.append(f"agent process {pid}")
    return left


def resolved(path):
    r = rocelab("validate", "--resolved", "-j", path)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def host_nics(doc):
    """(host, ifname, address) of every host NIC, from the resolved scenario."""
    kind = {n["name"]: n["kind"] for n in doc["nodes"]}
    out = []
    for link in doc["links"]:
        net = ipaddress.ip_network(link["subnet"])
        for i, ep in enumerate(link["endpoints"]):
            node, ifname = ep.split(":")
            if kind[node] == "host":
                out.append((node, ifname, str(net.network_address + i)))
    return out


def icmp_echo(ident, seq):
    hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + b"fabric-test"
    s = sum(struct.unpack(f"!{len(hdr) // 2}H", hdr[: len(hdr) // 2 * 2])) + (hdr[-1] << 8 if len(hdr) % 2 else 0)
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return hdr[:2] + struct.pack("!H", ~s & 0xFFFF) + hdr[4:]


def ping_all(instance, nics, ns_of=None):
    """Pings every host NIC from every other host's NICs; returns the pairs that failed.
    `ns_of(host)`: the host's namespace, when not rl-INSTANCE.HOST (a split fabric)."""
    socks = []
    for host, ifname, addr in nics:
        with InNetns(ns_of(host) if ns_of else f"rl-{instance}.{host}"):
            s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
            s.bind((addr, 0))
            s.setblocking(False)
            socks.append(s)
    want = {(i, j) for i in range(len(nics)) for j in range(len(nics)) if nics[i][0] != nics[j][0]}
    got = set()
    ident = PID & 0xFFFF
    for _ in range(3):
        for i, j in want - got:
            socks[i].sendto(icmp_echo(ident, j), (nics[j][2], 0))
        deadline = time.time() + 1.0
        while time.time() < deadline and got != want:
            for i, s in enumerate(socks):
                try:
                    while True:
                        data = s.recv(256)
                        ihl = (data[0] & 0x0F) * 4
                        typ, _, _, rid, seq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
                        src = socket.inet_ntoa(data[12:16])
                        if typ == 0 and rid == ident and seq < len(nics) and nics[seq][2] == src:
                            got.add((i, seq))
                except BlockingIOError:
                    pass
            time.sleep(0.005)
        if got == want:
            break
    for s in socks:
        s.close()
    return sorted(f"{nics[i][0]}:{nics[i][1]} -> {nics[j][0]}:{nics[j][1]}" for i, j in want - got), len(want)


def link_counters(ns, ifname):
    r = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show", "dev", ifname],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)[0]["stats64"]["rx"]["packets"]


@unittest.skipUnless(IS_ROOT, "needs root: makes network namespaces")
class Fabric(unittest.TestCase):
    instance = f"f{PID}"

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rocelab-fabric-")

    def tearDown(self):
        rocelab("down", self.instance)
        subprocess.run(["rm", "-rf", self.tmp])
        self.assertEqual(leftovers(self.instance), [])

    def scenario(self, body, name=None):
        path = os.path.join(self.tmp, "s.yaml")
        with open(path, "w") as f:
            f.write(f"name: {name or self.instance}\nscale: 1000\n{body}")
        return path

    def up(self, path):
        r = rocelab("up", path)
        self.assertEqual(r.returncode, 0, r.stderr)

    def down_leaves_nothing(self):
        before = set(os.listdir("/sys/class/net"))
        r = rocelab("down", self.instance)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(leftovers(self.instance), [])
        self.assertEqual(set(os.listdir("/sys/class/net")), before)  # never touched the host's

    def check_topology(self, fabric, expect_nics):
        path = self.scenario(f"fabric: {fabric}\n")
        host_links = set(os.listdir("/sys/class/net"))
        self.up(path)
        self.assertEqual(set(os.listdir("/sys/class/net")), host_links)  # nothing in the host's namespace
        nics = host_nics(resolved(path))
        self.assertEqual(len(nics), expect_nics)
        failed, pairs = ping_all(self.instance, nics)
        self.assertEqual(failed, [], f"{len(failed)} of {pairs} pairs unreachable")
        self.down_leaves_nothing()

    def test_leaf_spine_2x2x2(self):
        self.check_topology("{type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 2}", 4)

    def test_rail_optimized_two_nics_per_host(self):
        self.check_topology("{type: rail-optimized, rails: 2, hosts: 4, spines: 2}", 8)

    def test_fat_tree_k4(self):
        self.check_topology("{type: fat-tree, k: 4}", 16)

    def test_a_nodes_ports_share_two_tc_blocks_and_a_node_without_links_comes_up(self):
        # One ingress and one egress clsact block a namespace, holding the programs once (the
        # kernel scans a machine-wide list of blocks for each new one); a node with no port
        # has no block, and is no error.
        path = self.scenario("nodes:\n  - {name: s, kind: switch}\n  - {name: lone, kind: switch}\n"
                             "  - {name: h1, kind: host}\n  - {name: h2, kind: host}\n"
                             "links:\n  - {endpoints: [h1, s]}\n  - {endpoints: [h2, s]}\n")
        self.up(path)
        ns = f"rl-{self.instance}.s"
        qdiscs = json.loads(subprocess.run(["ip", "netns", "exec", ns, "tc", "-j", "qdisc", "show"],
                                           capture_output=True, text=True, check=True).stdout)
        clsact = {q["dev"]: (q.get("ingress_block"), q.get("egress_block")) for q in qdiscs if q["kind"] == "clsact"}
        self.assertEqual(clsact, {"h1": (1, 2), "h2": (1, 2)})
        for block, prog in ((1, "rl_ingress"), (2, "rl_egress")):
            out = subprocess.run(["ip", "netns", "exec", ns, "tc", "filter", "show", "block", str(block)],
                                 capture_output=True, text=True, check=True).stdout
            self.assertEqual(out.count(f"name {prog} "), 1, out)
        failed, pairs = ping_all(self.instance, host_nics(resolved(path)))
        self.assertEqual(failed, [], f"{len(failed)} of {pairs} pairs unreachable")
        self.down_leaves_nothing()

    def test_link_delay_is_applied_where_the_kernel_has_netem_and_said_where_not(self):
        # Issue 16: a delayed link runs through the wire namespace where netem exists (the VM
        # tier measures it there); on a kernel without it, `up` and `run` say so plainly.
        caps = json.loads(rocelab("doctor", "-j").stdout)["capabilities"]
        netem = caps["netem"]["ok"]
        path = self.scenario("defaults: {delay: 1us}\nqos: {profile: roce-lossless}\n"
                             "nodes: [{name: s, kind: switch}, {name: h1, kind: host}, {name: h2, kind: host}]\n"
                             "links: [{endpoints: [h1, s]}, {endpoints: [h2, s], delay: 0ns}]\n")
        r = rocelab("up", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        wire = f"rl-{self.instance}._wire"
        if netem:
            self.assertIn("link delay applied: 1 links", r.stderr)
            self.assertIn(wire, subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout)
        else:
            self.assertIn("link delay (up to 1us physical) is not applied: this kernel has no netem", r.stderr)
            self.assertNotIn(wire, subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout)
        failed, pairs = ping_all(self.instance, host_nics(resolved(path)))
        self.assertEqual(failed, [], f"{len(failed)} of {pairs} pairs unreachable")
        self.down_leaves_nothing()
        out = os.path.join(self.tmp, "run")
        r, res, _ = harness.run_valid(ROCELAB, path, out, "--no-report", test="fabric link delay")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(res["link_delay"], {"max_ns": 1000, "applied": netem, "links": 1 if netem else 0})
        self.assertEqual(any("has no netem" in n for n in res["notes"]), not netem, res["notes"])
        self.assertEqual(leftovers(self.instance), [])

    def flow_map(self, path, flows=64):
        """Which spine carries each of `flows` UDP flows from host1 to host2."""
        self.up(path)
        try:
            nics = {h: a for h, _, a in host_nics(resolved(path))}
            spines = [f"rl-{self.instance}.spine{i}" for i in (1, 2)]
            with InNetns(f"rl-{self.instance}.host1"):
                socks = []
                for i in range(flows):
                    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    s.bind((nics["host1"], 40000 + i))
                    socks.append(s)
            mapping = []
            for s in socks:
                before = [link_counters(sp, "leaf1") for sp in spines]
                for _ in range(3):
                    s.sendto(b"x" * 64, (nics["host2"], 7777))
                time.sleep(0.01)
                after = [link_counters(sp, "leaf1") for sp in spines]
                delta = [a - b for a, b in zip(after, before)]
                self.assertEqual(sorted(delta), [0, 3], f"a flow must stay on one spine: {delta}")
                mapping.append(delta.index(3))
                s.close()
            return mapping
        finally:
            self.down_leaves_nothing()

    def test_ecmp_spreads_flows_and_is_reproducible_with_a_seed(self):
        path = self.scenario("seed: 7\nfabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 1}\n")
        first = self.flow_map(path)
        share = first.count(0) / len(first)
        self.assertTrue(0.25 <= share <= 0.75, f"spine1 carries {share:.0%} of 64 flows")
        second = self.flow_map(path)
        self.assertEqual(first, second, "same seed, same flow -> spine map")
        print(f"\nECMP: spine1 {first.count(0)}/64, spine2 {first.count(1)}/64, identical on rerun",
              file=sys.stderr)

    def test_a_hostile_state_file_cannot_remove_other_namespaces(self):
        victim = f"rl-v{PID}.x"
        subprocess.run(["ip", "netns", "add", victim], check=True)
        try:
            os.makedirs(STATE_DIR, exist_ok=True)
            with open(f"{STATE_DIR}/{self.instance}.state", "w") as f:
                f.write(f"rocelab-state 1\ninstance {self.instance}\nnetns {victim} x\nnetns ../../etc x\n")
            r = rocelab("down", self.instance)
            self.assertEqual(r.returncode, 4)
            self.assertIn("left alone", r.stderr)
            self.assertTrue(os.path.exists(f"{NETNS_DIR}/{victim}"))
        finally:
            subprocess.run(["ip", "netns", "del", victim])
            if os.path.exists(f"{STATE_DIR}/{self.instance}.state"):
                os.unlink(f"{STATE_DIR}/{self.instance}.state")

    def test_hostile_names_never_reach_the_kernel(self):
        for bad in ["../../x", "a/b", "$(reboot)", "x" * 100_000, "a b", "-x"]:
            path = self.scenario("fabric: {type: leaf-spine, spines: 1, leaves: 1, hosts_per_leaf: 1}\n",
                                 name=json.dumps(bad))
            r = rocelab("up", path)
            self.assertEqual(r.returncode, 3, bad[:20])
            nodes = self.scenario(f"nodes:\n  - {{name: {json.dumps(bad)}, kind: switch}}\n"
                                  "  - {name: h, kind: host}\nlinks:\n  - {endpoints: [h, " + json.dumps(bad) + "]}\n")
            r = rocelab("up", nodes)
            self.assertEqual(r.returncode, 3, bad[:20])
        self.assertEqual([n for n in os.listdir(NETNS_DIR) if "reboot" in n or "/" in n or len(n) > 200], [])
        self.assertEqual(leftovers(self.instance), [])


@unittest.skipUnless(IS_ROOT, "needs root: makes network namespaces")
class Split(unittest.TestCase):
    """One fabric over two "machines" (docs/multi-machine.md): two namespaces standing for
    them, joined by a veth underlay; `up --part I/2` in each (nsenter, as on a machine of its
    own), cut links as VXLAN ports. Pings cross the cut, and so does PFC: a 2:1 incast from
    part 1's hosts into a host of part 0 is held by pause frames that travel over VXLAN, and
    every datagram arrives. Uplinks at 400G: the senders' two flows meet first at the
    receiver's leaf, in part 0, whichever spines they hash to."""
    base = f"sp{PID}"
    parts = [f"sp{PID}a", f"sp{PID}b"]
    whole = f"sp{PID}w"  # the same scenario on one machine
    underlay = ["198.19.254.0", "198.19.254.1"]

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rocelab-split-")
        self.machines = [f"rl-{self.base}.m0", f"rl-{self.base}.m1"]
        for m in self.machines:
            subprocess.run(["ip", "netns", "add", m], check=True)
        subprocess.run(["ip", "-n", self.machines[0], "link", "add", "u0", "mtu", "9000", "type", "veth", "peer", "u1",
                        "mtu", "9000", "netns", self.machines[1]], check=True)
        for i, m in enumerate(self.machines):
            subprocess.run(["ip", "-n", m, "addr", "add", f"{self.underlay[i]}/31", "dev", f"u{i}"], check=True)
            subprocess.run(["ip", "-n", m, "link", "set", f"u{i}", "up"], check=True)
            with InNetns(m):
                gro_on(f"u{i}")  # the machines' network keeps a VXLAN flow in order, as NICs do
        self.path = os.path.join(self.tmp, "s.yaml")
        with open(self.path, "w") as f:
            f.write("name: split\nscale: 1000\ndefaults: {rate: 100G, mtu: 4200}\nqos: {profile: pfc-only}\n"
                    "fabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 2, uplink_rate: 400G}\n")

    def tearDown(self):
        for name in self.parts + [self.whole]:
            rocelab("down", name)
        for m in self.machines:
            subprocess.run(["ip", "netns", "del", m], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)
        for name in self.parts + [self.base, self.whole]:
            self.assertEqual(leftovers(name), [])

    def up(self, i, *extra):
        return subprocess.run(["nsenter", f"--net={NETNS_DIR}/{self.machines[i]}", ROCELAB, "up", "--instance",
                               self.parts[i], "--part", f"{i}/2", "--peers", ",".join(self.underlay), *extra, self.path],
                              capture_output=True, text=True, timeout=120)

    def test_bad_split_options_are_refused_and_leave_nothing(self):
        for args, says in ((["--part", "2/2", "--peers", "1.2.3.4,1.2.3.5"], "I below M"),
                           (["--part", "0/2", "--peers", "1.2.3.4"], "1 addresses for 2 parts"),
                           (["--part", "0/x", "--peers", "1.2.3.4,1.2.3.5"], "expected I/M"),
                           (["--part", "0/2", "--peers", "1.2.3.4,bad"], "'bad' is not an IPv4 address"),
                           (["--part", "0/2"], "go together")):
            r = rocelab("up", "--instance", self.parts[0], *args, self.path)
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertIn(says, r.stderr)
        # A run key others may read, one too short, a link to one, or one without --part.
        key, short, link = (os.path.join(self.tmp, n) for n in ("open.key", "short.key", "link.key"))
        with open(key, "w") as f:
            f.write("sixteen bytes or more, but world-readable\n")
        os.chmod(key, 0o644)
        with open(short, "w") as f:
            f.write("too short\n")
        os.chmod(short, 0o600)
        os.symlink(short, link)
        split = ["--part", "0/2", "--peers", ",".join(self.underlay)]
        for args, says in ((split, "a split run needs a run key"),
                           ([*split, "--run-key", key], "readable or writable by others than its owner (chmod 600 it)"),
                           ([*split, "--run-key", short], "a run key is 16 bytes or more"),
                           ([*split, "--run-key", link], "--run-key " + link + ": Too many levels of symbolic links"),
                           (["--run-key", short], "--run-key goes with --part")):
            r = rocelab("run", "--instance", self.parts[0], "--out", os.path.join(self.tmp, "never"), *args, self.path)
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertIn(says, r.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "never")))
        # A key that is no random one; one of another user's, taken only when sudo ran rocelab
        # for that user (SUDO_UID): then the next check refuses the run, so it was taken.
        weak, theirs = os.path.join(self.tmp, "weak.key"), os.path.join(self.tmp, "theirs.key")
        with open(weak, "w") as f:
            f.write("abababababababababababab\n")
        with open(theirs, "w") as f:
            f.write(SPLIT_KEY + "\n")
        os.chmod(weak, 0o600)
        os.chmod(theirs, 0o600)
        os.chown(theirs, 54321, 54321)
        never = os.path.join(self.tmp, "never")
        for args, env, says in (([*split, "--run-key", weak], {}, "fewer than 8 distinct characters: not a random key"),
                                ([*split, "--run-key", theirs], {}, "owned by another user (neither this one nor, under sudo"),
                                ([*split, "--run-key", theirs], {"SUDO_UID": "54322"}, "owned by another user"),
                                ([*split, "--run-key", theirs, "--insecure-no-key"], {"SUDO_UID": "54321"},
                                 "--insecure-no-key with a run key")):
            r = subprocess.run([ROCELAB, "run", "--instance", self.parts[0], "--out", never, *args, self.path],
                               capture_output=True, text=True, timeout=60, env=dict(os.environ, **env))
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertIn(says, r.stderr)
            self.assertFalse(os.path.exists(never))
        # Addresses this machine does not have: refused before any namespace is made.
        r = rocelab("up", "--instance", self.parts[0], "--part", "0/2", "--peers", "198.19.253.0,198.19.253.1", self.path)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no interface of this machine has the underlay address 198.19.253.0", r.stderr)
        self.assertEqual(leftovers(self.parts[0]), [])
        # An underlay that cannot carry a 4200-byte frame and VXLAN's 50.
        subprocess.run(["ip", "-n", self.machines[0], "link", "set", "u0", "mtu", "4000"], check=True)
        r = self.up(0)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("has MTU 4000", r.stderr)
        self.assertIn("needs 4250", r.stderr)
        self.assertEqual(leftovers(self.parts[0]), [])

    def test_pings_and_pfc_cross_the_cut_links(self):
        for i in (0, 1):
            r = self.up(i)
            self.assertEqual(r.returncode, 0, r.stderr)
        doc = resolved(self.path)
        part_of = {}
        for host, _, _ in host_nics(doc):
            part_of[host] = 0 if os.path.exists(f"{NETNS_DIR}/rl-{self.parts[0]}.{host}") else 1
            self.assertTrue(os.path.exists(f"{NETNS_DIR}/rl-{self.parts[part_of[host]]}.{host}"), host)
        self.assertEqual(sorted(part_of.values()), [0, 0, 1, 1])
        ns_of = lambda node: f"rl-{self.parts[part_of.get(node, 0)]}.{node}"
        # The cut links: VXLAN ports, one VNI a link, toward the other machine.
        info = json.loads(subprocess.run(["ip", "-n", f"rl-{self.parts[0]}.leaf1", "-d", "-j", "link", "show", "spine2"],
                                         capture_output=True, text=True, check=True).stdout)[0]
        self.assertEqual(info["linkinfo"]["info_kind"], "vxlan")
        self.assertEqual(info["linkinfo"]["info_data"]["remote"], self.underlay[1])
        self.assertEqual(info["linkinfo"]["info_data"]["port"], 4789)
        self.assertEqual(info["mtu"], 4200)
        st = json.loads(rocelab("status", "-j", self.parts[0]).stdout)
        self.assertEqual(st["links"], 5, "host1-leaf1, host2-leaf1, leaf1-spine1 and the two cut ones")
        leaf1 = next(n for n in st["nodes"] if n["node"] == "leaf1")
        peers = {i["name"]: i["peer"] for i in leaf1["interfaces"]}
        self.assertEqual(peers["spine2"], f"spine2:leaf1 (VXLAN to {self.underlay[1]})")
        self.assertEqual(peers["spine1"], "spine1:leaf1")
        failed, pairs = ping_all(None, host_nics(doc), ns_of)
        self.assertEqual(failed, [], f"{len(failed)} of {pairs} pairs unreachable")
        self.assertEqual(pairs, 12)

        # 2:1 incast on the lossless priority (DSCP 26) from part 1's hosts into host1.
        nics = {h: a for h, _, a in host_nics(doc)}
        senders = [h for h in nics if part_of[h] == 1]
        target = "host1" if part_of["host1"] == 0 else "host3"
        with InNetns(ns_of(target)):
            rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
            rx.bind((nics[target], 9000))
        txs = []
        for h in senders:
            with InNetns(ns_of(h)):
                tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                tx.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 26 << 2)
                tx.bind((nics[h], 0))
                txs.append(tx)
        count, size = 1500, 1400
        payload = b"x" * size

        def blast(tx):
            for _ in range(count):
                tx.sendto(payload, (nics[target], 9000))

        import threading
        threads = [threading.Thread(target=blast, args=(tx,)) for tx in txs]
        for t in threads:
            t.start()
        got, rx_bytes = 0, 0
        rx.settimeout(3.0)
        try:
            while got < count * len(txs):
                rx_bytes += len(rx.recv(65536))
                got += 1
        except socket.timeout:
            pass
        for t in threads:
            t.join()
        for sock in txs + [rx]:
            sock.close()
        self.assertEqual(got, count * len(txs), "lossless: every datagram arrives")

        def stats(i):
            r = subprocess.run([ROCELAB, "stats", "-j", "--instance", self.parts[i]], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            return json.loads(r.stdout)["ports"]

        cut = {(0, "leaf1", "spine2"), (0, "spine1", "leaf2"), (1, "leaf2", "spine1"), (1, "spine2", "leaf1")}
        pfc_over_cut, lossless_drops = 0, 0
        for i in (0, 1):
            for p in stats(i):
                prio3 = p["priorities"][3]
                lossless_drops += sum(prio3["drops"].values())
                if (i, p["node"], p["port"]) in cut:
                    pfc_over_cut += prio3["pfc_rx"]
        self.assertGreater(pfc_over_cut, 0, "pause frames crossed a VXLAN cut link")
        self.assertEqual(lossless_drops, 0)
        print(f"split: {got} of {count * len(txs)} datagrams of a 2:1 incast across the cut, {pfc_over_cut} PFC frames "
              f"received over VXLAN cut links, {lossless_drops} lossless drops", file=sys.stderr)

    def incast_scenario(self, name, iterations, more=""):
        """A 2:1 incast from part 1's hosts into host1 (part 0's), `more` workload lines after."""
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write("name: split\nseed: 3\nscale: 2000\ndefaults: {rate: 100G, mtu: 4200}\n"
                    "fabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 2, uplink_rate: 400G}\n"
                    "workloads:\n"
                    f"  - {{name: incast, type: incast, hosts: [host3, host4], to: host1, message: 1MB, iterations: {iterations}}}\n"
                    f"{more}expect: [lossless_drops == 0, digest_errors == 0]\n")
        return path

    def run_parts(self, path, extra=(("--part-wait", "60"), ("--part-wait", "60")), env_of=None):
        """`rocelab run --part I/2` on both "machines" at once; (returncode, stderr, results) per
        part. A split run the machine could not keep up with (exit 2, and nothing worse on
        either part) runs once more at 2 x D on both, as every runner retries it, logged."""
        self.split_scale = ()  # the D of the last split run when not the file's
        got = self.run_parts_once(path, extra, env_of)
        codes = [rc for rc, _, _ in got]
        if 2 in codes and set(codes) <= {0, 2}:
            why = next(((res or {}).get("reason") or "invalid run") for rc, _, res in got if rc == 2)
            resolved = json.loads(subprocess.run([ROCELAB, "validate", "--resolved", "-j", path], capture_output=True,
                                                 text=True, check=True).stdout)
            d = 2 * float(resolved["scale"])
            retries.record(f"fabric Split {os.path.basename(path)}", why)
            self.split_scale = ("--scale", f"{d:g}")
            got = self.run_parts_once(path, tuple((*e, *self.split_scale, "--retry-of", why) for e in extra), env_of)
            codes = [rc for rc, _, _ in got]
            if 2 in codes and set(codes) <= {0, 2}:
                why = next(((res or {}).get("reason") or "invalid run") for rc, _, res in got if rc == 2)
                retries.unjudged(f"fabric Split {os.path.basename(path)}", why)
                raise unittest.SkipTest(f"invalid at D and 2 x D: not judged on this machine ({why})")
        return got

    def run_parts_once(self, path, extra, env_of=None):
        """Each part by its own --part I/2 and --peers; with env_of, by `--part auto` in the
        environment env_of(I) (a launcher's)."""
        procs = []
        for i in (0, 1):
            out = os.path.join(self.tmp, f"run{i}")
            shutil.rmtree(out, ignore_errors=True)
            part = ["--part", "auto"] if env_of else ["--part", f"{i}/2", "--peers", ",".join(self.underlay)]
            procs.append((out, subprocess.Popen(
                ["nsenter", f"--net={NETNS_DIR}/{self.machines[i]}", ROCELAB, "run", "--no-report", "--instance",
                 self.parts[i], *part, "--out", out, *extra[i], path],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=env_of(i) if env_of else dict(os.environ, ROCELAB_RUN_KEY=SPLIT_KEY))))
        got = []
        for out, p in procs:
            _, err = p.communicate(timeout=300)
            res = None
            if os.path.exists(os.path.join(out, "results.json")):
                with open(os.path.join(out, "results.json")) as f:
                    res = json.load(f)
            got.append((p.returncode, err, res))
        return got

    def test_a_split_run_reports_every_flow_as_one_machine_does(self):
        """`run --part` on both machines: a 2:1 incast from part 1's hosts into part 0's and a
        ring all-reduce over all four hosts (its rounds agreed across the machines). Each part
        reports every flow alike, the metrics of both parts' nodes, the connectivity of all
        twelve host pairs; and the figures are one machine's, within noise."""
        path = self.incast_scenario("w.yaml", 4, more="  - {name: ring, type: allreduce, message: 4MB, iterations: 2, start: 2ms}\n")
        parts = self.run_parts(path)
        for i, (rc, err, res) in enumerate(parts):
            self.assertEqual(rc, 0, f"part {i}: {err[-2000:]}")
            self.assertEqual(res["split"]["part"], i)
        a, b = parts[0][2], parts[1][2]
        self.assertEqual(a["workloads"]["flows"], b["workloads"]["flows"], "both parts report every flow alike")
        self.assertEqual(len(a["workloads"]["flows"]), 6)
        self.assertTrue(all(f["digest_ok"] and f["bytes"] > 0 for f in a["workloads"]["flows"]))
        for f in a["workloads"]["flows"]:
            # A flow's delivered bytes over time come from its responder's machine (the
            # incast's) or its own: never falling, all of it by the flow's end.
            delivered = [row[2] for row in f["rate_trace"]["rows"]]
            self.assertEqual(delivered, sorted(delivered), f"{f['from']} -> {f['to']}")
            self.assertEqual(delivered[-1], f["bytes"], f"{f['from']} -> {f['to']}")
        for res in (a, b):
            m = res["metrics"]
            self.assertEqual((m["host_pairs"], m["reachable_pairs"]), (12, 12), "each part pinged from its own hosts")
            nodes = {s["labels"]["node"] for s in m["tx_bytes"] if s["value"] > 0}
            self.assertTrue({"leaf1", "leaf2", "host1", "host3"} <= nodes, f"both parts' ports: {sorted(nodes)}")
            self.assertEqual(m["lossless_drops"], 0)
            self.assertEqual(m["retransmits"], 0, "lossless, nothing dropped or swapped across the cut: no go-back-N")
        # One run's files on each part: every port's series (each machine samples its own),
        # by time, and one report that draws the whole fabric's queues.
        for i in (0, 1):
            with open(os.path.join(self.tmp, f"run{i}", "series-ports.csv")) as f:
                rows = list(csv.DictReader(f))
            self.assertEqual({r["node"] for r in rows} >= {"leaf1", "leaf2", "host1", "host3"}, True,
                             f"part {i}'s merged series: {sorted({r['node'] for r in rows})}")
            times = [float(r["t_s"]) for r in rows]
            self.assertEqual(times, sorted(times))
        html = os.path.join(self.tmp, "split.html")
        rep = rocelab("report", "--out", html, os.path.join(self.tmp, "run0"))
        self.assertEqual(rep.returncode, 0, rep.stderr)
        with open(html) as f:
            page = f.read()
        for port in ("leaf1:host1 p3", "spine2:leaf1 p3"):  # the incast's bottleneck (part 0), a spine it pauses (part 1)
            self.assertIn(port, page)
        if harness.CHROMIUM:
            self.assertGreaterEqual(harness.chromium_dom(self, html, self.tmp), 2)  # queues and pauses at least

        whole = os.path.join(self.tmp, "whole")
        # One machine at the split run's D, an invalid run once more at 2 x D (logged).
        r = rocelab("run", "--no-report", "--retry-invalid", "--instance", self.whole, "--out", whole,
                    *self.split_scale, path, timeout=600)
        w, whole = harness.settle(r.returncode, r.stderr, whole, "fabric Split whole")
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])

        def ring(res):
            return next(x for x in res["workloads"]["workloads"] if x["name"] == "ring")["busbw_GBps"]

        def incast(res):
            return sorted((f["from"], f["bytes"]) for f in res["workloads"]["flows"] if f["workload"] == "incast")

        def bound(res):
            return next(x for x in res["workloads"]["workloads"] if x["name"] == "ring")["busbw_bound_GBps"]

        self.assertEqual(incast(a), incast(w))
        print(f"split run: ring busbw {ring(a):.2f} GB/s on two machines, {ring(w):.2f} on one, bound "
              f"{bound(a):.2f}; D {a['scale']:g} and {w['scale']:g}", file=sys.stderr)
        # Like with like (issue 48): the same ring, the same bound. The ring's rounds wait for
        # the other machine at each step (a round's barrier costs one message over the
        # underlay, well under 1 % here): the split run is at most 5 % below one machine. It
        # may read above it: two machines' engines have two CPUs' time where one has one
        # (+0.2 to +2.3 % in CI), so the upper side is physics, the ring's bound (its slowest
        # edge's line rate), not the one-machine draw (2 % over it failed CI once).
        self.assertEqual(bound(a), bound(w))
        self.assertGreater(ring(a), 0.95 * ring(w))
        self.assertLessEqual(ring(a), 1.01 * bound(a), "no faster than its slowest edge's line")

    def test_link_and_node_faults_on_a_split_run_pass_the_single_machine_assertions(self):
        """Issue 37, done-when 2: scenarios/link-flap.yaml with its flap moved onto a cut link
        (leaf1:spine2: part 0's leaf, part 1's spine) and scenarios/node-crash.yaml (host2, on
        part 0), each as a split run. Every part applies a link or node fault to the ends it
        holds and reconverges its own switches' routes from the one model; the crashed host
        halts on its own part. Each scenario's own assertions pass on both parts, and the merged
        faults hold one record of each start and end, all applied."""
        plan = json.loads(rocelab("plan", "-j", "--parts", "2", os.path.join(SOURCE, "scenarios", "node-crash.yaml")).stdout)
        self.assertIn("host2", json.dumps(plan["parts"][0]), "host2 is part 0's")
        self.assertIn("leaf1:spine2", json.dumps(plan["cut_links"]), "leaf1:spine2 is cut")
        with open(os.path.join(SOURCE, "scenarios", "link-flap.yaml")) as f:
            flap = f.read()
        with open(os.path.join(SOURCE, "scenarios", "node-crash.yaml")) as f:
            crash = f.read()
        self.assertIn('target: "leaf1:spine1"', flap)
        for name, text, starts in (("flap.yaml", flap.replace('target: "leaf1:spine1"', 'target: "leaf1:spine2"'), 2),
                                   ("crash.yaml", crash, 1)):
            path = os.path.join(self.tmp, name)
            with open(path, "w") as f:
                f.write(text)
            parts = self.run_parts(path)
            for i, (rc, err, res) in enumerate(parts):
                self.assertIsNotNone(res, f"{name} part {i}: {err[-2000:]}")
                failed = [a for a in res["assertions"] if a["outcome"] != "pass"]
                self.assertEqual((rc, failed), (0, []), f"{name} part {i}: {err[-2000:]}")
                self.assertTrue(all(f["ok"] for f in res["faults"]), res["faults"])
                actions = [f["action"] for f in res["faults"]]
                self.assertEqual((actions.count("start"), actions.count("end")), (starts, starts), res["faults"])
                self.assertGreater(res["metrics"]["path_changes"], 0)
            print(f"split {name}: path changes {parts[0][2]['metrics']['path_changes']:g}, link down "
                  f"{parts[0][2]['metrics']['link_down_time'] * 1e3:.2f} ms, flows failed "
                  f"{parts[0][2]['metrics']['flows_failed']:g}", file=sys.stderr)

    # A hostile process on part 1's machine, from part 1's own address (the address check
    # lets it through; only the run key stops it): every few hundred ms a port scan's
    # connect-and-close, an HTTP request, a 1 GiB length prefix, 10 MB of tiny frames, an
    # impostor hello and abort, 100,000 nested brackets as figures, and 12 idle connections
    # held; until told to stop. It prints the rounds it completed after every try.
    HOSTILE = r"""
import socket, struct, sys, time, os
hub, src, stop = sys.argv[1], sys.argv[2], sys.argv[3]
def frame(tag, datum):
    body = struct.pack("!I", len(tag)) + tag + struct.pack("!II", 1, len(datum)) + datum
    return struct.pack("!I", len(body)) + body
def conn():
    s = socket.socket()
    s.settimeout(2)
    s.bind((src, 0))
    s.connect((hub, 790))
    return s
attacks = [
    lambda s: None,
    lambda s: s.sendall(b"GET / HTTP/1.0\r\n\r\n"),
    lambda s: s.sendall(struct.pack("!I", 1 << 30)),
    lambda s: s.sendall(frame(b"t", b"") * (10_000_000 // 17)),
    lambda s: s.sendall(frame(b"!hello", b"1") + frame(b"!abort", b"stop everything")),
    lambda s: s.sendall(frame(b"figures", b"[" * 100_000)),
]
rounds = 0
while not os.path.exists(stop):
    try:
        idle = [conn() for _ in range(12)]
        for attack in attacks:
            s = conn()
            try:
                attack(s)
            except OSError:
                pass
            s.close()
        for s in idle:
            s.close()
        rounds += 1
    except OSError:
        pass
    print(rounds, flush=True)
    time.sleep(0.2)
"""

    def test_a_keyed_split_run_shrugs_off_a_hostile_peer(self):
        """Issue 34: both parts run with the run key while a hostile process on part 1's
        machine throws a port scan, HTTP, a 1 GiB length prefix, 10 MB of tiny frames, an
        impostor hello and abort, nested brackets and idle floods at part 0's rendezvous, from
        part 1's own address, the whole run long. Both parts finish as an untouched run does
        (every flow whole, both reporting alike), part 0 counts the strays, its memory stays
        under 100 MiB at its peak (36 MiB measured under attack), and nothing is left up.
        Without the key the impostor's hello would take part 1 and its abort stop the run."""
        path = self.incast_scenario("h.yaml", 4)
        key = os.path.join(self.tmp, "run.key")
        with open(key, "w") as f:
            f.write("the test's run key, 32 bytes ok\n")
        os.chmod(key, 0o600)
        stop = os.path.join(self.tmp, "stop")
        hostile = subprocess.Popen(["nsenter", f"--net={NETNS_DIR}/{self.machines[1]}", sys.executable, "-c", self.HOSTILE,
                                    self.underlay[0], self.underlay[1], stop], stdout=subprocess.PIPE, text=True)
        peak, rounds = 0, 0
        try:
            procs = []
            for i in (0, 1):
                out = os.path.join(self.tmp, f"run{i}")
                procs.append((out, subprocess.Popen(
                    ["nsenter", f"--net={NETNS_DIR}/{self.machines[i]}", ROCELAB, "run", "--no-report", "--instance",
                     self.parts[i], "--part", f"{i}/2", "--peers", ",".join(self.underlay), "--run-key", key,
                     "--part-wait", "60", "--out", out, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
                if i == 0:  # part 1 starts only once part 0 has taken three whole rounds of it
                    until = time.time() + 60
                    while rounds < 3 and hostile.poll() is None and procs[0][1].poll() is None and time.time() < until:
                        rounds = int(hostile.stdout.readline().strip() or rounds)
            while procs[0][1].poll() is None:  # nsenter execs: the pid is part 0's rocelab
                try:
                    with open(f"/proc/{procs[0][1].pid}/status") as f:
                        peak = max(peak, next((int(line.split()[1]) for line in f if line.startswith("VmHWM:")), 0))
                except (OSError, StopIteration):
                    pass
                time.sleep(0.05)
            got = []
            for out, p in procs:
                _, err = p.communicate(timeout=300)
                with open(os.path.join(out, "results.json")) as f:
                    got.append((p.returncode, err, json.load(f)))
        finally:
            open(stop, "w").close()
            lines = hostile.communicate(timeout=60)[0].split()
            rounds = int(lines[-1]) if lines else rounds
        self.assertEqual(hostile.returncode, 0, "the hostile process itself failed")
        for i, (rc, err, res) in enumerate(got):
            # Its figures are not rates or times (flows whole, strays closed, memory), so an
            # invalid run (the machine did not keep up: beside the flood, CI once read the other
            # part's process holding CPU 0 for 31 ms) is checked too, as the README's tests do.
            if rc == 2 and "did not keep up" in (res.get("error") or ""):
                print(f"\npart {i} invalid (its figures checked all the same): {res['error'][:300]}", file=sys.stderr)
            else:
                self.assertEqual(rc, 0, f"part {i}: {err[-2000:]}")
            self.assertTrue(res["split"]["signed"])
            self.assertNotIn("no run key", err)
            # The key guards the rendezvous alone: the output says the VXLAN port is open.
            self.assertIn(f"the cut links' VXLAN listens on UDP 4789 of {self.underlay[i]} and takes any sender's", err)
        a, b = got[0][2], got[1][2]
        self.assertEqual(a["workloads"]["flows"], b["workloads"]["flows"])
        self.assertEqual(sorted((f["from"], f["bytes"], f["digest_ok"]) for f in a["workloads"]["flows"]),
                         [("host3", 4 << 20, True), ("host4", 4 << 20, True)])
        self.assertGreaterEqual(rounds, 3, "part 1 started after three hostile rounds")
        self.assertGreaterEqual(a["split"]["strays"], 3 * 6, a["split"]["last_stray"])
        self.assertLess(peak, 100 * 1024, f"part 0's peak RSS {peak} KiB")
        print(f"split run under attack: {rounds} hostile rounds, {a['split']['strays']} strays closed by part 0 "
              f"(last: {a['split']['last_stray']}), part 0's peak RSS {peak // 1024} MiB", file=sys.stderr)

    # A connection flood from part 1's own address (the address check lets it through): new
    # connections at a steady rate, each held idle a while, none ever saying hello; until
    # told to stop. It prints how many it opened and over how many seconds.
    FLOOD = r"""
import socket, sys, time, os
hub, src, stop, rate, hold = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
held, opened, t0 = [], 0, time.time()
while not os.path.exists(stop):
    s = socket.socket()
    s.setblocking(False)
    s.bind((src, 0))
    try:
        s.connect((hub, 790))
    except BlockingIOError:
        pass
    except OSError:
        s.close()
        s = None
    if s:
        held.append((time.time(), s))
        opened += 1
    while held and time.time() - held[0][0] > hold:
        held.pop(0)[1].close()
    time.sleep(max(0.0, t0 + opened / rate - time.time()) if opened else 1.0 / rate)
print(opened, time.time() - t0, flush=True)
"""

    def test_a_keyed_split_run_joins_through_a_connection_flood(self):
        """Issue 49, build 4: 3,000 connections a second from part 1's own address, each held
        idle for 0.25 s, from before either part starts until both end. The hub keeps at most
        8 waiting for their hello; the oldest goes only once it has waited 200 ms, else the
        newcomer, so a part challenged a moment ago keeps its place, and a spoke let go before
        its hello was taken connects again. Both parts finish as an untouched run does. (At
        2b7f191, where 8 newer connections pushed out the oldest at once, part 0 waited its
        60 s at 'hello' for part 1 and failed; at 200 a second both got in.)"""
        path = self.incast_scenario("f.yaml", 4)
        stop = os.path.join(self.tmp, "stop-flood")
        flood = subprocess.Popen(["nsenter", f"--net={NETNS_DIR}/{self.machines[1]}", sys.executable, "-c", self.FLOOD,
                                  self.underlay[0], self.underlay[1], stop, FLOOD_RATE, "0.25"], stdout=subprocess.PIPE, text=True)
        try:
            time.sleep(1.5)  # the flood runs before either part listens or connects
            got = self.run_parts(path)
        finally:
            open(stop, "w").close()
            opened, seconds = (float(x) for x in flood.communicate(timeout=60)[0].split())
        rate = opened / seconds
        print(f"\nsplit run through a flood: {opened:.0f} connections in {seconds:.1f} s ({rate:.0f}/s), "
              f"{got[0][2]['split']['strays'] if got[0][2] else '?'} strays closed by part 0", file=sys.stderr)
        self.assertGreaterEqual(rate, 100, "the flood kept up at least 100 connections a second")
        for i, (rc, err, res) in enumerate(got):
            self.assertEqual(rc, 0, f"part {i}: {err[-2000:]}")
            self.assertTrue(res["split"]["signed"])
            self.assertEqual(sorted((f["from"], f["bytes"], f["digest_ok"]) for f in res["workloads"]["flows"]),
                             [("host3", 4 << 20, True), ("host4", 4 << 20, True)])
        self.assertGreater(got[0][2]["split"]["strays"], 100, "the hub let the flood's connections go")

    def test_part_auto_takes_its_share_from_a_slurm_step(self):
        """Issue 37: `run --part auto` inside a Slurm job step (srun -N 2 --ntasks-per-node=1):
        each task's SLURM_PROCID, the step's task count and its node list (a hostlist
        expression, expanded and resolved: here numeric names, as /etc/hosts is not ours to
        edit) give the part, M and the peers; the run is the hand-started one. A step with
        more tasks than nodes is refused before anything is made, saying how to start it."""
        path = self.incast_scenario("auto.yaml", 2)
        nodelist = self.underlay[0].rsplit(".", 1)[0] + ".[0-1]"  # 198.19.254.[0-1]

        def step_env(i, tasks=2):
            return dict(os.environ, SLURM_PROCID=str(i), SLURM_NODEID=str(i), SLURM_STEP_NUM_TASKS=str(tasks),
                        SLURM_STEP_NODELIST=nodelist, ROCELAB_RUN_KEY="the step's run key, from sbatch")
        for i, (rc, err, res) in enumerate(self.run_parts(path, env_of=step_env)):
            self.assertEqual(rc, 0, f"part {i}: {err[-2000:]}")
            self.assertIn(f"--part auto: part {i} of 2 (Slurm step on 2 nodes; this one {self.underlay[i]}", err)
            self.assertEqual((res["split"]["part"], res["split"]["parts"], res["split"]["signed"]), (i, 2, True))
            self.assertEqual(sorted((f["from"], f["bytes"], f["digest_ok"]) for f in res["workloads"]["flows"]),
                             [("host3", 2 << 20, True), ("host4", 2 << 20, True)])
        r = subprocess.run([ROCELAB, "run", "--instance", self.parts[0], "--part", "auto", "--out",
                            os.path.join(self.tmp, "never"), path], capture_output=True, text=True, timeout=60,
                           env=step_env(0, tasks=4))
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("a split run is one task per node on two nodes or more (srun -N M --ntasks-per-node=1)", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "never")))

    def test_part_auto_takes_its_share_from_a_k8s_pod(self):
        """Issue 37: `run --part auto` in a pod of the Indexed Job `rocelab k8s` writes: the
        index Kubernetes gives the pod (JOB_COMPLETION_INDEX), ROCELAB_PARTS and the Job's and
        Service's names make the part, M and the peers' DNS names (here --peers gives the
        addresses, as the cluster's DNS is not here); the run is the hand-started one. An index
        beyond the parts is refused before anything is made."""
        path = self.incast_scenario("k8s.yaml", 2)

        def pod_env(i, parts=2):
            return dict(os.environ, JOB_COMPLETION_INDEX=str(i), ROCELAB_PARTS=str(parts), ROCELAB_K8S_JOB="rocelab-k8s",
                        ROCELAB_K8S_SERVICE="rocelab-k8s", ROCELAB_RUN_KEY="the run key, from the Secret")
        procs = []
        for i in (0, 1):
            out = os.path.join(self.tmp, f"pod{i}")
            procs.append((out, subprocess.Popen(
                ["nsenter", f"--net={NETNS_DIR}/{self.machines[i]}", ROCELAB, "run", "--no-report", "--instance",
                 self.parts[i], "--part", "auto", "--peers", ",".join(self.underlay), "--part-wait", "60", "--out", out,
                 path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=pod_env(i))))
        for i, (out, p) in enumerate(procs):
            _, err = p.communicate(timeout=300)
            self.assertEqual(p.returncode, 0, f"part {i}: {err[-2000:]}")
            self.assertIn(f"--part auto: part {i} of 2 (Kubernetes Indexed Job of 2 pods; this one "
                          f"rocelab-k8s-{i}.rocelab-k8s, {self.underlay[i]})", err)
            with open(os.path.join(out, "results.json")) as f:
                res = json.load(f)
            self.assertEqual((res["split"]["part"], res["split"]["parts"], res["split"]["signed"]), (i, 2, True))
            self.assertEqual(sorted((f["from"], f["bytes"], f["digest_ok"]) for f in res["workloads"]["flows"]),
                             [("host3", 2 << 20, True), ("host4", 2 << 20, True)])
        env = pod_env(2)
        r = subprocess.run([ROCELAB, "run", "--instance", self.parts[0], "--part", "auto", "--out",
                            os.path.join(self.tmp, "never"), path], capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("JOB_COMPLETION_INDEX 2 of ROCELAB_PARTS 2", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "never")))

    def test_split_runs_that_cannot_agree_stop_on_every_part_and_say_why(self):
        # Another seed on part 1: both refuse before anything is made.
        got = self.run_parts(self.path, ((), ("--seed", "9")))
        for i, (rc, err, _) in enumerate(got):
            self.assertEqual(rc, 3, err)
            self.assertIn(f"part {1 - i} plans another run", err)
            self.assertIn("every part needs the same file, --seed, --scale and M", err)
        # Part 1 names an underlay address its machine lacks: it stops at once, saying so (it
        # could only reach the hub from another address, which the hub refuses); part 0 waits
        # as long as asked and names the part it did not meet. Nothing is left up.
        good, self.underlay = self.underlay, ["198.19.254.0", "198.19.254.7"]
        got = self.run_parts(self.path, (("--part-wait", "5"), ("--part-wait", "60")))
        self.underlay = good
        self.assertEqual(got[1][0], 4, got[1][1])
        self.assertIn("no interface of this machine has the underlay address 198.19.254.7", got[1][1])
        self.assertEqual(got[0][0], 4, got[0][1])
        self.assertIn("for part 1", got[0][1])
        for name in self.parts:
            self.assertEqual(leftovers(name), [])
        # A part alone waits as long as asked, then names the part it did not meet.
        # Without a key only when asked for by name, and said where a CI reads it.
        alone = os.path.join(self.tmp, "alone")
        r = subprocess.run(["nsenter", f"--net={NETNS_DIR}/{self.machines[1]}", ROCELAB, "run", "--instance", self.parts[1],
                            "--part", "1/2", "--peers", ",".join(self.underlay), "--part-wait", "1", "--insecure-no-key",
                            "--out", alone, self.path], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn("waited 1 s at 'hello' for part 0 (198.19.254.0:790)", r.stderr)
        self.assertIn("--insecure-no-key: the rendezvous trusts the --peers addresses alone", r.stderr)
        with open(os.path.join(alone, "results.json")) as f:
            self.assertTrue(json.load(f)["split"]["insecure_no_key"])
        with open(os.path.join(alone, "junit.xml")) as f:
            self.assertIn('name="insecure_no_key" value="true"', f.read())
        r = rocelab("run", "--part-wait", "5", self.path)
        self.assertEqual(r.returncode, 3)
        self.assertIn("--part-wait goes with --part", r.stderr)


@unittest.skipUnless(IS_ROOT, "needs root: makes network namespaces")
class CrashSafety(unittest.TestCase):
    """`up` killed with SIGKILL anywhere; `down` must still leave nothing."""

    instance = f"c{PID}"

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rocelab-crash-")
        self.path = os.path.join(self.tmp, "s.yaml")
        with open(self.path, "w") as f:
            f.write(f"name: {self.instance}\nscale: 1000\n"
                    "fabric: {type: leaf-spine, spines: 4, leaves: 8, hosts_per_leaf: 4}\n")

    def tearDown(self):
        rocelab("down", self.instance)
        subprocess.run(["rm", "-rf", self.tmp])
        self.assertEqual(leftovers(self.instance), [])

    def log_objects(self):
        try:
            with open(f"{STATE_DIR}/{self.instance}.state") as f:
                lines = f.read().split("\n")[:-1]  # a torn last line was never acted on
        except FileNotFoundError:
            return None, False
        return sum(1 for l in lines if l.startswith(("netns ", "veth "))), any(l.startswith("ready") for l in lines)

    def down_cleans(self, what):
        r = rocelab("down", self.instance)
        self.assertEqual(r.returncode, 0, f"{what}: {r.stderr}")
        self.assertEqual(leftovers(self.instance), [], what)

    def test_kills_at_seeded_uniform_moments(self):
        # A full up, watched: when its first object is logged and when it ends. Most of an
        # up (~0.4 of ~0.5 s here) is loading the BPF programs, before any object, so kills
        # land from a little before the first object to the end: uniform over the whole up,
        # one in nine landed between the first and last object, and 150 kills missed 15 at times.
        t0 = time.monotonic()
        p = subprocess.Popen([ROCELAB, "up", self.path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        first = None
        while p.poll() is None and first is None:
            if self.log_objects()[0]:
                first = time.monotonic() - t0
            time.sleep(0.001)
        _, err = p.communicate(timeout=300)
        duration = time.monotonic() - t0
        self.assertEqual(p.returncode, 0, err)
        self.assertIsNotNone(first, "the up logged an object while it ran")
        total, _ = self.log_objects()
        self.down_cleans("after a full up")
        rng = random.Random(20261122)
        landed, trials = 0, 0
        while landed < 15 and trials < 150:
            trials += 1
            p = subprocess.Popen([ROCELAB, "up", self.path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.8 * first, duration))
            p.send_signal(signal.SIGKILL)
            p.wait()
            n, ready = self.log_objects()
            # Between the first object made and the last: the first namespace is logged,
            # and "ready" (written after the last qdisc and program attach) is not.
            if n and not ready:
                landed += 1
            self.down_cleans(f"trial {trials} ({n} of {total} objects logged, ready={ready})")
        print(f"\ncrash: {trials} kills, {landed} between the first and last object "
              f"(up takes {duration * 1000:.0f} ms, its first object at {first * 1000:.0f} ms, {total} objects)",
              file=sys.stderr)
        self.assertGreaterEqual(landed, 15)

    def test_kill_when_the_log_holds_k_entries(self):
        r = rocelab("up", self.path)
        self.assertEqual(r.returncode, 0, r.stderr)
        total, _ = self.log_objects()
        self.down_cleans("after a full up")
        namespaces = 44
        exact = 0
        # Namespaces are logged one by one, veth pairs in one batch: the distinct states are
        # k = 1..44 namespaces, then all veths.
        for k in list(range(1, namespaces + 1)) + [total]:
            p = subprocess.Popen([ROCELAB, "up", self.path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            killed = False
            while p.poll() is None:
                n, ready = self.log_objects()
                if n is not None and n >= k:
                    p.send_signal(signal.SIGKILL)
                    killed = True
                    break
            p.wait()
            n, ready = self.log_objects()
            self.assertTrue(killed and p.returncode == -signal.SIGKILL, f"k={k}: up finished first")
            self.assertFalse(ready, f"k={k}")
            self.assertGreaterEqual(n, k)
            exact += n == k
            self.down_cleans(f"k={k} (log held {n})")
        print(f"\ncrash: killed at k = 1..{namespaces} and {total}; log held exactly k in {exact} of "
              f"{namespaces + 1} kills", file=sys.stderr)


    def test_a_slurm_epilog_takes_away_what_a_killed_part_left(self):
        """Issue 37: a `run` killed outright inside a Slurm job (SIGKILL: no teardown of its
        own) leaves its fabric up; `down --slurm-job ID`, the job's epilog, takes away every
        instance made inside that job, from its state file's record, and no other: an `up`
        of another job and one outside any job stay."""
        job = str(900000 + PID % 100000)
        mine, other, outside = self.instance, f"{self.instance}-o", f"{self.instance}-x"
        run_path = os.path.join(self.tmp, "long.yaml")
        with open(run_path, "w") as f:  # long enough to be killed mid-run
            f.write("scale: 1000\nfabric: {type: leaf-spine, spines: 1, leaves: 2, hosts_per_leaf: 2}\n"
                    "workloads: [{type: incast, hosts: [host2, host3, host4], to: host1, message: 512MB}]\n")
        try:
            p = subprocess.Popen([ROCELAB, "run", "--no-report", "--instance", mine, "--out",
                                  os.path.join(self.tmp, "run"), run_path], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True, env=dict(os.environ, SLURM_JOB_ID=job))
            deadline = time.monotonic() + 120
            while p.poll() is None and not self.log_objects()[1] and time.monotonic() < deadline:
                time.sleep(0.05)
            if p.poll() is not None:
                self.fail(f"the run ended before it was killed: {p.communicate()[1][-1500:]}")
            time.sleep(1)  # mid-run: its traffic flowing
            p.send_signal(signal.SIGKILL)
            p.communicate(timeout=60)
            self.assertNotEqual(leftovers(mine), [], "a part killed outright leaves its fabric up")
            for name, env in ((other, dict(os.environ, SLURM_JOB_ID=str(int(job) + 1))), (outside, None)):
                r = subprocess.run([ROCELAB, "up", "--instance", name, self.path], capture_output=True, text=True,
                                   timeout=300, env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
            r = rocelab("-j", "status")
            jobs = {st["instance"]: st.get("job") for st in json.loads(r.stdout)}
            self.assertEqual((jobs[mine], jobs[other], jobs[outside]), (f"slurm:{job}", f"slurm:{int(job) + 1}", None))
            r = rocelab("-j", "down", "--slurm-job", job)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual([d["instance"] for d in json.loads(r.stdout)], [mine])
            self.assertEqual(leftovers(mine), [])
            for name in (other, outside):
                self.assertNotEqual(leftovers(name), [], f"{name}: not of job {job}, left up")
            r = rocelab("down", "--slurm-job", job)  # again: nothing of the job is up
            self.assertEqual((r.returncode, r.stdout.strip()), (0, f"no instance of slurm:{job} is up: nothing to do"))
            r = rocelab("down", "--slurm-job", "12a")
            self.assertEqual(r.returncode, 3, r.stderr)
        finally:
            for name in (mine, other, outside):
                rocelab("down", name)
                self.assertEqual(leftovers(name), [], name)

    def test_an_epilog_does_not_hang_on_a_held_instance(self):
        """Issue 49: `down --slurm-job ID` waited for the instance's lock with no end, so a
        part stuck holding it (or anyone who opened its state file and locked it) hung the
        job's epilog, and Slurm's node with it. It waits --lock-wait seconds (30 by default
        there), then exits 4 naming the holder, with nothing touched; once the lock is free,
        the same line takes the instance away."""
        job = str(800000 + PID % 100000)
        r = subprocess.run([ROCELAB, "up", "--instance", self.instance, self.path], capture_output=True, text=True,
                           timeout=300, env=dict(os.environ, SLURM_JOB_ID=job))
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                                       "f = open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True)\n"
                                       "time.sleep(600)", f"{STATE_DIR}/{self.instance}.state"],
                                      stdout=subprocess.PIPE, text=True)
            try:
                self.assertEqual(holder.stdout.readline().strip(), "held")
                t0 = time.monotonic()
                r = rocelab("down", "--slurm-job", job, "--lock-wait", "2")
                waited = time.monotonic() - t0
                self.assertEqual(r.returncode, 4, r.stdout + r.stderr)
                self.assertGreaterEqual(waited, 2.0, "it waited its --lock-wait")
                self.assertRegex(r.stderr, rf"is still held after \d+\.\d s by PID {holder.pid} \(")
                self.assertIn("nothing was touched", r.stderr)
                self.assertNotEqual(leftovers(self.instance), [], "the held instance is left as it was")
                r = rocelab("down", "--lock-wait", "0.5", self.instance)  # the same for a named down
                self.assertEqual(r.returncode, 4, r.stderr)
                self.assertIn(f"by PID {holder.pid} (", r.stderr)
            finally:
                holder.kill()
                holder.wait()
            r = rocelab("-j", "down", "--slurm-job", job, "--lock-wait", "2")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual([d["instance"] for d in json.loads(r.stdout)], [self.instance])
            self.assertEqual(leftovers(self.instance), [])
            r = rocelab("down", "--slurm-job", job, "--lock-wait", "-1")
            self.assertEqual(r.returncode, 3, r.stderr)
        finally:
            rocelab("down", self.instance)
            self.assertEqual(leftovers(self.instance), [])

@unittest.skipUnless(IS_ROOT and shutil.which("unshare"), "needs root and unshare: a network namespace stands for the machine")
class DedicatedMachine(unittest.TestCase):
    """Issue 49: ROCELAB_DEDICATED_MACHINE=1 (rxe before Linux 7.1) puts the hosts in the
    machine's own namespace, and wrote its sysctls (forwarding, rp_filter, accept_local,
    icmp_ratelimit, the multipath hash) and moved its local rule for good. The values before
    go to the state file first; down, or the rollback of an up that failed, puts them back.
    A fresh namespace (unshare -n) stands for the machine, so this one's is never touched."""

    KEYS = {"net/ipv4/conf/all/forwarding": "1", "net/ipv4/conf/all/rp_filter": "2",
            "net/ipv4/conf/all/accept_local": "0", "net/ipv4/icmp_ratelimit": "1000",
            "net/ipv4/fib_multipath_hash_policy": "0"}

    def test_the_machines_own_settings_come_back(self):
        if tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2]) >= (7, 1):
            self.skipTest("Linux 7.1+: rxe follows namespaces, so no host is placed in the machine's own")
        instance = f"ded{PID % 100000}"
        show = "; ".join(f"echo {k}=$(cat /proc/sys/{k})" for k in self.KEYS) + "; echo rule=$(ip rule | head -1)"
        script = "; ".join([
            *(f"echo {v} > /proc/sys/{k}" for k, v in self.KEYS.items()),  # not what the fabric writes
            "echo '# before'", show,
            f"ROCELAB_DEDICATED_MACHINE=1 {ROCELAB} up --instance {instance} {SOURCE}/scenarios/rxe-incast.yaml; echo up=$?",
            f"{ROCELAB} down {instance}; echo down=$?",
            "echo '# after'", show])
        try:
            r = subprocess.run(["unshare", "-n", "sh", "-c", script], capture_output=True, text=True, timeout=300)
        finally:
            rocelab("down", instance)
        self.assertEqual(r.returncode, 0, r.stderr[-1500:])
        before, after = (dict(l.split("=", 1) for l in part.strip().splitlines() if "=" in l)
                         for part in r.stdout.split("# after"))
        # Without rxe here up fails at its first NIC (after the sysctls and the rule): its
        # rollback is down's replay. With rxe, up passes and down replays.
        self.assertIn(before.pop("up"), ("0", "4"), r.stderr[-1500:])
        self.assertEqual(before.pop("down"), "0", r.stderr[-1500:])
        self.assertEqual({k: before[k] for k in self.KEYS}, self.KEYS)
        self.assertEqual(after, before, r.stderr[-1500:])
        self.assertRegex(after["rule"], r"^0:\s+from all lookup local")
        self.assertEqual(leftovers(instance), [])


@unittest.skipUnless(IS_ROOT, "needs root: makes network namespaces")
class Reliability(unittest.TestCase):
    """Issue 17: what a fault sweep found. A phase that throws, an agent killed mid-run, a
    damaged state file, a state file naming another program: each ends clean and says why."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rocelab-rel-")
        self.instance = f"rel{PID % 100000}"

    def tearDown(self):
        rocelab("down", self.instance)
        shutil.rmtree(self.tmp)
        self.assertEqual(leftovers(self.instance), [])

    def scenario(self, seconds_of_traffic=False):
        """scenarios/incast-lossless.yaml (PFC only, so the agent holds the line) under this
        test's instance name; its 2.2 s of traffic, or a short one."""
        with open(os.path.join(SOURCE, "scenarios", "incast-lossless.yaml")) as f:
            text = f.read().replace("name: incast-lossless", f"name: {self.instance}")
        if not seconds_of_traffic:
            text = text.replace("message: 1MB, iterations: 4", "message: 64KB, iterations: 1")
        path = os.path.join(self.tmp, "s.yaml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_an_exception_in_any_phase_after_validate_leaves_nothing(self):
        path = self.scenario()
        for phase in ("up", "connectivity", "traffic", "collect", "down"):
            out = os.path.join(self.tmp, f"run-{phase}")
            r = subprocess.run([ROCELAB, "run", path, "--out", out], capture_output=True, text=True, timeout=300,
                               env={**os.environ, "ROCELAB_TEST_THROW_IN": phase})
            self.assertEqual(r.returncode, 4, f"{phase}: {r.stderr[-500:]}")
            with open(os.path.join(out, "results.json")) as f:
                res = json.load(f)
            self.assertIn(f"{phase}: out of memory", json.dumps(res), phase)
            self.assertEqual(leftovers(self.instance), [], phase)

    def test_a_message_larger_than_memory_is_refused_and_leaves_nothing(self):
        path = self.scenario()
        with open(path) as f:
            text = f.read().replace("message: 64KB", "message: 64GB")
        with open(path, "w") as f:
            f.write(text)
        out = os.path.join(self.tmp, "run")
        r = subprocess.run([ROCELAB, "run", path, "--out", out], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 4, r.stderr[-500:])
        self.assertIn("of message buffers", r.stderr)
        self.assertEqual(leftovers(self.instance), [])

    def test_the_agent_killed_mid_run_is_a_testbed_fault_and_names_it(self):
        out = os.path.join(self.tmp, "run")
        p = subprocess.Popen([ROCELAB, "run", self.scenario(seconds_of_traffic=True), "--out", out],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        events = os.path.join(out, "events.jsonl")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and p.poll() is None:
            if os.path.exists(events):
                with open(events) as f:
                    if '"workloads","status":"started"' in f.read().replace(" ", ""):
                        break
            time.sleep(0.05)
        time.sleep(0.5)
        agents = [pid for pid in agent_pids(self.instance)]
        self.assertEqual(len(agents), 1, "the run's agent")
        os.kill(agents[0], signal.SIGKILL)
        _, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 5, err[-800:])  # a defect, not a slow machine: never retried
        with open(os.path.join(out, "results.json")) as f:
            res = json.load(f)
        self.assertEqual(res["class"], "testbed fault")
        traffic = next(ph for ph in res["phases"] if ph["name"] == "traffic")
        print(f"\nagent killed mid-run: exit {p.returncode}, traffic: {traffic.get('why')}", file=sys.stderr)
        self.assertIn("the PFC agent stopped during the run", traffic.get("why", ""))
        self.assertEqual(leftovers(self.instance), [])

    def test_a_damaged_state_file_is_refused_and_nothing_touched(self):
        r = rocelab("up", self.scenario())
        self.assertEqual(r.returncode, 0, r.stderr)
        state = f"{STATE_DIR}/{self.instance}.state"
        with open(state, "rb") as f:
            original = f.read()
        try:
            for damage in (b"", b"\x1b[2Jgarbage\n", b"rocelab-state 9\n" + original, b"rocelab-state 1\ninstance other\n"):
                with open(state, "wb") as f:
                    f.write(damage)
                r = rocelab("down", self.instance)
                self.assertEqual(r.returncode, 4, damage[:20])
                self.assertIn("damaged", r.stderr)
                self.assertIn("nothing was touched", r.stderr)
                self.assertTrue(os.path.exists(state))
                self.assertGreater(len([n for n in os.listdir(NETNS_DIR) if n.startswith(f"rl-{self.instance}.")]), 0)
                self.assertEqual(len(agent_pids(self.instance)), 1, "the agent left running")
        finally:
            with open(state, "wb") as f:
                f.write(original)
        self.assertEqual(rocelab("down", self.instance).returncode, 0)

    def test_a_proc_line_naming_another_program_is_left_alone(self):
        r = rocelab("up", self.scenario())
        self.assertEqual(r.returncode, 0, r.stderr)
        sleeper = subprocess.Popen(["sleep", "60"])
        try:
            with open(f"/proc/{sleeper.pid}/stat") as f:
                start = f.read().rsplit(")", 1)[1].split()[19]
            with open(f"{STATE_DIR}/{self.instance}.state", "a") as f:
                f.write(f"proc {sleeper.pid} {start}\n")
            self.assertEqual(rocelab("down", self.instance).returncode, 0)
            self.assertIsNone(sleeper.poll(), "down killed a process that is not its agent")
        finally:
            sleeper.kill()
            sleeper.wait()


def agent_pids(instance):
    """Live (not zombie) agent processes of an instance."""
    return [int(x.split()[-1]) for x in leftovers(instance) if x.startswith("agent process")]


if __name__ == "__main__":
    harness.run(globals())
