"""Renders the suite table of `tbd suite`."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text


def render_suite(rows: list[dict], *, width: int = 120) -> str:
    """The models x frameworks table as plain text at `width` columns."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("Model", "Framework", "Application", "Dominant layer", "Data set imitated", "Throughput",
                 "Batch", "Here"):
        table.add_column(name, overflow="fold")
    for r in rows:
        here = Text("yes") if r["available"] else Text(f"no: {r['why']}")
        table.add_row(r["model"], r["framework"], r["application"], r["dominant_layer"], r["dataset"],
                      r["unit"], str(r["default_batch"]), here)
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, force_terminal=False).print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"
