"""Kernel tables for the terminal: the paper's Table V and the top-kernels table.

Both take `KernelRow`s that analysis already grouped, ranked and measured; this module only
picks the first N, formats numbers and shortens names (STYLE.md, "Renderers format, never
compute"). Kernel names are data, never markup: a CUDA name such as
`void f<float>(T [with T = float])` must print as is, so every cell is a `rich.text.Text`.

Shared console helpers live here too so that `reports/terminal.py` and this module render
through the same deterministic console.
"""

from __future__ import annotations

import io
import math
import os
import sys
from collections.abc import Callable, Sequence

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from tbd.errors import UsageError
from tbd.profile import KernelRow, Profile
from tbd.reports.printable import printable

ELLIPSIS = "…"
NA = "n/a"
#: Names are never squeezed below this many characters, however narrow the console; rich then
#: crops the line instead, which still beats an unreadable three-letter stub.
MIN_NAME_CHARS = 16


def shorten_middle(name: str, max_chars: int) -> str:
    """Return `name` cut to at most `max_chars` characters by an ellipsis in the middle.

    Both ends are kept: the head names the kernel (`void cudnn::rnn::elemWiseRNNcell<...`), the
    tail holds the last arguments that tell variants apart. The head gets two thirds of the room,
    since in C++ names it carries the function's own name. Raises UsageError if max_chars < 1.
    """
    if max_chars < 1:
        raise UsageError(f"cannot shorten a name to {max_chars} characters")
    if len(name) <= max_chars:
        return name
    keep = max_chars - len(ELLIPSIS)
    tail = keep // 3
    head = keep - tail
    return name[:head] + ELLIPSIS + (name[-tail:] if tail else "")


def new_console(width: int, color: bool | None) -> Console:
    """A console that writes to memory, `width` cells wide.

    color: True for ANSI styles, False for plain text, None for "when stdout is a terminal and
    NO_COLOR is unset" (https://no-color.org). With colour off the environment is ignored
    (`_environ={}`), so NO_COLOR, TERM or COLUMNS on the machine running the tests cannot change
    a golden file.
    """
    if width < 20:
        raise UsageError(f"terminal width {width} is too narrow (at least 20 columns)")
    if color is None:
        color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    return Console(file=io.StringIO(), width=width, color_system="auto" if color else None,
                   force_terminal=color, highlight=False, markup=False, emoji=False,
                   soft_wrap=False, legacy_windows=False, _environ=None if color else {})


def console_text(console: Console, renderables: Sequence[RenderableType | None]) -> str:
    """Print `renderables` (None = blank line) on `console` and return what it wrote."""
    for item in renderables:
        console.print(item if item is not None else "")
    text = console.file.getvalue()  # type: ignore[attr-defined]
    if console.color_system is None:
        # Padding leaves trailing spaces on table lines; plain output (and goldens) drop them.
        text = "\n".join(line.rstrip() for line in text.split("\n"))
    return text


def fmt_pct(value: float | None) -> str:
    """A percentage as a bare number ("12.3"); tiny non-zero shares keep two significant digits, and
    a figure of 10,000 or more (only ever a flagged above-peak one) is written as "1.2e+05"."""
    if value is None or not math.isfinite(value):
        return NA
    if 0 < abs(value) < 0.1 or abs(value) >= 1e4:
        return f"{value:.2g}"
    return f"{value:.1f}"


def fmt_seconds(value: float | None) -> str:
    """A duration in seconds, in the unit that keeps it readable (µs, ms or s)."""
    if value is None or not math.isfinite(value):
        return NA
    if value < 1e-3:
        return f"{value * 1e6:.1f} µs"
    if value < 1:
        return f"{value * 1e3:.2f} ms"
    return f"{value:.3f} s"


ABOVE_PEAK_MARK = "⚠"


def fmt_util(row: KernelRow) -> str:
    """A group's Util % cell: the figure, flagged when it lies above its precision's peak."""
    text = fmt_pct(row.util_pct)
    if row.util_note and row.util_note.startswith("above peak"):
        return f"{text} {ABOVE_PEAK_MARK}"
    return text


def util_caption(rows: Sequence[KernelRow]) -> str:
    """The Util % legend: n/a, and the above-peak flag when a shown row carries it."""
    legend = "Util %: FLOPs / (peak FLOP/s of its precision x time); n/a: no FLOP formula, or no peak."
    if any(fmt_util(r).endswith(ABOVE_PEAK_MARK) for r in rows):
        legend += f"\n{ABOVE_PEAK_MARK}: above its precision's peak (precision or peak misdetected); not in the threshold."
    return legend


def fmt_window(window: list[int] | None) -> str:
    """An inclusive [first, last] iteration window as "first–last"."""
    if not window:
        return NA
    return f"{window[0]}–{window[-1]}"


