#!/usr/bin/env python3
"""Communication share and scaling efficiency of a 2-machine run as the link between them narrows.

Two machines are simulated on this host (tools/netns_link.py: two network namespaces, a veth pair
shaped with tc); `tbd profile --nnodes 2` runs one rank in each at every link rate, after a
1-process run of the same model that the efficiencies are measured against, all in this one
invocation (the machine's noise is shared by every row). Needs root.

    sudo .venv/bin/python bench/distributed_link.py --model resnet50 --rates 1000,200,50,20
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT / "tools"))
import netns_link  # noqa: E402 - tools/ is a folder of scripts, not a package


def _profile(out: Path) -> dict:
    return json.loads((out / "profile.json").read_text())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--size", default="test")
    p.add_argument("--batch", default="4")
    p.add_argument("--rates", default="1000,200,50,20", help="link rates in Mbit/s, comma-separated")
    args = p.parse_args()
    refused = netns_link.refusal()
    if refused:
        print(f"distributed_link: {refused}", file=sys.stderr)
        return 2
    run = [args.model, "--size", args.size, "--batch", args.batch, "--device", "cpu", "--threads", "1",
           "--iterations", "10", "--trace-iterations", "2", "--repeat", "3", "--quiet"]
    tbd = [sys.executable, "-m", "tbd.cli", "profile"]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        subprocess.run([*tbd, *run, "--out", str(base / "one")], check=True, capture_output=True)
        single = _profile(base / "one")["metrics"]["throughput"]["value"]
        print(f"{args.model} ({args.size}), batch {args.batch} per rank; 1 process: {single:.4g}/s")
        print(f"{'link':>42}  {'cluster /s':>10}  {'efficiency %':>12}  {'comm share %':>12}  {'exposed %':>9}")
        with netns_link.link_pair() as pair:
            for rate in [float(r) for r in args.rates.split(",")]:
                shaping = netns_link.shape(pair, rate, 1.0)
                out = base / f"r{rate:g}"
                procs = [subprocess.Popen(pair.command(n, [*tbd, *run, "--nnodes", "2", "--node-rank", str(n),
                                                            "--rdzv-endpoint", f"{pair.addresses[0]}:29641",
                                                            "--out", str(out / f"node{n}")]),
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                         for n in (0, 1)]
                for proc in procs:
                    _, err = proc.communicate(timeout=1200)
                    if proc.returncode:
                        print(f"{shaping}: failed: {err.strip().splitlines()[-1:]}", file=sys.stderr)
                        return 1
                profile = _profile(out / "node0")
                total, cluster = profile["metrics"]["throughput"]["value"], profile["cluster"]
                print(f"{shaping[:42]:>42}  {total:>10.4g}  {total / (2 * single) * 100:>12.1f}  "
                      f"{cluster['comm_share_mean_pct']:>12.1f}  {cluster['exposed_comm_share_mean_pct']:>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
