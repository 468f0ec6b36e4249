#!/usr/bin/env python3
"""`rocelab sweep` and `rocelab compare` (issue 35). Sweep: a grid of XOFF values x two seeds on a PFC-only incast - a row
a run in sweep.csv with the knob, the seed and the figures; the peak queue follows the
knob as PFC's arithmetic says (the queue toward the receiver holds each sender's PG up to
XOFF); report.html draws a chart per figure in headless Chromium with no JavaScript error;
the same command again resumes (runs nothing), another grid in that directory is refused.
Compare: an ECN-on and an ECN-off run of one incast (DCQCN on the hosts) - the page renders
in headless Chromium with no JavaScript error, names the ECN setting as what differs, and
puts ECN marks and CNPs (down 100 %) among the metrics that changed most.

Usage: sweep_test.py --rocelab PATH --source REPO_DIR
"""
import csv
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import harness  # tests/integration/harness.py, beside this script

ROCELAB = ""
SOURCE = ""
CHROMIUM = harness.CHROMIUM

SCENARIO = """name: {name}
seed: 1
scale: 1000
defaults: {{rate: 100G, mtu: 4200}}
fabric: {{type: leaf-spine, spines: 1, leaves: 1, hosts_per_leaf: 4}}
qos: {{profile: pfc-only}}
hosts: {{dcqcn: off}}
workloads:
  - {{name: in, type: incast, hosts: [host1, host2, host3], to: host4, message: 1MB, iterations: 2}}
"""


@unittest.skipUnless(os.geteuid() == 0, "needs root: each point runs a fabric")
class Sweep(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="rocelab-sweep-")
        cls.path = os.path.join(cls.tmp, "s.yaml")
        with open(cls.path, "w") as f:
            f.write(SCENARIO.format(name=f"sw{os.getpid() % 100000}"))
        cls.out = os.path.join(cls.tmp, "out")
        cls.args = ["sweep", "--out", cls.out, "--set", "qos.pfc.xoff=32KB,128KB", "--seeds", "1-2",
                    "--figure", "max(queue_max(node=leaf1, port=host4))", "--figure", "lossless_drops", cls.path]
        cls.first = subprocess.run([ROCELAB, *cls.args], capture_output=True, text=True, timeout=600)
        harness.log_retries("sweep first", cls.first.stderr)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def rows(self):
        with open(os.path.join(self.out, "sweep.csv")) as f:
            return list(csv.DictReader(f))

    def test_a_row_a_run_and_the_peak_follows_xoff(self):
        self.assertEqual(self.first.returncode, 0, self.first.stderr[-3000:])
        rows = self.rows()
        self.assertEqual([(r["qos.pfc.xoff"], r["seed"]) for r in rows],
                         [("32KB", "1"), ("32KB", "2"), ("128KB", "1"), ("128KB", "2")])
        peak = "max(queue_max(node=leaf1, port=host4))"
        for r in rows:
            self.assertEqual(r["exit_code"], "0")
            self.assertEqual(float(r["lossless_drops"]), 0)
            xoff = 32 * 1024 if r["qos.pfc.xoff"] == "32KB" else 128 * 1024
            # Three PGs each held at XOFF plus what arrives after their XOFF (a few frames).
            self.assertGreaterEqual(float(r[peak]), 3 * xoff, r)
            self.assertLessEqual(float(r[peak]), 3 * (xoff + 6 * 4200), r)
            self.assertTrue(os.path.exists(os.path.join(r["run_dir"], "results.json")))
        self.assertIn("4 runs (4 run now, 0 from before", self.first.stdout)

    @unittest.skipUnless(CHROMIUM, "Debian's chromium is not installed (scripts/setup.sh installs it)")
    def test_the_report_draws_every_chart(self):
        self.assertEqual(harness.chromium_dom(self, os.path.join(self.out, "report.html"), self.tmp), 2)  # two figures x one knob

    def test_the_same_command_resumes_and_another_grid_is_refused(self):
        again = subprocess.run([ROCELAB, *self.args], capture_output=True, text=True, timeout=600)
        harness.log_retries("sweep again", again.stderr)
        self.assertEqual(again.returncode, 0, again.stderr[-2000:])
        self.assertIn("4 runs (0 run now, 4 from before", again.stdout)
        other = [a.replace("32KB,128KB", "64KB,128KB") for a in self.args]
        r = subprocess.run([ROCELAB, *other], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 3)
        self.assertIn("holds another sweep", r.stderr)


