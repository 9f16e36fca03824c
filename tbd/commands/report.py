"""`tbd report RUN_DIR`: render a saved profile again, without running anything."""

from __future__ import annotations

import argparse

from tbd.collect import load_profile
from tbd.commands.common import terminal_width, write
from tbd.reports.terminal import render_profile


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run directory or profile.json")
    p.add_argument("--top", type=int, default=10, help="kernels shown (default 10)")


def run(args: argparse.Namespace) -> int:
    write(render_profile(load_profile(args.run), width=terminal_width(), color=None, top=args.top))
    return 0
