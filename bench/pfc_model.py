#!/usr/bin/python3
"""What physical ports do in the N:1 incast, frame by frame: the reference bench/pfc_reaction
sets the emulation beside (no root, no fabric, seconds).

Each sender transmits at line rate while not paused, back to back, or with `--dcqcn` paced
at its DCQCN rate (a frame at line rate, the next no sooner than the frame's bits at the
rate later; a new rate moves the wait left, as HPCC's ns-3 and rocelab's engine do). The
switch counts a frame into its ingress priority group (PG) once it has received all of it,
and sends XOFF when the PG reaches XOFF; a sender that hears XOFF finishes the frame it has
begun (802.1Qbb) and sends nothing more. The egress port sends its FIFO queue back to back
at line rate; a frame leaves its PG as it starts to leave, and XON goes out when that PG
falls to XON. XOFF and XON reach the sender after the link's delay plus the pause frame's
own time on the wire.

With `--dcqcn paper`, the egress port marks ECN at dequeue (HPCC's ns-3: on the bytes the
queue holds after the frame left; probability 0 below Kmin, Pmax at Kmax, 1 above), the
receiver sends a CNP for a marked frame at most once per CNP interval per sender, and the
CNP cuts the sender's rate when it arrives (two links and two 64 B frames later). The
reaction point is tests/unit/dcqcn_golden.py's model of DESIGN.md §2 (the reading
orchestrator/engine/dcqcn.h implements, checked against the engine there): the same DCQCN as
rocelab's, on physical ports.

Prints the XOFF count, the peak queue toward the receiver, the summed pause time and each
pause's and each sending spell's median; with DCQCN also CNPs, job time, FCT spread and the
bottleneck's utilisation while all seven send: what rocelab's 7:1 incast
(scenarios/incast-dcqcn.yaml, or with dcqcn: off) should show, were its loop a physical one.

    bench/pfc_model.py                      # PFC alone: 7 x 16 MiB, 4,288 B frames
    bench/pfc_model.py --frame 4154         # rocelab's frames as a PG counts them
    bench/pfc_model.py --frame 4154 --dcqcn paper --seeds 1-5   # incast-dcqcn.yaml
    bench/pfc_model.py --frame 4154 --dcqcn paper --seeds 1-5 --cut-delay-ns 1000

    bench/pfc_model.py --frame 4154 --react-ns 60,140   # senders' PFC reaction, p50,p99

`--react-ns` gives each sender's pause a reaction: XOFF takes hold that long after it arrives
(log-normal through the p50 and p99 given; one figure: always that long), frames begun
meanwhile go out whole. The XOFF count rests on it far more than the figures that add up
bytes: a reaction of 60 ns at the median, 140 ns at the 99th percentile, well inside one
332 ns frame and within what a physical NIC takes, gives 6,103 XOFF frames where an instant
one gives 6,895 (-11 %; the peak queue and a PG's mean past XOFF unchanged), because the
ideal ports' cadence is a lattice every sender keeps in step with. rocelab's agent puts a
pause in force in tens of microseconds of wall clock, tens of nanoseconds at D = 1000:
bench/pfc_reaction sets each run beside the model given the run's own reaction.

The last DCQCN line shows how much the DCQCN incast's XOFF count rests on the CNP's way: its cuts taking
hold 1 us later give 82-85 XOFF frames where 0-400 ns give 72-80 (rocelab: 70-78; the HPCC
ns-3 simulator, 100 ns links: 82-87).
"""
import argparse
import bisect
import heapq
import math
import os
import random
import statistics
import sys

LINE_BPS = 100e9
PAUSE_FRAME_NS = 64 * 8 / LINE_BPS * 1e9  # the PFC frame's own time on the wire (a CNP's too)


def dcqcn_model(preset):
    """A reaction point of the project's independent DCQCN model, the engine's parameters."""
    unit = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "unit")
    if unit not in sys.path:
        sys.path.insert(0, unit)
    import dcqcn_golden
    p = dict(dcqcn_golden.PRESETS[preset])
    p["B"] = 10_000_000  # the engine's byte counter (DESIGN.md: 10 MB)
    return lambda: dcqcn_golden.Model(p, LINE_BPS)


def mark_probability(queue, kmin, kmax, pmax):
    if queue <= kmin:
        return 0.0
    if queue > kmax:
        return 1.0
    return pmax * (queue - kmin) / (kmax - kmin)


