"""`tbd analyze TARGET`: the trace analysis on traces that tbd did not record, or on a tbd run.

TARGET is a PyTorch profiler (Kineto) trace; a folder of them (one per rank, analysed side by
side, then the cluster summary: communication, overlap, straggler); or a tbd run directory, or its
trace file, of any framework (analysed again from its raw records, --peak-flops, --sm-clock-mhz and
--memory-bandwidth applied; --samples-per-step refused, the run knowing its batch).
tbd.core.targets.open_target tells which; any other input gets one line naming the command that
reads it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tbd.cli.commands import arguments as num
from tbd.cli.commands.kernels import add_ranking_argument, with_ranking
from tbd.cli.commands.output import SavedJson, add_output_arguments, check_outputs, write_output
from tbd.cli.results import ANALYZE, load_target
from tbd.cli.run_analysis import cluster_of_ranks
from tbd.core.profile_result import Profile
from tbd.core.targets import open_target
from tbd.reports.renderers import RankFolder, renderer_for


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, metavar="TARGET",
                   help="Kineto trace (.json or .json.gz) from torch.profiler or its TensorBoard handler; a folder of "
                        "per-rank traces; or a tbd run directory (or its trace file) of any framework, analysed "
                        "again from its raw records")
    p.add_argument("--peak-flops", type=num.peak_flops, default=None,
                   help="FP32 peak FLOP/s of the device that ran the trace or run, instead of the GPU table's "
                        "(`tbd gpus`) or the run's; applies to a trace, a folder of traces and a run directory alike; "
                        "labelled as yours")
    p.add_argument("--memory-bandwidth", type=num.bandwidth, default=None, metavar="BYTES_PER_S",
                   help="memory bandwidth of that device in bytes/s (e.g. 9e11 for 900 GB/s), the roofline's slope, "
                        "instead of the GPU table's or the run's measured one; needed for the bound and the memory "
                        "ranking of a GPU the table lacks; labelled as yours")
    p.add_argument("--sm-clock-mhz", type=num.clock_mhz, default=None,
                   help="max SM clock of the NVIDIA GPU in the trace or GPU run: peaks from compute capability x SMs x "
                        "this clock instead of the GPU table")
    p.add_argument("--samples-per-step", type=num.samples_per_step, default=None,
                   help="samples per ProfilerStep, for a throughput over the traced steps; traces only: refused for a "
                        "tbd run directory, which recorded its own batch")
    add_output_arguments(p, save_json=SavedJson("--json", "PATH", "also write a profile.json here (always every "
                                                                  "kernel group: --top limits the text only)",
                                                example="profile.json"),
                         force="let --json replace a file already there")
    p.add_argument("--top", type=num.top, default=10,
                   help="rows shown per kernel table in the text (default 10); --json always holds every group")
    add_ranking_argument(p)


def run(args: argparse.Namespace) -> int:
    target = open_target(args.trace)
    check_outputs(args)  # --json PATH: not a folder, not a file already there without --force
    options = dict(peak_flops=args.peak_flops, sm_clock_mhz=args.sm_clock_mhz, samples_per_step=args.samples_per_step,
                   memory_bandwidth=args.memory_bandwidth)
    loaded = load_target(target, ANALYZE, **options)
    if isinstance(loaded, list):  # a folder of per-rank traces
        if len(loaded) > 1:
            return _out(args, RankFolder(loaded, cluster_of_ranks(loaded)))
        loaded = loaded[0].profile
    return _out(args, loaded)


def _out(args: argparse.Namespace, result: Profile | RankFolder) -> int:
    """--json PATH's file (the profile, or the ranks and their cluster: schema tbd.ranks/1), then the text."""
    rendered = with_ranking(renderer_for(result, top=args.top), args.ranking)
    if args.json:
        write_output(rendered, "json", args.json)
    write_output(rendered, "text")
    return 0
