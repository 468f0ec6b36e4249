#!/usr/bin/python3
"""Mininet 2.3 building the bench's leaf-spine (Linux bridges with STP, no controller), timed.

Run only inside a network namespace the bench owns (fabric_updown.py does this): Mininet
makes its switches and links in the namespace it runs in. Prints one JSON line per cycle:
{"up": seconds for build + start, "down": seconds for stop}.
Usage: mininet_leafspine.py SPINES LEAVES HOSTS_PER_LEAF CYCLES
"""
import json
import sys
import time

import mininet.net
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.nodelib import LinuxBridge
from mininet.topo import Topo

# Mininet.init() raises machine-wide limits (fs.file-max, kernel.pty.max) with sysctl: the
# bench must not touch the machine, and the defaults here are large enough.
mininet.net.fixLimits = lambda: None


class LeafSpine(Topo):
    def build(self, spines, leaves, hosts_per_leaf):
        sw = [self.addSwitch(f"s{i + 1}", stp=True) for i in range(spines)]
        for l in range(leaves):
            leaf = self.addSwitch(f"l{l + 1}", stp=True)
            for s in sw:
                self.addLink(leaf, s)
            for h in range(hosts_per_leaf):
                self.addLink(self.addHost(f"h{l * hosts_per_leaf + h + 1}"), leaf)


def main():
    spines, leaves, hpl, cycles = (int(a) for a in sys.argv[1:5])
    setLogLevel("error")
    for _ in range(cycles):
        t0 = time.monotonic()
        net = Mininet(topo=LeafSpine(spines, leaves, hpl), switch=LinuxBridge, controller=None,
                      autoSetMacs=True, build=True)
        net.start()
        t1 = time.monotonic()
        net.stop()
        t2 = time.monotonic()
        print(json.dumps({"up": t1 - t0, "down": t2 - t1}), flush=True)


if __name__ == "__main__":
    main()
