#!/usr/bin/env python3
""""NODE:PORT" is split in one place, model::PortTarget (issue 50): no other source under
orchestrator/ looks for a ':' by hand. The few colons that are not a node's and its port's
are listed below with what they divide. Before it reads the tree, the check is run on a
planted violation and must find it."""
import argparse
import pathlib
import re
import sys

SPLIT = re.compile(r"""(?:find|rfind|find_first_of|find_last_of)\s*\(\s*(?:':'|":")|getline\([^)]*,\s*':'\s*\)""")
OTHER_COLONS = {
    "model/port_target.h": "the one split",
    "sys/host_info.cc": "a /proc line's fields",
    "sys/rendezvous.cc": "the hub's ADDRESS:TCP-PORT",
    "run/autoscale.cc": "/proc/cpuinfo's 'model name : ...'",
}


def violations(text, rel):
    if rel in OTHER_COLONS:
        return []
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        code = line.split("//", 1)[0]
        if SPLIT.search(code):
            out.append(f"orchestrator/{rel}:{n}: splits at ':' by hand; use model::PortTarget::parse: {line.strip()}")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", default=".")
    a = ap.parse_args()
    planted = "  const size_t colon = f.target.find(':');\n  auto t = spec.substr(0, spec.find(\":\"));\n"
    if len(violations(planted, "run/planted.cc")) != 2 or violations("// s.find(':') in a comment\n", "run/x.cc"):
        print("port_target lint: the check misses its planted violations", file=sys.stderr)
        return 2
    root = pathlib.Path(a.source) / "orchestrator"
    bad, files = [], 0
    for p in sorted(root.rglob("*")):
        if p.suffix not in (".cc", ".h"):
            continue
        files += 1
        bad += violations(p.read_text(errors="replace"), p.relative_to(root).as_posix())
    for b in bad:
        print(b, file=sys.stderr)
    print(f"{files} files checked")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
