"""`tbd report RUN|SWEEP|COMPARE`: render a saved result again, without running anything.

The target is a run directory or profile.json, a sweep directory or sweep.json, or a comparison
saved by `tbd compare --out`. A run directory whose parent process died before writing
profile.json (SIGKILL, a power cut) still holds its raw records: they are analysed on the spot,
the profile marked partial and the reason said.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tbd.cli.commands.arguments import positive_int
from tbd.cli.commands.output import terminal_width, write
from tbd.cli.results import Result, load_result
from tbd.cli.sweep_run import SWEEP_JSON
from tbd.core import rundir
from tbd.core.comparison import Comparison
from tbd.core.errors import UsageError
from tbd.core.profile import Profile
from tbd.core.sweep_result import Sweep
from tbd.reports.comparison_text import comparison_csv, render_comparison
from tbd.reports.figures import saving as figures
from tbd.reports.html import run_page as html
from tbd.reports.profile_export import profile_csv
from tbd.reports.sweep_table import render_csv, render_sweep
from tbd.reports.terminal import render_profile

#: The HTML file written beside a run's or a sweep's own files when --html names no path.
HTML_NAME = "report.html"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", metavar="RUN|SWEEP|COMPARE",
                   help="run directory or profile.json; sweep directory or sweep.json; or a comparison saved by "
                        "`tbd compare --out`")
    p.add_argument("--top", type=positive_int, default=10, help="kernels shown (default 10)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the result as JSON (its own schema)")
    out.add_argument("--csv", action="store_true",
                     help="print it as CSV: a profile's figures (key, value, unit, reason), a sweep's points, a "
                          "comparison's metrics and ops")
    out.add_argument("--html", nargs="?", const="", default=None, metavar="PATH",
                     help="write one self-contained HTML file (figures inline, no network needed): PATH, or "
                          f"{HTML_NAME} in the run or sweep directory (beside a comparison's JSON: NAME.html)")
    p.add_argument("--figures", type=Path, default=None, metavar="DIR",
                   help="also write the figures as SVG and PNG into DIR")
    p.add_argument("--force", action="store_true", help="let --html PATH replace a file already there")


def run(args: argparse.Namespace) -> int:
    result = load_result(args.target)
    if args.html is not None:
        path = _html_path(Path(args.target), args.html, args.force)
        rundir.atomic_write_bytes(path, _html(result).encode("utf-8"))
        write(f"HTML report: {path}")
    elif args.json:
        write(json.dumps(result.to_dict(), indent=1))
    elif args.csv:
        write(_csv(result))
    else:
        write(_text(result, args.top))
    if args.figures is not None:
        for path in _save_figures(result, args.figures):
            write(f"figure: {path}")
    return 0


def _html_path(target: Path, given: str, force: bool) -> Path:
    if given:
        path = Path(given)
        if path.is_dir():
            raise UsageError(f"--html {given} is a folder", hint=f"give a file path, e.g. {path / HTML_NAME}")
        if path.exists() and not force:
            raise UsageError(f"--html {given} exists", hint="choose another path, or --force to replace it")
        return path
    # Beside the result: report.html is tbd's own file in a run or sweep directory, rewritten freely.
    if target.is_dir():
        return target / HTML_NAME
    if target.name in (rundir.PROFILE, SWEEP_JSON):
        return target.parent / HTML_NAME
    return target.with_suffix(".html")


def _text(result: Result, top: int) -> str:
    width = terminal_width()
    if isinstance(result, Profile):
        return render_profile(result, width=width, color=None, top=top)
    if isinstance(result, Comparison):
        return render_comparison(result, width=width, color=None, top=top)
    return render_sweep(result, width=width, color=None)


def _csv(result: Result) -> str:
    if isinstance(result, Profile):
        return profile_csv(result)
    if isinstance(result, Comparison):
        return comparison_csv(result)
    return render_csv(result)


def _html(result: Result) -> str:
    if isinstance(result, Profile):
        return html.profile_html(result)
    if isinstance(result, Sweep):
        return html.sweep_html(result)
    return html.comparison_html(result)


def _save_figures(result: Result, out_dir: Path) -> list[Path]:
    if isinstance(result, Profile):
        made = figures.run_figures(result)
    elif isinstance(result, Sweep):
        made = figures.sweep_figures(result)
    else:
        made = figures.comparison_figures(result)
    return figures.save_figures(made, out_dir)
