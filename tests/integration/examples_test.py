#!/usr/bin/env python3
"""Every example a user is shown runs as written: each YAML block of the README validates
(fragments on a small leaf-spine), and every command of the README's code blocks and of
every `rocelab COMMAND --help` runs and exits 0, in an order that gives each the state it
assumes (the plan below). An example missing from the plan fails the test, so a new one
must be added. `sudo` runs the command as is (the test runs as root); examples write into
a scratch directory."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import harness
import retries

ROCELAB = SOURCE = None
IS_ROOT = os.geteuid() == 0
BASE = "scale: 1000\nfabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 2}\n"
COMMANDS = ["validate", "graph", "run", "report", "up", "down", "status", "stats", "top", "pause", "pfcwd", "agent", "perf",
            "doctor", "lab", "sweep", "compare", "import", "export", "k8s", "plan"]

# Shown but not run here, each with why.
SKIPPED = {
    "scripts/quickstart.sh": "the README's install-and-run command: CI runs its sibling scripts/test.sh",
    "scripts/test.sh": "the README's test command: this test runs inside it",
    "tcpdump": "captures until interrupted (tests/integration/engine_test.py runs the same capture)",
    "images/build.sh": "builds the VM image: the vm tier (tests/vm/rxe_vm_test.py) runs it with --rocelab",
    "run --vm": "boots the VM image: the vm tier (tests/vm/rxe_vm_test.py) runs a scenario with run --vm",
    "up --part": "needs the machines its --peers name: fabric_test.py Split runs up --part with two namespaces "
                 "standing for them, and the vm tier with two guests",
    "rocelab sweep": "runs a grid of scenarios (minutes): sweep_test.py runs a smaller grid and checks its table, "
                     "resumption and report",
    "rocelab compare": "needs run directories: sweep_test.py compares an ECN-on and an ECN-off run",
    "run --out runs/on": "the compare example's first run: sweep_test.py's Compare runs the same pair, ECN on and off",
    "run --out runs/off": "the compare example's second run (its CNP assertion fails with ECN off, by design)",
    "kubectl": "needs a Kubernetes cluster: k8s_test.py validates rocelab k8s's manifests against the API's models",
    "lab check": "grades a learner's copy: a starting file fails (exit 1) by design; lab_test.py checks every lab's "
                 "starting file and solution",
    "down --slurm-job": "a Slurm epilog's line (Slurm sets SLURM_JOB_ID): fabric_test.py CrashSafety runs it on a "
                        "run killed inside a job, and the vm tier's two-guest cluster as its epilog",
    "run --part": "needs the machines its --peers name: fabric_test.py Split runs run --part with two namespaces "
                  "standing for them, and the vm tier with two guests",
}

# The order examples run in, with the clean-up between them that is not an example.
PLAN = [
    "rocelab validate scenarios/quickstart.yaml",
    "rocelab validate --resolved -j scenarios/quickstart.yaml > resolved.json",
    "rocelab graph scenarios/quickstart.yaml | dot -Tsvg > fabric.svg",
    "sudo rocelab doctor",
    "rocelab doctor -j | jq .capabilities.netem",
    "rocelab run scenarios/quickstart.yaml",
    "rocelab run --out runs/r1 scenarios/quickstart.yaml && cat runs/r1/junit.xml",
    "rocelab report runs/r1",
    "rocelab report --out runs/r1/copy.html --no-plots runs/r1",
    "rocelab run --scale 2000 scenarios/incast-dcqcn.yaml",
    "rocelab run --retry-invalid scenarios/quickstart.yaml",
    "sudo rocelab up scenarios/quickstart.yaml && sudo ip netns exec rl-quickstart.host1 ip route",
    "sudo rocelab up --instance qs2 scenarios/quickstart.yaml",
    ("cleanup", "rocelab down qs2"),
    "sudo rocelab status -j quickstart | jq '.nodes[0].interfaces'",
    "sudo rocelab stats leaf1:host1",
    "sudo rocelab top --instance quickstart --count 3 --interval 0.5",
    "sudo rocelab top --count 1 | tee top.txt",
    "sudo rocelab stats -j --instance quickstart | jq '.ports[0].priorities[3]'",
    "sudo rocelab pause leaf1:host1 --prio 3 && sudo rocelab stats leaf1:host1",
    "sudo rocelab pause --resume leaf1:host1 --prio 3",
    "sudo rocelab perf scenarios/quickstart.yaml --from host1 --to host2 --size 64KiB --iters 500",
    "sudo rocelab perf scenarios/quickstart.yaml --from host1 --to host2 --verb send --qps 4 --seconds 3 -j",
    "sudo rocelab down quickstart",
    "sudo rocelab up scenarios/quickstart.yaml",
    "sudo rocelab inject link_down leaf1:spine1",
    "sudo rocelab inject link_flap leaf1:spine2 period=2ms count=3",
    "sudo rocelab inject loss leaf1:host1 probability=0.01",
    "sudo rocelab inject pause_storm host2:nic0 priority=3",
    "sudo rocelab inject --clear",
    ("cleanup", "rocelab down quickstart"),
    "sudo rocelab up scenarios/pfc-watchdog.yaml",
    "sudo rocelab inject pause_storm host3:nic0 priority=3",
    "sudo rocelab pfcwd show stats --all",
    "sudo rocelab inject --clear",
    ("cleanup", "rocelab down pfc-watchdog"),
    "sudo rocelab up scenarios/incast-lossless.yaml && sudo rocelab stats --instance incast-lossless",
    ("cleanup", "rocelab down incast-lossless"),
    "rocelab lab list",
    "rocelab lab start 1",
    "rocelab lab hint 1",
    "rocelab lab solution 1",
    "rocelab lab reset 1",
    "rocelab export sonic scenarios/incast-dcqcn.yaml --ports Ethernet0,Ethernet4,Ethernet8 > config_db.json",
    "rocelab import sonic config_db.json > qos.yaml",
    "rocelab k8s scenarios/quickstart.yaml --parts 2 --image registry.example/rocelab:0.1.0 > qs.yaml",
    "rocelab plan scenarios/quickstart.yaml --parts 2",
    "rocelab plan -j scenarios/fat-tree-k4.yaml --parts 4 | jq '.cut_links | length'",
    "rocelab import sonic config_db.json --into scenarios/incast-dcqcn.yaml -o mine.yaml && sudo rocelab run mine.yaml",
]
INSTANCES = ["quickstart", "qs2", "incast-lossless", "pfc-watchdog"]


def strip_comment(line):
    return re.sub(r"\s+#.*$", "", line).strip()


def readme_blocks():
    with open(os.path.join(SOURCE, "README.md")) as f:
        return re.findall(r"```(\w*)\n(.*?)```", f.read(), re.S)


def shown_commands():
    """Every command line shown: README code blocks and --help examples."""
    out = set()
    for lang, block in readme_blocks():
        if lang not in ("", "sh"):
            continue
        for line in block.splitlines():
            line = line.strip()
            if (line.startswith(("rocelab ", "sudo ")) or re.match(r"scripts/\S+\.sh", line)) and "COMMAND" not in line:
                out.add(strip_comment(line))
    for c in COMMANDS:
        r = subprocess.run([ROCELAB, c, "--help"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        text = r.stdout.split("\nexample:\n", 1)[1]
        out.update(strip_comment(l) for l in text.splitlines() if l.strip())
    return out


class Examples(unittest.TestCase):
    def test_every_readme_scenario_block_validates(self):
        tmp = tempfile.mkdtemp(prefix="rocelab-examples-")
        try:
            n = 0
            for lang, block in readme_blocks():
                if lang != "yaml":
                    continue
                n += 1
                text = block if re.search(r"^(fabric|nodes):", block, re.M) else BASE + block
                path = os.path.join(tmp, f"block{n}.yaml")
                with open(path, "w") as f:
                    f.write(text)
                r = subprocess.run([ROCELAB, "validate", path], capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, f"README YAML block {n} does not validate:\n{r.stderr}\n{text}")
            self.assertGreaterEqual(n, 3)
        finally:
            shutil.rmtree(tmp)

    def test_the_metrics_table_is_the_registry(self):
        with open(os.path.join(SOURCE, "README.md")) as f:
            readme = f.read()
        table = readme.split("<!-- metrics:begin -->\n", 1)[1].split("<!-- metrics:end -->", 1)[0]
        r = subprocess.run([ROCELAB, "help", "metrics"], capture_output=True, text=True, timeout=30)
        self.assertEqual(table, r.stdout, "README's metrics table differs from `rocelab help metrics`")

    def test_every_example_is_in_the_plan(self):
        planned = {strip_comment(p) for p in PLAN if isinstance(p, str)}
        missing = [c for c in shown_commands()
                   if c not in planned and not any(k in c for k in SKIPPED)]
        self.assertEqual(missing, [], "examples this test does not run: add them to PLAN")

    @unittest.skipUnless(IS_ROOT, "needs root: the examples make fabrics")
    def test_every_command_example_runs_as_written(self):
        tmp = tempfile.mkdtemp(prefix="rocelab-examples-")
        bin_dir = os.path.join(tmp, "bin")
        os.makedirs(bin_dir)
        os.symlink(ROCELAB, os.path.join(bin_dir, "rocelab"))
        with open(os.path.join(bin_dir, "sudo"), "w") as f:
            f.write('#!/bin/sh\nexec "$@"\n')  # root already
        os.chmod(os.path.join(bin_dir, "sudo"), 0o755)
        os.symlink(os.path.join(SOURCE, "scenarios"), os.path.join(tmp, "scenarios"))
        # A run the machine could not keep up with (exit 2) runs once more at 2 x D, as CI is
        # told to run them (README); each such retry goes to the suite's retry log.
        env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"], ROCELAB_RETRY_INVALID="1")
        try:
            for step in PLAN:
                cleanup = isinstance(step, tuple)
                cmd = step[1] if cleanup else step
                r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=tmp, env=env, capture_output=True,
                                   text=True, timeout=600)
                for line in r.stderr.splitlines():
                    if "once more at D =" in line:
                        retries.record(f"example `{cmd}`", line)
                self.assertEqual(r.returncode, 0, f"`{cmd}` exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        finally:
            for inst in INSTANCES:
                subprocess.run([ROCELAB, "down", inst], capture_output=True, timeout=120)
            shutil.rmtree(tmp)


if __name__ == "__main__":
    harness.run(globals())
