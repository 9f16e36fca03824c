"""`tbd report RUN|SWEEP|COMPARE|TTA`: render a saved result again, without running anything.

The target is a run directory or profile.json, a sweep directory or sweep.json, or a comparison
saved by `tbd compare --out`. A run directory whose parent process died before writing
profile.json (SIGKILL, a power cut) still holds its raw records: they are analysed on the spot,
the profile marked partial and the reason said.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tbd.cli.commands import arguments as num
from tbd.cli.commands.output import (
    add_output_arguments,
    check_output_file,
    check_outputs,
    printed_format,
    write,
    write_output,
)
from tbd.cli.results import load_result
from tbd.cli.sweep_run import SWEEP_JSON
from tbd.core import rundir
from tbd.core.run_ownership import record_written
from tbd.reports.renderers import renderer_for

#: The HTML file written beside a run's or a sweep's own files when --html names no path.
HTML_NAME = "report.html"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", metavar="RUN|SWEEP|COMPARE|TTA",
                   help="run directory (or its trace file) or profile.json; sweep directory or sweep.json; or a "
                        "comparison saved by `tbd compare --out`, or a `tbd tta --out` result (a run directory without profile.json is analysed "
                        "from its raw records, marked partial)")
    p.add_argument("--top", type=num.top, default=10,
                   help="rows shown per kernel table in the text (default 10); --json and --csv always hold every row")
    add_output_arguments(
        p, json="print the result as JSON (its own schema)",
        csv="print it as CSV: a profile's figures (key, value, unit, reason), a sweep's points, a comparison's "
            "metrics and ops",
        html="write one self-contained HTML file (figures inline, no network needed): PATH, or "
             f"{HTML_NAME} in the run or sweep directory (beside a comparison's JSON: NAME.html)", html_name=HTML_NAME,
        figures="also write the figures as SVG and PNG into DIR",
        force="let --html replace a file already there (its PATH, or the default page)")


def run(args: argparse.Namespace) -> int:
    check_outputs(args)  # --html PATH: not a folder, not a file already there without --force
    fmt = printed_format(args)
    page = _html_path(Path(args.target), args.html) if fmt == "html" else None
    if page is not None and not args.html:  # the default page, checked as a given PATH is, before any work
        check_output_file("--html", page, force=args.force, example=HTML_NAME)
    result = load_result(args.target)
    rendered = renderer_for(result, top=args.top)
    if page is not None:
        for path in write_output(rendered, "html", page):
            write(f"HTML report: {path}")
        if not args.html:  # tbd's own page in a run or sweep folder: a later --force there may replace it
            record_written(page.parent, [page])
    else:
        write_output(rendered, fmt)
    if args.figures is not None:
        for path in write_output(rendered, "figures", args.figures):
            write(f"figure: {path}")
    return 0


def _html_path(target: Path, given: str) -> Path:
    """--html's PATH (checked by check_outputs), or the page's place beside the result."""
    if given:
        return Path(given)
    # Beside the result: report.html in a run or sweep directory, NAME.html beside a comparison's JSON.
    if target.is_dir():
        return target / HTML_NAME
    if target.name in (rundir.PROFILE, SWEEP_JSON):
        return target.parent / HTML_NAME
    return target.with_suffix(".html")

