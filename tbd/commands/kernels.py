"""`tbd kernels RUN_DIR`: the paper's Table V, long kernels with below-average utilization."""

from __future__ import annotations

import argparse

from tbd.collect import load_profile
from tbd.commands.arguments import positive_int
from tbd.commands.common import terminal_width, write
from tbd.reports.terminal import render_kernels


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run directory or profile.json")
    p.add_argument("--top", type=positive_int, default=5, help="rows to show (default 5)")


def run(args: argparse.Namespace) -> int:
    write(render_kernels(load_profile(args.run), top=args.top, width=terminal_width(), color=None))
    return 0
