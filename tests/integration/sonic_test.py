#!/usr/bin/env python3
"""`rocelab import sonic` / `export sonic` (issue 35, done-when 5): a SONiC config_db with two
lossless queues becomes a scenario whose resolved thresholds are the file's, and exports back
to tables that say the same; bad files are refused naming the table, key and field.

The fixture, tests/sonic/config_db_2lossless.json, follows SONiC's documented CONFIG_DB schema
(sonic-buildimage's buffers templates and the SONiC QoS docs): BUFFER_POOL, BUFFER_PROFILE with
pre-202012 "[TABLE|name]" references, BUFFER_PG 3-4 lossless, BUFFER_QUEUE, QUEUE's
wred_profile, WRED_PROFILE, PORT_QOS_MAP, the AZURE DSCP_TO_TC_MAP listing all 64 DSCPs,
TC_TO_PRIORITY_GROUP_MAP, TC_TO_QUEUE_MAP and PFC_WD.

Usage: sonic_test.py --rocelab PATH --source REPO_DIR
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import harness  # tests/integration/harness.py, beside this script

ROCELAB = ""
SOURCE = ""
PORTS = ["Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"]
SCENARIO = ("name: sonic{pid}\nscale: 1000\nfabric: {{type: leaf-spine, spines: 1, leaves: 2, hosts_per_leaf: 2}}\n"
            "qos: {{profile: lossy}}   # replaced by the import\n")


def rocelab(*args):
    return subprocess.run([ROCELAB, *args], capture_output=True, text=True, timeout=60)


def ref(v):
    """A CONFIG_DB reference, "[TABLE|name]" or "name", as its name."""
    return v.split("|", 1)[1][:-1] if v.startswith("[") else v


def meaning(db, ports):
    """What a switch's tables say for each port, through every reference: the lossless
    priorities, their PG profile's thresholds, the lossless queues' ECN curve, the port's
    DSCP -> TC map (all 64), the lossy queues' dynamic_th, the pool, the watchdog."""
    out = {"pool": db["BUFFER_POOL"]["ingress_lossless_pool"]["size"],
           "poll": db.get("PFC_WD", {}).get("GLOBAL", {}).get("POLL_INTERVAL")}
    for p in ports:
        qm = db["PORT_QOS_MAP"][p]
        lossless = sorted(int(x) for x in qm["pfc_enable"].split(","))
        pg = {}
        for key, e in db["BUFFER_PG"].items():
            port, prios = key.split("|")
            lo, _, hi = prios.partition("-")
            for prio in range(int(lo), int(hi or lo) + 1):
                if port == p and prio in lossless:
                    prof = db["BUFFER_PROFILE"][ref(e["profile"])]
                    pg[prio] = (prof["xoff"], prof["xon"], prof["size"])
        lossy_th = set()
        for key, e in db["BUFFER_QUEUE"].items():
            port, prios = key.split("|")
            lo, _, hi = prios.partition("-")
            if port == p and not set(range(int(lo), int(hi or lo) + 1)) & set(lossless):
                lossy_th.add(db["BUFFER_PROFILE"][ref(e["profile"])].get("dynamic_th"))
        wred = {}
        for prio in lossless:
            w = db["WRED_PROFILE"][ref(db["QUEUE"][f"{p}|{prio}"]["wred_profile"])]
            wred[prio] = (w["ecn"], w["green_min_threshold"], w["green_max_threshold"], w["green_drop_probability"])
        dscp = db["DSCP_TO_TC_MAP"][ref(qm["dscp_to_tc_map"])]
        tcpg = db["TC_TO_PRIORITY_GROUP_MAP"][ref(qm["tc_to_pg_map"])]
        wd = db["PFC_WD"][p]
        out[p] = {"lossless": lossless, "pg": pg, "lossy_dynamic_th": sorted(lossy_th), "wred": wred,
                  "dscp": {int(d): int(dscp.get(str(d), 0)) for d in range(64)},
                  "tc_pg": {t: int(tcpg[str(t)]) for t in lossless},
                  "wd": (wd["action"], wd["detection_time"], wd["restoration_time"])}
    return out


