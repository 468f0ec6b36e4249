#!/usr/bin/env python3
"""The PFC watchdog (issue 19) on real packets: a host storms priority 3 into one switch while
host1 sends to it and to a healthy host (the victim). `forward` lets the stormed queue send
and drops nothing; `alert` only reports and restores on the first clean poll; a storm
shorter than half the detection time is never declared and loses nothing; a gray slow
receiver that pauses part of every poll does not trip the default predicate; Broadcom's
predicate finds the storm in the same window. (`drop` runs
as scenarios/pfc-watchdog.yaml.) 1G links at D = 10; times physical. Needs root."""
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

# NCCL's RC timers (timeout 20: 4.3 s, retry_cnt 7), as a training job runs: the ACK timer
# runs while a storm holds a QP's packets in the fabric (as on an RNIC), and 4.3 s outlasts
# every storm here, so a flow that loses nothing never retransmits; one whose packets the
# watchdog dropped recovers at its first timeout.
BASE = """name: {name}
seed: {seed}
scale: 10
defaults: {{rate: 1G, mtu: 4200}}
nodes:
  - {{name: sw, kind: switch}}
  - {{name: host1, kind: host}}
  - {{name: host2, kind: host}}
  - {{name: host3, kind: host}}
links:
  - {{endpoints: [host1, sw]}}
  - {{endpoints: [host2, sw]}}
  - {{endpoints: [host3, sw]}}
qos:
  profile: pfc-only
  pfc:
    watchdog: {{detection_time: 200ms, restoration_time: 400ms, poll_interval: 100ms, action: {action}, predicate: {predicate}}}
hosts: {{dcqcn: off, rc: nccl}}
workloads:
  - {{name: tostorm, type: write_bw, from: host1, to: host3, message: 1MB, iterations: {iters}}}
  - {{name: victim, type: write_bw, from: host1, to: host2, message: 1MB, iterations: 60}}
faults:
  - {fault}
"""


def delivered_at(flow, t):
    """A flow's in-order delivered bytes at physical time t, linear between trace samples."""
    rows = flow["rate_trace"]["rows"]
    prev = None
    for r in rows:
        if r[0] >= t:
            if prev is None:
                return r[2]
            return prev[2] + (r[2] - prev[2]) * (t - prev[0]) / (r[0] - prev[0]) if r[0] > prev[0] else r[2]
        prev = r
    return rows[-1][2]


def rate(flow, a, b):
    return (delivered_at(flow, b) - delivered_at(flow, a)) * 8 / (b - a)


