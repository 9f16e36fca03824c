"""Overhead of tbd's hook: throughput tbd reports vs a bare training loop, side by side in one run.

    .venv/bin/python bench/overhead.py [--model resnet50] [--batch 16] [--size full] [--iterations 20] [--rounds 3]

Both loops drive the same Workload object in this process, alternating round by round (and which
goes first) so drift in the machine (thermal, other load) hits both alike. The bare loop is what a user would write:
warm-up, synchronise, time N steps, synchronise. tbd's figure is the throughput that
`tbd.profile_step` reports (timing window only). Goal: ratio >= 0.98.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import tbd
from tbd.cli.registry import load_builder
from tbd.profilers.pytorch.hook import resolve_device


def bare_throughput(workload, sync, warmup: int, iterations: int) -> float:
    for _ in range(warmup):
        workload.step()
    sync()
    t0 = time.perf_counter_ns()
    for _ in range(iterations):
        workload.step()
    sync()
    return workload.samples_per_step * iterations / ((time.perf_counter_ns() - t0) / 1e9)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--size", default="full", choices=("full", "test"))
    ap.add_argument("--device", default="auto")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    device = resolve_device(torch, args.device)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    workload = load_builder(args.model, "pytorch")(batch=args.batch, device=device, size=args.size, seed=0)
    def with_tbd() -> float:
        profile = tbd.profile_step(workload.step, samples_per_step=workload.samples_per_step, model=workload.model,
                                   optimizer=workload.optimizer, device=str(device), warmup=args.warmup,
                                   iterations=args.iterations, trace_iterations=0)
        return profile.metrics.throughput.value

    bare, hooked = [], []
    for r in range(args.rounds):
        # Alternate which loop goes first, so a drift within a round does not favour one side.
        if r % 2 == 0:
            bare.append(bare_throughput(workload, sync, args.warmup, args.iterations))
            hooked.append(with_tbd())
        else:
            hooked.append(with_tbd())
            bare.append(bare_throughput(workload, sync, args.warmup, args.iterations))
        print(f"round {r + 1}: bare {bare[-1]:.2f} {workload.throughput_unit}, "
              f"tbd {hooked[-1]:.2f} {workload.throughput_unit}, ratio {hooked[-1] / bare[-1]:.4f}", flush=True)
    ratio = statistics.median(hooked) / statistics.median(bare)
    print(f"{args.model} ({args.size}) batch {args.batch} on {device}: median bare {statistics.median(bare):.2f}, "
          f"median tbd {statistics.median(hooked):.2f} {workload.throughput_unit}; "
          f"ratio tbd/bare = {ratio:.4f} (goal >= 0.98)")


if __name__ == "__main__":
    main()
