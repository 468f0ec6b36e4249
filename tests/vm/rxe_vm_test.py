#!/usr/bin/env python3
"""The `vm` tier: the project's VM image (images/build.sh) boots under qemu and real rxe
carries real perftest traffic inside it (DESIGN.md "Real rxe").

Inside the guest, two veth ends sit in its init namespace with one rxe device each and
per-oif policy routing (the layout rocelab's hosts take there); `ib_write_bw` runs between
them and `rdma link` shows both devices. KVM is used only where a test boot proves it works;
otherwise TCG (on these machines /dev/kvm opens but a guest stops with an emulation
failure).

With --rocelab, the image carries that binary too, and rocelab itself runs in the guest:
a fabric comes up (on a fresh kernel whose sch_htb is a module not loaded yet) and goes
down, `doctor` there finds rdma_rxe and netem (which this machine's kernel lacks), and
`rocelab run --vm` runs a scenario in the guest and brings its run directory and exit code
back.

Usage: rxe_vm_test.py --image-dir DIR [--source REPO] [--rocelab BIN]   (builds the image into DIR)
Exit 77 (ctest: skipped, with the reason) when no test could run: without qemu-system-x86_64,
without root for the build's apt downloads, or when the image cannot be built (no Debian
archive reachable). With ROCELAB_REQUIRE_VM=1 (.ci/run sets it when it runs as root, where
the tier can run) that is a failure instead: a vm tier that did not run never shows green.
A guest is booted again only for the known TCG fault ("Oops: int3", multi-threaded code
patching); any other Oops or panic fails with the console, and every reboot or retry is
written to the suite's retry log.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import retries  # noqa: E402  (tests/integration/retries.py: the suite's retry log)

IMAGE_DIR = ""
ROCELAB = ""
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
QEMU = shutil.which("qemu-system-x86_64")

JOB = r"""#!/bin/sh
# busybox sh prefers its applets to PATH: iproute2's ip (rules by oif) by its full path.
ip() { /usr/bin/ip "$@"; }
set -x
/usr/bin/kmod list | grep -E 'rdma_rxe|veth'
ip link add name na type veth peer name nb
ip link set na up
ip link set nb up
ip addr add 198.18.0.0/31 dev na
ip addr add 198.18.0.1/31 dev nb
for k in all/rp_filter na/rp_filter nb/rp_filter; do echo 0 > /proc/sys/net/ipv4/conf/$k; done
for k in na/accept_local nb/accept_local; do echo 1 > /proc/sys/net/ipv4/conf/$k; done
# Each NIC reaches the other over the wire, not through `local`: per-oif tables first.
ip rule add pref 100 lookup local
ip rule del pref 0 lookup local
ip route add 198.18.0.1 dev na table 10
ip route add 198.18.0.0 dev nb table 11
ip rule add pref 10 oif na lookup 10
ip rule add pref 11 oif nb lookup 11
rdma link add rxe_a type rxe netdev na
rdma link add rxe_b type rxe netdev nb
rdma link show
ib_write_bw -d rxe_b -x 1 -F --report_gbits -n 200 > /tmp/server.log 2>&1 &
sleep 1
ib_write_bw -d rxe_a -x 1 -F --report_gbits -n 200 198.18.0.1
rc=$?
wait
cat /tmp/server.log
cat /sys/class/infiniband/rxe_a/ports/1/hw_counters/sent_pkts /sys/class/infiniband/rxe_b/ports/1/hw_counters/rcvd_pkts
exit $rc
"""


def qemu_cmd(image_dir, job_dir, accel, extra=()):
    return [QEMU, "-machine", "q35", "-accel", accel, "-cpu", "max" if accel.startswith("tcg") else "host",
            "-m", "2048", "-smp", "2", "-nographic", "-no-reboot", "-nodefaults", "-serial", "stdio",
            "-kernel", os.path.join(image_dir, "vmlinuz"), "-initrd", os.path.join(image_dir, "initrd.img"),
            "-append", "console=ttyS0 quiet panic=-1",
            "-virtfs", f"local,path={job_dir},mount_tag=job,security_model=none,id=job", *extra]


# TCG's multi-threaded code patching oopses a guest now and then (CI: "Oops: int3" in
# sched_clock_cpu mid-job): not the guest's software, so worth one more boot.
TCG_OOPS = "Oops: int3"


def rocelab_vm(test, *args):
    """`rocelab run --vm ARGS` against the image; a second boot it made for the known TCG
    fault (it says so) goes to the retry log."""
    r = subprocess.run([ROCELAB, "run", "--vm", *args], capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, ROCELAB_VM_IMAGE=IMAGE_DIR))
    if "the guest was booted again" in r.stderr:
        retries.record(f"vm {test._testMethodName}", f"guest kernel: {TCG_OOPS}; booted again (rocelab run --vm)")
    return r


def guest_crashed(console, job_dir):
    """The guest's kernel died of the known TCG fault before its job finished (no job.rc).
    Any other Oops or panic is not this: the test fails and shows the console."""
    return not os.path.exists(os.path.join(job_dir, "job.rc")) and TCG_OOPS in console


def boot(image_dir, job_dir, accel, timeout):
    t0 = time.time()
    p = subprocess.run(qemu_cmd(image_dir, job_dir, accel), capture_output=True, text=True, timeout=timeout)
    return p, time.time() - t0


# A guest of a fabric split over two (docs/multi-machine.md), started as a Slurm cluster
# starts it (issue 37): its NIC on the underlay (a qemu socket link between the two guests,
# loopback TCP on this machine), munge with the cluster's one key, slurmd on both and
# slurmctld on g0, all from Debian's packages in the image. g0 then runs two job steps with
# srun, each `rocelab run --part auto` on both nodes: the split run, and a longer one whose
# part on g1 is killed outright (SIGKILL) once its traffic flows: --kill-on-bad-exit ends
# the step on g0 too, and the job's epilog (`rocelab down --slurm-job`) takes away what the
# killed part left. Each guest writes what is left of any fabric into left.txt; g1 stays up
# until the host says g0 is done (`done` in its job directory).
SLURM_JOB = r"""#!/bin/sh
ip() {{ /usr/bin/ip "$@"; }}
bb=/usr/bin/busybox
cd /job
ip link set lo up
ip link set eth0 mtu 9000 up
ip addr add {me}/31 dev eth0
$bb hostname g{part}
printf '127.0.0.1 localhost\n{under0} g0\n{under1} g1\n' > /etc/hosts
i=0; until $bb ping -c 1 -W 1 {peer} > /dev/null 2>&1; do i=$((i+1)); [ $i -gt 180 ] && exit 20; done
mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge /var/spool/slurmctld /var/spool/slurmd /var/log/slurm \
  /sys/fs/cgroup/system.slice
