#!/usr/bin/env python3
"""`rocelab k8s` (issue 37, done-when 4): its manifests validate against the Kubernetes API's
schema — the official Python client's models, generated from the API's OpenAPI document
(Debian python3-kubernetes 22.6, API 1.22): every field a known one, of its type, every
required field there — and they fit together (the Service selects the Job's pods, the pods'
subdomain is the Service, the key comes from the Secret, the scenario from the ConfigMap).

Usage: k8s_test.py --rocelab PATH --source REPO_DIR
"""
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

import yaml

import harness  # tests/integration/harness.py, beside this script

try:
    import kubernetes
except ImportError:  # an interpreter of its own (pyenv) beside Debian's, which the package serves
    sys.path.append("/usr/lib/python3/dist-packages")
    import kubernetes  # noqa: E402  (scripts/setup.sh installs python3-kubernetes)

ROCELAB = ""
SOURCE = ""
MODELS = {"Secret": "V1Secret", "ConfigMap": "V1ConfigMap", "Service": "V1Service", "NetworkPolicy": "V1NetworkPolicy",
          "Job": "V1Job"}


def rocelab(*args):
    return subprocess.run([ROCELAB, *args], capture_output=True, text=True, timeout=60)


def check(data, kind, path, errors):
    """`data` against the client's type `kind` ('V1Job', 'list[V1Container]', 'dict(str, str)',
    'str', 'int', ...): unknown fields and wrong types go to `errors`."""
    if kind.startswith("list["):
        if not isinstance(data, list):
            return errors.append(f"{path}: a list expected")
        for i, x in enumerate(data):
            check(x, kind[5:-1], f"{path}[{i}]", errors)
    elif kind.startswith("dict("):
        if not isinstance(data, dict):
            return errors.append(f"{path}: a map expected")
        for k, v in data.items():
            check(v, kind[5:-1].split(", ", 1)[1], f"{path}.{k}", errors)
    elif kind in ("str", "int", "bool", "float"):
        want = {"str": str, "int": int, "bool": bool, "float": (int, float)}[kind]
        if not isinstance(data, want) or (kind == "int" and isinstance(data, bool)):
            errors.append(f"{path}: {data!r} is not {kind}")
    elif kind == "object":
        pass  # IntOrString, RawExtension: any
    else:
        klass = getattr(kubernetes.client, kind)
        if not isinstance(data, dict):
            return errors.append(f"{path}: an object ({kind}) expected")
        by_json = {v: k for k, v in klass.attribute_map.items()}
        for key, value in data.items():
            if key not in by_json:
                errors.append(f"{path}.{key}: not a field of {kind}")
            else:
                check(value, klass.openapi_types[by_json[key]], f"{path}.{key}", errors)


def validate(doc):
    """Errors of one manifest: unknown fields and types, then the models' own required-field
    checks (deserialising raises on a required field left out)."""
    errors = []
    check(doc, MODELS[doc["kind"]], doc["kind"], errors)
    try:
        kubernetes.client.ApiClient()._ApiClient__deserialize(doc, MODELS[doc["kind"]])
    except (ValueError, TypeError) as e:
        errors.append(f"{doc['kind']}: {e}")
    return errors