class Watchdog(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rocelab-wd-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_case(self, tag, action, fault, iters=40, seed=3, predicate="mellanox"):
        path = os.path.join(self.tmp, tag + ".yaml")
        with open(path, "w") as f:
            f.write(BASE.format(name=f"wd{tag}{os.getpid() % 1000}", seed=seed, action=action, fault=fault, iters=iters,
                                predicate=predicate))
        out = os.path.join(self.tmp, tag)
        r, res, _ = harness.run_valid(ROCELAB, path, out, test=f"pfcwd {tag}")
        self.assertEqual(r.returncode, 0, r.stderr[-1500:])
        m = res["metrics"]
        flows = {f["workload"]: f for f in res["workloads"]["flows"]}

        def total(name, **labels):
            return sum(s["value"] for s in m.get(name, []) if all(s["labels"].get(k) == v for k, v in labels.items()))
        return m, flows, total, res

    def test_forward_ignores_the_storm_and_the_queue_sends(self):
        m, flows, total, _ = self.run_case("fwd", "forward", '{type: pause_storm, target: "host3:nic0", at: 150ms, duration: 400ms, priority: 3}')
        det = m["pfcwd_detected_at"][0]["value"]
        print(f"\nforward: detected at {det:.3f} s; flow to host3 after it {rate(flows['tostorm'], det + 0.01, 0.55) / 1e6:.0f} "
              f"Mbit/s, TX OK {total('pfcwd_tx_ok'):.0f}, TX DROP {total('pfcwd_tx_dropped'):.0f}", file=sys.stderr)
        self.assertEqual(total("pfcwd_storms"), 1)
        self.assertTrue(0.35 < det <= 0.45, det)
        self.assertGreater(rate(flows["tostorm"], det + 0.01, 0.55), 0.3e9, "the stormed queue sends again")
        self.assertGreater(total("pfcwd_tx_ok"), 1000)
        self.assertEqual(total("pfcwd_tx_dropped"), 0)
        self.assertEqual(total("drops"), 0)
        self.assertEqual(m["retransmits"], 0)

    def test_alert_only_reports_and_restores_on_the_first_clean_poll(self):
        m, flows, total, _ = self.run_case("alert", "alert", '{type: pause_storm, target: "host3:nic0", at: 150ms, duration: 400ms, priority: 3}')
        det, res = m["pfcwd_detected_at"][0]["value"], m["pfcwd_restored_at"][0]["value"]
        print(f"\nalert: detected at {det:.3f} s, restored at {res:.3f} s; victim while stormed "
              f"{rate(flows['victim'], det + 0.01, 0.55) / 1e6:.0f} Mbit/s", file=sys.stderr)
        self.assertTrue(0.35 < det <= 0.45, det)
        # The last frame's pause (33.6 ms at 1G) runs out after 0.55 s; the next clean poll restores.
        self.assertTrue(0.55 < res <= 0.55 + 0.034 + 0.1 + 0.001, res)
        self.assertLess(rate(flows["victim"], det + 0.01, 0.55), 0.02e9, "still stopped: alert changes nothing")
        self.assertEqual(total("pfcwd_tx_dropped") + total("drops"), 0)
        self.assertEqual(m["retransmits"], 0)

    def test_a_storm_shorter_than_half_the_detection_time_is_not_declared(self):
        m, flows, total, _ = self.run_case("short", "drop", '{type: pause_storm, target: "host3:nic0", at: 150ms, duration: 90ms, priority: 3}', iters=20)
        print(f"\nshort storm: {total('pfcwd_storms'):.0f} detections, {total('drops'):.0f} drops, "
              f"{m['storm_frames']:.0f} frames", file=sys.stderr)
        self.assertGreater(m["storm_frames"], 4)
        self.assertEqual(total("pfcwd_storms"), 0)
        self.assertEqual(total("drops"), 0)
        self.assertEqual(m["retransmits"], 0)

    def test_the_broadcom_predicate_detects_the_storm_in_the_same_window(self):
        m, flows, total, _ = self.run_case("bcm", "drop", '{type: pause_storm, target: "host3:nic0", at: 150ms, duration: 400ms, priority: 3}',
                                           predicate="broadcom")
        det, res = m["pfcwd_detected_at"][0]["value"], m["pfcwd_restored_at"][0]["value"]
        print(f"\nbroadcom: detected at {det:.3f} s, restored at {res:.3f} s; victim after detection "
              f"{rate(flows['victim'], det + 0.01, 0.55) / 1e6:.0f} Mbit/s", file=sys.stderr)
        self.assertEqual(total("pfcwd_storms"), 1)
        self.assertEqual(total("pfcwd_storms", port="host3"), 1)
        self.assertTrue(0.35 < det <= 0.45, det)
        self.assertTrue(0.95 < res <= 1.05, res)
        self.assertGreater(rate(flows["victim"], det + 0.01, 0.55), 0.8e9, "the victim recovers")
        self.assertEqual(total("pfcwd_tx_dropped"), total("drops", reason="pfcwd"))

    def test_a_gray_slow_receiver_does_not_trip_the_default_predicate(self):
        # Draining at 30 % of 1G against host1's ~490 Mbit/s to it: the switch port toward it is
        # paused most of the time (73 %), never a whole poll with nothing sent.
        m, flows, total, _ = self.run_case("gray", "drop", '{type: slow_receiver, target: "host3:nic0", at: 0s, fraction: 0.3}', iters=60)
        paused = total("port_pause_time", node="sw", port="host3", prio="3")
        span = flows["tostorm"]["fct_s"]
        print(f"\ngray receiver: sw:host3 paused {paused / span * 100:.0f} % of {span:.3f} s; "
              f"{total('pfcwd_storms'):.0f} detections", file=sys.stderr)
        self.assertTrue(0.2 < paused / span < 0.8, paused / span)
        self.assertEqual(total("pfcwd_storms"), 0)
        self.assertEqual(total("drops"), 0)
        # pfc.txt, the HPCC simulator's format (time node nodeType ifIdx type): its pause
        # intervals add up to each port's port_pause_time.
        with open(os.path.join(self.tmp, "gray", "resolved.json")) as f:
            names = list(json.load(f)["derived"]["nodes"])
        opened, held, lines = {}, {}, 0
        with open(os.path.join(self.tmp, "gray", "pfc.txt")) as f:
            for line in f:
                t, node, kind, ifidx, typ = map(int, line.split())
                lines += 1
                self.assertEqual(kind, 0 if names[node].startswith("host") else 1, line)
                key = (names[node], ifidx)
                if typ == 1:
                    self.assertNotIn(key, opened, line)
                    opened[key] = t
                else:
                    held[key] = held.get(key, 0) + t - opened.pop(key)
        self.assertGreater(lines, 10)
        self.assertIn(("sw", 3), held)  # sw's third port, toward host3
        for (node, ifidx), ns in held.items():
            if (node, ifidx) in opened:
                continue  # a pause still in force when the run collected: its end is not in the file
            port = "host3" if node == "sw" else "nic0"
            self.assertAlmostEqual(ns / 1e9, total("port_pause_time", node=node, port=port, prio="3"), delta=1e-6)


if __name__ == "__main__":
    harness.run(globals())
