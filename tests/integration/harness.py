"""What every integration test script shares: its command line (--rocelab PATH --source
REPO_DIR, the rest for unittest) and the verbose unittest run."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import unittest

CHROMIUM = shutil.which("chromium")


def run(module_globals):
    """Sets the module's ROCELAB and SOURCE (absolute paths) and runs its tests."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rocelab", required=True)
    ap.add_argument("--source", required=True)
    args, rest = ap.parse_known_args()
    module_globals["ROCELAB"] = os.path.abspath(args.rocelab)
    module_globals["SOURCE"] = os.path.abspath(args.source)
    unittest.main(module=module_globals["__name__"], argv=[sys.argv[0], "-v", *rest])


def run_valid(rocelab, path, out, *flags, test="", timeout=600, env=None, count=True):
    """`rocelab run --retry-invalid`: an invalid run (exit 2) once more at 2 x D, as every
    runner does, logged (retries.py). Invalid at 2 x D too, the test is not judged on this
    machine: logged UNJUDGED and skipped with the reason. The process, the last run's
    results and its directory (DIR-2xD after a retry)."""
    r = subprocess.run([rocelab, "run", "--retry-invalid", *flags, path, "--out", out], capture_output=True,
                       text=True, timeout=timeout, env=env)
    res, out = settle(r.returncode, r.stderr, out, test, count)
    return r, res, out


def log_retries(test, stderr):
    """Every retry a command made on its own (`lab check`, `sweep`: an invalid run once more at
    2 x D) into the suite's retry log, like the tests' own (issue 48: they went uncounted)."""
    import retries  # beside this script
    for line in stderr.splitlines():
        if "once more at D =" in line:
            retries.record(test, line)


def settle(returncode, stderr, out, test="", count=True):
    """For a run started with --retry-invalid by the test itself (one it watches while it
    runs): logs the retry, skips the test when the run was invalid at 2 x D too, and gives
    the last run's results and directory."""
    import json
    import retries  # beside this script
    retried = next((line for line in stderr.splitlines() if "once more at D =" in line), None)
    if retried:
        retries.record(test or os.path.basename(out), retried)
        out += "-2xD"
    with open(os.path.join(out, "results.json")) as f:
        res = json.load(f)
    if returncode == 2 and retried and "did not keep up" in (res.get("error") or ""):
        if count:  # else each test that reads the run counts itself (SharedRun)
            retries.unjudged(test or os.path.basename(out), res["error"])
        raise unittest.SkipTest(f"invalid at D and 2 x D: not judged on this machine ({res['error']})")
    return res, out


class SharedRun(unittest.TestCase):
    """Tests that all read runs made once in setUpClass (through `shared`, with run_valid's
    count=False). When such a run could not be judged, every one of the class's tests is
    counted UNJUDGED and skipped: one run unjudged is that many tests that judged nothing
    (issue 48: counted once, a class's only browser check went unseen among them)."""
    unjudged = None

    @classmethod
    def shared(cls, make):
        try:
            return make()
        except unittest.SkipTest as e:
            cls.unjudged = str(e)
            return None

    def setUp(self):
        if self.unjudged:
            import retries
            retries.unjudged(f"{type(self).__name__}.{self._testMethodName}", self.unjudged)
            self.skipTest(self.unjudged)


def chromium_dom(test, html, tmp):
    """A report page as headless Chromium leaves it: asserts its script finished without a
    JavaScript error and gives the number of charts it drew."""
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                          f"--user-data-dir={tmp}/chromium", "--dump-dom", "file://" + html],
                         capture_output=True, text=True, timeout=120)
    test.assertEqual(dom.returncode, 0, dom.stderr)
    charts = re.search(r'<body[^>]*data-charts="(\d+)"', dom.stdout)
    test.assertIsNotNone(charts, "the page's script did not finish")
    test.assertIn('<div id="errors"></div>', dom.stdout, "a JavaScript error was caught")
    return int(charts.group(1))
