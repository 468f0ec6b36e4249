#!/usr/bin/env python3
"""DCQCN golden traces, computed from the equations of DESIGN.md §2 by this script alone
(never by the engine's code). The reading is the one written at the top of
orchestrator/engine/dcqcn.h; this is a separate event-queue model of it.

Each trace is a list of events (a CNP, bytes sent, or a plain tick that lets timers fire) and,
after each, the reaction point's RC, RT and alpha and the stage of its last step.

  dcqcn_golden.py --write DIR   write DIR/dcqcn_<trace>.txt
  dcqcn_golden.py --check DIR   exit 1 when a file in DIR differs from what this script computes
"""
import argparse
import heapq
import os
import sys

US = 1000
MIB = 1024 * 1024

PRESETS = {
    "paper": dict(reaction=True, g=1 / 256, alpha0=1.0, K=55 * US, window=0, T=55 * US, B=10 * MIB, F=5,
                  rai=40e6, rhai=200e6, rmin=10e6, period=0, gd=11, max_cut=1.0, clamp=True,
                  clamp_timer=False, first=0),
    "nvidia": dict(reaction=True, g=5 / 1024, alpha0=1023 / 1024, K=0, window=1 * US, T=300 * US, B=32767, F=1,
                   rai=5e6, rhai=50e6, rmin=1e6, period=4 * US, gd=11, max_cut=0.5, clamp=False,
                   clamp_timer=True, first=0),
    "off": dict(reaction=False, g=1 / 256, alpha0=1.0, K=55 * US, window=0, T=55 * US, B=10 * MIB, F=5,
                rai=40e6, rhai=200e6, rmin=10e6, period=0, gd=11, max_cut=1.0, clamp=True,
                clamp_timer=False, first=0),
}


def scaled(p, d):
    """DESIGN.md §3: times × D, rates ÷ D, bytes unchanged."""
    q = dict(p)
    for k in ("K", "window", "T", "period"):
        q[k] = round(p[k] * d)
    for k in ("rai", "rhai", "rmin", "first"):
        q[k] = round(p[k] / d)
    return q


class Model:
    def __init__(self, p, line):
        self.p, self.line = p, line
        self.rc = self.rt = line
        self.alpha = p["alpha0"]
        self.stage = "line"
        self.timers = []  # heap of (time, priority, name): alpha 0, pending cut 1, rate 2
        self.started = False
        self.counts = {"timer": 0, "bytes": 0}
        self.hyper = 0
        self.bytes = 0
        self.raised_by_timer = False
        self.seen_cnp = False
        self.cuts = 0
        self.last_cut = None
        self.pending = False

    def arm(self, name, at):
        self.timers = [t for t in self.timers if t[2] != name]
        heapq.heapify(self.timers)
        heapq.heappush(self.timers, (at, {"alpha": 0, "cut": 1, "rate": 2}[name], name))

    def run_until(self, now):
        while self.timers and self.timers[0][0] <= now:
            at, _, name = heapq.heappop(self.timers)
            if name == "alpha":
                p = self.p
                if p["window"]:
                    self.alpha = (1 - p["g"]) * self.alpha + p["g"] * (1 if self.seen_cnp else 0)
                    self.seen_cnp = False
                    self.arm("alpha", at + p["window"])
                else:
                    self.alpha = (1 - p["g"]) * self.alpha
                    self.arm("alpha", at + p["K"])
            elif name == "cut":
                self.do_cut(at)
            else:
                self.step("timer")
                self.arm("rate", at + self.p["T"])

    def limit(self):
        self.rt = min(self.rt, self.line)
        self.rc = max(min(self.rc, self.line), min(self.p["rmin"], self.line))

    def do_cut(self, now):
        p = self.p
        old = self.alpha
        if p["clamp"] or (p["clamp_timer"] and self.raised_by_timer):
            self.rt = self.rc
        share = min(old / 2 ** (p["gd"] - 10), p["max_cut"])
        self.rc = self.rc * (1 - share)
        if self.cuts == 0 and p["first"] > 0:
            self.rc = p["first"]
        if not p["window"]:
            self.alpha = (1 - p["g"]) * old + p["g"]
            self.arm("alpha", now + p["K"])
        self.counts = {"timer": 0, "bytes": 0}
        self.hyper = 0
        self.bytes = 0
        self.raised_by_timer = False
        self.arm("rate", now + p["T"])
        self.timers = [t for t in self.timers if t[2] != "cut"]
        heapq.heapify(self.timers)
        self.pending = False
        self.last_cut = now
        self.cuts += 1
        self.stage = "cut"
        self.limit()

    def step(self, kind):
        p = self.p
        t, b = self.counts["timer"], self.counts["bytes"]
        if max(t, b) < p["F"]:
            self.stage = "fast-recovery"
        elif min(t, b) >= p["F"]:
            self.stage = "hyper"
            self.hyper += 1
            self.rt += self.hyper * p["rhai"]
        else:
            self.stage = "additive"
            self.rt += p["rai"]
        self.rt = min(self.rt, self.line)
        self.rc = (self.rt + self.rc) / 2
        self.counts[kind] += 1
        if kind == "timer":
            self.raised_by_timer = True
        self.limit()

    def cnp(self, now):
        self.run_until(now)
        p = self.p
        if not p["reaction"]:
            return
        if not self.started:
            self.started = True
            self.arm("alpha", now + (p["window"] or p["K"]))
        if p["window"]:
            self.seen_cnp = True
        if p["period"] and self.cuts and now - self.last_cut < p["period"]:
            if not self.pending:
                self.pending = True
                self.arm("cut", self.last_cut + p["period"])
            return
        self.do_cut(now)

    def sent(self, n, now):
        self.run_until(now)
        if not self.started:
            return
        self.bytes += n
        while self.bytes >= self.p["B"]:
            self.bytes -= self.p["B"]
            self.step("bytes")