class K8s(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rocelab-k8s-")
        self.scenario = os.path.join(SOURCE, "scenarios", "quickstart.yaml")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def manifests(self, *extra):
        r = rocelab("k8s", self.scenario, "--parts", "3", *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r, [d for d in yaml.safe_load_all(r.stdout) if d]

    def test_the_manifests_are_the_apis_and_fit_together(self):
        r, docs = self.manifests("--image", "registry.example/rocelab:0.1.0", "--namespace", "lab")
        self.assertEqual([d["kind"] for d in docs], ["Secret", "ConfigMap", "Service", "NetworkPolicy", "Job"])
        for d in docs:
            self.assertEqual(validate(d), [], d["kind"])
            self.assertEqual(d["metadata"]["namespace"], "lab")
        secret, cm, svc, policy, job = docs
        # The validator finds what is wrong: a field the API does not have, a wrong type, a
        # required one left out.
        bad = yaml.safe_load(yaml.safe_dump(job))
        bad["spec"]["completionsMode"] = "Indexed"
        bad["spec"]["parallelism"] = "3"
        del bad["spec"]["template"]["spec"]["containers"][0]["name"]
        errs = validate(bad)
        self.assertTrue(any("completionsMode: not a field of V1JobSpec" in e for e in errs), errs)
        self.assertTrue(any("parallelism: '3' is not int" in e for e in errs), errs)
        self.assertTrue(any("`name`, must not be `None`" in e for e in errs), errs)

        name = job["metadata"]["name"]
        self.assertEqual(name, "rocelab-quickstart")
        spec, pod = job["spec"], job["spec"]["template"]["spec"]
        self.assertEqual((spec["completionMode"], spec["completions"], spec["parallelism"], spec["backoffLimit"]),
                         ("Indexed", 3, 3, 0))
        self.assertEqual(pod["subdomain"], svc["metadata"]["name"])
        self.assertEqual(svc["spec"]["clusterIP"], "None")
        self.assertTrue(svc["spec"]["publishNotReadyAddresses"])
        labels = job["spec"]["template"]["metadata"]["labels"]
        self.assertTrue(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()))
        self.assertEqual(sorted((p["protocol"], p["port"]) for p in svc["spec"]["ports"]), [("TCP", 790), ("UDP", 4789)])
        # Issue 49: the pods take no API credentials, have bounded memory, and only the run's
        # own pods reach them, on the rendezvous and VXLAN ports alone.
        self.assertIs(pod["automountServiceAccountToken"], False)
        run_pods = {"matchLabels": {"rocelab.io/run": name}}
        self.assertEqual(policy["spec"]["podSelector"], run_pods)
        self.assertTrue(all(labels.get(k) == v for k, v in run_pods["matchLabels"].items()), "the policy selects the Job's pods")
        self.assertEqual(policy["spec"]["policyTypes"], ["Ingress"])
        [rule] = policy["spec"]["ingress"]
        self.assertEqual(rule["from"], [{"podSelector": run_pods}])
        self.assertEqual(sorted((p["protocol"], p["port"]) for p in rule["ports"]), [("TCP", 790), ("UDP", 4789)])
        c = pod["containers"][0]
        self.assertEqual(c["resources"]["limits"], {"memory": "4Gi"})
        self.assertEqual(c["image"], "registry.example/rocelab:0.1.0")
        self.assertTrue(c["securityContext"]["privileged"])
        self.assertEqual(c["args"][:3], ["run", "--part", "auto"])
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(env["ROCELAB_PARTS"]["value"], "3")
        self.assertEqual(env["ROCELAB_K8S_JOB"]["value"], name)
        self.assertEqual(env["ROCELAB_K8S_SERVICE"]["value"], svc["metadata"]["name"])
        ref = env["ROCELAB_RUN_KEY"]["valueFrom"]["secretKeyRef"]
        self.assertEqual(ref["name"], secret["metadata"]["name"])
        self.assertRegex(secret["stringData"][ref["key"]], r"^[0-9a-f]{64}$")
        vols = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        self.assertEqual(vols["scenario"]["configMap"]["name"], cm["metadata"]["name"])
        with open(self.scenario) as f:
            self.assertEqual(cm["data"]["scenario.yaml"], f.read())
        self.assertEqual(c["args"][-1], mounts["scenario"] + "/scenario.yaml")
        self.assertIn("must carry 4250-byte packets", r.stderr)  # quickstart's MTU 4200 + VXLAN's 50
        # A fresh key each time: two runs' parts never take each other's frames.
        _, again = self.manifests()
        self.assertNotEqual(again[0]["stringData"]["run-key"], secret["stringData"]["run-key"])

    def test_written_to_a_file_only_its_owner_reads_it(self):
        out = os.path.join(self.tmp, "run.yaml")
        r = rocelab("k8s", self.scenario, "--parts", "2", "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(stat.S_IMODE(os.stat(out).st_mode), 0o600)
        with open(out) as f:
            self.assertEqual(len([d for d in yaml.safe_load_all(f) if d]), 5)
        # An existing file of this user's, readable by all: 0600 before the key is in it.
        os.chmod(out, 0o644)
        r = rocelab("k8s", self.scenario, "--parts", "2", "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(stat.S_IMODE(os.stat(out).st_mode), 0o600)
        # One another user made beforehand, or a second name of it: they would read the key.
        theirs, alias = os.path.join(self.tmp, "theirs.yaml"), os.path.join(self.tmp, "alias.yaml")
        with open(theirs, "w") as f:
            f.write("theirs\n")
        os.chmod(theirs, 0o666)
        os.link(out, alias)
        cases = [(alias, "it has another name (a hard link)")]
        if os.geteuid() == 0:  # only root can give a file away
            os.chown(theirs, 54321, 54321)
            cases.append((theirs, "it is another user's file"))
        for path, says in cases:
            r = rocelab("k8s", self.scenario, "--parts", "2", "-o", path)
            self.assertEqual(r.returncode, 4, r.stderr)
            self.assertIn(says, r.stderr)
        with open(theirs) as f:
            self.assertEqual(f.read(), "theirs\n", "left as it was")

    def test_bad_requests_are_refused(self):
        for args, words in [((self.scenario,), "missing --parts"),
                            ((self.scenario, "--parts", "1"), "--parts: 2 to 64"),
                            ((self.scenario, "--parts", "2", "--name", "Bad_Name"), "a DNS label"),
                            ((self.scenario, "--parts", "2", "--namespace", "-x"), "a DNS label"),
                            ((os.path.join(self.tmp, "none.yaml"), "--parts", "2"), "none.yaml")]:
            r = rocelab("k8s", *args)
            self.assertEqual(r.returncode, 3, (args, r.stderr))
            self.assertIn(words, r.stderr)
            self.assertEqual(r.stdout, "")
        path = os.path.join(self.tmp, "bad.yaml")
        with open(path, "w") as f:
            f.write("name: bad\nscale: 1000\nfabric: {type: leaf-spine, spines: 0}\n")
        r = rocelab("k8s", path, "--parts", "2")
        self.assertEqual(r.returncode, 3)
        self.assertTrue(re.search(r"bad\.yaml:\d+:\d+", r.stderr), r.stderr)


if __name__ == "__main__":
    harness.run(globals())
