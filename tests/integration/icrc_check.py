#!/usr/bin/env python3
"""Independent RoCEv2 ICRC checker for a pcap (Ethernet link type): for every IPv4 UDP
packet to port 4791, recompute the ICRC with zlib.crc32 as IBTA annex A17 says (8 bytes of
0xFF, IPv4 header with TOS, TTL and checksum as all-ones, UDP header with checksum all-ones,
BTH with its FECN/BECN/reserved byte all-ones, the rest) and compare it with the 4 bytes
at the end, least-significant byte first.

  icrc_check.py FILE.pcap   prints {"checked": N, "bad": M, "opcodes": {...}}; exit 1 if M > 0
"""
import json
import struct
import sys
import zlib


def frames(path):
    with open(path, "rb") as f:
        head = f.read(24)
        magic = struct.unpack("<I", head[:4])[0]
        endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
        linktype = struct.unpack(endian + "I", head[20:24])[0]
        if linktype != 1:
            raise SystemExit(f"{path}: link type {linktype}, want Ethernet (1)")
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            _, _, incl, orig = struct.unpack(endian + "IIII", rec)
            data = f.read(incl)
            if incl < orig:
                raise SystemExit(f"{path}: truncated capture (snaplen): capture with -s 0")
            yield data


def icrc(ip):
    ihl = (ip[0] & 0xF) * 4
    head = bytearray(ip[:ihl + 8])
    head[1] = 0xFF
    head[8] = 0xFF
    head[10:12] = b"\xff\xff"
    head[ihl + 6:ihl + 8] = b"\xff\xff"
    bth = bytearray(ip[ihl + 8:ihl + 20])
    bth[4] = 0xFF
    c = zlib.crc32(b"\xff" * 8)
    c = zlib.crc32(bytes(head), c)
    c = zlib.crc32(bytes(bth), c)
    return zlib.crc32(bytes(ip[ihl + 20:-4]), c)


def check(path):
    checked = bad = 0
    opcodes = {}
    for fr in frames(path):
        if len(fr) < 14 + 20 + 8 + 16 or fr[12:14] != b"\x08\x00":
            continue
        ip = fr[14:]
        ihl = (ip[0] & 0xF) * 4
        total = struct.unpack(">H", ip[2:4])[0]
        ip = ip[:total]  # drop Ethernet padding
        if ip[9] != 17 or struct.unpack(">H", ip[ihl + 2:ihl + 4])[0] != 4791:
            continue
        checked += 1
        op = ip[ihl + 8]
        opcodes[op] = opcodes.get(op, 0) + 1
        if icrc(ip) != struct.unpack("<I", ip[-4:])[0]:
            bad += 1
    return {"checked": checked, "bad": bad, "opcodes": {str(k): v for k, v in sorted(opcodes.items())}}


if __name__ == "__main__":
    r = check(sys.argv[1])
    print(json.dumps(r))
    sys.exit(1 if r["bad"] or not r["checked"] else 0)
