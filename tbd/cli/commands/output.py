"""Shared pieces of the subcommands: output console and the profile summary."""

from __future__ import annotations

import shutil
import sys

from rich.console import Console


def terminal_width() -> int:
    return max(80, min(shutil.get_terminal_size((120, 40)).columns, 160))


def write(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def stderr_console() -> Console:
    return Console(stderr=True)
