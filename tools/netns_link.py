#!/usr/bin/env python3
"""Two simulated machines on one host: two network namespaces joined by a veth pair, the link shaped.

    sudo python tools/netns_link.py up --rate-mbit 50 --delay-ms 2    # prints the two addresses
    sudo ip netns exec tbd-node0 env GLOO_SOCKET_IFNAME=tbd-veth0 tbd profile ... --nnodes 2 --node-rank 0 \\
         --rdzv-endpoint 10.231.0.1:29600 --out runs/node0
    sudo ip netns exec tbd-node1 env GLOO_SOCKET_IFNAME=tbd-veth1 tbd profile ... --nnodes 2 --node-rank 1 \\
         --rdzv-endpoint 10.231.0.1:29600 --out runs/node1
    sudo python tools/netns_link.py down

The link is shaped in both directions with tc: `netem rate R delay D` where the kernel has netem
(bandwidth and latency), else `tbf rate R` (bandwidth only: the pair says the latency is not
shaped). Needs root (CAP_NET_ADMIN) and `ip`/`tc` (iproute2). tests/e2e/test_distributed_netns.py
and bench/distributed_link.py use `link_pair`; they skip, with the reason, where it is refused.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Iterator

NAMESPACES = ("tbd-node0", "tbd-node1")
INTERFACES = ("tbd-veth0", "tbd-veth1")
ADDRESSES = ("10.231.0.1", "10.231.0.2")


@dataclass(frozen=True)
class LinkPair:
    namespaces: tuple[str, str]
    interfaces: tuple[str, str]
    addresses: tuple[str, str]
    shaping: str  # the tc qdisc applied, in tc's words

    def command(self, node: int, argv: list[str]) -> list[str]:
        """`argv` run inside node `node`'s namespace, Gloo bound to its end of the link."""
        return ["ip", "netns", "exec", self.namespaces[node], "env",
                f"GLOO_SOCKET_IFNAME={self.interfaces[node]}", *argv]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def refusal() -> str | None:
    """Why namespaces cannot be made here (not root, no iproute2, refused by the kernel), else None."""
    if os.geteuid() != 0:
        return "creating network namespaces needs root (CAP_NET_ADMIN)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"`{tool}` (iproute2) is not installed"
    probe = "tbd-probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` was refused: {made.stderr.strip() or made.returncode}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def shape(pair: LinkPair | None, rate_mbit: float, delay_ms: float) -> str:
    """Shape both ends at `rate_mbit` (and `delay_ms` where netem exists); returns the qdisc in words."""
    words = ""
    for ns, dev in zip(NAMESPACES, INTERFACES):
        netem = ["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "netem", "rate", f"{rate_mbit}mbit",
                 "delay", f"{delay_ms}ms"]
        done = subprocess.run(netem, capture_output=True, text=True)
        if done.returncode == 0:
            words = f"netem rate {rate_mbit:g} Mbit/s, delay {delay_ms:g} ms each way"
            continue
        # No sch_netem in this kernel: a token bucket shapes the bandwidth alone. The burst is one
        # 64 KiB socket write, so short messages are not held back more than a real link would.
        subprocess.run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{rate_mbit}mbit",
                        "burst", "64kb", "latency", "400ms"], check=True, capture_output=True, text=True)
        words = f"tbf rate {rate_mbit:g} Mbit/s (this kernel has no netem: latency not shaped)"
    return words


def up(rate_mbit: float | None = None, delay_ms: float = 0.0) -> LinkPair:
    down()
    for ns in NAMESPACES:
        _ip("netns", "add", ns)
    _ip("link", "add", INTERFACES[0], "type", "veth", "peer", "name", INTERFACES[1])
    for ns, dev, addr in zip(NAMESPACES, INTERFACES, ADDRESSES):
        _ip("link", "set", dev, "netns", ns)
        _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
        _ip("-n", ns, "link", "set", dev, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
    pair = LinkPair(NAMESPACES, INTERFACES, ADDRESSES, "unshaped veth")
    if rate_mbit is not None:
        pair = LinkPair(NAMESPACES, INTERFACES, ADDRESSES, shape(pair, rate_mbit, delay_ms))
    return pair


def down() -> None:
    for ns in NAMESPACES:  # deleting a namespace deletes its end of the veth pair, and so the pair
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@contextlib.contextmanager
def link_pair(rate_mbit: float | None = None, delay_ms: float = 0.0) -> Iterator[LinkPair]:
    """Two namespaces joined by a veth pair for the time of the block, removed afterwards."""
    try:
        yield up(rate_mbit, delay_ms)
    finally:
        down()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("action", choices=("up", "down", "shape"))
    p.add_argument("--rate-mbit", type=float, default=None)
    p.add_argument("--delay-ms", type=float, default=0.0)
    args = p.parse_args(argv)
    if args.action == "down":
        down()
        return 0
    reason = refusal()
    if reason:
        print(f"netns_link: {reason}", file=sys.stderr)
        return 2
    if args.action == "shape":
        print(shape(None, args.rate_mbit or 1000.0, args.delay_ms))
        return 0
    pair = up(args.rate_mbit, args.delay_ms)
    for ns, dev, addr in zip(pair.namespaces, pair.interfaces, pair.addresses):
        print(f"{ns}: {dev} {addr}")
    print(f"link: {pair.shaping}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
