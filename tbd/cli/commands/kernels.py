"""`tbd kernels TARGET`: the kernel drill-down of a run or a trace, its ranking (by the time that could be won
back; `--ranking table-v`: the paper's Table V), ncu commands,
measured counters merged in (`--ncu REPORT.csv`, or the CUPTI range counters a trace holds)."""

from __future__ import annotations

import argparse
import re
from dataclasses import fields, replace
from pathlib import Path

from tbd.analysis.counters import merged_profile
from tbd.cli.commands import arguments as num
from tbd.cli.commands.output import add_output_arguments, printed_format, write_output
from tbd.cli.results import KERNELS, load_target
from tbd.core.errors import UsageError
from tbd.core.targets import open_target
from tbd.profilers import cupti_counters, ncu_csv
from tbd.reports.kernels.tables import RANKINGS, RECOVERABLE
from tbd.reports.renderers import KernelDrilldown, Renderer, renderer_for


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", metavar="RUN_DIR|TRACE",
                   help="a tbd run directory (or its trace file) or a profile.json, or a Kineto trace (.json, "
                        ".json.gz)")
    p.add_argument("--top", type=num.top, default=10,
                   help="rows shown per table in the text (default 10); --json and --csv always hold every group")
    p.add_argument("--kernel", metavar="REGEX", default=None,
                   help="show the kernel groups whose name matches REGEX (Python re.search) in full")
    add_output_arguments(p, json="print the rows and rankings as JSON", csv="print one CSV row per kernel group")
    p.add_argument("--ncu", type=Path, metavar="REPORT", default=None,
                   help="merge measured counters from an Nsight Compute CSV (ncu --csv --page raw)")
    add_ranking_argument(p)


def add_ranking_argument(p: argparse.ArgumentParser) -> None:
    """`--ranking`: which kernel ranking the text shows (`tbd kernels`, `tbd analyze`)."""
    p.add_argument("--ranking", choices=RANKINGS, default=RECOVERABLE,
                   help="the kernel ranking the text shows: recoverable (default), every group whose bound is known "
                        "by the time that could be won back, time x (1 - achieved/attainable on the roofline), most "
                        "first; table-v, the paper's Table V (compute-bound groups below the average FLOP "
                        "utilization, longest first) and the memory-bound ones below the average bandwidth share. "
                        "--json and --csv hold both, and the groups whose bound is unknown stay apart in either")


def with_ranking(renderer: Renderer, ranking: str) -> Renderer:
    """`renderer` showing the kernel ranking `ranking`, where it shows one (a run, the kernel report)."""
    return replace(renderer, ranking=ranking) if any(f.name == "ranking" for f in fields(renderer)) else renderer


def run(args: argparse.Namespace) -> int:
    try:
        pattern = re.compile(args.kernel) if args.kernel is not None else None
    except re.error as exc:
        raise UsageError(f"--kernel {args.kernel!r} is not a regular expression ({exc})") from None
    target = open_target(args.target)
    profile = load_target(target, KERNELS)
    notes = []
    if target.kineto_trace is not None:  # a trace may hold CUPTI range counters; a profile.json never does
        ranges = cupti_counters.measured_launches(target.kineto_trace)
        if ranges:
            profile, unmatched = merged_profile(profile, ranges, "cupti_range")
            if unmatched < len(ranges):
                notes.append(f"{len(ranges)} CUPTI counter ranges read: {len(ranges) - unmatched} merged into kernel "
                             f"groups, {unmatched} matched no kernel group")
            else:  # Kineto's range profiler refuses to run beside kernel tracing (profilers.cupti_counters)
                notes.append(f"{len(ranges)} CUPTI counter ranges: a range-profiler trace records no kernels of "
                             "its own, so no kernel group holds them; `tbd analyze` shows them per range, kernel "
                             "and launching op (\"Measured counters\")")
    if args.ncu is not None:
        launches = ncu_csv.measured_launches(args.ncu)
        profile, unmatched = merged_profile(profile, launches, "ncu")
        notes.append(f"{len(launches)} ncu launches read from {args.ncu}: {len(launches) - unmatched} merged into "
                     f"kernel groups, {unmatched} matched no kernel group")
    rows = profile.kernels
    if pattern is not None:
        rows = [r for r in rows if pattern.search(r.name)]
        if not rows:
            raise UsageError(f"no kernel group matches --kernel {args.kernel!r}",
                             hint=f"`tbd kernels {args.target}` lists them")
    drilldown = KernelDrilldown(profile, rows, notes, detail=pattern is not None)
    write_output(with_ranking(renderer_for(drilldown, top=args.top), args.ranking), printed_format(args))
    return 0
