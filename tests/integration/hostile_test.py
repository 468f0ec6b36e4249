#!/usr/bin/env python3
"""Safe to run as root where others reach (issue 34):

- A scenario is read once (issue 49): its owner swaps it for a link to a root-only file
  mid-sweep (a user the test makes, removed after), and no run directory holds that file.
- The run directory is held (issue 49): that user renames it mid-run and leaves a link in its
  place, and nothing is written where the link points.
- A run directory (`--out`) with a planted link, one another user owns, or one others may
  write to is refused before anything is made, and the link's target is untouched.
- `rocelab report` on a results.json nested 100,000 deep refuses it (bad input, exit 3)
  instead of crashing.
- A client of the agent's socket that asks for every figure and then never reads (a
  `rocelab stats` stopped with Ctrl-Z) leaves PFC working: a PFC-only incast beside it
  passes, and its pause reaction p99 stays within what the same run reads alone.

Usage: hostile_test.py --rocelab PATH --source REPO_DIR
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import harness  # tests/integration/harness.py, beside this script

ROCELAB = ""
SOURCE = ""

INCAST = """name: {name}
seed: 1
scale: 1000
defaults: {{rate: 100G, mtu: 4200}}
fabric: {{type: leaf-spine, spines: 1, leaves: 1, hosts_per_leaf: 4}}
qos: {{profile: pfc-only}}
hosts: {{dcqcn: off}}
workloads:
  - {{name: in, type: incast, hosts: [host1, host2, host3], to: host4, message: 1MB, iterations: 16}}
expect:
  - lossless_drops == 0
  - retransmits == 0
"""


@unittest.skipUnless(os.geteuid() == 0, "needs root: runs as root is what it checks")
class RunDirectories(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rocelab-hostile-")
        os.chmod(self.tmp, 0o755)
        self.precious = os.path.join(self.tmp, "precious")
        with open(self.precious, "w") as f:
            f.write("keep me\n")
        self.scenario = os.path.join(SOURCE, "scenarios", "explicit.yaml")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_into(self, out):
        return subprocess.run([ROCELAB, "run", "--model-only", "--no-report", "--out", out, self.scenario],
                              capture_output=True, text=True, timeout=120)

    def test_a_planted_link_is_refused_and_its_target_untouched(self):
        out = os.path.join(self.tmp, "r1")
        os.mkdir(out, 0o755)
        os.symlink(self.precious, os.path.join(out, "results.json"))
        r = self.run_into(out)
        self.assertEqual(r.returncode, 4, r.stderr[-800:])
        self.assertIn("not empty", r.stderr)
        with open(self.precious) as f:
            self.assertEqual(f.read(), "keep me\n")

    def test_a_directory_of_another_user_or_open_to_others_is_refused(self):
        theirs, open_dir, link = (os.path.join(self.tmp, n) for n in ("theirs", "open", "link"))
        os.mkdir(theirs, 0o755)
        os.chown(theirs, 65534, 65534)
        os.mkdir(open_dir)
        os.chmod(open_dir, 0o777)
        os.symlink(self.tmp, link)
        for path, why in ((theirs, "belongs to uid 65534"), (open_dir, "others may write"), (link, "symbolic link")):
            r = self.run_into(path)
            self.assertEqual(r.returncode, 4, f"{path}: {r.stderr[-800:]}")
            self.assertIn(why, r.stderr)
            self.assertEqual(os.listdir(path) if not os.path.islink(path) else [], [], "nothing written")
        # A fresh one is made, ours alone, and the run writes into it.
        fresh = os.path.join(self.tmp, "fresh", "r")
        r = self.run_into(fresh)
        self.assertIn(r.returncode, (0, 1), r.stderr[-800:])  # --model-only: its fabric assertions may fail
        self.assertEqual(os.stat(fresh).st_mode & 0o022, 0)
        self.assertTrue(os.path.exists(os.path.join(fresh, "results.json")))

    def test_a_files_output_never_goes_through_a_planted_link(self):
        """Issue 49: `graph -o` and `export sonic -o` opened their file by name (std::ofstream),
        following a link a user left where root's output was to go. Now refused, the link's
        target as it was; a plain path is written."""
        link = os.path.join(self.tmp, "out")
        os.symlink(self.precious, link)
        for args in (["graph", self.scenario, "-o", link], ["export", "sonic", self.scenario, "-o", link]):
            r = subprocess.run([ROCELAB, *args], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 4, f"{args[0]}: {r.stderr[-800:]}")
            self.assertIn("it is a symbolic link", r.stderr)
            with open(self.precious) as f:
                self.assertEqual(f.read(), "keep me\n", args[0])
            plain = os.path.join(self.tmp, f"{args[0]}.out")
            r = subprocess.run([ROCELAB, *args[:-1], plain], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, f"{args[0]}: {r.stderr[-800:]}")
            self.assertGreater(os.path.getsize(plain), 0)

    def test_report_refuses_deeply_nested_results(self):
        d = os.path.join(self.tmp, "deep")
        os.mkdir(d)
        with open(os.path.join(d, "results.json"), "w") as f:
            f.write('{"faults": ' + "[" * 100000 + "]" * 100000 + "}")
        r = subprocess.run([ROCELAB, "report", d], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 3, r.stderr[-800:])
        self.assertIn("nested deeper", r.stderr)


SMALL = """name: {name}
seed: 1
scale: 1000
defaults: {{rate: 100G, mtu: 4200}}
fabric: {{type: leaf-spine, spines: 1, leaves: 1, hosts_per_leaf: 2}}
qos: {{profile: pfc-only}}
hosts: {{dcqcn: off}}
workloads:
  - {{name: w, type: write_bw, from: host1, to: host2, message: 256KB, iterations: 1}}
