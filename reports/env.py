"""Renders `tbd env`'s table."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table


def render_env(rows: list[dict], *, width: int = 120) -> str:
    """Frameworks x (usable, version, interpreter, GPU) as plain text."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("Framework", "Usable", "Version", "Interpreter", "GPU it would use"):
        table.add_column(name, overflow="fold")
    for r in rows:
        usable = "yes" if r["usable"] else f"no: {r['reason']}"
        table.add_row(r["framework"], usable, r["version"] or "-", r["python"] or "-",
                      r["gpu"] or ("none (CPU)" if r["usable"] else "-"))
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, force_terminal=False).print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"
