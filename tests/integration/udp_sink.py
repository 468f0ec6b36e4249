#!/usr/bin/env python3
"""Counts UDP datagrams on a port for SECONDS, inside a host namespace: udp_sink.py BIND_IP
PORT SECONDS. Prints {"received": N}. The end-to-end half of a loss count."""
import json
import socket
import sys
import time


def main():
    ip, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((ip, port))
    s.settimeout(0.2)
    got = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            while True:
                s.recv(2048)
                got += 1
        except socket.timeout:
            pass
    print(json.dumps({"received": got}))


if __name__ == "__main__":
    main()