"""


class InstalledBinary(unittest.TestCase):
    """Issue 49: `sudo -E` passes ROCELAB_*, so an installed rocelab honours no test hook and
    never looks for labs in the source tree it was built from; the build's own binary (the
    tests') does both. A copy outside the build tree stands for the installed one."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rocelab-installed-")
        os.makedirs(os.path.join(self.tmp, "bin"))
        self.copy = os.path.join(self.tmp, "bin", "rocelab")
        shutil.copy2(ROCELAB, self.copy)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_a_test_hook_and_the_source_labs_are_the_build_binarys_alone(self):
        scenario = os.path.join(SOURCE, "scenarios", "explicit.yaml")
        env = dict(os.environ, ROCELAB_TEST_THROW_IN="validate")
        got = {}
        for name, exe in (("build", ROCELAB), ("installed", self.copy)):
            out = os.path.join(self.tmp, f"run-{name}")
            got[name] = subprocess.run([exe, "run", "--model-only", "--no-report", "--out", out, scenario],
                                       capture_output=True, text=True, timeout=120, env=env)
        self.assertEqual(got["build"].returncode, 4, got["build"].stderr[-800:])
        self.assertIn("validate: out of memory", got["build"].stderr)
        self.assertIn(got["installed"].returncode, (0, 1), got["installed"].stderr[-800:])  # --model-only: assertions may fail
        self.assertNotIn("out of memory", got["installed"].stderr)
        env = {k: v for k, v in os.environ.items() if k != "ROCELAB_LABS"}
        r = subprocess.run([ROCELAB, "lab", "list"], capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([self.copy, "lab", "list"], capture_output=True, text=True, timeout=60, env=env)
        self.assertNotIn(os.path.realpath(SOURCE), r.stdout + r.stderr)
        self.assertIn(os.path.join(self.tmp, "share", "rocelab", "labs"), r.stderr, "it looks beside its own prefix")


class AnotherUser(unittest.TestCase):
    """A second, unprivileged user, made for the test and removed after, and a directory
    (mode 0755) for its files."""

    def setUp(self):
        self.user = f"rl{type(self).__name__[:4].lower()}{os.getpid() % 100000}"
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", self.user], check=True,
                       capture_output=True)
        self.tmp = tempfile.mkdtemp(prefix="rocelab-another-")
        os.chmod(self.tmp, 0o755)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)
        subprocess.run(["userdel", self.user], capture_output=True)


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("useradd") and shutil.which("runuser"),
                     "needs root and useradd/runuser: the attack is another user's, for real")
