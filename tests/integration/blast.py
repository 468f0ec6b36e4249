#!/usr/bin/env python3
"""Paced UDP sender for the data-plane tests, run inside a host namespace:
blast.py DST_IP TOS RATE_BPS SECONDS [SIZE [PORT]]. Frames are SIZE + 42 bytes on the wire; the
rate counts whole frames. Drops at the sender's own port (ENOBUFS) are counted, not fatal.
Prints one JSON line: {"sent": N, "refused": M, "seconds": S}."""
import errno
import json
import socket
import sys
import time


def main():
    dst, tos, rate, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    size = int(sys.argv[5]) if len(sys.argv) > 5 else 1000
    port = int(sys.argv[6]) if len(sys.argv) > 6 else 9
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    payload = b"\0" * size
    interval = (size + 42) * 8 / rate
    sent = refused = 0
    t0 = time.monotonic()
    next_at = t0
    while True:
        now = time.monotonic()
        if now - t0 >= seconds:
            break
        if now < next_at:
            # Sleep rather than spin: several senders share two cores with the fabric's
            # softirqs and the agent; the catch-up burst below keeps the average rate.
            time.sleep(min(next_at - now, 0.001))
            continue
        # Catch up in a burst after a scheduling gap, but never more than 64 frames at once.
        burst = min(64, int((now - next_at) / interval) + 1)
        for _ in range(burst):
            try:
                s.sendto(payload, (dst, port))
                sent += 1
            except OSError as e:
                if e.errno != errno.ENOBUFS:
                    raise
                refused += 1
        next_at += burst * interval
    print(json.dumps({"sent": sent, "refused": refused, "seconds": time.monotonic() - t0}))


if __name__ == "__main__":
    main()
