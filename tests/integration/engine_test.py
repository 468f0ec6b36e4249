#!/usr/bin/env python3
"""The built-in RoCEv2 engine on real packets: two hosts in two namespaces joined by one
veth, `rocelab perf` between them (RDMA WRITE and SEND, two QPs, a payload that needs
padding), captured with tcpdump in the requester's namespace.

- tshark decodes every captured packet as InfiniBand over UDP 4791 (RoCEv2), with no
  malformed packet or warning; the CNP shows as opcode 129 ("Unknown"), as DESIGN.md says.
- tests/integration/icrc_check.py, an independent zlib checker, verifies every ICRC.
- The engine's own figures: every message verified at the responder, no bad ICRC, CNPs
  sent for CE marks. The capture runs through a switch whose port toward h2 runs at half
  h1's rate, so its queue certainly passes Kmax (8 KB; PFC holds it near XOFF, 128 KB) and
  marks: CNPs follow from the first message, not from a chance queue at h1's own NIC.

Usage: engine_test.py --rocelab PATH --source REPO_DIR
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import harness  # tests/integration/harness.py, beside this script

ROCELAB = ""
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import icrc_check  # noqa: E402


def rocelab(*args, timeout=120):
    return subprocess.run([ROCELAB, *args], capture_output=True, text=True, timeout=timeout)


class Checker(unittest.TestCase):
    def test_the_checker_agrees_with_the_design_vector(self):
        frame = bytes.fromhex(
            "020000000002020000000001080045c0003c00004000401125ef0a0000020a000001"
            "c12312b7002800008100ffff400000110000000000000000000000000000000000000000"
            "4107b81e")
        tmp = tempfile.mkdtemp(prefix="rocelab-icrc-")
        try:
            path = os.path.join(tmp, "v.pcap")
            with open(path, "wb") as f:
                f.write(bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000"))
                bad = bytearray(frame)
                bad[-10] ^= 1  # one payload bit
                for fr in (frame, bytes(bad)):
                    f.write(b"\0" * 8 + len(fr).to_bytes(4, "little") * 2 + fr)
            self.assertEqual(icrc_check.check(path), {"checked": 2, "bad": 1, "opcodes": {"129": 2}})
        finally:
            shutil.rmtree(tmp)


@unittest.skipUnless(os.geteuid() == 0, "needs root: makes network namespaces")
@unittest.skipUnless(shutil.which("tshark") and shutil.which("tcpdump"), "needs tshark and tcpdump (scripts/setup.sh)")
class Capture(unittest.TestCase):
    instance = f"en{os.getpid() % 100000}"

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rocelab-engine-")
        self.path = os.path.join(self.tmp, "pair.yaml")
        # The capture's pair meets at a switch with a 2:1 rate step toward h2 (a queue that
        # certainly marks); the pacer's pair is one wire (nothing but the pacer sets the pace).
        if self._testMethodName.startswith("test_capture"):
            fabric = ("nodes:\n  - {name: h1, kind: host}\n  - {name: h2, kind: host}\n  - {name: sw, kind: switch}\n"
                      "links:\n  - {endpoints: [h1, sw]}\n  - {endpoints: [sw, h2], rate: 50G}\n")
        else:
            fabric = "nodes:\n  - {name: h1, kind: host}\n  - {name: h2, kind: host}\nlinks:\n  - {endpoints: [h1, h2]}\n"
        with open(self.path, "w") as f:
            f.write(f"name: {self.instance}\nscale: 1000\ndefaults: {{rate: 100G}}\n"
                    "qos: {ecn: {kmin: 1KB, kmax: 8KB, pmax: 1}}\n" + fabric)
        r = rocelab("up", self.path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.tcpdump = None

    def tearDown(self):
        if self.tcpdump and self.tcpdump.poll() is None:
            self.tcpdump.kill()
            self.tcpdump.wait()
        r = rocelab("down", self.instance)
        shutil.rmtree(self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)

    def perf(self, *args):
        r = rocelab("perf", self.path, "--from", "h1", "--to", "h2", "-j", *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_pacer_never_sends_faster_than_its_rate(self):
        # Pacing: data sent against what rate x time allowed while the QP's own pacer was the
        # limit. A pacer never sends faster than its rate: that is certain, and asserted. How
        # much slower it reads is the machine's doing (a busy 2-core machine takes the engine's
        # CPU): a speed figure, measured by bench/engine_pacing.py against its own run's
        # baseline, never held to a bound here. The bytes on the wire bound it from the other
        # side: one QP alone cannot move more than the line rate.
        for qps in (1, 2):
            write = self.perf("--verb", "write", "--size", "64KiB", "--iters", "60", "--qps", str(qps))
            pacing = [q["pacing_error"] for q in write["requester"]["qps"]]
            print(f"\npacing error, {qps} QP(s): {', '.join(f'{e:+.2%}' for e in pacing)}; "
                  f"{write['bw_average_gbps'] * 1000:.1f} Mb/s", file=sys.stderr)
            for e in pacing:
                # +1.4 % seen with two QPs under capture: a batch counted at its interval's start;
                # a wrong pacer (2x) reads +100 %.
                self.assertLess(e, 0.05, f"pacing error {pacing}: faster than the rate")
            self.assertLessEqual(write["bw_average_gbps"], 100 / 1000, "no faster than the emulated line rate")

    def test_capture_decodes_as_rocev2_and_every_icrc_verifies(self):
        pcap = os.path.join(self.tmp, "h1.pcap")
        self.err = open(os.path.join(self.tmp, "tcpdump.err"), "w")
        self.tcpdump = subprocess.Popen(["ip", "netns", "exec", f"rl-{self.instance}.h1", "tcpdump", "-i", "nic0",
                                         "-s", "0", "-B", "32768", "--immediate-mode", "-w", pcap, "udp port 4791"],
                                        stdout=subprocess.DEVNULL, stderr=self.err)
        time.sleep(1.0)  # time for tcpdump to open the interface
        self.assertIsNone(self.tcpdump.poll(), "tcpdump started")
        write = self.perf("--verb", "write", "--size", "64KiB", "--iters", "60", "--qps", "2")
        send = self.perf("--verb", "send", "--size", "10001", "--iters", "100", "--qps", "2")
        time.sleep(0.5)
        self.tcpdump.send_signal(signal.SIGINT)
        self.tcpdump.wait(timeout=10)
        self.err.close()
        with open(os.path.join(self.tmp, "tcpdump.err")) as f:
            summary = f.read()
        # SEND: every message compared at the responder; WRITE: the 16 slots of each QP's region.
        for r, n, verified in ((write, 120, 2 * 16 * 65536), (send, 200, 200 * 10001)):
            self.assertEqual(r["iterations"], n)
            self.assertEqual(r["errors"], 0)
            self.assertEqual(r["verified_bytes"], verified)
            for side in ("requester", "responder"):
                self.assertEqual(r[side]["endpoint"]["bad_icrc"], 0)
                self.assertEqual(r[side]["endpoint"]["malformed"], 0)
        cnps = write["responder"]["endpoint"]["cnp_sent"] + send["responder"]["endpoint"]["cnp_sent"]
        # A pacer never sends faster than its rate, even beside tcpdump (how much slower it
        # reads under capture load is the machine's doing: test_pacer_keeps_its_rate).
        pacing = [q["pacing_error"] for r in (write, send) for q in r["requester"]["qps"]]
        for e in pacing:
            self.assertLess(e, 0.10, f"pacing error {pacing}: faster than the rate")

        fields = subprocess.run(["tshark", "-r", pcap, "-T", "fields", "-E", "separator=,", "-e", "frame.protocols",
                                 "-e", "infiniband.bth.opcode"], capture_output=True, text=True, timeout=120)
        self.assertEqual(fields.returncode, 0, fields.stderr)
        rows = [line.split(",") for line in fields.stdout.splitlines()]
        not_roce = [r for r in rows if "infiniband" not in r[0]]
        opcodes = {}
        for r in rows:
            opcodes[r[1]] = opcodes.get(r[1], 0) + 1
        flagged = subprocess.run(["tshark", "-r", pcap, "-Y", '_ws.malformed || _ws.expert.severity >= "warning"'],
                                 capture_output=True, text=True, timeout=120)
        checked = icrc_check.check(pcap)
        print(f"\ncapture: {len(rows)} packets, opcodes {opcodes}; tshark malformed/warnings: "
              f"{len(flagged.stdout.splitlines())}; ICRC checker {checked['checked']} checked, {checked['bad']} bad; "
              f"engine CNPs {cnps}; pacing error under capture {', '.join(f'{e:+.2%}' for e in pacing)}; write {write['bw_average_gbps'] * 1000:.1f} Mb/s, "
              f"send {send['bw_average_gbps'] * 1000:.1f} Mb/s", file=sys.stderr)
        # Without --immediate-mode, libpcap hands packets over a block at a time and a SIGINT
        # loses the last block: ~100 packets "received by filter" but never written.
        print(summary.strip().replace("\n", "; "), file=sys.stderr)
        self.assertIn(f"{len(rows)} packets received by filter", summary, "the capture is complete")
        data = lambda *ops: sum(opcodes.get(str(o), 0) for o in ops)
        self.assertGreaterEqual(data(6, 7, 8), 120 * 64, "every WRITE packet (64 per 64 KiB message)")
        self.assertGreaterEqual(data(0, 1, 2), 200 * 10, "every SEND packet (10 per 10,001-byte message)")
        self.assertEqual(not_roce, [], "every packet decodes as RoCEv2")
        self.assertEqual(flagged.stdout.strip(), "", "no malformed packet")
        for op in ("6", "7", "8", "0", "1", "2", "17"):  # WRITE FIRST/MIDDLE/LAST, SEND F/M/L, ACK
            self.assertIn(op, opcodes)
        self.assertEqual(checked["checked"], len(rows))
        self.assertEqual(checked["bad"], 0)
        self.assertGreater(cnps, 0, "CE marks made CNPs")
        self.assertEqual(opcodes.get("129", 0), cnps, "every CNP on the wire, opcode 129")


if __name__ == "__main__":
    harness.run(globals())
