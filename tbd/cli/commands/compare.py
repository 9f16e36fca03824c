"""`tbd compare RUN_OR_TRACE...`: runs or traces side by side, ratios to the first."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tbd.analysis.compare_runs import Side, compare_profiles
from tbd.cli.commands.arguments import positive_float, positive_int
from tbd.cli.commands.output import terminal_width, write
from tbd.cli.run_analysis import profile_of_target
from tbd.core import rundir
from tbd.core.errors import UsageError
from tbd.reports.comparison_text import comparison_csv, render_comparison


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("targets", nargs="+", metavar="RUN_OR_TRACE",
                   help="two or more tbd run directories, profile.json files or Kineto traces; the first is the "
                        "reference every ratio is to. Different models, batches or frameworks are allowed and shown")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the comparison as JSON (schema tbd.compare/1)")
    out.add_argument("--csv", action="store_true", help="print one CSV row per metric or op and run")
    p.add_argument("--out", type=Path, default=None, metavar="FILE",
                   help="also save the comparison as JSON (for `tbd report FILE --html`)")
    p.add_argument("--force", action="store_true", help="let --out replace a file already there")
    p.add_argument("--top", type=positive_int, default=10, help="ops shown (default 10)")
    p.add_argument("--peak-flops", type=positive_float, default=None,
                   help="FP32 peak FLOP/s for traces that tbd did not record (as `tbd analyze --peak-flops`)")


def run(args: argparse.Namespace) -> int:
    if len(args.targets) < 2:
        raise UsageError("tbd compare needs at least two runs or traces", hint="e.g. `tbd compare runs/a runs/b`")
    if args.out is not None and args.out.exists() and not args.force:
        raise UsageError(f"--out {args.out} exists", hint="choose another path, or --force to replace it")
    if args.out is not None and args.out.is_dir():
        raise UsageError(f"--out {args.out} is a folder", hint="give a file path, e.g. compare.json")
    sides = [Side(t, profile_of_target(t, peak_flops=args.peak_flops)) for t in args.targets]
    comparison = compare_profiles(sides)
    if args.out is not None:
        rundir.atomic_write_json(args.out, comparison.to_dict())
    if args.json:
        write(json.dumps(comparison.to_dict(), indent=1))
    elif args.csv:
        write(comparison_csv(comparison))
    else:
        write(render_comparison(comparison, width=terminal_width(), color=None, top=args.top))
    return 0