class Sonic(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rocelab-sonic-")
        self.fixture = os.path.join(SOURCE, "tests", "sonic", "config_db_2lossless.json")
        with open(self.fixture) as f:
            self.db = json.load(f)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def write_db(self, name, db):
        with open(self.path(name), "w") as f:
            f.write(db if isinstance(db, str) else json.dumps(db))
        return self.path(name)

    def test_import_resolves_to_the_files_thresholds_and_exports_back_to_the_same_tables(self):
        with open(self.path("s.yaml"), "w") as f:
            f.write(SCENARIO.format(pid=os.getpid()))
        r = rocelab("import", "sonic", self.fixture, "--into", self.path("s.yaml"), "-o", self.path("mine.yaml"))
        self.assertEqual(r.returncode, 0, r.stderr)
        # Every field it read is mapped; what it leaves is named (the lossy queues' reservation).
        self.assertIn("not mapped: BUFFER_PROFILE|egress_lossy_profile size", r.stderr)
        self.assertNotIn("note: workload", r.stderr)  # the scenario has no workload
        # Right by the file and still a surprise: the AZURE map puts perftest's DSCP 26 on TC 1.
        with open(self.path("w.yaml"), "w") as f:
            f.write(SCENARIO.format(pid=os.getpid()) + "workloads: [{name: inc, type: incast, hosts: [host1, host2], "
                    "to: host3}, {name: on3, type: write_bw, from: host1, to: host2, dscp: 3}]\n")
        r = rocelab("import", "sonic", self.fixture, "--into", self.path("w.yaml"), "-o", self.path("w2.yaml"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("note: workload inc sends on DSCP 26, which this map puts on priority 1: not lossless", r.stderr)
        self.assertNotIn("workload on3", r.stderr)
        r = rocelab("validate", "--resolved", "-j", self.path("mine.yaml"))
        self.assertEqual(r.returncode, 0, r.stderr)
        q = json.loads(r.stdout)["qos"]
        kib = {"B": 1, "KiB": 1024, "MiB": 1 << 20}

        def size(text):
            unit = next(u for u in ("KiB", "MiB", "B") if text.endswith(u))
            return int(float(text[:-len(unit)]) * kib[unit])

        prof = self.db["BUFFER_PROFILE"]["pg_lossless_100000_5m_profile"]
        wred = self.db["WRED_PROFILE"]["AZURE_LOSSLESS"]
        self.assertEqual(q["lossless"], [3, 4])
        self.assertEqual(q["pfc"]["priorities"], [3, 4])
        self.assertEqual(size(q["pfc"]["xoff"]), int(prof["xoff"]))
        self.assertEqual(size(q["pfc"]["xon"]), int(prof["xon"]))
        self.assertEqual(size(q["pfc"]["headroom"]), int(prof["size"]) - int(prof["xoff"]))
        self.assertEqual(size(q["ecn"]["kmin"]), int(wred["green_min_threshold"]))
        self.assertEqual(size(q["ecn"]["kmax"]), int(wred["green_max_threshold"]))
        self.assertAlmostEqual(q["ecn"]["pmax"], int(wred["green_drop_probability"]) / 100)
        self.assertEqual(size(q["buffer"]["size"]), int(self.db["BUFFER_POOL"]["ingress_lossless_pool"]["size"]))
        self.assertEqual(q["buffer"]["dynamic_th"], int(self.db["BUFFER_PROFILE"]["egress_lossy_profile"]["dynamic_th"]))
        wd = q["pfc"]["watchdog"]
        self.assertEqual((wd["detection_time"], wd["restoration_time"], wd["poll_interval"], wd["action"]),
                         ("200ms", "400ms", "200ms", "drop"))
        dscp = {}
        for key, tc in q["dscp_map"].items():
            lo, _, hi = key.partition("-")
            for d in range(int(lo), int(hi or lo) + 1):
                dscp[d] = tc
        self.assertEqual(dscp, {d: int(t) for d, t in ((int(k), v) for k, v in self.db["DSCP_TO_TC_MAP"]["AZURE"].items())})

        r = rocelab("export", "sonic", self.path("mine.yaml"), "--ports", ",".join(PORTS), "-o", self.path("out.json"))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.path("out.json")) as f:
            out = json.load(f)
        self.assertEqual(meaning(out, PORTS), meaning(self.db, PORTS))
        # And the export imports to the same qos block.
        a, b = rocelab("import", "sonic", self.fixture), rocelab("import", "sonic", self.path("out.json"))
        body = lambda t: t[t.index("qos:"):]
        self.assertEqual(body(a.stdout), body(b.stdout))

    def test_ports_that_disagree_are_named_and_the_majority_taken(self):
        db = json.loads(json.dumps(self.db))
        db["PORT_QOS_MAP"]["Ethernet12"]["pfc_enable"] = "3"
        db["PFC_WD"]["Ethernet8"]["detection_time"] = "400"
        r = rocelab("import", "sonic", self.write_db("odd.json", db))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("lossless: [3, 4]", r.stdout)
        self.assertIn("pfc_enable of Ethernet12 (3)", r.stderr)
        self.assertIn("PFC_WD of Ethernet8 ({detection_time: 400ms", r.stderr)

    def test_bad_files_are_refused_naming_where(self):
        def refused(db, words):
            r = rocelab("import", "sonic", self.write_db("bad.json", db))
            self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
            self.assertIn(words, r.stderr)
            self.assertEqual(r.stdout, "", "nothing printed for a refused file")

        refused("{ not json", "not JSON")
        refused("[" * 100000 + "]" * 100000, "nested past 64 levels")
        refused("[]", "its tables make one JSON object")
        db = json.loads(json.dumps(self.db))
        del db["PORT_QOS_MAP"]
        refused(db, "no PORT_QOS_MAP")
        db = json.loads(json.dumps(self.db))
        db["PORT_QOS_MAP"]["Ethernet0"]["pfc_enable"] = "3,9"
        refused(db, "PORT_QOS_MAP|Ethernet0 pfc_enable: 9 is outside 0..7")
        db = json.loads(json.dumps(self.db))
        for p in PORTS:
            db["BUFFER_PG"][p + "|3-4"]["profile"] = "[BUFFER_PROFILE|nothing]"
        refused(db, "BUFFER_PROFILE: no entry nothing")
        db = json.loads(json.dumps(self.db))
        db["BUFFER_PROFILE"]["pg_lossless_100000_5m_profile"]["xoff"] = "lots"
        refused(db, "BUFFER_PROFILE|pg_lossless_100000_5m_profile xoff: \"lots\" is not a whole number")
        # Values SONiC accepts but a scenario cannot hold are refused the way a file's are.
        db = json.loads(json.dumps(self.db))
        db["BUFFER_PROFILE"]["pg_lossless_100000_5m_profile"]["xon"] = "200000"
        refused(db, "must be below xoff")
        r = rocelab("import", "yaml", self.fixture)
        self.assertEqual(r.returncode, 3)
        self.assertIn("the one format is sonic", r.stderr)


if __name__ == "__main__":
    harness.run(globals())