def reaction_sampler(react_ns, rng):
    """Draws a sender's PFC reaction, ns: from (p50, p99) a log-normal through both (p99 =
    p50: always p50), or from (percentile, value) pairs rising from 0 to 100 (a run's
    pfc_reaction_quantiles), linear between them."""
    react_ns = list(react_ns)
    if react_ns and isinstance(react_ns[0], (tuple, list)):
        qs = [q for q, _ in react_ns]
        vs = [v for _, v in react_ns]

        def draw():
            u = rng.random() * 100
            i = min(bisect.bisect_right(qs, u), len(qs) - 1)
            if i == 0:
                return vs[0]
            q0, q1 = qs[i - 1], qs[i]
            return vs[i - 1] + (vs[i] - vs[i - 1]) * ((u - q0) / (q1 - q0) if q1 > q0 else 1.0)
        return draw
    p50, p99 = react_ns[0], react_ns[-1]
    sigma = math.log(p99 / p50) / 2.3263 if p50 > 0 and p99 > p50 else 0.0
    return lambda: p50 * math.exp(sigma * rng.gauss(0.0, 1.0)) if p50 > 0 else 0.0


def simulate(frame=4288, senders=7, mib=16, xoff=128 * 1024, xon=128 * 1024 - 2 * 4200, delay_ns=0.0, payload=4096,
             dcqcn=None, ecn=(32 * 1024, 160 * 1024, 0.05), cnp_interval_ns=50_000.0, seed=1, cut_delay_ns=0.0,
             react_ns=(0.0, 0.0), resume_ns=(0.0, 0.0)):
    """The incast's figures; `frame` is the bytes a frame counts for in a PG (wire bytes);
    `dcqcn` a preset of dcqcn_golden (None: PFC alone, senders at line rate); `cut_delay_ns`
    how long after a CNP arrives its cut takes hold (a NIC's own reaction); `react_ns` (p50,
    p99) or quantiles, how long after an XOFF arrives the sender's pause takes hold;
    `resume_ns` likewise how long after XON leaves the switch the sender resumes, beyond the
    link's delay and the XON's own time on the wire."""
    s_ns = frame * 8 / LINE_BPS * 1e9
    frames = mib * 1024 * 1024 // payload
    events, seq = [], 0

    def at(t, *what):
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq) + what)

    paused, sending, left = [False] * senders, [False] * senders, [frames] * senders
    xoffed, pg = [False] * senders, [0] * senders
    fifo, egress_busy = [], False
    f = dict(xoff=0, peak=0, pause_ns=0.0, cnps=0, busy_ns=0.0)
    queue = 0
    since, resumed = [0.0] * senders, [0.0] * senders
    pauses, spells, overshoot = [], [], []
    # rocelab's pfc_xon_late and pfc_refill: how far below XON a PG had drained as XON went
    # out, and as its sender's first frame after that XON arrived.
    xon_late, refills, refill = [], [], [False] * senders
    new_rp = dcqcn_model(dcqcn) if dcqcn else None
    rp = [new_rp() for _ in range(senders)] if new_rp else None
    rng = random.Random(seed)
    react_rng = random.Random(seed ^ 0x5EED)
    reaction = reaction_sampler(react_ns, react_rng)
    resumption = reaction_sampler(resume_ns, random.Random(seed ^ 0xA11))
    next_avail, booked_rate, waiting = [0.0] * senders, [LINE_BPS] * senders, [False] * senders
    last_cnp, received, fct = [None] * senders, [0] * senders, [None] * senders

    def rate(i, t):
        if not rp:
            return LINE_BPS
        rp[i].run_until(t)
        return min(rp[i].rc, LINE_BPS)

    def send(i, t):
        if sending[i] or paused[i] or not left[i]:
            return
        r = rate(i, t)
        if r != booked_rate[i]:  # a new rate moves the wait left (ns-3's ChangeRate)
            next_avail[i] += frame * 8 / r * 1e9 - frame * 8 / booked_rate[i] * 1e9
            booked_rate[i] = r
        if t < next_avail[i] - 1e-6:
            if not waiting[i]:
                waiting[i] = True
                at(next_avail[i], "due", i)
            return
        sending[i], left[i] = True, left[i] - 1
        next_avail[i], booked_rate[i] = t + frame * 8 / r * 1e9, r
        if rp:
            rp[i].sent(frame, t)
        at(t + s_ns, "sent", i)
        at(t + s_ns + delay_ns, "arrived", i)

    def egress(t):
        nonlocal egress_busy, queue
        if egress_busy or not fifo:
            return
        j = fifo.pop(0)
        egress_busy, queue, pg[j] = True, queue - frame, pg[j] - frame
        if xoffed[j] and pg[j] <= xon:
            xoffed[j] = False
            xon_late.append(xon - pg[j])
            refill[j] = True
            at(t + delay_ns + PAUSE_FRAME_NS + resumption(), "xon", j)
        marked = bool(rp) and rng.random() < mark_probability(queue, *ecn)
        f["busy_ns"] += s_ns
        at(t + s_ns, "left")
        at(t + s_ns + delay_ns, "received", j, marked)

    for i in range(senders):
        send(i, 0.0)
    episode = [0] * senders  # the most a PG held since its XOFF
    all_sending_until = None  # the first completion: the bottleneck's share while all seven send
    busy_then = 0.0
    t = 0.0
    while events:
        t, _, kind, *rest = heapq.heappop(events)
        if kind == "sent":
            sending[rest[0]] = False
            send(rest[0], t)
        elif kind == "due":
            waiting[rest[0]] = False
            send(rest[0], t)
        elif kind == "arrived":
            i = rest[0]
            if refill[i] and not xoffed[i]:
                refill[i] = False
                refills.append(max(0, xon - pg[i]))
            fifo.append(i)
            pg[i] += frame
            queue += frame
            f["peak"] = max(f["peak"], queue)
            episode[i] = max(episode[i], pg[i])
            if not xoffed[i] and pg[i] >= xoff:
                if f["xoff"] >= senders:
                    overshoot.append(episode[i] - xoff)
                episode[i] = pg[i]
                xoffed[i] = True
                f["xoff"] += 1
                at(t + delay_ns + PAUSE_FRAME_NS + reaction(), "xoff", i)
            egress(t)
        elif kind == "left":
            egress_busy = False
            egress(t)
        elif kind == "received":
            j, marked = rest
            received[j] += 1
            if received[j] == frames:
                fct[j] = t
                if all_sending_until is None:
                    all_sending_until, busy_then = t, f["busy_ns"]
            if marked and (last_cnp[j] is None or t - last_cnp[j] >= cnp_interval_ns):
                last_cnp[j] = t
                f["cnps"] += 1
                at(t + 2 * (delay_ns + PAUSE_FRAME_NS) + cut_delay_ns, "cnp", j)
        elif kind == "cnp":
            rp[rest[0]].cnp(t)
        elif kind == "xoff" and not paused[rest[0]]:
            i = rest[0]
            paused[i], since[i] = True, t
            if resumed[i]:
                spells.append(t - resumed[i])
        elif kind == "xon" and paused[rest[0]]:
            i = rest[0]
            paused[i] = False
            pauses.append(t - since[i])
            f["pause_ns"] += t - since[i]
            resumed[i] = t
            send(i, t)
    f.update(end_ns=t, pause_p50_ns=statistics.median(pauses) if pauses else 0.0,
             spell_p50_ns=statistics.median(spells) if spells else 0.0,
             overshoot_mean=statistics.mean(overshoot) if overshoot else 0.0,
             xon_late_mean=statistics.mean(xon_late) if xon_late else 0.0,
             refill_mean=statistics.mean(refills) if refills else 0.0,
             jct_ns=max(fct), fct_spread=max(fct) / min(fct),
             utilization=busy_then / all_sending_until if all_sending_until else 0.0)
    return f


