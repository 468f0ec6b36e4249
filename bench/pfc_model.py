#!/usr/bin/python3
"""What physical ports do in the N:1 PFC-only incast, frame by frame: the reference
bench/pfc_reaction sets the emulation beside (no root, no fabric, ~2 s).

Each sender transmits back to back at line rate while not paused. The switch counts a frame
into its ingress priority group (PG) once it has received all of it, and sends XOFF when the
PG reaches XOFF; a sender that hears XOFF finishes the frame it has begun (802.1Qbb) and
sends nothing more. The egress port sends its FIFO queue back to back at line rate; a frame
leaves its PG as it starts to leave, and XON goes out when that PG falls to XON. XOFF and XON
reach the sender after the link's delay plus the pause frame's own time on the wire.

Prints the XOFF count, the peak queue toward the receiver, the summed pause time and each
pause's and each sending spell's median: what rocelab's 7:1 incast (scenarios/incast-dcqcn.yaml
with dcqcn: off) should show, were its loop a physical one.

    bench/pfc_model.py                      # the reference incast: 7 x 16 MiB, 4,288 B frames
    bench/pfc_model.py --frame 1048         # the same bytes in 1 KB frames
"""
import argparse
import heapq
import statistics
import sys

LINE_BPS = 100e9
PAUSE_FRAME_NS = 64 * 8 / LINE_BPS * 1e9  # the PFC frame's own time on the wire


def simulate(frame=4288, senders=7, mib=16, xoff=128 * 1024, xon=128 * 1024 - 2 * 4200, delay_ns=0.0, payload=4096):
    """The incast's figures; `frame` is the bytes a frame counts for in a PG (wire bytes)."""
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
    f = dict(xoff=0, peak=0, pause_ns=0.0)
    queue = 0
    since, resumed = [0.0] * senders, [0.0] * senders
    pauses, spells, overshoot = [], [], []

    def send(i, t):
        if sending[i] or paused[i] or not left[i]:
            return
        sending[i], left[i] = True, left[i] - 1
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
            at(t + delay_ns + PAUSE_FRAME_NS, "xon", j)
        at(t + s_ns, "left")

    for i in range(senders):
        send(i, 0.0)
    episode = [0] * senders  # the most a PG held since its XOFF
    t = 0.0
    while events:
        t, _, kind, *rest = heapq.heappop(events)
        if kind == "sent":
            sending[rest[0]] = False
            send(rest[0], t)
        elif kind == "arrived":
            i = rest[0]
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
                at(t + delay_ns + PAUSE_FRAME_NS, "xoff", i)
            egress(t)
        elif kind == "left":
            egress_busy = False
            egress(t)
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
             overshoot_mean=statistics.mean(overshoot) if overshoot else 0.0)
    return f


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frame", type=int, default=4288, help="bytes a frame counts for in its PG (default 4,288: "
                    "rocelab's 4,096 B RoCE payload with its headers)")
    ap.add_argument("--senders", type=int, default=7)
    ap.add_argument("--mib", type=int, default=16, help="MiB each sender writes")
    ap.add_argument("--xoff", type=int, default=128 * 1024)
    ap.add_argument("--xon", type=int, default=128 * 1024 - 2 * 4200, help="default XOFF - 2 x MTU (4,200)")
    ap.add_argument("--delay-ns", type=float, default=0.0, help="link propagation delay (rocelab's links: 0)")
    a = ap.parse_args()
    if a.frame <= 0 or a.senders <= 0 or a.mib <= 0 or not 0 < a.xon < a.xoff:
        ap.error("frame, senders and mib must be positive, and 0 < xon < xoff")
    payload = min(4096, a.frame)
    f = simulate(a.frame, a.senders, a.mib, a.xoff, a.xon, a.delay_ns, payload)
    print(f"{a.senders}:1 incast, PFC only, physical ports, {a.frame} B frames, {a.delay_ns:g} ns links: "
          f"XOFF {f['xoff']}, peak queue {f['peak']} B ({(f['peak'] - a.senders * a.xoff) / a.senders:.0f} B a PG "
          f"past XOFF at the peak), a PG {f['overshoot_mean']:.0f} B past XOFF a pause (mean), pause time "
          f"{f['pause_ns'] / 1e6:.2f} ms summed, a pause {f['pause_p50_ns'] / 1e3:.2f} us and a sending spell "
          f"{f['spell_p50_ns'] / 1e3:.2f} us (medians), done at {f['end_ns'] / 1e6:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
