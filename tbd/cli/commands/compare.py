"""`tbd compare RUN_OR_TRACE...`: runs or traces side by side, ratios to the first."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from tbd.analysis.compare_runs import Side, compare_profiles, run_label
from tbd.cli.commands import arguments as num
from tbd.cli.commands.arguments import positive_float
from tbd.cli.commands.output import SavedJson, add_output_arguments, check_outputs, printed_format, write_output
from tbd.cli.results import COMPARE, load_target
from tbd.core.errors import UsageError
from tbd.core.profile_result import Profile
from tbd.core.targets import Kind, Target, open_target
from tbd.reports.numbers import fmt_bandwidth, fmt_rate
from tbd.reports.renderers import renderer_for


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("targets", nargs="+", metavar="RUN_OR_TRACE",
                   help="two or more tbd run directories (or their trace files), profile.json files or Kineto traces; "
                        "the first is the reference every ratio is to. Different models, batches or frameworks are "
                        "shown side by side, without a speed ratio")
    add_output_arguments(p, json="print the comparison as JSON (schema tbd.compare/1)",
                         csv="print one CSV row per metric or op and run",
                         save_json=SavedJson("--out", "FILE", "also save the comparison as JSON (for `tbd report FILE "
                                                              "--html`)", example="compare.json"),
                         force="let --out replace a file already there")
    p.add_argument("--top", type=num.top, default=10,
                   help="ops shown in the text (default 10); --json and --csv always hold every op")
    p.add_argument("--label", nargs="+", action="extend", default=[], metavar="RUN=NAME",
                   help="name runs in every table and figure, e.g. --label A=v100 B=a100 (default: model, device "
                        "and batch)")
    p.add_argument("--peak-flops", type=num.per_run(num.peak_flops), nargs="+", action="extend", default=[], metavar="[RUN=]FLOPS",
                   help="FP32 peak FLOP/s for traces: FLOPS alone applies to traces without a known peak, "
                        "B=FLOPS to trace B even where its GPU is known")
    p.add_argument("--memory-bandwidth", type=num.per_run(num.bandwidth), nargs="+", action="extend",
                   default=[], metavar="[RUN=]BYTES_PER_S",
                   help="memory bandwidth in bytes/s for traces, as --peak-flops: alone for traces without a known "
                        "one, B=BYTES_PER_S for trace B")


@dataclass(frozen=True)
class Override:
    """A --peak-flops or --memory-bandwidth: the value for runs without their own, and per-run values."""

    flag: str
    default: float | None
    per_run: dict[str, float]


def parse_override(flag: str, given: list[str], labels: list[str]) -> Override:
    """`--peak-flops 1e13 B=2e13` as Override("--peak-flops", 1e13, {"B": 2e13}); UsageError on a bad item."""
    default, per_run = None, {}
    for item in given:
        run, _, text = item.rpartition("=")
        try:
            value = positive_float(text)
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"{flag} {item}: {exc}", hint=f"e.g. {flag} 1.5e13 or {flag} B=1.5e13") from None
        if not run:
            if default is not None:
                raise UsageError(f"{flag} is given twice without a run", hint=f"name the run: {flag} B=1.5e13")
            default = value
        elif run not in labels:
            raise UsageError(f"{flag} {item}: there is no run {run}", hint=f"the runs are {', '.join(labels)}")
        else:
            per_run[run] = value
    return Override(flag, default, per_run)


def parse_labels(given: list[str], labels: list[str]) -> dict[str, str]:
    """`--label A=v100 B=a100` as {"A": "v100", "B": "a100"}; UsageError on a bad or repeated item."""
    names: dict[str, str] = {}
    for item in given:
        run, sep, name = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--label {item}: expected RUN=NAME", hint="e.g. --label A=v100 B=a100")
        if run not in labels:
            raise UsageError(f"--label {item}: there is no run {run}", hint=f"the runs are {', '.join(labels)}")
        if run in names:
            raise UsageError(f"--label names run {run} twice")
        names[run] = name.strip()
    if len(set(names.values())) < len(names):
        raise UsageError("--label gives two runs the same name", hint="give each run its own name")
    return names


def run(args: argparse.Namespace) -> int:
    if len(args.targets) < 2:
        raise UsageError("tbd compare needs at least two runs or traces", hint="e.g. `tbd compare runs/a runs/b`")
    labels = [run_label(i) for i in range(len(args.targets))]
    names = parse_labels(args.label, labels)
    peak = parse_override("--peak-flops", args.peak_flops, labels)
    bandwidth = parse_override("--memory-bandwidth", args.memory_bandwidth, labels)
    check_outputs(args)  # --out FILE: not a folder, not a file already there without --force
    targets = [open_target(t) for t in args.targets]  # every path told first: a wrong one fails before any analysis
    notes: list[str] = []
    sides = []
    for label, path, target in zip(labels, args.targets, targets):
        profile = _load(label, target, peak, bandwidth, notes)
        sides.append(Side(path, profile, names.get(label)))
    comparison = compare_profiles(sides, notes=notes)
    rendered = renderer_for(comparison, top=args.top)
    fmt = printed_format(args)
    saved = write_output(rendered, "json", args.out) if args.out is not None else []
    write_output(rendered, fmt)
    for path in saved:  # on stderr: stdout stays the comparison alone (text, JSON or CSV)
        sys.stderr.write(f"comparison saved: {path} (`tbd report {path} --html` makes its page)\n")
    return 0


def _load(label: str, target: Target, peak: Override, bandwidth: Override, notes: list[str]) -> Profile:
    """Run `label`'s profile, with the peak and bandwidth the options give it, and a note saying which applied."""
    if target.kind is not Kind.KINETO_TRACE:
        for o in (peak, bandwidth):
            if label in o.per_run:
                raise UsageError(f"{o.flag} {label}=...: {target.path} is {target.description}, read as analysed",
                                 hint=f"`tbd analyze {target.path} {o.flag} VALUE` analyses a run again with it")
        return load_target(target, COMPARE)
    forced = {"peak_flops": peak.per_run.get(label), "memory_bandwidth": bandwidth.per_run.get(label)}
    profile = load_target(target, COMPARE, **forced)
    missing = {"peak_flops": peak.default if forced["peak_flops"] is None and
               profile.metrics.flop_util_pct.peak_flops is None else None,
               "memory_bandwidth": bandwidth.default if forced["memory_bandwidth"] is None and
               (profile.metrics.memory_bandwidth is None or profile.metrics.memory_bandwidth.value is None) else None}
    if any(v is not None for v in missing.values()):
        profile = load_target(target, COMPARE, **{k: v if v is not None else missing[k] for k, v in forced.items()})
    for o, key, fmt, own in ((peak, "peak_flops", fmt_rate, profile.metrics.flop_util_pct.peak_flops),
                             (bandwidth, "memory_bandwidth", fmt_bandwidth,
                              profile.metrics.memory_bandwidth.value if profile.metrics.memory_bandwidth else None)):
        if forced[key] is not None:
            notes.append(f"{label}'s {_WHAT[key]} is {fmt(forced[key])}, given with {o.flag} {label}=...")
        elif missing[key] is not None:
            notes.append(f"{o.flag} {fmt(o.default)} applied to {label}: its trace names no known {_WHAT[key]}")
        elif o.default is not None:
            notes.append(f"{label} keeps its own {_WHAT[key]} ({fmt(own)}): {o.flag} alone applies only to traces "
                         f"without one; {o.flag} {label}=VALUE replaces it")
    return profile


_WHAT = {"peak_flops": "FP32 peak", "memory_bandwidth": "memory bandwidth"}