def events(name):
    """The event list of each trace: (time ns, kind, bytes)."""
    ev = []
    if name in ("paper", "paper_d1000", "off"):
        d = 1000 if name == "paper_d1000" else 1
        ev += [(0, "sent", 4096), (10 * US * d, "cnp", 0), (20 * US * d, "cnp", 0)]
        # Timer-only recovery: 5 fast-recovery steps, then additive (alpha decays alongside).
        ev += [((20 + 55 * k) * US * d, "tick", 0) for k in range(1, 8)]
        # The byte counter catches up: both counts past F -> hyper increase, i = 1, 2, 3...
        t = (20 + 55 * 7) * US * d
        ev += [(t + k * US * d, "sent", 10 * MIB) for k in range(1, 9)]
        ev += [(t + (55 * k + 3) * US * d, "tick", 0) for k in range(1, 4)]
        # A cut mid-recovery uses the decayed alpha; then a quiet spell lets alpha decay.
        t2 = t + 200 * US * d
        ev += [(t2, "cnp", 0), (t2 + 30 * US * d, "cnp", 0)]
        ev += [(t2 + (30 + 55 * k) * US * d, "tick", 0) for k in range(1, 4)]
        ev += [(t2 + 400 * US * d, "sent", 25 * MIB), (t2 + 2000 * US * d, "tick", 0)]
    elif name == "nvidia":
        ev += [(0, "sent", 4096), (5 * US, "cnp", 0), (6 * US, "cnp", 0), (7 * US, "tick", 0),
               (9 * US, "tick", 0), (10 * US, "tick", 0), (12 * US, "sent", 32767)]
        ev += [(12 * US + k * 100, "sent", 20000) for k in range(1, 4)]
        ev += [(305 * US, "tick", 0), (309 * US, "tick", 0), (310 * US, "sent", 32767),
               (320 * US, "sent", 32767 * 3), (609 * US, "tick", 0), (700 * US, "cnp", 0),
               (701 * US, "cnp", 0), (702 * US, "cnp", 0), (703 * US, "tick", 0), (704 * US, "tick", 0),
               (705 * US, "tick", 0), (720 * US, "tick", 0), (1004 * US, "tick", 0),
               (1010 * US, "sent", 32767 * 2), (1304 * US, "tick", 0), (2000 * US, "cnp", 0)]
    return ev


TRACES = {"paper": ("paper", 1, 100e9), "nvidia": ("nvidia", 1, 100e9), "off": ("off", 1, 100e9),
          "paper_d1000": ("paper", 1000, 100e6)}


def render(trace):
    preset, d, line = TRACES[trace]
    m = Model(scaled(PRESETS[preset], d), line)
    out = [f"# DCQCN golden trace: preset {preset}, scale {d}, line rate {line:.0f} bit/s (emulated).",
           "# Generated by tests/unit/dcqcn_golden.py from DESIGN.md section 2; do not edit by hand.",
           "# time_ns event bytes rc_bps rt_bps alpha stage"]
    for at, kind, n in events(trace):
        if kind == "cnp":
            m.cnp(at)
        elif kind == "sent":
            m.sent(n, at)
        else:
            m.run_until(at)
        out.append(f"{at} {kind} {n} {m.rc:.6f} {m.rt:.6f} {m.alpha:.12f} {m.stage}")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", metavar="DIR")
    g.add_argument("--check", metavar="DIR")
    a = ap.parse_args()
    bad = 0
    for trace in TRACES:
        text = render(trace)
        path = os.path.join(a.write or a.check, f"dcqcn_{trace}.txt")
        if a.write:
            with open(path, "w") as f:
                f.write(text)
            stages = {line.split()[-1] for line in text.splitlines() if not line.startswith("#")}
            print(f"{path}: {text.count(chr(10)) - 3} steps, stages {sorted(stages)}")
        elif not os.path.exists(path) or open(path).read() != text:
            print(f"{path} differs from what the equations give: regenerate with --write", file=sys.stderr)
            bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main())