def plain_table(**kwargs) -> Table:
    """The one table style of the terminal report: header rule, no frame (kwargs go to rich's Table)."""
    options = {"box": box.SIMPLE_HEAD, "show_edge": False, "pad_edge": False, **kwargs}
    return Table(**options)


def fit_names(console: Console, build: Callable[[list[str]], Table], names: list[str],
              shorten: Callable[[str, int], str] | None = None) -> Table:
    """Build a table whose last column holds `names`, each shortened to fit the console width.

    `build(names)` makes the table. It is first built with empty names to measure what every
    other column takes, so the budget follows the real column widths rather than a guess.
    `shorten(name, max_chars)`: how a name is cut (default `shorten_middle`).
    """
    shorten = shorten or shorten_middle
    probe = build(["" for _ in names])
    probe.columns[-1].header = ""  # else a header longer than the empty cells would count as "other"
    others = console.measure(probe).maximum
    budget = max(MIN_NAME_CHARS, console.width - others)
    return build([shorten(printable(n), budget) for n in names])


def kernel_noun(profile: Profile) -> str:
    """"ops" on a CPU run, "kernels" otherwise: the word the tables use for device work."""
    # DESIGN.md: on a machine without a GPU, ops play the role of kernels.
    return "ops" if str(profile.spec.get("device", "")).startswith("cpu") else "kernels"


def top_kernels_table(console: Console, profile: Profile, top: int) -> list[RenderableType]:
    """The longest `top` kernel groups: name, calls, time, time %, utilization %, precision."""
    noun = kernel_noun(profile)
    rows = profile.kernels[:top]
    title = Text(f"Top {noun} by time ({len(rows)} of {len(profile.kernels)})", style="bold")
    if not rows:
        return [title, Text(f"  none: the trace window recorded no {noun}")]

    def build(names: list[str]) -> Table:
        table = plain_table()
        for header in ("Calls", "Time", "Time %", "Util %"):
            table.add_column(header, justify="right")
        table.add_column("Precision")
        table.add_column("Name", no_wrap=True, overflow="ellipsis")
        for row, name in zip(rows, names):
            table.add_row(*(Text(cell) for cell in (
                str(row.calls), fmt_seconds(row.time_s), fmt_pct(row.time_share_pct), fmt_util(row),
                printable(row.precision), name)))
        return table

    caption = Text(f"Time %: share of the summed {noun[:-1]} time in the trace window.\n" + util_caption(rows),
                   style="dim")
    return [title, fit_names(console, build, [r.name for r in rows]), caption]


def low_util_table(console: Console, profile: Profile, top: int) -> list[RenderableType]:
    """The paper's Table V: duration %, utilization %, kernel name, and its caption."""
    noun = kernel_noun(profile)
    rows: list[KernelRow] = profile.low_util_kernels[:top]
    flop = profile.metrics.flop_util_pct
    title = Text(f"Low-utilization long {noun} (the paper's Table V): "
                 f"{len(rows)} of {len(profile.low_util_kernels)}", style="bold")
    if flop.kernel_average_pct is None:
        threshold = f"{NA} — {printable(flop.reason)}" if flop.reason else NA
    else:
        threshold = f"{fmt_pct(flop.kernel_average_pct)} % ({flop.source})"
    window = fmt_window(profile.iterations.trace_window) if profile.iterations else NA
    caption = Text(f"Threshold: the busy-time-weighted average utilization of {noun} with known FLOPs, {threshold}; longest first.\n"
                   f"Duration %: share of the summed {noun[:-1]} time in the trace window "
                   f"(iterations {window}).", style="dim")
    if not rows:
        return [title, Text(f"  none: no {noun[:-1]} group is below the threshold"), caption]

    def build(names: list[str]) -> Table:
        table = plain_table()
        table.add_column("Duration %", justify="right")
        table.add_column("Utilization %", justify="right")
        table.add_column(f"{noun[:-1].capitalize()} name", no_wrap=True, overflow="ellipsis")
        for row, name in zip(rows, names):
            table.add_row(Text(fmt_pct(row.time_share_pct)), Text(fmt_pct(row.util_pct)), Text(name))
        return table

    return [title, fit_names(console, build, [r.name for r in rows]), caption]


def render_kernels(profile: Profile, *, top: int = 5, width: int = 100, color: bool | None = False) -> str:
    """The paper's Table V for `profile`: its `top` low-utilization long kernels, as text.

    Args: top, rows shown (longest first, as analysis ranked them); width, in terminal cells;
    color, ANSI styling: True, False (deterministic plain text) or None (if stdout is a terminal).
    Returns the rendered text, ending in a newline.
    """
    if top < 1:
        raise UsageError(f"--top must be at least 1, got {top}")
    console = new_console(width, color)
    return console_text(console, low_util_table(console, profile, top))