cp /job/munge.key /etc/munge/munge.key && chmod 700 /etc/munge && chmod 400 /etc/munge/munge.key
cp /job/slurm.conf /job/cgroup.conf /job/epilog /etc/slurm/ && chmod 755 /etc/slurm/epilog
/usr/sbin/munged --force || exit 21
if [ {part} = 0 ]; then /usr/sbin/slurmctld || exit 22; fi
/usr/sbin/slurmd || exit 23
left() {{ (ip netns list; ls /run/rocelab 2>/dev/null) > /job/left.txt; }}
if [ {part} = 0 ]; then
  i=0; until [ "$(sinfo -h -N -o %t | grep -c '^idle$')" = 2 ]; do i=$((i+1)); [ $i -gt 300 ] && exit 24; sleep 1; done
  export ROCELAB_RUN_KEY=the-two-guests-share-this-run-key
  # Each part's output into its own guest's /job (srun's -o would bring both to this one).
  srun -N2 --ntasks-per-node=1 --kill-on-bad-exit=1 sh -c \
    '/usr/bin/rocelab run --no-report --part auto --part-wait 600 --scale {scale} --out /job/run /job/split.yaml > /job/run.txt 2>&1; rc=$?; echo $rc > /job/run.rc; exit $rc' \
    > srun.txt 2>&1
  echo $? > srun.rc
  # The wrapper outlives Slurm's SIGTERM (trapped, so rocelab still gets it as it is) to
  # write down how its part ended.
  srun -N2 --ntasks-per-node=1 --kill-on-bad-exit=1 sh -c \
    'trap true TERM; /usr/bin/rocelab run --no-report --part auto --part-wait 600 --scale {scale} --out /job/kill /job/long.yaml > /job/kill.txt 2>&1; rc=$?; echo $rc > /job/kill.rc; exit $rc' \
    > srun-kill.txt 2>&1
  echo $? > srun-kill.rc
  # The jobs' epilogs have run when no node is still completing.
  i=0; until [ "$(sinfo -h -N -o %t | grep -c '^idle$')" = 2 ] && [ -z "$(squeue -h)" ]; do i=$((i+1)); [ $i -gt 300 ] && break; sleep 1; done
  sinfo -N > sinfo.txt
  left
