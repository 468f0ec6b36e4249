"""The machine a bench ran on, said with its figures (issue 48): every ratio moves with the host,
so each bench names the CPU model, the CPUs it had, the clocksource, the kernel, and on its
way out the hypervisor's steal and other programs' CPU over the bench.

    import machine
    machine.announce()   # prints the machine now, its steal and others' CPU at exit
"""
import atexit
import os
import sys
import time


def _read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def describe():
    """'AMD EPYC, 2 CPUs, clocksource tsc, kernel 6.18.44' as results.json's machine says it."""
    model = next((line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo").splitlines()
                  if line.startswith("model name")), "unknown CPU")
    cs = _read("/sys/devices/system/clocksource/clocksource0/current_clocksource").strip() or "unknown"
    return f"{model}, {os.cpu_count()} CPUs, clocksource {cs}, kernel {os.uname().release}"


def _cpu():
    """(steal, all) jiffies of the machine, /proc/stat's first line."""
    v = [int(x) for x in _read("/proc/stat", "cpu 0 0 0 0 0 0 0 0").split("\n")[0].split()[1:9]]
    return v[7], sum(v)


def _others(mine):
    """CPU jiffies of every user process but `mine` and its descendants (kernel threads left
    out: the fabric's softirq work runs there)."""
    total, kids = 0, {}
    stats = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        s = _read(f"/proc/{pid}/stat")
        close = s.rfind(")")
        if close < 0:
            continue
        f = s[close + 2:].split()
        if int(f[6]) & 0x00200000:  # PF_KTHREAD
            continue
        stats[int(pid)] = (int(f[1]), int(f[11]) + int(f[12]))
    ours = {mine}
    for _ in range(8):  # descendants, a few generations down
        ours |= {p for p, (ppid, _) in stats.items() if ppid in ours}
    for p, (_, t) in stats.items():
        if p not in ours:
            total += t
    return total


class _Watch:
    def __init__(self):
        self.t0, self.cpu0, self.others0 = time.monotonic(), _cpu(), _others(os.getpid())

    def summary(self):
        steal1, all1 = _cpu()
        steal = (steal1 - self.cpu0[0]) / max(1, all1 - self.cpu0[1])
        others = (_others(os.getpid()) - self.others0) / max(1, all1 - self.cpu0[1])
        return (f"machine over the bench ({time.monotonic() - self.t0:.0f} s): steal {steal:.1%} of its CPU time, "
                f"other programs {others:.1%}")


def announce(out=sys.stdout):
    """Prints the machine now and, when the bench exits, the steal and others' CPU meanwhile."""
    print(f"machine: {describe()}", file=out, flush=True)
    w = _Watch()
    atexit.register(lambda: print(w.summary(), file=out, flush=True))
    return w