class ScenarioReadOnce(AnotherUser):
    """Issue 49, build 1: a run keeps the bytes its loader read. The file's owner (a user this
    test makes) swaps the scenario for a link to a root-only file once the sweep's first point
    has begun; no run directory may hold that file's bytes, and each holds what was loaded."""

    def test_a_scenario_swapped_for_a_link_mid_sweep_is_not_read_again(self):
        vault = os.path.join(self.tmp, "vault")
        os.mkdir(vault, 0o700)
        secret = os.path.join(vault, "secret")
        marker = f"ROOT-ONLY-{os.getpid()}-{time.time_ns()}"
        with open(secret, "w") as f:
            f.write(f"name: {marker}\n")
        os.chmod(secret, 0o600)
        home = os.path.join(self.tmp, "home")
        os.mkdir(home, 0o755)
        path = os.path.join(home, "s.yaml")
        text = SMALL.format(name=f"ro{os.getpid() % 100000}")
        with open(path, "w") as f:
            f.write(text)
        pw = subprocess.run(["id", "-u", self.user], capture_output=True, text=True, check=True)
        uid = int(pw.stdout)
        os.chown(home, uid, uid)
        os.chown(path, uid, uid)
        out = os.path.join(self.tmp, "out")
        p = subprocess.Popen([ROCELAB, "sweep", "--out", out, "--seeds", "1-2", "--figure", "lossless_drops", path],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first, second = os.path.join(out, "points", "0000"), os.path.join(out, "points", "0001")
        deadline = time.time() + 120
        while not os.path.exists(first) and p.poll() is None and time.time() < deadline:
            time.sleep(0.005)
        began_first, began_second = os.path.exists(first), os.path.exists(second)
        swap = subprocess.run(["runuser", "-u", self.user, "--", "ln", "-sfn", secret, path], capture_output=True,
                              text=True)
        _, err = p.communicate(timeout=600)
        harness.log_retries("hostile read once", err)
        self.assertEqual(swap.returncode, 0, swap.stderr)
        self.assertTrue(os.path.islink(path), "the owner swapped the file for a link")
        self.assertTrue(began_first and not began_second, "the swap came while the first point ran")
        self.assertEqual(p.returncode, 0, err[-1500:])
        copies = 0
        for d, _, files in os.walk(out):
            for n in files:
                with open(os.path.join(d, n), "rb") as f:
                    self.assertNotIn(marker.encode(), f.read(), os.path.join(d, n))
                if n == "scenario.yaml":
                    copies += 1
                    with open(os.path.join(d, n)) as f:
                        self.assertEqual(f.read(), text, os.path.join(d, n))
        self.assertEqual(copies, 2, "each point's run directory holds the file as loaded")


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("useradd") and shutil.which("runuser"),
                     "needs root and useradd/runuser: the attack is another user's, for real")