def seeds(text):
    a, _, b = text.partition("-")
    return list(range(int(a), int(b or a) + 1))


def delay_arg(ap, flag, text):
    """--react-ns / --resume-ns: P50[,P99], or PERCENTILE:NS pairs rising from 0 to 100."""
    try:
        parts = text.split(",")
        if ":" in text:
            out = [tuple(float(y) for y in x.split(":")) for x in parts]
            ok = all(len(x) == 2 for x in out) and out[0][0] == 0 and out[-1][0] == 100 and \
                all(b[0] > x[0] and b[1] >= x[1] for x, b in zip(out, out[1:])) and out[0][1] >= 0
        else:
            out = [float(x) for x in parts]
            ok = len(out) <= 2 and out[0] >= 0 and out[-1] >= out[0]
        if not ok:
            raise ValueError
    except ValueError:
        ap.error(f"{flag} takes P50, P50,P99, or PERCENTILE:NS pairs rising from 0 to 100")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frame", type=int, default=4288, help="bytes a frame counts for in its PG (default 4,288: "
                    "rocelab's 4,096 B RoCE payload with its headers)")
    ap.add_argument("--senders", type=int, default=7)
    ap.add_argument("--mib", type=int, default=16, help="MiB each sender writes")
    ap.add_argument("--xoff", type=int, default=128 * 1024)
    ap.add_argument("--xon", type=int, default=128 * 1024 - 2 * 4200, help="default XOFF - 2 x MTU (4,200)")
    ap.add_argument("--delay-ns", type=float, default=0.0, help="link propagation delay (rocelab's links: 0)")
    ap.add_argument("--dcqcn", choices=("paper",), help="DCQCN at the senders (default: none, PFC alone)")
    ap.add_argument("--kmin", type=int, default=32 * 1024, help="ECN Kmin, bytes (incast-dcqcn.yaml's 32 KB)")
    ap.add_argument("--kmax", type=int, default=160 * 1024)
    ap.add_argument("--pmax", type=float, default=0.05)
    ap.add_argument("--seeds", type=seeds, default=[1], help="marking draws, e.g. 1-5 (DCQCN only)")
    ap.add_argument("--cut-delay-ns", type=float, default=0.0,
                    help="how long after a CNP arrives its cut takes hold (DCQCN only; default 0)")
    ap.add_argument("--react-ns", default="0",
                    help="a sender's PFC reaction, ns: P50[,P99] (log-normal; default 0, instant), or "
                    "PERCENTILE:NS pairs from 0 to 100 (a run's pfc_reaction_quantiles / D)")
    ap.add_argument("--resume-ns", default="0",
                    help="how much later than XON's arrival a sender resumes, ns: the same forms as --react-ns")
    a = ap.parse_args()
    react = delay_arg(ap, "--react-ns", a.react_ns)
    resume = delay_arg(ap, "--resume-ns", a.resume_ns)
    if a.frame <= 0 or a.senders <= 0 or a.mib <= 0 or not 0 < a.xon < a.xoff:
        ap.error("frame, senders and mib must be positive, and 0 < xon < xoff")
    payload = min(4096, a.frame)
    for seed in a.seeds if a.dcqcn else [1]:
        f = simulate(a.frame, a.senders, a.mib, a.xoff, a.xon, a.delay_ns, payload, a.dcqcn,
                     (a.kmin, a.kmax, a.pmax), seed=seed, cut_delay_ns=a.cut_delay_ns, react_ns=react,
                     resume_ns=resume)
        print(f"{a.senders}:1 incast, {'DCQCN ' + a.dcqcn + ' + PFC, seed ' + str(seed) if a.dcqcn else 'PFC only'}, "
              f"physical ports, {a.frame} B frames, {a.delay_ns:g} ns links"
              f"{', reaction drawn as given' if a.react_ns != '0' else ''}"
              f"{', resumption drawn as given' if a.resume_ns != '0' else ''}: "
              f"XOFF {f['xoff']}, peak queue {f['peak']} B ({(f['peak'] - a.senders * a.xoff) / a.senders:.0f} B a PG "
              f"past XOFF at the peak), a PG {f['overshoot_mean']:.0f} B past XOFF a pause (mean), "
              f"{f['xon_late_mean']:.0f} B below XON as XON went and {f['refill_mean']:.0f} B as its sender's next "
              f"frame came (means), pause time "
              f"{f['pause_ns'] / 1e6:.2f} ms summed, a pause {f['pause_p50_ns'] / 1e3:.2f} us and a sending spell "
              f"{f['spell_p50_ns'] / 1e3:.2f} us (medians), done at {f['end_ns'] / 1e6:.2f} ms")
        if a.dcqcn:
            print(f"  CNPs {f['cnps']}, job {f['jct_ns'] / 1e6:.2f} ms, FCT spread {f['fct_spread']:.3f}, "
                  f"bottleneck busy {f['utilization']:.1%} while all send")
    return 0


if __name__ == "__main__":
    sys.exit(main())
