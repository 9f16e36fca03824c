"""`tbd analyze TARGET`: the trace analysis on traces that tbd did not record, or on a tbd run.

TARGET is a PyTorch profiler (Kineto) trace; a folder of them (one per rank, analysed side by
side, then the cluster summary: communication, overlap, straggler); or a tbd run directory, or its trace file, of any framework (analysed as the run).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tbd.cli.commands.arguments import positive_float, positive_int
from tbd.cli.commands.output import terminal_width, write
from tbd.cli.run_analysis import profile_from_run_dir, profile_from_trace, run_dir_of_trace
from tbd.cli.trace_folder import cluster_of_ranks, profiles_from_trace_folder
from tbd.core import rundir
from tbd.core.errors import UsageError
from tbd.reports.cluster_text import render_cluster
from tbd.reports.ranks import ranks_json, render_ranks
from tbd.reports.terminal import render_profile


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, metavar="TARGET",
                   help="Kineto trace (.json or .json.gz) from torch.profiler or its TensorBoard handler; a folder of "
                        "per-rank traces; or a tbd run directory (or its trace file) of any framework")
    p.add_argument("--peak-flops", type=positive_float, default=None,
                   help="FP32 peak FLOP/s of the device that ran the trace, instead of the GPU table's (`tbd gpus`); "
                        "labelled as yours")
    p.add_argument("--sm-clock-mhz", type=positive_float, default=None,
                   help="max SM clock of the NVIDIA GPU in the trace: peaks from compute capability x SMs x this "
                        "clock instead of the GPU table")
    p.add_argument("--samples-per-step", type=positive_float, default=None,
                   help="samples per ProfilerStep, for a throughput over the traced steps")
    p.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write a profile.json here")
    p.add_argument("--force", action="store_true", help="let --json replace a file already there")
    p.add_argument("--top", type=positive_int, default=10, help="kernels shown (default 10)")


def run(args: argparse.Namespace) -> int:
    target: Path = args.trace
    if not target.exists():
        raise UsageError(f"{target}: no such file or folder", hint="give a .json or .json.gz trace, a folder of "
                                                                  "them, or a tbd run directory")
    if args.json is not None and args.json.is_dir():
        raise UsageError(f"--json {args.json} is a folder", hint="give a file path, e.g. profile.json")
    if args.json is not None and args.json.exists() and not args.force:
        raise UsageError(f"--json {args.json} exists", hint="choose another path, or --force to replace it")
    options = dict(peak_flops=args.peak_flops, sm_clock_mhz=args.sm_clock_mhz, samples_per_step=args.samples_per_step)
    run_dir = run_dir_of_trace(target)
    if run_dir is not None:
        profile = profile_from_run_dir(run_dir)
    elif target.is_dir():
        ranks = profiles_from_trace_folder(target, **options)
        if len(ranks) > 1:
            cluster = cluster_of_ranks(ranks)
            if args.json:
                rundir.atomic_write_json(args.json, ranks_json(ranks, cluster))
            width = terminal_width()
            write(render_ranks(ranks, width=width, color=None) + "\n" + render_cluster(cluster, width=width, color=None))
            return 0
        profile = ranks[0].profile
    else:
        profile = profile_from_trace(target, **options)
    if args.json:
        rundir.atomic_write_json(args.json, profile.to_dict())
    write(render_profile(profile, width=terminal_width(), color=None, top=args.top))
    return 0
