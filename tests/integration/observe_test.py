#!/usr/bin/env python3
"""Observability (root): a PFC-only 4:1 incast run, then what it leaves in its run directory.

- series-ports.csv: each queue's largest peak equals the counters' queue_max (exact: the
  egress program keeps the peak between samples), the paused time integrates to
  port_pause_time within 2 %, tx bytes integrate to the port's tx_bytes within 2 %.
- pfc.txt, qlen.txt, fct.txt in the HPCC simulator's line shapes.
- report.html in Debian's headless Chromium: every chart drawn, no JavaScript error, a
  screenshot that is not blank (skipped, with the reason, where chromium is not installed).
- telemetry.series: off leaves no series files and the report says so.
- rocelab top during a run: the receiver's queue at the bottleneck's rate.
- --metrics-port: scraped during a run, the Prometheus values agree with `rocelab stats -j`
  read right after, within what the line rate moves between the two reads.
- capture: with DCQCN on, tshark with scripts/wireshark/rocelab.lua decodes every PFC frame
  and CNP, none malformed; PFC frames a port sent = its pfc_tx, CNPs = the CNPs sent.

Usage: observe_test.py --rocelab PATH
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

import harness  # tests/integration/harness.py, beside this script: run_valid

ROCELAB = ""
CHROMIUM = shutil.which("chromium")
TSHARK = shutil.which("tshark")
DISSECTOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "wireshark", "rocelab.lua")

SCENARIO = """name: {name}
scale: 1000
defaults: {{rate: 100G, mtu: 4200}}
nodes:
  - {{name: sw, kind: switch}}
  - {{name: h1, kind: host}}
  - {{name: h2, kind: host}}
  - {{name: h3, kind: host}}
  - {{name: h4, kind: host}}
  - {{name: h5, kind: host}}
links:
  - {{endpoints: [h1, sw]}}
  - {{endpoints: [h2, sw]}}
  - {{endpoints: [h3, sw]}}
  - {{endpoints: [h4, sw]}}
  - {{endpoints: [h5, sw]}}
