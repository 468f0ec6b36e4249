#!/usr/bin/env python3
"""What the Debian package and `cmake --install` carry (issue 36): the build installed into a
scratch prefix has the binary, the reference scenarios and labs, a gzipped man page for
rocelab and each command that man renders, the bash completion and the Wireshark dissector;
and the installed binary, with the source tree hidden (a private mount namespace, root
only), finds its labs beside its prefix and validates an installed scenario.

Usage: package_test.py --rocelab BUILD/rocelab --source REPO_DIR
"""
import glob
import os
import shutil
import subprocess
import tempfile
import unittest

import harness  # tests/integration/harness.py, beside this script

ROCELAB = ""
SOURCE = ""


class Install(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.prefix = tempfile.mkdtemp(prefix="rocelab-install-")
        cls.r = subprocess.run(["cmake", "--install", os.path.dirname(ROCELAB), "--prefix", cls.prefix],
                               capture_output=True, text=True, timeout=300)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.prefix, ignore_errors=True)

    def test_the_files_are_where_users_look(self):
        self.assertEqual(self.r.returncode, 0, self.r.stderr)
        p = self.prefix
        self.assertTrue(os.access(f"{p}/bin/rocelab", os.X_OK))
        self.assertTrue(os.path.exists(f"{p}/share/rocelab/scenarios/quickstart.yaml"))
        self.assertEqual(len(glob.glob(f"{p}/share/rocelab/labs/*/lab.yaml")), len(glob.glob(f"{SOURCE}/labs/*/lab.yaml")))
        self.assertTrue(os.path.exists(f"{p}/share/bash-completion/completions/rocelab"))
        self.assertTrue(glob.glob(f"{p}/lib/**/wireshark/plugins/rocelab.lua", recursive=True))
        help_text = subprocess.run([ROCELAB, "--help"], capture_output=True, text=True).stdout
        commands = [l.split()[0] for l in help_text.split("commands:\n", 1)[1].split("\n\n", 1)[0].splitlines() if l.strip()]
        for c in ["rocelab"] + [f"rocelab-{c}" for c in commands]:
            page = f"{p}/share/man/man1/{c}.1.gz"
            self.assertTrue(os.path.exists(page), page)
        if shutil.which("man"):
            r = subprocess.run(["man", "-l", f"{p}/share/man/man1/rocelab-run.1.gz"], capture_output=True, text=True,
                               env=dict(os.environ, MANPAGER="cat", MANWIDTH="100"), timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("rocelab-run - run a scenario end to end", r.stdout)

    @unittest.skipUnless(os.geteuid() == 0, "needs root: hides the source tree in a private mount namespace")
    def test_the_installed_binary_needs_no_source_tree(self):
        self.assertEqual(self.r.returncode, 0, self.r.stderr)
        p = self.prefix
        script = (f"mount -t tmpfs none {SOURCE} && {p}/bin/rocelab lab list -j && "
                  f"{p}/bin/rocelab validate {p}/share/rocelab/scenarios/quickstart.yaml")
        r = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('"id": "lossless-incast"', r.stdout)
        self.assertIn("quickstart.yaml: ok", r.stdout)


if __name__ == "__main__":
    harness.run(globals())
