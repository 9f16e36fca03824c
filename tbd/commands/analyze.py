"""`tbd analyze TRACE`: the same trace analysis on a PyTorch/Kineto trace another tool recorded."""

from __future__ import annotations

import argparse
from pathlib import Path

from tbd import rundir
from tbd.collect import profile_from_trace
from tbd.commands.common import terminal_width, write
from tbd.errors import UsageError
from tbd.reports.terminal import render_profile


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, help="Kineto trace (.json or .json.gz) from torch.profiler or its "
                                            "TensorBoard handler")
    p.add_argument("--peak-flops", type=float, default=None,
                   help="FP32 peak FLOP/s of the device that ran the trace (else from the hardware model, "
                        "which for a GPU needs --sm-clock-mhz)")
    p.add_argument("--sm-clock-mhz", type=float, default=None,
                   help="max SM clock of the GPU in the trace (Kineto records the GPU but not its clock)")
    p.add_argument("--samples-per-step", type=float, default=None,
                   help="samples per ProfilerStep, for a throughput over the traced steps")
    p.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write a profile.json here")
    p.add_argument("--top", type=int, default=10, help="kernels shown (default 10)")


def run(args: argparse.Namespace) -> int:
    if not args.trace.exists():
        raise UsageError(f"{args.trace}: no such file", hint="give the path of a .json or .json.gz trace")
    profile = profile_from_trace(args.trace, peak_flops=args.peak_flops, sm_clock_mhz=args.sm_clock_mhz,
                                 samples_per_step=args.samples_per_step)
    if args.json:
        rundir.atomic_write_json(args.json, profile.to_dict())
    write(render_profile(profile, width=terminal_width(), color=None, top=args.top))
    return 0