@unittest.skipUnless(os.geteuid() == 0, "needs root: each run makes a fabric")
class Repeat(unittest.TestCase):
    """--repeat: each point several times at one seed (issue 48, build 7), and each figure's
    spread run to run: a row a run with its number, the spread printed and in the report."""

    def test_each_point_runs_again_at_its_seed_and_the_spread_is_said(self):
        tmp = tempfile.mkdtemp(prefix="rocelab-repeat-")
        try:
            path = os.path.join(tmp, "s.yaml")
            with open(path, "w") as f:
                f.write(SCENARIO.format(name=f"rp{os.getpid() % 100000}"))
            out = os.path.join(tmp, "out")
            r = subprocess.run([ROCELAB, "sweep", "--json", "--out", out, "--repeat", "2", "--figure", "lossless_drops",
                                "--figure", "max(jct)", path], capture_output=True, text=True, timeout=600)
            harness.log_retries("sweep repeat", r.stderr)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            with open(os.path.join(out, "sweep.csv")) as f:
                rows = list(csv.DictReader(f))
            self.assertEqual([(x["seed"], x["run"], x["exit_code"]) for x in rows], [("", "1", "0"), ("", "2", "0")])
            spread = json.loads(r.stdout)["spread"]
            # PFC-only, lossless: no drop in either run, so nothing moved.
            self.assertEqual(spread["lossless_drops"], {"run_to_run": 0, "seed_to_seed": None})
            jct = [float(x["max(jct)"]) for x in rows]
            self.assertAlmostEqual(spread["max(jct)"]["run_to_run"], (max(jct) - min(jct)) / (sum(jct) / 2), delta=1e-5)
            with open(os.path.join(out, "report.html")) as f:
                self.assertIn("<h2>Spread</h2>", f.read())
            bad = subprocess.run([ROCELAB, "sweep", "--repeat", "21", path], capture_output=True, text=True, timeout=60)
            self.assertEqual(bad.returncode, 3)
            self.assertIn("--repeat 21: from 1 to 20", bad.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


@unittest.skipUnless(os.geteuid() == 0, "needs root: the two runs make fabrics")
class Compare(harness.SharedRun):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="rocelab-compare-")
        text = SCENARIO.format(name=f"cmp{os.getpid() % 100000}").replace("qos: {profile: pfc-only}", "qos: {profile: roce-lossless}")
        text = text.replace("hosts: {dcqcn: off}", "hosts: {dcqcn: paper}")
        path = os.path.join(cls.tmp, "c.yaml")
        with open(path, "w") as f:
            f.write(text)
        # Exit 2 (the machine did not keep up) goes once more at 2 x D, as every runner does;
        # the compare then also names D among the differences.
        runs = cls.shared(lambda: [
            harness.run_valid(ROCELAB, path, os.path.join(cls.tmp, name), "--no-report", *extra,
                              test=f"sweep compare {name}", count=False)
            for name, extra in (("on", []), ("off", ["--set", "qos.ecn=false"]))])
        if runs is None:  # not judged: each test says so (SharedRun)
            return
        cls.runs = [r for r, _, _ in runs]
        cls.on, cls.off = (out for _, _, out in runs)
        cls.html = os.path.join(cls.tmp, "compare.html")
        cls.cmp = subprocess.run([ROCELAB, "compare", "-j", "--out", cls.html, cls.on, cls.off], capture_output=True, text=True,
                                 timeout=120)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_names_what_changed_most(self):
        for r in self.runs:
            self.assertIn(r.returncode, (0, 1), r.stderr[-2000:])
        self.assertEqual(self.cmp.returncode, 0, self.cmp.stderr)
        doc = json.loads(self.cmp.stdout)
        self.assertGreaterEqual(doc["scenario_differences"], 1)
        with open(self.html) as f:
            page = f.read()
        self.assertIn("qos.ecn", page)  # the setting that differs, named
        most = {m["metric"]: m["change"] for m in doc["most_changed"]}
        self.assertEqual(most.get("ecn_marked (sum)"), -1.0, doc["most_changed"])
        self.assertEqual(most.get("cnp_received"), -1.0, doc["most_changed"])

    @unittest.skipUnless(CHROMIUM, "Debian's chromium is not installed (scripts/setup.sh installs it)")
    def test_the_page_renders(self):
        self.assertEqual(self.cmp.returncode, 0, self.cmp.stderr)
        self.assertGreaterEqual(harness.chromium_dom(self, self.html, self.tmp), 2)  # queues and pauses at least


if __name__ == "__main__":
    harness.run(globals())
