"""What every integration test script shares: its command line (--rocelab PATH --source
REPO_DIR, the rest for unittest) and the verbose unittest run."""
import argparse
import os
import sys
import unittest


def run(module_globals):
    """Sets the module's ROCELAB and SOURCE (absolute paths) and runs its tests."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rocelab", required=True)
    ap.add_argument("--source", required=True)
    args, rest = ap.parse_known_args()
    module_globals["ROCELAB"] = os.path.abspath(args.rocelab)
    module_globals["SOURCE"] = os.path.abspath(args.source)
    unittest.main(module=module_globals["__name__"], argv=[sys.argv[0], "-v", *rest])