else
  # The second step's part here: killed outright once its traffic flows.
  i=0; until grep -q 'workloads:' /job/kill.txt 2>/dev/null; do i=$((i+1)); [ $i -gt 1500 ] && exit 25; sleep 1; done
  pid=""
  for d in /proc/[0-9]*; do
    case "$($bb tr '\0' ' ' < $d/cmdline 2>/dev/null)" in *"rocelab run "*/job/long.yaml*) pid=${{d#/proc/}};; esac
  done
  [ -n "$pid" ] && kill -9 $pid && echo "$pid" > killed.txt
  i=0; until [ -e /job/done ]; do i=$((i+1)); [ $i -gt 1500 ] && break; sleep 1; done
  left
fi
cp /var/log/slurm/*.log /job/ 2>/dev/null
exit 0
"""

# The two guests' cluster: g0 the controller, both compute nodes, everything as root (the
# guests have no other users); cgroup v2 without systemd; the epilog rocelab documents.
SLURM_CONF = """ClusterName=rocelab
SlurmctldHost=g0
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/linear
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ReturnToService=2
MessageTimeout=60
KillWait=30
Epilog=/etc/slurm/epilog
NodeName=g0 NodeAddr={under0} CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1
NodeName=g1 NodeAddr={under1} CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1
PartitionName=main Nodes=g0,g1 Default=YES MaxTime=INFINITE State=UP
"""
CGROUP_CONF = "CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n"
EPILOG = """#!/bin/sh
# After every job, on every node: what a killed part of it left (docs/multi-machine.md).
/usr/bin/rocelab down --slurm-job "$SLURM_JOB_ID" >> /var/log/slurm/epilog.log 2>&1
exit 0
"""

# Issue 22's cut link, shown: an 8-rank ring all-reduce over both leaves and a 3:1 incast from
# part 1's hosts into part 0's, on the default lossless profile (PFC and DCQCN both act).
SPLIT_SCENARIO = """name: split
seed: 5
scale: 20000
defaults: {rate: 100G, mtu: 4200}
fabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 4}
workloads:
  - {name: ring, type: allreduce, message: 1MB, iterations: 2}
  - {name: incast, type: incast, hosts: [host5, host6, host7], to: host1, message: 512KB, iterations: 2, start: 1ms}
expect: [lossless_drops == 0, digest_errors == 0]
"""
# The step g1's part is killed in: the same fabric and traffic, long enough to be mid-run.
LONG_SCENARIO = SPLIT_SCENARIO.replace("name: split", "name: long").replace("iterations: 2}", "iterations: 200}")


class Vm(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not QEMU:
            raise unittest.SkipTest("qemu-system-x86_64 is not installed (scripts/setup.sh installs it)")
        if os.geteuid() != 0:
            if not os.path.exists(os.path.join(IMAGE_DIR, "initrd.img")):
                raise unittest.SkipTest("the VM image is not built and building it needs root (apt-get download)")
        else:  # builds it, or keeps it when its manifest (packages, the rocelab binary) matches
            r = subprocess.run([os.path.join(SOURCE, "images", "build.sh"), *(["--rocelab", ROCELAB] if ROCELAB else []),
                                IMAGE_DIR], capture_output=True, text=True, timeout=900)
            if r.returncode != 0:
                raise unittest.SkipTest(f"the VM image could not be built: {r.stderr.strip()[-300:]}")

    def run_job(self, job, script, timeout):
        """Boots the image under TCG with `script` as the guest's job.sh in `job`: (exit code
        as text, job.log, seconds from boot to power-off)."""
        with open(os.path.join(job, "job.sh"), "w") as f:
            f.write(script)
        os.chmod(os.path.join(job, "job.sh"), 0o755)
        p, seconds = boot(IMAGE_DIR, job, "tcg,thread=multi", timeout)
        if guest_crashed(p.stdout, job):
            # The known TCG fault killed the guest's kernel: one more boot. A job whose kernel
            # lived, or died of anything else, is never rerun.
            retries.record(f"vm {self._testMethodName}", f"guest kernel: {TCG_OOPS}; booted again")
            for name in ("job.log", "job.rc"):
                if os.path.exists(os.path.join(job, name)):
                    os.remove(os.path.join(job, name))
            p, seconds = boot(IMAGE_DIR, job, "tcg,thread=multi", timeout)
        rc_path = os.path.join(job, "job.rc")
        self.assertTrue(os.path.exists(rc_path), f"the guest did not run its job:\n{p.stdout[-2000:]}")
        with open(os.path.join(job, "job.log")) as f:
            log = f.read()
        with open(rc_path) as f:
            return f.read().strip(), log, seconds

    def test_real_rxe_carries_ib_write_bw(self):
        job = tempfile.mkdtemp(prefix="rocelab-vm-")
        try:
            rc, log, seconds = self.run_job(job, JOB, 240)
            print(f"vm: booted, ran ib_write_bw and powered off in {seconds:.1f} s (TCG)", file=sys.stderr)
            self.assertEqual(rc, "0", log[-3000:])
            self.assertRegex(log, r"link rxe_a/1 state ACTIVE")
            self.assertRegex(log, r"link rxe_b/1 state ACTIVE")
            # perftest's result line: #bytes #iterations BW peak BW average MsgRate; it can exit 0
            # after 0 iterations (DESIGN.md), so the figures themselves are checked. 200 WRITEs,
            # not a 2 s window: CI once read 0.00 Gb/s in a window a stalled guest mostly lost
            # (0.086 Gb/s is usual under TCG); a fixed count still averages over all of them.
            rows = re.findall(r"^\s*65536\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", log, re.M)
            self.assertTrue(rows, log[-3000:])
            iterations, bw_avg = int(rows[0][0]), float(rows[0][2])
            self.assertGreater(iterations, 0)
            self.assertGreater(bw_avg, 0.01)
            print(f"vm: ib_write_bw over rxe: {iterations} iterations, {bw_avg} Gb/s average", file=sys.stderr)
        finally:
            shutil.rmtree(job, ignore_errors=True)

    def test_rocelab_runs_in_the_guest(self):
        if not ROCELAB:
            self.skipTest("no --rocelab: the image carries no rocelab binary")
        job = tempfile.mkdtemp(prefix="rocelab-vm-")
        try:
            shutil.copy(os.path.join(SOURCE, "scenarios", "quickstart.yaml"), os.path.join(job, "quickstart.yaml"))
            # up first: on a fresh stock kernel (sch_htb a module nothing has loaded yet) it must
            # load its programs without doctor's probes having gone before.
            rc, log, seconds = self.run_job(job, "#!/bin/sh\nset -x\ncd /job\n"
                                            "/usr/bin/rocelab up quickstart.yaml || exit 10\n"
                                            "/usr/bin/rocelab status -j quickstart > status.json || exit 11\n"
                                            "/usr/bin/rocelab down quickstart || exit 12\n"
                                            "/usr/bin/rocelab doctor -j > doctor.json\n", 300)
            self.assertEqual(rc, "0", log[-3000:])
            with open(os.path.join(job, "doctor.json")) as f:
                caps = json.load(f)["capabilities"]
            self.assertTrue(caps["rxe"]["ok"], caps["rxe"])
            self.assertFalse(caps["rxe_in_netns"]["ok"], "6.12 predates rxe's namespace support (7.1)")
            self.assertTrue(caps["netem"]["ok"], caps["netem"])
            with open(os.path.join(job, "status.json")) as f:
                self.assertGreater(len(json.load(f)["nodes"]), 2)
            print(f"vm: rocelab up, status, down and doctor in the guest: {seconds:.1f} s (TCG)", file=sys.stderr)
        finally:
            shutil.rmtree(job, ignore_errors=True)

    def test_run_vm_brings_the_run_back(self):
        if not ROCELAB:
            self.skipTest("no --rocelab: the image carries no rocelab libraries")
        tmp = tempfile.mkdtemp(prefix="rocelab-vmrun-")
        try:
            scenario = os.path.join(tmp, "vmpair.yaml")
            with open(scenario, "w") as f:
                f.write("name: vmpair\nscale: 20000\ndefaults: {rate: 100G}\nqos: {profile: roce-lossless}\n"
                        "nodes: [{name: sw, kind: switch}, {name: h1, kind: host}, {name: h2, kind: host}]\n"
                        "links: [{endpoints: [h1, sw]}, {endpoints: [h2, sw]}]\n"
                        "workloads: [{name: bw, type: write_bw, from: h1, to: h2, message: 64KB, iterations: 20}]\n"
                        "expect:\n  - digest_errors == 0\n  - hosts == 3   # false: the VM's exit code must say so\n")
            out = os.path.join(tmp, "run")
            def run_vm(out, *flags):
                return rocelab_vm(self, "--no-report", "--out", out, *flags, scenario)
            r = run_vm(out)
            # An invalid run (the guest's machine did not keep up: CI read h1's line held 1.7 %
            # of the phase under TCG) says 2 before any assertion: once more at 2 x D.
            if r.returncode == 2 and "did not keep up" in r.stdout:
                retries.record(f"vm {self._testMethodName}", "invalid at D = 20000; again at D = 40000")
                out = os.path.join(tmp, "run2")
                r = run_vm(out, "--scale", "40000")
                if r.returncode == 2 and "did not keep up" in r.stdout:
                    retries.unjudged(f"vm {self._testMethodName}", "invalid at D = 20000 and 40000")
                    self.skipTest("invalid at D = 20000 and 40000: not judged on this machine")
            self.assertEqual(r.returncode, 1, r.stdout[-3000:] + r.stderr[-2000:])  # an assertion failed, in the guest
            self.assertIn("FAIL  hosts == 3", r.stdout)
            with open(os.path.join(out, "results.json")) as f:
                res = json.load(f)
            self.assertEqual(res["outcome"], "fail")
            self.assertEqual(res["kernel"]["release"][:5], "6.12.")  # the guest's kernel, not this machine's
            self.assertEqual([a["outcome"] for a in res["assertions"]], ["pass", "fail"])
            self.assertTrue(os.path.exists(os.path.join(out, "junit.xml")))
            print(f"vm: {r.stdout.strip().splitlines()[-1]}", file=sys.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_rxe_incast_through_a_lossless_switch(self):
        """scenarios/rxe-incast.yaml: real rxe hosts (verbs, RC WRITEs) 4:1 through a PFC
        switch: its own assertions (no lossless drop, PFC heard by the NICs, digests), and
        rxe's own counters in the results."""
        if not ROCELAB:
            self.skipTest("no --rocelab: the image carries no rocelab binary")
        tmp = tempfile.mkdtemp(prefix="rocelab-vmrun-")
        try:
            out = os.path.join(tmp, "run")
            # D = 10000: TCG emulates the guest's CPUs (the rates fit in them there).
            r = rocelab_vm(self, "--no-report", "--scale", "10000", "--out", out,
                           os.path.join(SOURCE, "scenarios", "rxe-incast.yaml"))
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-2000:])
            with open(os.path.join(out, "results.json")) as f:
                res = json.load(f)
            nic = res["workloads"]["nic_counters"]
            flows = res["workloads"]["flows"]
            self.assertEqual(len(flows), 4)
            self.assertTrue(all(f["digest_ok"] for f in flows), flows)
            # Every WRITE packet the senders' rxe sent reached host5's (and its ACKs came back).
            self.assertGreater(nic["sent_pkts"], 4 * 4 * 512 * 1024 // 4096)
            self.assertEqual(nic["retry_exceeded_err"], 0)
            print(f"vm: rxe incast: {r.stdout.strip().splitlines()[-1]}", file=sys.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_rxe_link_flap_survives_as_its_scenario_asserts(self):
        """scenarios/rxe-link-flap.yaml, which only this tier can run (real rxe): sw1:sw2 down
        100 us mid-transfer, rxe's requester times out and retries (timeout 4: 65.5 us), and
        the transfer completes byte-exact: the scenario's own assertions, in the guest."""
        if not ROCELAB:
            self.skipTest("no --rocelab: the image carries no rocelab binary")
        tmp = tempfile.mkdtemp(prefix="rocelab-vmrun-")
        try:
            out = os.path.join(tmp, "run")
            r = rocelab_vm(self, "--no-report", "--out", out, os.path.join(SOURCE, "scenarios", "rxe-link-flap.yaml"))
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-2000:])
            with open(os.path.join(out, "results.json")) as f:
                res = json.load(f)
            self.assertEqual(res["kernel"]["release"][:5], "6.12.")
            self.assertTrue(res["assertions"] and all(a["outcome"] == "pass" for a in res["assertions"]), res["assertions"])
            print(f"vm: rxe link flap: {r.stdout.strip().splitlines()[-1]}; completer_retry_err "
                  f"{res['metrics'].get('completer_retry_err')}", file=sys.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_perf_runs_ib_write_bw_through_two_switches(self):
        """`rocelab perf --engine rxe`: real ib_write_bw between host1 and host2, two switches
        apart (scenarios/rxe-link-flap.yaml's fabric, up without its fault). With --iters the
        port toward host2 carries every message's bytes, each once (exact), and its rate from
        the first WRITE to the last is ib_write_bw's average within 2 %; with --seconds the
        port is measured over the very window ib_write_bw counts (D/4 to 3D/4)."""
        if not ROCELAB:
            self.skipTest("no --rocelab: the image carries no rocelab binary")
        job = tempfile.mkdtemp(prefix="rocelab-vm-")
        try:
            with open(os.path.join(SOURCE, "scenarios", "rxe-link-flap.yaml")) as f, open(os.path.join(job, "flap.yaml"), "w") as g:
                g.write(f.read().replace("scale: 10000", "scale: 1000"))  # queues that drain quickly
            perf = "/usr/bin/rocelab perf -j --engine rxe --from host1 --to host2 flap.yaml"
            rc, log, seconds = self.run_job(job, "#!/bin/sh\ncd /job\n"
                                            "/usr/bin/rocelab up flap.yaml || exit 10\n"
                                            f"{perf} --iters 400 > iters.json || {{ /usr/bin/rocelab down rxe-link-flap; exit 11; }}\n"
                                            f"{perf} --seconds 4 > seconds.json || {{ /usr/bin/rocelab down rxe-link-flap; exit 13; }}\n"
                                            "/usr/bin/rocelab down rxe-link-flap || exit 12\n", 300)
            self.assertEqual(rc, "0", log[-3000:])
            with open(os.path.join(job, "iters.json")) as f:
                perf = json.load(f)
            with open(os.path.join(job, "seconds.json")) as f:
                timed = json.load(f)
            for p in (perf, timed):
                self.assertEqual(p["tool"], "ib_write_bw")
                self.assertGreater(p["iterations"], 0)
                self.assertGreater(p["bw_average_gbps"], 0)
            self.assertEqual(perf["iterations"], 400)
            # 400 x 64 KiB WRITEs, 16 packets each: every byte on the wire, none twice (a
            # retransmission would add a packet); perftest's TCP handshake and goodbye
            # share the first and last sampling intervals: a few hundred bytes.
            self.assertEqual(perf["posted_wire_bytes"], 400 * (65536 + 16 * 58 + 16))
            extra = perf["switch_rdma_wire_bytes"] - perf["posted_wire_bytes"]
            self.assertTrue(0 <= extra < 2048, perf)
            # Measured 0.998-1.002, idle and beside stress-ng --cpu 2 (6 runs).
            self.assertAlmostEqual(perf["switch_over_perftest"], 1.0, delta=0.02, msg=perf)
            # -D: the port over ib_write_bw's own 2 s. Its edges are perftest's SIGALRM and our
            # estimate of its first post, both the guest's timers under TCG: 0.968-1.024 beside
            # stress-ng --cpu 2 (10 runs), 0.996-1.002 idle. The bound catches a window that
            # strays off the transfer (a first post found 1.2 s early reads 10 % low), not timer noise.
            self.assertAlmostEqual(timed["switch_window_s"], 2.0, delta=1e-6, msg=timed)
            self.assertAlmostEqual(timed["switch_over_perftest"], 1.0, delta=0.1, msg=timed)
            print(f"vm: ib_write_bw -n 400: {perf['bw_average_gbps']:.4f} Gb/s, switch {perf['switch_payload_gbps']:.4f} "
                  f"payload ({perf['switch_over_perftest']:.3f}), {extra:.0f} B beyond the WRITEs; -D 4: "
                  f"{timed['bw_average_gbps']:.4f} ({timed['iterations']} x 64 KiB in 2 s: "
                  f"{timed['iterations'] * 65536 * 8 / 2e9:.4f}), switch {timed['switch_payload_gbps']:.4f} "
                  f"({timed['switch_over_perftest']:.3f}); {seconds:.1f} s (TCG)", file=sys.stderr)
        finally:
            shutil.rmtree(job, ignore_errors=True)

    def test_link_delay_is_real_and_moves_pfc_as_the_headroom_formula_says(self):
        """Issue 16: a link's `delay:` through netem in the wire namespace (Debian's 6.12 has
        netem). A ping crosses two delayed links each way; then the PFC-only 7:1 incast
        (scenarios/incast-lossless.yaml, shorter) at 100 ns and at 1 us a link. The headroom
        formula says a sender's priority group holds, after its XOFF, what was on the wire
        during the round trip: 2 x delay x 100 Gbit/s, 22.5 KB more at 1 us, so the queue
        toward host8 (seven groups) peaks higher by about seven times that, and each pause
        lasts longer, so fewer XOFFs carry the same bytes."""
        if not ROCELAB:
            self.skipTest("no --rocelab: the image carries no rocelab binary")
        job = tempfile.mkdtemp(prefix="rocelab-vm-")
        try:
            with open(os.path.join(SOURCE, "scenarios", "incast-lossless.yaml")) as f:
                incast = f.read()

            def write_incasts(scale):
                for d in ("100ns", "1us"):
                    text = (incast.replace("name: incast-lossless", f"name: il{d}").replace("scale: 1000", f"scale: {scale}")
                            .replace("defaults: {rate: 100G, mtu: 4200}", f"defaults: {{rate: 100G, mtu: 4200, delay: {d}}}")
                            .replace("message: 1MB, iterations: 4", "message: 256KB, iterations: 2"))
                    self.assertIn(f"delay: {d}", text)
                    with open(os.path.join(job, f"il{d}.yaml"), "w") as f:
                        f.write(text)
            write_incasts(10000)
            with open(os.path.join(job, "pair.yaml"), "w") as f:
                f.write("name: pair\nscale: 10000\ndefaults: {rate: 100G, delay: 1us}\nqos: {profile: roce-lossless}\n"
                        "nodes: [{name: sw, kind: switch}, {name: h1, kind: host}, {name: h2, kind: host}]\n"
                        "links: [{endpoints: [h1, sw]}, {endpoints: [h2, sw]}]\n")
            # Each run's exit code beside its output: an invalid run under TCG (exit 2: the
            # guest did not keep up, the run says which part) is run again, both delays at 2 x D.
            runs = ("for d in 100ns 1us; do /usr/bin/rocelab run --no-report --out /job/r$d il$d.yaml > run$d.txt 2>&1; "
                    "echo $? > rc$d; done\n")
            rc, log, seconds = self.run_job(job, "#!/bin/sh\ncd /job\n"
                                            "/usr/bin/rocelab up pair.yaml || exit 10\n"
                                            "/usr/bin/ip netns exec rl-pair.h1 /usr/bin/busybox ping -c 4 198.18.1.2 > ping.txt\n"
                                            "/usr/bin/rocelab down pair || exit 12\n" + runs, 600)
            self.assertEqual(rc, "0", log[-3000:])

            def outcome(d):
                with open(os.path.join(job, f"rc{d}")) as f, open(os.path.join(job, f"run{d}.txt")) as g:
                    return f.read().strip(), g.read()
            if any(outcome(d)[0] == "2" for d in ("100ns", "1us")):
                retries.record(f"vm {self._testMethodName}", "invalid at D = 10000 (" +
                               "; ".join(outcome(d)[1][-200:] for d in ("100ns", "1us")) + "); both again at D = 20000")
                for d in ("100ns", "1us"):
                    shutil.rmtree(os.path.join(job, f"r{d}"), ignore_errors=True)
                write_incasts(20000)
                rc, log, more_seconds = self.run_job(job, "#!/bin/sh\ncd /job\n" + runs, 600)
                self.assertEqual(rc, "0", log[-3000:])
                seconds += more_seconds
            for d in ("100ns", "1us"):
                code, text = outcome(d)
                self.assertEqual(code, "0", f"{d}: {text[-3000:]}")
            with open(os.path.join(job, "ping.txt")) as f:
                rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", f.read())]
            # Four crossings of a link delayed 1 us x D = 10 ms: at least 40 ms a round trip.
            self.assertEqual(len(rtts), 4, rtts)
            self.assertGreaterEqual(min(rtts), 40.0, rtts)
            self.assertLess(min(rtts), 60.0, rtts)
            fig = {}
            for d in ("100ns", "1us"):
                with open(os.path.join(job, f"r{d}", "results.json")) as f:
                    res = json.load(f)
                self.assertEqual(res["outcome"], "pass", res["assertions"])
                self.assertEqual(res["link_delay"], {"max_ns": 100 if d == "100ns" else 1000, "applied": True, "links": 8})
                m = res["metrics"]
                fig[d] = {"peak": max(s["value"] for s in m["queue_max"] if s["labels"]["port"] == "host8"),
                          "xoff": sum(s["value"] for s in m["pfc_xoff_tx"] if s["labels"]["node"] == "sw"),
                          "headroom": m["pfc_headroom"]}
            # The switch ports' headroom: 2 x 900 ns x 12.5 GB/s = 22,500 bytes more.
            self.assertEqual(fig["1us"]["headroom"] - fig["100ns"]["headroom"], 22500)
            more = fig["1us"]["peak"] - fig["100ns"]["peak"]
            predicted = 7 * 22500
            # What is certain: after its XOFF, each of the seven groups still receives what was
            # on the wire and what its sender sent before the pause reached it, 2 x delay x
            # 12.5 GB/s, while the port drains 2 x delay x 12.5 GB/s in all: the queue peaks at
            # least 6 x that above 7 x XOFF. The difference between the two runs is no such
            # certainty: each peak also holds the agent's wall-clock reaction (a pause taking
            # hold) times the emulated rate, which TCG makes vary by tens of KB a group (a
            # fresh machine read +8 KB where this one reads +61-182 KB): printed, not held.
            for d, delay in (("100ns", 100e-9), ("1us", 1e-6)):
                floor = 7 * 131072 + 6 * 2 * delay * 12.5e9
                self.assertGreaterEqual(fig[d]["peak"], floor, (d, fig))
            self.assertLess(fig["1us"]["xoff"], 0.8 * fig["100ns"]["xoff"], fig)  # measured 56-57 against 117-152
            print(f"vm: link delay: ping {min(rtts):.1f} ms (>= 40); 7:1 incast peak toward host8 "
                  f"{fig['100ns']['peak'] / 1024:.0f} -> {fig['1us']['peak'] / 1024:.0f} KB (+{more / 1024:.0f}, "
                  f"formula +{predicted / 1024:.0f}; the 1 us floor {(7 * 131072 + 6 * 25000) / 1024:.0f}), XOFF {fig['100ns']['xoff']:.0f} -> {fig['1us']['xoff']:.0f}; "
                  f"{seconds:.1f} s (TCG)", file=sys.stderr)
        finally:
            shutil.rmtree(job, ignore_errors=True)

    def split_run(self, scale, retried=False):
        """The two guests' Slurm cluster runs SLURM_JOB at D = `scale`: per guest, a dict of
        its job directory's files (run.rc, run.txt, results (parsed), kill.rc, kill.txt,
        left.txt, ...; None where absent), and the seconds both took."""
        tmp = tempfile.mkdtemp(prefix="rocelab-vm-split-")
        procs, jobs = [], []
        try:
            under = ["198.19.254.0", "198.19.254.1"]
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            munge_key = os.urandom(1024)
            for part in (0, 1):
                job = os.path.join(tmp, f"part{part}")
                os.makedirs(job)
                files = {"split.yaml": SPLIT_SCENARIO, "long.yaml": LONG_SCENARIO, "cgroup.conf": CGROUP_CONF,
                         "epilog": EPILOG, "slurm.conf": SLURM_CONF.format(under0=under[0], under1=under[1]),
                         "job.sh": SLURM_JOB.format(me=under[part], peer=under[1 - part], part=part, under0=under[0],
                                                    under1=under[1], scale=scale)}
                for name, text in files.items():
                    with open(os.path.join(job, name), "w") as f:
                        f.write(text)
                with open(os.path.join(job, "munge.key"), "wb") as f:
                    f.write(munge_key)
                os.chmod(os.path.join(job, "job.sh"), 0o755)
                mode = "listen" if part == 0 else "connect"
                net = ["-netdev", f"socket,id=u,{mode}=127.0.0.1:{port}",
                       "-device", f"virtio-net-pci,netdev=u,mac=52:54:00:52:4c:0{part}"]
                procs.append(subprocess.Popen(qemu_cmd(IMAGE_DIR, job, "tcg,thread=multi", net),
                                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
                jobs.append(job)
                time.sleep(2)  # the listening guest's socket first
            t0 = time.time()
            # g1 stays up until g0's steps are over: a g1 that ends first died (its kernel, under
            # TCG), and g0 would wait for its node until the timeout (CI once sat 18 minutes
            # behind 'srun: job 2 queued and waiting for resources'). g0 is stopped then, and
            # g1's console judged below like any crash.
            while procs[0].poll() is None and procs[1].poll() is None and time.time() - t0 < 1800:
                time.sleep(1)
            if procs[0].poll() is None and procs[1].poll() is not None:
                procs[0].kill()
            outs = [procs[0].communicate(timeout=60)[0]]
            with open(os.path.join(jobs[1], "done"), "w"):  # g0's steps are over: g1 may look and stop
                pass
            outs.append(procs[1].communicate(timeout=300)[0])
            seconds = time.time() - t0
            crashed = [part for part, job in enumerate(jobs) if guest_crashed(outs[part], job)]
            if crashed and not retried:
                # The known TCG fault killed a guest's kernel (see run_job): the split once more.
                retries.record(f"vm {self._testMethodName}", f"guest {', '.join(f'g{p}' for p in crashed)} kernel: {TCG_OOPS}; both again")
                shutil.rmtree(tmp, ignore_errors=True)
                return self.split_run(scale, retried=True)
            got = []
            for part, job in enumerate(jobs):
                def read(name):
                    path = os.path.join(job, name)
                    if not os.path.exists(path):
                        return None
                    with open(path, errors="replace") as f:
                        return f.read()
                self.assertEqual((read("job.rc") or "").strip(), "0", f"guest {part}:\n{(read('job.log') or outs[part])[-2000:]}"
                                 f"\n{(read('slurmd.log') or '')[-1500:]}")
                g = {name: read(name) for name in ("run.rc", "run.txt", "kill.rc", "kill.txt", "left.txt", "srun.txt",
                                                    "srun.rc", "srun-kill.txt", "srun-kill.rc", "killed.txt", "sinfo.txt",
                                                    "epilog.log", "slurmd.log", "slurmctld.log")}
                res = read(os.path.join("run", "results.json"))
                g["results"] = json.loads(res) if res else None
                got.append(g)
            return got, seconds
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            shutil.rmtree(tmp, ignore_errors=True)

    def test_srun_starts_one_run_over_two_guests_as_one_machine_does(self):
        """Issues 22 and 37: one scenario split over two guests, each a kernel of its own and a
        Slurm node (munge, slurmd; slurmctld on g0, from Debian's packages): `srun -N2
        --ntasks-per-node=1 rocelab run --part auto` gives each task its part and peers from
        the step; the two leaves' uplinks reach the other guest's spine by VXLAN over the
        guests' underlay. Both report the whole run alike, and its physical figures are this
        machine's for the same scenario, within run-to-run noise. A second step's part on g1
        killed outright ends the step on g0 with the reason (--kill-on-bad-exit), and the
        job's epilog leaves nothing up on either guest."""
        if not ROCELAB:
            self.skipTest("no --rocelab: the image carries no rocelab binary")
        # D = 40000, not 20000: each lock-step round of the ring ends with a message between the
        # guests, and under TCG its wall-clock cost becomes physical time / D. At D = 20000 the
        # ring read 11.64-12.19 GB/s against 12.33 (a fresh machine 10.32): outside 5 % at
        # times; at D = 40000 12.30. The figure is only physical where that cost is small.
        scale = 40000
        guests, seconds = self.split_run(scale)
        if any((g["run.rc"] or "").strip() == "2" for g in guests):  # TCG fell behind (exit 2, the reason said): once more at 2 x D
            retries.record(f"vm {self._testMethodName}", f"split run invalid at D = {scale}: "
                           f"{'; '.join((g['run.txt'] or '')[-200:] for g in guests)}; again at {2 * scale}")
            scale *= 2
            guests, seconds = self.split_run(scale)
        g0, g1 = guests
        self.assertEqual((g0["srun.rc"] or "").strip(), "0", f"srun:\n{g0['srun.txt']}\n{g0['slurmctld.log'][-1500:]}")
        for part, g in enumerate(guests):
            text, res = g["run.txt"] or "", g["results"]
            self.assertEqual((g["run.rc"] or "").strip(), "0", f"part {part}:\n{text[-3000:]}")
            self.assertIn(f"--part auto: part {part} of 2 (Slurm step on 2 nodes", text)
            self.assertEqual(res["split"]["part"], part)
            self.assertTrue(res["split"]["signed"], "ROCELAB_RUN_KEY: every rendezvous frame signed")
            self.assertIn(f"part {part} of 2: meeting the other parts", text)
            self.assertEqual((res["metrics"]["host_pairs"], res["metrics"]["reachable_pairs"]), (56, 56))
        # The second step: g1's part killed outright mid-run; the step ends on both guests.
        self.assertIsNotNone(g1["killed.txt"], f"g1 never saw its part's traffic:\n{(g1['kill.txt'] or '')[-1500:]}")
        self.assertNotEqual((g0["srun-kill.rc"] or "").strip(), "0", g0["srun-kill.txt"])
        self.assertRegex(g0["srun-kill.txt"], r"g1: task 1: (Killed|Exited with exit code 137)", "srun names the part that died")
        kill0 = g0["kill.txt"] or ""
        self.assertNotIn((g0["kill.rc"] or "").strip(), ("", "0"), f"part 0 went on:\n{kill0[-2000:]}")
        # Part 0 learns it two ways, and either may come first: part 1's socket closing (the
        # kernel's FIN, a moment after the kill) and srun's SIGTERM (slurmstepd on g1, srun,
        # slurmstepd on g0: under TCG often after part 0 has stopped and torn down on the
        # first). Each names the cause; both are printed when the signal comes before the end.
        self.assertRegex(kill0, r"rocelab run: ([a-z-]+: )?(part 1 closed its connection \(it stopped\)|"
                                r"stopped by SIGTERM \(under srun: the step is ending)")
        print(f"vm: part 0 after part 1 was killed (exit {(g0['kill.rc'] or '').strip()}):\n{kill0[-1500:]}", file=sys.stderr)
        for part, g in enumerate(guests):
            self.assertIsNotNone(g["left.txt"], f"guest {part} did not look")
            self.assertEqual(g["left.txt"].strip(), "", f"guest {part} left a fabric up:\n"
                             f"{g['left.txt']}\nepilog: {g['epilog.log']}")
        self.assertIn("long (slurm:", g1["epilog.log"] or "", "g1's epilog took the killed part's share away")
        self.assertNotIn("drain", (g0["sinfo.txt"] or "").lower(), g0["sinfo.txt"])
        parts = [((g["run.rc"] or "").strip(), g["results"], g["run.txt"] or "") for g in guests]
        a, b = parts[0][1], parts[1][1]
        self.assertEqual(a["workloads"]["flows"], b["workloads"]["flows"])
        # The same scenario on this machine, at the same D.
        tmp = tempfile.mkdtemp(prefix="rocelab-vm-whole-")
        try:
            path = os.path.join(tmp, "split.yaml")
            with open(path, "w") as f:
                f.write(SPLIT_SCENARIO)
            r = subprocess.run([ROCELAB, "run", "--no-report", "--instance", f"vmw{os.getpid()}", "--scale", str(scale),
                                "--out", os.path.join(tmp, "run"), path], capture_output=True, text=True, timeout=900)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            with open(os.path.join(tmp, "run", "results.json")) as f:
                w = json.load(f)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        fig = {name: figures(res) for name, res in (("two guests", a), ("one machine", w))}
        print(f"vm: one run over two guests ({seconds:.0f} s, TCG, D = {scale}) against this machine: {fig}", file=sys.stderr)
        two, one = fig["two guests"], fig["one machine"]
        self.assertAlmostEqual(two["ring_busbw_GBps"], one["ring_busbw_GBps"], delta=0.05 * one["ring_busbw_GBps"])
        self.assertEqual(two["incast_bytes"], one["incast_bytes"])
        # The incast's job time is DCQCN's to decide, and it decides it differently run to run
        # on one machine too: whichever sender was cut deepest finishes alone while its rate
        # recovers. Same seed and scenario, 26 runs here (D = 2000, 20000): 261-372 us, the
        # receiver 68-97 % busy; two guests, 9 runs: 288-439 us (58-88 %). So one draw is not
        # held to the other's; both must keep the receiver at least half busy (a pause or XON
        # lost on the cut, or an RC timeout, idles it far longer), and both DCQCN and PFC act.
        for name, f in fig.items():
            self.assertGreaterEqual(f["incast_rx_busy"], 0.5, name)
            self.assertGreater(f["cnps"], 0, name)
            self.assertGreater(f["pfc_frames"], 0, name)
            self.assertEqual(f["lossless_drops"], 0, name)


def figures(res):
    """The physical figures a split run must share with one machine's."""
    wl = {x["name"]: x for x in res["workloads"]["workloads"]}
    m = res["metrics"]
    return {"ring_busbw_GBps": round(wl["ring"]["busbw_GBps"], 2), "incast_jct_us": round(wl["incast"]["jct_s"] * 1e6, 1),
            "incast_rx_busy": round(wl["incast"]["rx_utilization"], 3),
            "incast_bytes": sum(f["bytes"] for f in res["workloads"]["flows"] if f["workload"] == "incast"),
            "cnps": res["workloads"]["engine"]["cnp_sent"], "pfc_frames": sum(s["value"] for s in m.get("pfc_tx", [])),
            "pause_us": round(sum(s["value"] for s in m.get("port_pause_time", [])) * 1e6, 1),
            "lossless_drops": m["lossless_drops"], "retransmitted": res["workloads"]["engine"]["retransmitted"],
            "worst_pacing_error": round(res["workloads"]["engine"].get("worst_pacing_error", 0), 3),
            "timeouts": sum(f["timeouts"] for f in res["workloads"]["flows"]),
            "incast_flows_us": sorted((f["from"], round(f["start_s"] * 1e6), round(f["fct_s"] * 1e6))
                                      for f in res["workloads"]["flows"] if f["workload"] == "incast")}


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--image-dir" in args:
        IMAGE_DIR = os.path.abspath(args[args.index("--image-dir") + 1])
    if "--rocelab" in args:
        ROCELAB = os.path.abspath(args[args.index("--rocelab") + 1])
    if "--source" in args:
        SOURCE = os.path.abspath(args[args.index("--source") + 1])
    names = [a for a in args if a.startswith("Vm.")]  # one test by name, for a quicker look
    result = unittest.main(argv=[sys.argv[0], *names], verbosity=2, exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.testsRun - len(result.skipped) <= 0:  # nothing ran: skipped, never green
        why = "; ".join(sorted({reason for _, reason in result.skipped}))
        if os.environ.get("ROCELAB_REQUIRE_VM") == "1":
            print(f"vm tier required (ROCELAB_REQUIRE_VM=1) but it did not run: {why}", file=sys.stderr)
            sys.exit(1)
        print(f"skipped: {why}")
        sys.exit(77)
