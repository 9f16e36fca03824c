"""`tbd compare RUN_OR_TRACE...`: runs or traces side by side, ratios to the first."""

from __future__ import annotations

import argparse

from tbd.analysis.compare_runs import Side, compare_profiles
from tbd.cli.commands.arguments import positive_float, positive_int
from tbd.cli.commands.output import SavedJson, add_output_arguments, check_outputs, printed_format, write_output
from tbd.cli.results import COMPARE, load_target
from tbd.core.errors import UsageError
from tbd.core.targets import open_target
from tbd.reports.renderers import renderer_for


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("targets", nargs="+", metavar="RUN_OR_TRACE",
                   help="two or more tbd run directories (or their trace files), profile.json files or Kineto traces; "
                        "the first is the reference every ratio is to. Different models, batches or frameworks are "
                        "allowed and shown")
    add_output_arguments(p, json="print the comparison as JSON (schema tbd.compare/1)",
                         csv="print one CSV row per metric or op and run",
                         save_json=SavedJson("--out", "FILE", "also save the comparison as JSON (for `tbd report FILE "
                                                              "--html`)", example="compare.json"),
                         force="let --out replace a file already there")
    p.add_argument("--top", type=positive_int, default=10,
                   help="ops shown in the text (default 10); --json and --csv always hold every op")
    p.add_argument("--peak-flops", type=positive_float, default=None,
                   help="FP32 peak FLOP/s for traces that tbd did not record (as `tbd analyze --peak-flops`)")
    p.add_argument("--memory-bandwidth", type=positive_float, default=None, metavar="BYTES_PER_S",
                   help="memory bandwidth in bytes/s for traces that tbd did not record (as `tbd analyze "
                        "--memory-bandwidth`)")


def run(args: argparse.Namespace) -> int:
    if len(args.targets) < 2:
        raise UsageError("tbd compare needs at least two runs or traces", hint="e.g. `tbd compare runs/a runs/b`")
    check_outputs(args)  # --out FILE: not a folder, not a file already there without --force
    targets = [open_target(t) for t in args.targets]  # every path told first: a wrong one fails before any analysis
    sides = [Side(t, load_target(target, COMPARE, peak_flops=args.peak_flops, memory_bandwidth=args.memory_bandwidth))
             for t, target in zip(args.targets, targets)]
    comparison = compare_profiles(sides)
    rendered = renderer_for(comparison, top=args.top)
    if args.out is not None:
        write_output(rendered, "json", args.out)
    write_output(rendered, printed_format(args))
    return 0