qos: {{profile: roce-lossless}}
hosts: {{dcqcn: {dcqcn}}}
workloads:
  - {{name: incast, type: incast, hosts: [h1, h2, h3, h4], to: h5, message: 1MB, iterations: 2}}
{extra}
"""


def metric(results, name):
    m = results["metrics"][name]
    return {(s["labels"].get("node"), s["labels"].get("port"), s["labels"].get("prio")): s["value"]
            for s in (m if isinstance(m, list) else m["samples"])}


@unittest.skipUnless(os.geteuid() == 0, "needs root: makes network namespaces")
class Observe(harness.SharedRun):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="rocelab-observe-")
        cls.run_dir = cls.shared(lambda: cls.run_scenario("on", "", count=False))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def run_scenario(cls, tag, extra, dcqcn="off", count=True):
        name = f"ob{os.getpid() % 100000}{tag}"
        path = os.path.join(cls.tmp, f"{name}.yaml")
        with open(path, "w") as f:
            f.write(SCENARIO.format(name=name, extra=extra, dcqcn=dcqcn))
        out = os.path.join(cls.tmp, tag)
        r, _, out = harness.run_valid(ROCELAB, path, out, test=f"observe {tag}", timeout=300, count=count)
        if r.returncode != 0:
            raise AssertionError(f"rocelab run exit {r.returncode}\n{r.stdout}\n{r.stderr}")
        return out

    def rows(self, name):
        with open(os.path.join(self.run_dir, name)) as f:
            return list(csv.DictReader(f))

    def results(self):
        with open(os.path.join(self.run_dir, "results.json")) as f:
            return json.load(f)

    def test_series_agree_with_the_counters(self):
        res = self.results()
        peak, paused, tx = {}, {}, {}
        rows = self.rows("series-ports.csv")
        self.assertGreater(len(rows), 10)
        for r in rows:
            k = (r["node"], r["port"], r["prio"])
            peak[k] = max(peak.get(k, 0), int(r["peak_bytes"]))
            paused[k] = paused.get(k, 0) + float(r["paused_s"])
        qmax = metric(res, "queue_max")
        toward_rx = qmax[("sw", "h5", "3")]
        self.assertGreater(toward_rx, 4 * 100_000, "PFC-only 4:1 incast: the queue toward h5 grows past XOFF per PG")
        self.assertEqual(peak[("sw", "h5", "3")], toward_rx)
        for k, v in qmax.items():
            if k[2] == "3":  # the traffic's priority (others only saw the connectivity check, before the series)
                self.assertEqual(peak.get(k, 0), v, k)
        ppt = metric(res, "port_pause_time")
        self.assertTrue(ppt, "PFC-only incast: senders were paused")
        for k, v in ppt.items():
            self.assertAlmostEqual(paused.get(k, 0), v, delta=0.02 * v, msg=k)
        # Physical Gbit/s over physical intervals integrate back to the bytes counted.
        iv = sorted({float(r["t_s"]) for r in rows})
        dt = {b: b - a for a, b in zip(iv, iv[1:])}
        dt[iv[0]] = iv[0]
        sent = sum(float(r["tx_gbps"]) * 1e9 / 8 * dt[float(r["t_s"])] for r in rows
                   if (r["node"], r["port"], r["prio"]) == ("sw", "h5", "3"))
        total = metric(res, "tx_bytes")[("sw", "h5", "3")]
        self.assertAlmostEqual(sent, total, delta=0.02 * total)
        sw = self.rows("series-switches.csv")
        self.assertTrue(sw)
        self.assertGreaterEqual(max(int(r["peak_bytes"]) for r in sw), toward_rx)

    def test_hpcc_files(self):
        with open(os.path.join(self.run_dir, "pfc.txt")) as f:
            pfc = f.read().splitlines()
        self.assertTrue(pfc)
        for line in pfc:
            self.assertRegex(line, r"^\d+ \d+ [01] \d+ [01]$")
        with open(os.path.join(self.run_dir, "qlen.txt")) as f:
            qlen = f.read().splitlines()
        self.assertRegex(qlen[0], r"^time: \d+$")
        self.assertEqual(len(qlen), 1 + 5)  # one line per switch port
        for line in qlen[1:]:
            self.assertRegex(line, r"^0 [1-5]( \d+)+$")
        with open(os.path.join(self.run_dir, "fct.txt")) as f:
            fct = [l.split() for l in f.read().splitlines()]
        self.assertEqual(len(fct), 4)
        for sip, dip, sport, dport, size, start, t, ideal in fct:
            self.assertRegex(sip + dip, r"^[0-9a-f]{16}$")
            self.assertEqual(int(size), 2 * 1024 * 1024)
            self.assertGreater(int(t), int(ideal))  # four into one: slower than alone
        flows = self.rows("series-flows.csv")
        self.assertEqual({r["from"] for r in flows}, {"h1", "h2", "h3", "h4"})
        self.assertEqual(max(int(r["delivered_bytes"]) for r in flows), 2 * 1024 * 1024)

    @unittest.skipUnless(CHROMIUM, "Debian's chromium is not installed (scripts/setup.sh installs it)")
    def test_report_renders_without_error(self):
        html = os.path.join(self.run_dir, "report.html")
        self.assertTrue(os.path.exists(html), "run writes report.html")
        common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                  f"--user-data-dir={self.tmp}/chromium"]
        dom = subprocess.run(common + ["--dump-dom", "file://" + html], capture_output=True, text=True, timeout=120)
        self.assertEqual(dom.returncode, 0, dom.stderr)
        charts = re.search(r'<body[^>]*data-charts="(\d+)"', dom.stdout)
        self.assertIsNotNone(charts, "the page's script did not finish")
        self.assertGreaterEqual(int(charts.group(1)), 5)  # queues, pauses, flows, buffers, slowdown
        self.assertRegex(dom.stdout, r'<div id="errors"></div>', "a JavaScript error was caught")
        self.assertNotIn("Uncaught", dom.stderr)
        shot = os.path.join(self.tmp, "report.png")
        r = subprocess.run(common + ["--window-size=1300,3000", f"--screenshot={shot}", "file://" + html],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(os.path.getsize(shot), 50_000, "a blank page compresses to far less")

    def test_series_off(self):
        out = self.run_scenario("off", "telemetry: {series: off}")
        names = os.listdir(out)
        self.assertFalse([n for n in names if n.startswith("series-ports")], names)
        self.assertIn("fct.txt", names)
        with open(os.path.join(out, "report.html")) as f:
            self.assertIn("no time series in this run directory", f.read())

    @unittest.skipUnless(TSHARK, "tshark is not installed (scripts/setup.sh installs it)")
    def test_capture_decodes_pfc_and_cnp(self):
        out = self.run_scenario("cap", "capture: {ports: ['sw:h1', 'sw:h5']}", dcqcn="paper")
        with open(os.path.join(out, "results.json")) as f:
            res = json.load(f)

        def tshark(pcap, flt):
            r = subprocess.run([TSHARK, "-n", "-X", f"lua_script:{DISSECTOR}", "-r", os.path.join(out, pcap),
                                *(["-Y", flt] if flt else [])], capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            return r.stdout.splitlines()

        captured = metric(res, "captured_packets")
        for pcap, port in (("capture-sw-h1.pcap", ("sw", "h1", None)), ("capture-sw-h5.pcap", ("sw", "h5", None))):
            every = tshark(pcap, "")
            self.assertEqual(len(every), captured[port])
            self.assertGreater(len(every), 100)
            self.assertFalse([l for l in every if "Malformed" in l or "Unknown opcode" in l][:3])
            self.assertEqual(tshark(pcap, "_ws.malformed || _ws.expert.severity >= error"), [])
        # PFC: the frames the switch sent toward h1 that name a priority = its pfc_tx.
        pfc = tshark("capture-sw-h1.pcap", "rocelab.pfc.xoff != 0 || rocelab.pfc.xon != 0")
        sent = metric(res, "pfc_tx").get(("sw", "h1", "3"), 0)
        self.assertGreater(sent, 0, "the incast paused h1")
        self.assertEqual(len([l for l in pfc if "PFC X" in l]), sent)
        # CNPs: h5 (the notification point) sends them through sw:h5, each named by the script.
        cnp = tshark("capture-sw-h5.pcap", "rocelab.cnp")
        self.assertTrue(all("RoCEv2 CNP to QP" in l for l in cnp))
        self.assertEqual(len(cnp), res["workloads"]["engine"]["cnp_sent"])
        self.assertGreater(len(cnp), 0)

    def test_metrics_endpoint_agrees_with_stats(self):
        name = f"ob{os.getpid() % 100000}mp"
        path = os.path.join(self.tmp, f"{name}.yaml")
        with open(path, "w") as f:
            f.write(SCENARIO.format(name=name, dcqcn="paper", extra="").replace("iterations: 2", "iterations: 12"))
        port = 20000 + os.getpid() % 20000
        run = subprocess.Popen([ROCELAB, "run", "--no-report", "--retry-invalid", "--metrics-port", str(port), "--out",
                                os.path.join(self.tmp, "mp"), path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            text, deadline = None, time.time() + 60
            while time.time() < deadline and run.poll() is None:
                try:
                    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
                except OSError:
                    time.sleep(0.2)
                    continue
                if 'sai_queue_stat_bytes{node="sw",port="h5",queue="3"}' in body:
                    t_scrape = time.time()
                    text = body
                    break
                time.sleep(0.2)
            self.assertIsNotNone(text, "no scrape with traffic before the run ended")
            st = subprocess.run([ROCELAB, "stats", "-j", "--instance", name, "sw:h5"], capture_output=True, text=True)
            elapsed = time.time() - t_scrape
            self.assertEqual(st.returncode, 0, st.stderr)
            top = subprocess.run([ROCELAB, "top", name, "--count", "1", "--interval", "0.3"],
                                 capture_output=True, text=True, timeout=30)
        finally:
            run.wait(timeout=600)
        err = run.stderr.read().decode()
        harness.settle(run.returncode, err, os.path.join(self.tmp, "mp"), "observe metrics endpoint")
        self.assertEqual(run.returncode, 0, err)
        prom = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                prom[k] = float(v)
        q3 = json.loads(st.stdout)["ports"][0]["priorities"][3]
        moved = 100e9 / 1000 / 8 * (elapsed + 0.05) + 4200  # emulated line rate x the time between the reads
        scraped = prom['sai_queue_stat_bytes{node="sw",port="h5",queue="3"}']
        self.assertGreater(scraped, 0)
        self.assertLessEqual(scraped, q3["tx_bytes"])
        self.assertLessEqual(q3["tx_bytes"] - scraped, moved)
        self.assertLessEqual(prom['sai_queue_stat_watermark_bytes{node="sw",port="h5",queue="3"}'], q3["depth_max"])
        self.assertIn('node_infiniband_port_data_transmitted_bytes_total{device="h1_nic0",port="1"}', prom)
        self.assertTrue(any(k.startswith("sai_port_stat_pfc_rx_pkts{") for k in prom))
        # top, piped: one frame, the receiver's queue busy at the bottleneck's physical rate
        # (the run's scenario record gives D = 1000).
        self.assertEqual(top.returncode, 0, top.stderr)
        self.assertIn("(D = 1000)", top.stdout)
        row = [l.split() for l in top.stdout.splitlines() if l.startswith("sw:h5 ")]
        self.assertTrue(row, top.stdout)
        self.assertEqual(row[0][1], "3")
        self.assertGreater(float(row[0][3]), 20_000)  # tx Mbit/s, physical (the 100G link)
        self.assertLessEqual(float(row[0][3]), 101_000)

    def test_report_of_a_non_run_directory_is_bad_input(self):
        r = subprocess.run([ROCELAB, "report", self.tmp], capture_output=True, text=True)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("no results.json", r.stderr)
        # Hostile results.json files: bad input (exit 3) with the reason, or a report; never a crash.
        hostile = ['', '[]', '{"scenario": 5}', '{"assertions": [1, 2]}', '{"notes": [{}]}',
                   '{"workloads": {"flows": [7]}}', '{"scenario": {"name": ["x"]}}', '{"kernel": "6.18"}',
                   '{"outcome": "pass", "assertions": [{"observed": 3}]}', '{"seed": "x"', '{"scale": {}}']
        for i, text in enumerate(hostile):
            d = os.path.join(self.tmp, f"hostile{i}")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "results.json"), "w") as f:
                f.write(text)
            with open(os.path.join(d, "series-ports.csv"), "w") as f:
                f.write("t_s,node\n1,\"unterminated\nx,y,z\n")
            r = subprocess.run([ROCELAB, "report", "--no-plots", d], capture_output=True, text=True, timeout=60)
            self.assertIn(r.returncode, (0, 3), f"{text!r}: {r.stderr}")
            if r.returncode == 3:
                self.assertIn("rocelab report:", r.stderr)


if __name__ == "__main__":
    args = sys.argv[1:]
    ROCELAB = os.path.abspath(args[args.index("--rocelab") + 1])
    unittest.main(argv=[sys.argv[0]], verbosity=2)
