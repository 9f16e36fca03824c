"""`tbd tta PATH...`: time to accuracy from MLPerf Training submissions and DAWNBench entries, side by side.

MLPerf scores are mlperf-logging's result_summarizer's, computed on a temporary copy of each
benchmark folder (the summarizer writes into the folder it scores); DAWNBench entries are scored by
the rules of its README. docs/tta.md says what each figure is; docs/tta-json.md the JSON.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tbd.cli.commands import arguments as num
from tbd.cli.commands.output import (
    SavedJson,
    add_output_arguments,
    check_output_file,
    check_outputs,
    printed_format,
    stderr_console,
    write,
    write_output,
)
from tbd.cli.tta_analysis import analyse
from tbd.core.errors import UsageError
from tbd.reports.renderers import renderer_for

#: The page `--html` writes when it names no path: in the current folder, never over a file without --force.
HTML_NAME = "tta.html"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="MLPerf Training result logs (result_*.txt), benchmark, system or submission folders (a "
                        "training_results_vX.Y tree), DAWNBench entries (JSON or TSV), or any folder holding them "
                        "(walked recursively); the first system of each benchmark is the reference of its ratios")
    p.add_argument("--benchmark", metavar="NAME", default=None,
                   help="only this MLPerf benchmark (resnet, bert, llama2_70b_lora, ...) or DAWNBench task "
                        "(CIFAR10, ImageNet, SQuAD)")
    p.add_argument("--target", type=num.target, default=None, metavar="VALUE",
                   help="DAWNBench quality target in the TSV's own scale (default: 94 top-1 on CIFAR10, 93 top-5 on "
                        "ImageNet, F1 0.73 on SQuAD); MLPerf scores are always to their rules' target")
    p.add_argument("--ruleset", metavar="X.Y.Z", default=None,
                   help="MLPerf ruleset the logs follow (default: from a training_results_vX.Y folder in the path, "
                        "else the newest round that has the benchmark, said in the output)")
    add_output_arguments(
        p, json="print the result as JSON (schema tbd.tta/1, docs/tta-json.md)",
        csv="print one CSV row per system and one per run, numbers unformatted",
        html=f"write one self-contained HTML page to PATH (default {HTML_NAME} here)", html_name=HTML_NAME,
        save_json=SavedJson("--out", "FILE", "also save the result as JSON (for `tbd report FILE`)",
                            example="tta.json"),
        figures="also write the figures as SVG and PNG into DIR",
        force="let --out or --html replace a file already there")


def run(args: argparse.Namespace) -> int:
    check_outputs(args)
    fmt = printed_format(args)
    html_path = None
    if fmt == "html":
        html_path = Path(args.html) if args.html else check_output_file("--html", HTML_NAME, force=args.force,
                                                                       example=HTML_NAME)
    console = stderr_console()
    with Progress(TextColumn("scoring MLPerf benchmark folders"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True,
                  disable=not console.is_terminal) as bar:
        task = bar.add_task("", total=None)

        def advance(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, description=what[:40])

        result = analyse(args.paths, benchmark=args.benchmark, target=args.target, ruleset=args.ruleset,
                         progress=advance)
    if not result.tables:
        first = result.problems[0] if result.problems else None
        raise UsageError("nothing to score" + (f": {first.path}: {first.reason}" if first else ""),
                         hint="give MLPerf Training result logs or submission folders, or DAWNBench entries")
    rendered = renderer_for(result)
    if args.out is not None:
        write_output(rendered, "json", args.out)
    if html_path is not None:
        for path in write_output(rendered, "html", html_path):
            write(f"HTML report: {path}")
    else:
        write_output(rendered, fmt)
    if fmt != "text":  # the text lists them; JSON and CSV readers still see them on stderr
        for problem in result.problems:
            sys.stderr.write(f"tbd: could not read {problem.path}: {problem.reason}\n")
    if args.figures is not None:
        for path in write_output(rendered, "figures", args.figures):
            write(f"figure: {path}")
    return 0
