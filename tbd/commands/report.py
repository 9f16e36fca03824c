"""`tbd report RUN_DIR`: render a saved profile again, without running anything.

A run directory whose parent process died before writing profile.json (SIGKILL, a power cut)
still holds its raw records: they are analysed on the spot, the profile marked partial and the
reason said, and nothing is written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tbd import rundir
from tbd.collect import load_profile, profile_from_run_dir
from tbd.commands.arguments import positive_int
from tbd.commands.common import terminal_width, write
from tbd.profile import PARTIAL
from tbd.reports.terminal import render_profile


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run directory or profile.json")
    p.add_argument("--top", type=positive_int, default=10, help="kernels shown (default 10)")


def run(args: argparse.Namespace) -> int:
    path = Path(args.run)
    if path.is_dir() and not (path / rundir.PROFILE).exists() and (path / rundir.SPEC).is_file():
        profile = profile_from_run_dir(path, status=PARTIAL, extra_notes=[
            "profile.json was never written (the tbd process stopped first): analysed from the raw records"])
    else:
        profile = load_profile(path)
    write(render_profile(profile, width=terminal_width(), color=None, top=args.top))
    return 0
