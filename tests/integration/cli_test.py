#!/usr/bin/env python3
"""The rocelab command as a user meets it: exit codes, run directory, JUnit, --help.

Usage: cli_test.py --rocelab PATH --source REPO_DIR
"""
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import harness  # tests/integration/harness.py, beside this script
import xml.etree.ElementTree as ET

ROCELAB = ""
SOURCE = ""

# Instance names carry the PID: tests of other ctest processes may run fabrics meanwhile.
INSTANCE = f"cli{os.getpid()}"
SMALL = f"name: {INSTANCE}\nscale: 1000\nfabric: {{type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 2}}\n"
IS_ROOT = os.geteuid() == 0


def rocelab(*args, cwd=None):
    return subprocess.run([ROCELAB, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


class Cli(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rocelab-cli-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_validate_ok_exits_0(self):
        r = rocelab("validate", os.path.join(SOURCE, "scenarios", "quickstart.yaml"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("4 hosts", r.stdout)

    def test_bad_input_exits_3_with_file_line_column(self):
        path = self.write("bad.yaml", SMALL + "colour: blue\n")
        r = rocelab("validate", path)
        self.assertEqual(r.returncode, 3)
        line = SMALL.count("\n") + 1
        self.assertIn(f"{path}:{line}:1: colour: unknown key", r.stderr)

    def test_missing_file_exits_3(self):
        r = rocelab("validate", os.path.join(self.tmp, "nope.yaml"))
        self.assertEqual(r.returncode, 3)
        self.assertIn("No such file", r.stderr)

    def test_unknown_command_and_bad_option_exit_3(self):
        self.assertEqual(rocelab("frobnicate").returncode, 3)
        self.assertEqual(rocelab("validate", "--no-such-option", "x.yaml").returncode, 3)
        self.assertEqual(rocelab().returncode, 3)

    def test_help_for_every_command_teaches_with_an_example(self):
        for cmd in ["validate", "graph", "run", "up", "down", "status", "doctor"]:
            r = rocelab(cmd, "--help")
            self.assertEqual(r.returncode, 0, cmd)
            self.assertIn(f"usage: rocelab {cmd}", r.stdout)
            self.assertIn("example:", r.stdout)
            self.assertEqual(rocelab("help", cmd).stdout, r.stdout)
        r = rocelab("--help")
        self.assertEqual(r.returncode, 0)
        for cmd in ["validate", "graph", "run", "up", "down", "status", "doctor"]:
            self.assertIn(cmd, r.stdout)

    def commands(self):
        """Every command the general help lists."""
        text = rocelab("--help").stdout.split("commands:\n", 1)[1].split("\n\n", 1)[0]
        return [line.split()[0] for line in text.splitlines() if line.strip()]

    def test_man_pages_say_what_help_says(self):
        cmds = self.commands()
        self.assertGreaterEqual(len(cmds), 18)
        top = rocelab("help", "man")
        self.assertEqual(top.returncode, 0, top.stderr)
        self.assertTrue(top.stdout.startswith(".TH ROCELAB 1"))
        for cmd in cmds:
            with self.subTest(cmd=cmd):
                self.assertIn(f"rocelab\\-{cmd.replace('-', chr(92) + '-')}(1)", top.stdout)
                man = rocelab("help", "man", cmd)
                self.assertEqual(man.returncode, 0, man.stderr)
                plain = man.stdout.replace("\\-", "-").replace("\\e", "\\").replace("\\&", "")
                self.assertIn(f".TH ROCELAB-{cmd.upper()} 1", man.stdout)
                help_text = rocelab(cmd, "--help").stdout
                usage, summary = help_text.splitlines()[0], help_text.splitlines()[2]
                self.assertIn(summary.rstrip("."), plain)
                options = help_text.split("\nexample:\n", 1)[0]  # its own options and the global ones
                for opt in re.findall(r"^  (?:-\w \[ )?--([a-z][a-z0-9-]*)", options, re.M):
                    self.assertIn(f"--{opt}", plain, f"{cmd}: --{opt} is in --help, not in the man page")
                for line in help_text.split("\nexample:\n", 1)[1].strip().splitlines():
                    self.assertIn(line.strip(), plain)
        self.assertEqual(rocelab("help", "man", "frobnicate").returncode, 3)

    def test_completion_offers_every_command_and_option(self):
        r = rocelab("completion", "bash")
        self.assertEqual(r.returncode, 0, r.stderr)
        script = self.write("rocelab.bash", r.stdout)
        self.assertEqual(subprocess.run(["bash", "-n", script]).returncode, 0, "the script parses")

        def complete(*words):
            line = " ".join(words)
            prog = (f"source {script}\nCOMP_WORDS=({line})\nCOMP_CWORD={len(words) - 1}\n_rocelab 2>/dev/null\n"
                    'printf "%s\\n" "${COMPREPLY[@]}"\n')
            out = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, timeout=30,
                                 env=dict(os.environ, PATH=os.path.dirname(ROCELAB) + os.pathsep + os.environ["PATH"]))
            return out.stdout.split()

        cmds = self.commands()
        self.assertEqual(sorted(complete("rocelab", "''")), sorted(cmds + ["help", "-v", "-j", "-h", "--help", "--version"]))
        self.assertIn("run", complete("rocelab", "ru"))
        self.assertIn("--scale", complete("rocelab", "run", "--sc"))
        self.assertIn("--seeds", complete("rocelab", "sweep", "--se"))
        self.assertEqual(sorted(complete("rocelab", "lab", "''")), ["check", "hint", "list", "reset", "solution", "start"])
        self.assertIn("lossless-incast", complete("rocelab", "lab", "start", "''"))

    def test_version_names_the_version_the_commit_and_the_kernel(self):
        r = rocelab("--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^rocelab \d+\.\d+\.\d+ \(commit [^)]+\) on Linux \S+: has .*netns")
        j = json.loads(rocelab("--version", "-j").stdout)
        self.assertEqual(j["kernel"], os.uname().release)
        self.assertIn("netns", j["features"])
        self.assertTrue(j["commit"])

    def test_resolved_json_round_trips(self):
        src = os.path.join(SOURCE, "scenarios", "rail-optimized.yaml")
        first = rocelab("validate", "--resolved", "-j", src)
        self.assertEqual(first.returncode, 0, first.stderr)
        doc = json.loads(first.stdout)
        self.assertEqual(doc["schema"], "rocelab.resolved/1")
        path = self.write("resolved.json", first.stdout)
        second = rocelab("validate", "--resolved", "-j", path)
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertEqual(second.stdout, first.stdout)

    def test_set_changes_one_knob_and_is_validated_like_the_file(self):
        src = os.path.join(SOURCE, "scenarios", "incast-dcqcn.yaml")
        r = rocelab("validate", "--resolved", "-j", "--set", "qos.ecn.kmin=64KB", "--set", "qos.ecn.marking=enqueue", src)
        self.assertEqual(r.returncode, 0, r.stderr)
        ecn = json.loads(r.stdout)["qos"]["ecn"]
        self.assertEqual((ecn["kmin"], ecn["kmax"], ecn["marking"]), ("64KiB", "160KiB", "enqueue"))
        bad = rocelab("validate", "--set", "qos.ecn.kmn=64KB", src)
        self.assertEqual(bad.returncode, 3)
        self.assertIn("kmn", bad.stderr)
        self.assertIn("with --set", bad.stderr)
        shape = rocelab("validate", "--set", "workloads.3.message=1MB", src)
        self.assertEqual(shape.returncode, 3)
        self.assertIn("--set workloads.3.message=1MB: 'workloads' is a list of 1", shape.stderr)
        # A run records what was set.
        out = os.path.join(self.tmp, "set-run")
        run = rocelab("run", "--model-only", "--no-report", "--out", out, "--set", "seed=11", src)
        self.assertIn(run.returncode, (0, 1), run.stderr)
        with open(os.path.join(out, "results.json")) as f:
            res = json.load(f)
        self.assertEqual(res["scenario"]["set"], ["seed=11"])
        self.assertEqual(res["seed"], 11)

    def test_graph_is_dot(self):
        r = rocelab("graph", os.path.join(SOURCE, "scenarios", "quickstart.yaml"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('graph "quickstart" {', r.stdout)
        self.assertIn("D = 1000)", r.stdout)
        self.assertIn("spine1", r.stdout)
        self.assertEqual(r.stdout.count("--"), 8)

    def test_plan_splits_every_node_once_and_cuts_only_switch_links(self):
        path = os.path.join(SOURCE, "scenarios", "fat-tree-k4.yaml")
        r = rocelab("plan", "-j", path, "--parts", "4")
        self.assertEqual(r.returncode, 0, r.stderr)
        plan = json.loads(r.stdout)
        doc = json.loads(rocelab("validate", "--resolved", "-j", path).stdout)
        nodes = doc["derived"]["nodes"]
        placed = [n for p in plan["parts"] for n in p["nodes"]]
        self.assertEqual(sorted(placed), sorted(nodes), "every node in exactly one part")
        part_of = {n: p["part"] for p in plan["parts"] for n in p["nodes"]}
        links = sum(len(n["interfaces"]) for n in nodes.values()) // 2
        self.assertEqual(sum(p["ports"] for p in plan["parts"]), 2 * links, "each link's two ports, once")
        self.assertGreater(len(plan["cut_links"]), 0)
        for c in plan["cut_links"]:
            a, b = c["a"].split(":")[0], c["b"].split(":")[0]
            self.assertNotEqual(part_of[a], part_of[b], c)
            self.assertEqual(c["parts"], [part_of[a], part_of[b]], c)
            self.assertNotIn("host", a + b, "a host's link never crosses a cut")
        # A cut carries its links' rates / D on the machines' network.
        self.assertAlmostEqual(plan["cut_wall_bps_each_way"],
                               sum(c["rate_bps"] for c in plan["cut_links"]) / plan["scale"], delta=1)
        # Two parts of the quickstart: one leaf with its hosts each; more parts than host
        # groups, or fewer than two, are refused as bad input.
        r = rocelab("plan", os.path.join(SOURCE, "scenarios", "quickstart.yaml"), "--parts", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("part 0:", r.stdout)
        self.assertIn("part 1:", r.stdout)
        for bad in ("1", "9"):
            r = rocelab("plan", os.path.join(SOURCE, "scenarios", "quickstart.yaml"), "--parts", bad)
            self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
            self.assertIn("rocelab plan:", r.stderr)

    def run_with(self, expect_lines, *flags):
        path = self.write("s.yaml", SMALL + "expect:\n" + "".join(f"  - {e}\n" for e in expect_lines))
        out = os.path.join(self.tmp, "run")
        r = rocelab("run", *flags, "--out", out, path)
        return r, out

    def test_run_passing_exits_0_and_writes_the_run_directory(self):
        r, out = self.run_with(["hosts == 4"], "--model-only")
        self.assertEqual(r.returncode, 0, r.stderr)
        for f in ["scenario.yaml", "resolved.json", "results.json", "events.jsonl", "junit.xml"]:
            self.assertTrue(os.path.exists(os.path.join(out, f)), f)
        with open(os.path.join(out, "results.json")) as f:
            res = json.load(f)
        self.assertEqual(res["outcome"], "pass")
        self.assertEqual(res["exit_code"], 0)
        self.assertEqual(res["seed"], 1)
        for key in ["schema_version", "kernel", "versions", "scale", "capabilities", "assertions"]:
            self.assertIn(key, res)

    def test_junit_with_a_pass_and_a_failure_parses_and_run_exits_1(self):
        r, out = self.run_with(["hosts == 4", "links > 100"], "--model-only")
        self.assertEqual(r.returncode, 1, r.stderr)
        root = ET.parse(os.path.join(out, "junit.xml")).getroot()
        cases = root.findall(".//testcase")
        self.assertEqual(len(cases), 2)
        by_name = {c.get("name"): c for c in cases}
        self.assertIsNone(by_name["hosts == 4"].find("failure"))
        failure = by_name["links > 100"].find("failure")
        self.assertIsNotNone(failure)
        self.assertIn("observed: links = 8", failure.text)
        suite = root.find("testsuite")
        self.assertEqual(suite.get("tests"), "2")
        self.assertEqual(suite.get("failures"), "1")

    def test_run_scale_override(self):
        r, out = self.run_with(["hosts == 4"], "--model-only", "--scale", "2000")
        self.assertEqual(r.returncode, 0, r.stderr)
        for f in ["results.json", "resolved.json"]:
            with open(os.path.join(out, f)) as fh:
                self.assertEqual(json.load(fh)["scale"], 2000, f)
        for bad in ["0", "-3", "1e15"]:
            r = rocelab("run", "--model-only", "--scale", bad, "--out", os.path.join(self.tmp, "b" + bad),
                        self.write("s.yaml", SMALL))
            self.assertEqual(r.returncode, 3, bad)
            self.assertIn("--scale", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "b" + bad)))

    def test_run_refuses_a_used_directory(self):
        path = self.write("s.yaml", SMALL)
        out = os.path.join(self.tmp, "used")
        os.makedirs(out)
        self.write("used/keep", "x")
        r = rocelab("run", "--model-only", "--out", out, path)
        self.assertEqual(r.returncode, 4)
        self.assertIn("not empty", r.stderr)

    def test_bad_scenario_run_exits_3_and_makes_nothing(self):
        path = self.write("bad.yaml", "scale: 0\n" + SMALL.split("\n", 1)[1])
        r = rocelab("run", path, cwd=self.tmp)
        self.assertEqual(r.returncode, 3)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "runs")))

    def test_hostile_instance_names_are_bad_input(self):
        for name in ["../../etc/passwd", "a/b", "x;reboot", "A" * 100_000, "rf/../x", "UPPER"]:
            for cmd in (["down", name], ["status", name]):
                r = rocelab(*cmd)
                self.assertEqual(r.returncode, 3, (cmd[0], name[:20], r.stderr))
                self.assertIn("not an instance name", r.stderr)
        self.assertFalse(os.path.exists("/run/rocelab/passwd.state"))

    def test_a_negative_seed_is_bad_input(self):
        r = rocelab("run", "--model-only", "--seed", "-5", self.write("s.yaml", SMALL), cwd=self.tmp)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("a seed is 0 or more", r.stderr)

    @unittest.skipUnless(IS_ROOT and shutil.which("unshare"), "needs root and unshare: a private /run/rocelab")
    def test_no_instance_and_several_exit_alike_in_every_command(self):
        """Issue 50: one class for one condition. With no NAME, no instance up exited 4 from
        stats, top and pfcwd but 3 from pause and inject, and several up made `down` exit 0.
        In a mount namespace of its own, /run/rocelab is first empty, then holds two state
        files (nothing else is read before the choice fails): every command says the same
        and exits the same, 4 for none (0 for down: nothing to take away), 3 for several."""
        cmds = {"stats": [], "top": ["--count", "1"], "pfcwd": ["show", "stats"], "pause": ["h1:p", "--prio", "3"],
                "inject": ["loss", "h1:p", "rate=0.1"], "down": []}
        script = ["mount -t tmpfs -o mode=0755 none /run/rocelab"]
        for state in ("none", "several"):
            if state == "several":
                script.append("touch /run/rocelab/aaa.state /run/rocelab/bbb.state")
            for cmd, args in cmds.items():
                line = " ".join([ROCELAB, cmd, *args])
                script.append(f"{line} > /dev/null 2> {self.tmp}/{state}-{cmd}.err; echo {state} {cmd} $?")
        os.makedirs("/run/rocelab", exist_ok=True)
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", "; ".join(script)],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = {tuple(l.split()[:2]): int(l.split()[2]) for l in r.stdout.splitlines()}
        for cmd in cmds:
            with open(f"{self.tmp}/none-{cmd}.err") as f:
                self.assertIn("no instance is up", f.read(), cmd)
            with open(f"{self.tmp}/several-{cmd}.err") as f:
                self.assertIn("several instances are up", f.read(), cmd)
            self.assertEqual(got[("none", cmd)], 0 if cmd == "down" else 4, cmd)
            self.assertEqual(got[("several", cmd)], 3, cmd)

    def test_a_user_who_is_not_root_is_told_so_not_that_nothing_is_up(self):
        # As root the test drops to `nobody` for the commands (setpriv, util-linux).
        pre = [] if not IS_ROOT else ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        # A copy `nobody` can reach (the checkout may sit under a directory only root enters).
        binary = ROCELAB
        if IS_ROOT:
            binary = os.path.join(self.tmp, "rocelab")
            shutil.copy(ROCELAB, binary)
            os.chmod(self.tmp, 0o755)
        for cmd in (["stats", "--instance", "nosuch"], ["pause", "--instance", "nosuch", "h:p", "--prio", "3"],
                    ["status", "nosuch"]):
            r = subprocess.run([*pre, binary, *cmd], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 4, (cmd, r.stderr))
            self.assertIn("permission denied", r.stderr, cmd)

    @unittest.skipIf(IS_ROOT, "as root, up succeeds: covered by test_up_status_down")
    def test_up_needs_root(self):
        r = rocelab("up", self.write("s.yaml", SMALL))
        self.assertEqual(r.returncode, 4)
        self.assertIn("needs root", r.stderr)

    @unittest.skipUnless(IS_ROOT, "needs root: makes network namespaces")
    def test_up_status_down(self):
        path = self.write("s.yaml", SMALL)
        prefix = f"rl-{INSTANCE}."
        try:
            r = rocelab("up", path)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(len([n for n in os.listdir("/run/netns") if n.startswith(prefix)]), 8)
            again = rocelab("up", path)
            self.assertEqual(again.returncode, 4)
            self.assertIn("already up", again.stderr)
            st = rocelab("status", "-j", INSTANCE)
            self.assertEqual(st.returncode, 0, st.stderr)
            doc = json.loads(st.stdout)
            self.assertEqual(doc["state"], "up")
            self.assertTrue(doc["agent"]["running"], "up started the agent")
            agent_pid = doc["agent"]["pid"]
            self.assertEqual(len(doc["nodes"]), 8)
            ports = {}
            for n in doc["nodes"]:
                self.assertTrue(n["present"])
                self.assertEqual(n["namespace"], prefix + n["node"])
                for i in n["interfaces"]:
                    if i["name"] == "lo":
                        continue
                    self.assertTrue(i["admin_up"] and i["carrier"], (n["node"], i["name"]))
                    self.assertEqual(i["mtu"], 1500)
                    self.assertEqual(len(i["addresses"]), 1)
                    self.assertTrue(i["addresses"][0].endswith("/31"))
                    ports[f'{n["node"]}:{i["name"]}'] = i["peer"]
            self.assertEqual(len(ports), 16)  # 8 links, two ends each
            for here, peer in ports.items():
                self.assertEqual(ports[peer], here)  # peers are mutual
            listed = rocelab("status")
            self.assertIn(f"{INSTANCE}: up, 8/8 namespaces", listed.stdout)
        finally:
            d = rocelab("down", INSTANCE)
        self.assertEqual(d.returncode, 0, d.stderr)
        self.assertIn("8 namespaces removed", d.stdout)
        try:
            with open(f"/proc/{agent_pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            state = "gone"
        self.assertIn(state, ("gone", "Z"), "down stopped the agent")
        self.assertEqual([n for n in os.listdir("/run/netns") if n.startswith(prefix)], [])
        self.assertFalse(os.path.exists(f"/run/rocelab/{INSTANCE}.state"))
        d2 = rocelab("down", INSTANCE)  # idempotent
        self.assertEqual(d2.returncode, 0)
        self.assertIn("not up", d2.stdout)

    @unittest.skipUnless(IS_ROOT, "needs root: makes network namespaces")
    def test_real_run_checks_connectivity(self):
        r, out = self.run_with(["unreachable_pairs == 0", "host_pairs == 12"])
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "results.json")) as f:
            res = json.load(f)
        self.assertEqual(res["mode"], "fabric")
        self.assertEqual(res["metrics"]["reachable_pairs"], 12)
        self.assertEqual([p["name"] for p in res["phases"]],
                         ["validate", "up", "connectivity", "traffic", "collect", "down"])
        self.assertTrue(all(p["status"] == "done" for p in res["phases"]), res["phases"])
        self.assertEqual([n for n in os.listdir("/run/netns") if n.startswith(f"rl-{INSTANCE}.")], [])

    def test_doctor_json(self):
        r = rocelab("doctor", "-j")
        self.assertIn(r.returncode, (0, 4))
        doc = json.loads(r.stdout)
        caps = doc["capabilities"]
        for n in ["root", "netns", "veth", "htb", "tbf", "clsact", "bpf", "btf", "netem", "fq", "rxe_in_netns"]:
            self.assertIn(n, caps)
        for name, c in caps.items():
            self.assertIsInstance(c["ok"], bool, name)
            self.assertTrue(c["why"], name)
        self.assertEqual(r.returncode == 0, doc["ok"])


if __name__ == "__main__":
    harness.run(globals())
