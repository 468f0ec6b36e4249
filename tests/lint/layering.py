#!/usr/bin/env python3
"""Dependencies point one way (DESIGN.md §5): cli -> run -> fabric, agent, workload, engine,
fault, telemetry -> netlink, bpf -> sys; model uses nothing of ours. And nothing above
fabric/, netlink/, bpf/ includes a libnl or libbpf header: they reach the kernel through
the Testbed and the wrappers (issue 15)."""
import argparse
import pathlib
import re
import sys

# Which of our folders each folder may include.
ALLOWED = {
    "model": {"model"},
    "sys": {"sys"},
    "netlink": {"netlink", "sys", "model"},
    "bpf": {"bpf", "sys"},
    "fabric": {"fabric", "netlink", "bpf", "sys", "model"},
    "engine": {"engine", "sys", "model"},
    "agent": {"agent", "fabric", "netlink", "bpf", "sys", "model"},
    "workload": {"workload", "engine", "fabric", "sys", "model"},
    "fault": {"fault", "fabric", "sys", "model"},
    "telemetry": {"telemetry", "fabric", "bpf", "sys", "model"},
    "run": {"run", "fabric", "workload", "engine", "fault", "telemetry", "netlink", "bpf", "sys", "model"},
    "cli": {"cli", "run", "agent", "fabric", "workload", "engine", "fault", "telemetry", "bpf", "sys", "model"},
}
NO_KERNEL_LIBS = {"run", "workload", "cli", "engine", "agent", "fault", "telemetry"}
KERNEL_LIB = re.compile(r'#\s*include\s*<(netlink|bpf)/')
OURS = re.compile(r'#\s*include\s*"([a-z_]+)/')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", default=".")
    a = ap.parse_args()
    root = pathlib.Path(a.source) / "orchestrator"
    bad, files = [], 0
    for p in sorted(root.rglob("*")):
        if p.suffix not in (".cc", ".h"):
            continue
        folder = p.relative_to(root).parts[0]
        if folder not in ALLOWED:
            bad.append(f"{p}: folder {folder} has no place in the layering (tests/lint/layering.py)")
            continue
        files += 1
        for n, line in enumerate(p.read_text().splitlines(), 1):
            if folder in NO_KERNEL_LIBS and KERNEL_LIB.search(line):
                bad.append(f"{p.relative_to(a.source)}:{n}: {folder}/ includes a libnl/libbpf header: {line.strip()}")
            m = OURS.search(line)
            if m and m.group(1) in ALLOWED and m.group(1) not in ALLOWED[folder]:
                bad.append(f"{p.relative_to(a.source)}:{n}: {folder}/ may not include {m.group(1)}/: {line.strip()}")
    print(f"{files} files checked", file=sys.stderr)
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
