"""Console helpers shared by the terminal reports (the kernel tables themselves: `reports/kernels/tables.py`).

A deterministic in-memory console (`new_console`, `console_text`), the one table style
(`plain_table`) and its legends (`legend_grid`), names shortened to the room a table leaves them
(`fit_names`, `name_room`), the word for device work (`kernel_noun`), the above-peak flag of a
Util % cell, and the cap on a list of notes or problems (`listed`: the first `MAX_LISTED`, then a count). Every number format lives in `reports/numbers.py`. Kernel
names are data, never markup: a CUDA name such as `void f<float>(T [with T = float])` must print
as is, so every cell is a `rich.text.Text`.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Sequence

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from tbd.core.errors import UsageError
from tbd.core.profile_result import KernelRow, Profile
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
        isatty = getattr(sys.stdout, "isatty", None)  # sys.stdout is None in a process started without one
        color = bool(isatty and isatty()) and "NO_COLOR" not in os.environ
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


#: The most items of one list (notes, warnings, problems) a terminal report prints; the rest are counted
#: in one line, so a result holding 100,000 notes still prints a screen, not gigabytes.
MAX_LISTED = 30


def listed(items: Sequence, noun: str = "notes", where: str = "the JSON output (--json)",
           limit: int = MAX_LISTED) -> tuple[list, Text | None]:
    """The first `limit` of `items`, and the line counting the rest ("… and 12,345 more notes: every one is in
    the JSON output (--json)"), None when nothing was left out. Each item's own length is capped by `printable`."""
    shown = list(items[:limit])
    if len(items) <= limit:
        return shown, None
    return shown, Text(f"{ELLIPSIS} and {len(items) - limit:,} more {noun}: every one is in {where}", style="dim")


#: Beside a Util % that lies above its precision's peak: the figure cannot be read as it stands.
ABOVE_PEAK_MARK = "⚠"


def above_peak(row: KernelRow) -> bool:
    """Whether analysis flagged the group's utilization as above its precision's peak (`util_note`)."""
    return isinstance(row.util_note, str) and row.util_note.startswith("above peak")


def fmt_window(window: list[int] | None) -> str:
    """An inclusive [first, last] iteration window as "first–last"."""
    if not window:
        return NA
    return f"{window[0]}–{window[-1]}"


def legend_grid(entries: Sequence[tuple[str, str]]) -> Table:
    """Legends under a table, one term per line, each explanation wrapping under itself (dim)."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for term, text in entries:
        grid.add_row(Text(f"{term}:", style="dim"), Text(text, style="dim"))
    return grid


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
    budget = max(MIN_NAME_CHARS, name_room(console, build, len(names)))
    return build([shorten(printable(n), budget) for n in names])


def name_room(console: Console, build: Callable[[list[str]], Table], count: int) -> int:
    """The characters the last column of `build`'s table gets on `console` once every other column has its
    width: the table is built with `count` empty names and measured."""
    probe = build(["" for _ in range(count)])
    probe.columns[-1].header = ""  # else a header longer than the empty cells would count as "other"
    return console.width - console.measure(probe).maximum


def kernel_noun(profile: Profile) -> str:
    """"ops" on a CPU run, "kernels" otherwise: the word the tables use for device work."""
    # docs/architecture.md: on a machine without a GPU, ops play the role of kernels.
    return "ops" if str(profile.spec.get("device", "")).startswith("cpu") else "kernels"