class RunDirectoryHeld(AnotherUser):
    """Issue 49, build 2: the run directory is held, not found again by name. A user this test
    makes owns the directory the run directory is made in; once the run has begun they rename
    it and leave a link to another directory in its place. Nothing may be written where the
    link points; every file goes into the directory the run made, and the run says so."""

    def test_a_run_directory_renamed_and_replaced_by_a_link_mid_run_redirects_nothing(self):
        uid = int(subprocess.run(["id", "-u", self.user], capture_output=True, text=True, check=True).stdout)
        theirs = os.path.join(self.tmp, "theirs")
        os.mkdir(theirs, 0o755)
        os.chown(theirs, uid, uid)
        elsewhere = os.path.join(self.tmp, "elsewhere")  # what root must not write into
        os.mkdir(elsewhere, 0o755)
        path = os.path.join(self.tmp, "s.yaml")
        with open(path, "w") as f:
            f.write(SMALL.format(name=f"rd{os.getpid() % 100000}"))
        out, moved = os.path.join(theirs, "run"), os.path.join(theirs, "moved")
        p = subprocess.Popen([ROCELAB, "run", "--out", out, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        deadline = time.time() + 120
        while not os.path.exists(os.path.join(out, "events.jsonl")) and p.poll() is None and time.time() < deadline:
            time.sleep(0.002)
        early = sorted(os.listdir(out)) if os.path.isdir(out) else None
        mv = subprocess.run(["runuser", "-u", self.user, "--", "mv", out, moved], capture_output=True, text=True)
        ln = subprocess.run(["runuser", "-u", self.user, "--", "ln", "-s", elsewhere, out], capture_output=True, text=True)
        stdout, err = p.communicate(timeout=600)
        harness.log_retries("hostile held dir", err)
        self.assertEqual((mv.returncode, ln.returncode), (0, 0), mv.stderr + ln.stderr)
        self.assertIsNotNone(early, "the run had begun when its directory was moved")
        self.assertNotIn("results.json", early, "... and not yet finished")
        self.assertIn(p.returncode, (0, 1), err[-1500:])
        self.assertEqual(os.listdir(elsewhere), [], "nothing followed the name to the link's target")
        for f in ("results.json", "junit.xml", "resolved.json", "scenario.yaml", "report.html"):
            self.assertTrue(os.path.isfile(os.path.join(moved, f)), f)
        self.assertIn("was renamed or replaced during the run", err)
        with open(os.path.join(moved, "results.json")) as f:
            self.assertTrue(any("renamed or replaced" in n for n in json.load(f)["notes"]))


def traffic_started(out):
    try:
        with open(os.path.join(out, "events.jsonl")) as f:
            return any('"workloads"' in line and '"started"' in line for line in f)
    except OSError:
        return False


def metric(res, name):
    v = res["metrics"].get(name)
    return v if not isinstance(v, list) else sum(s["value"] for s in v)


@unittest.skipUnless(os.geteuid() == 0, "needs root: makes network namespaces")
class AgentClients(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rocelab-hostile-")
        self.name = f"ho{os.getpid() % 10000}"
        self.path = os.path.join(self.tmp, "incast.yaml")
        with open(self.path, "w") as f:
            f.write(INCAST.format(name=self.name))

    def tearDown(self):
        subprocess.run([ROCELAB, "down", self.name], capture_output=True, timeout=120)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_incast(self, out, beside=None):
        p = subprocess.Popen([ROCELAB, "run", "--no-report", "--retry-invalid", "--out", out, self.path], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        stuck = []
        if beside:
            sock_path = f"/run/rocelab/{self.name}.agent.sock"
            t0 = time.time()
            while not traffic_started(out) and time.time() - t0 < 120 and p.poll() is None:
                time.sleep(0.01)
            # Once the traffic runs: clients that connect and say nothing (the agent used to
            # wait 200 ms for each one's line), or ask for every figure and never read a byte.
            for i in range(beside):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                try:
                    s.connect(sock_path)
                    if i % 2:
                        s.sendall(b'{"request": "figures"}\n')
                except OSError:
                    pass
                stuck.append(s)
        _, err = p.communicate(timeout=600)
        for s in stuck:
            s.close()
        res, _ = harness.settle(p.returncode, err, out, f"hostile {os.path.basename(out)}")
        return p.returncode, res, err

    def test_a_client_that_never_reads_leaves_pfc_working(self):
        rc0, alone, err0 = self.run_incast(os.path.join(self.tmp, "alone"))
        self.assertEqual(rc0, 0, err0[-1500:])
        rc1, beside, err1 = self.run_incast(os.path.join(self.tmp, "beside"), beside=12)
        a, b = metric(alone, "pfc_reaction_p99"), metric(beside, "pfc_reaction_p99")
        print(f"\npause reaction p99: alone {a * 1e6:.0f} us, beside 12 stuck clients {b * 1e6:.0f} us; "
              f"XOFF {metric(alone, 'pfc_xoff_tx'):.0f} / {metric(beside, 'pfc_xoff_tx'):.0f}", file=sys.stderr)
        self.assertEqual(rc1, 0, err1[-1500:])
        self.assertGreater(metric(beside, "pfc_xoff_tx"), 0, "PFC acted")
        self.assertEqual(metric(beside, "lossless_drops"), 0)
        # Blocked on a client, the loop would hold every pause for as long as the client
        # sleeps (seconds); served without blocking, the reaction stays within a few ms.
        self.assertLess(b, max(4 * a, 0.005))


if __name__ == "__main__":
    harness.run(globals())
