"""What every figure shares: the canvas, colours, units, captions and "n/a" markers.

Figures are explicit `matplotlib.figure.Figure` objects, never pyplot: no global figure registry,
no backend switch, so rendering in a library or a test leaves nothing behind. Colours are the
Okabe-Ito palette, which stays distinguishable for the common kinds of colour blindness. A figure
that is null in the record is never drawn as zero: its place gets "n/a" and the caption the reason.

Texts are data (op, kernel, model and run names, reasons from others' logs) and matplotlib reads a text holding
two unescaped `$` as mathtext: `$\\undefinedcmd$` would fail the whole figure, a 300,000-character name would be
laid out glyph by glyph and squeeze the plot to nothing. `plain_texts` makes every text of a finished figure plain
(each `$` escaped, which matplotlib then draws as `$`; backslashes outside mathtext are drawn as they are) and
bounded (`TEXT_CHARS` for titles and captions, `LABEL_CHARS` for tick labels, legend entries and annotations,
which take room from the plot); `add_caption` keeps at most `CAPTION_LINES` lines and `new_figure` at most
`MAX_WIDTH_IN` x `MAX_HEIGHT_IN` inches, so no record can make a figure slow to draw or collapse its layout.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from tbd.core.profile_result import MEMORY_CATEGORIES
from tbd.reports.console import ELLIPSIS, shorten_middle
from tbd.reports.numbers import NA
from tbd.reports.printable import printable
from tbd.reports.sweep_table import STATUS_LABELS

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Dots per inch of the canvas (on screen, and the SVG's layout): fixed, so a figure is the same size everywhere.
DPI = 110
#: Dots per inch of saved PNGs: 200, sharp on a slide or a printed page (a 9-inch figure is 1,800 pixels wide);
#: written into the PNG's pHYs chunk, so an editor places it at its size in inches.
PNG_DPI = 200
CAPTION_POINTS = 8
#: Memory categories as drawn: each category's own colour, everywhere it appears.
CATEGORY_COLOURS = {"weights": "#0072B2", "gradients": "#56B4E9", "feature_maps": "#009E73",
                    "workspace": "#E69F00", "dynamic": "#CC79A7", "unattributed": "#BBBBBB"}
SPLIT_PARTS = (*MEMORY_CATEGORIES, "unattributed")
#: One colour per run or series, in order.
SERIES_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
MISSING_COLOUR = "#D55E00"
#: The most characters of one line of a title or caption drawn; a longer line is cut in its middle.
TEXT_CHARS = 160
#: The most characters of one line of a tick label, legend entry or annotation: these take room from the plot.
LABEL_CHARS = 64
#: The most lines of one text drawn (a caption has `CAPTION_LINES` plus the line counting the rest).
TEXT_LINES = 16
#: The most caption lines under a figure (after wrapping); the rest are counted in one last line.
CAPTION_LINES = 14
#: The largest canvas, in inches: a figure grows with its rows and captions up to this and no further.
MAX_WIDTH_IN = 16.0
MAX_HEIGHT_IN = 18.0
_BYTE_UNITS = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def new_figure(width: float = 9.0, height: float = 4.5) -> Figure:
    """A blank figure on its own canvas, laid out by matplotlib's constrained layout.

    Args: width, height: size in inches (at `DPI`).
    Returns: the Figure.
    """
    # Loaded on the first figure drawn, not with every `tbd` command (matplotlib is 0.4 s of start-up).
    from matplotlib.figure import Figure

    return Figure(figsize=(min(width, MAX_WIDTH_IN), min(height, MAX_HEIGHT_IN)), dpi=DPI, layout="constrained")


def plain_text(value, chars: int = TEXT_CHARS) -> str:
    """`value` as text matplotlib draws verbatim: control characters escaped (`printable`), each line cut to `chars`
    in its middle, at most `TEXT_LINES` lines, and every `$` as `\\$`.

    matplotlib reads a text holding an even number of unescaped `$` as mathtext (and raises on an unknown
    `\\command` inside); with each `$` escaped it counts none, draws the text as it is and shows `\\$` as `$`
    (an input `\\$` stays `\\$`: its escaped form `\\\\$` counts one `$` and one `\\$`, so none).
    Apply it once: the escape is not idempotent. Figures get it from `plain_texts`, never by hand.
    """
    text = "" if value is None else value if isinstance(value, str) else str(value)
    lines = text.split("\n")
    if len(lines) > TEXT_LINES:
        lines = [*lines[:TEXT_LINES - 1], f"{ELLIPSIS} {len(lines) - TEXT_LINES + 1} more lines"]
    # printable cuts first (at a few times `chars`, saying the full length): a 300,000-character name costs nothing.
    return "\n".join(shorten_middle(printable(line, 4 * chars), chars) for line in lines).replace("$", r"\$")


def plain_texts(fig: Figure) -> Figure:
    """Make every text of a finished figure plain and bounded (`plain_text`), once: titles, captions, axis labels,
    texts and annotations, legend entries and tick labels given as text (numbers formatted by matplotlib are its own).

    Args: fig: a figure as one of the figure functions returned it, not yet passed through here.
    Returns: `fig`, changed in place.
    """
    from matplotlib.text import Text  # loaded with the first figure, as in new_figure
    from matplotlib.ticker import FixedFormatter, FuncFormatter

    # Titles and captions have the figure's width; everything else shares the plot's room.
    wide = {id(getattr(owner, name, None)) for owner in (fig, *fig.axes)
            for name in ("title", "_left_title", "_right_title", "_suptitle", "_supxlabel", "_supylabel")}
    for text in fig.findobj(Text):
        raw = text.get_text()
        if raw:
            text.set_text(plain_text(raw, TEXT_CHARS if id(text) in wide else LABEL_CHARS))
    # Tick labels are written by the axis' formatter at each draw: labels given as text (`set_xticks(ticks, labels)`
    # makes a FuncFormatter or FixedFormatter of them) and tbd's own functions are wrapped; matplotlib's number
    # formatters (ScalarFormatter, LogFormatter: "$10^{2}$") are its own mathtext and kept. Shared and twin axes
    # share one ticker, which is wrapped once.
    seen = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for ticker, install in ((axis.major, axis.set_major_formatter), (axis.minor, axis.set_minor_formatter)):
                if id(ticker) in seen or not isinstance(ticker.formatter, (FixedFormatter, FuncFormatter)):
                    continue
                seen.add(id(ticker))
                install(FuncFormatter(lambda x, pos, given=ticker.formatter: plain_text(given(x, pos), LABEL_CHARS)))
    return fig


def count_left_out(shown: int, total: int, what: str) -> list[str]:
    """The caption line saying how many of `what` a figure leaves out: ["1,200 more kernel groups not shown"], or []."""
    return [f"{total - shown:,} more {what} not shown (of {total:,})"] if total > shown else []


def empty_figure(title: str, message: str, width: float = 9.0) -> Figure:
    """A figure that says why there is nothing to draw ("n/a — no iteration was recorded").

    Args: title: the figure's title; message: the sentence shown in place of the plot.
    Returns: the Figure, one axes without frame holding `title` and `message`.
    """
    fig = new_figure(width, 2.0)
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(title, loc="left")
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color=MISSING_COLOUR)
    return fig


def na(reason: str | None) -> str:
    """"n/a — reason" (or "n/a" alone), the reason made printable."""
    return f"{NA} — {printable(reason)}" if reason else NA


def category_label(name: str) -> str:
    """A memory category as a person reads it: "feature_maps" -> "feature maps"."""
    return name.replace("_", " ")


def byte_unit(values: Iterable[int | float | None]) -> tuple[int, str]:
    """The binary unit (divisor, name) that the largest known value reads best in: GiB, MiB, KiB or B.

    Args: values: byte counts, None for unknown ones.
    Returns: (bytes per unit, unit name); (1, "B") when nothing is known or all are below 1 KiB.
    """
    largest = max((abs(v) for v in values if v is not None), default=0)
    return next(((size, unit) for size, unit in _BYTE_UNITS if largest >= size), (1, "B"))


def add_caption(fig: Figure, lines: Sequence[str]) -> None:
    """Write `lines` under the plot, wrapped to the figure's width (nothing when there are none).

    Args: fig: the figure; lines: sentences, each started on its own line.
    """
    if not lines:
        return
    # About 0.55 em per character of DejaVu Sans: the wrap width that keeps a line inside the figure.
    chars = min(TEXT_CHARS, max(40, int(fig.get_figwidth() * 72 / (CAPTION_POINTS * 0.55))))
    # A sentence is cut (in its middle) before it is wrapped, the lines counted after: no reason fills a page.
    wrapped = [part for line in lines
               for part in textwrap.wrap(shorten_middle(printable(line, 8 * chars), 4 * chars), chars) or [""]]
    if len(wrapped) > CAPTION_LINES:
        wrapped = [*wrapped[:CAPTION_LINES], f"{ELLIPSIS} {len(wrapped) - CAPTION_LINES} more caption lines not "
                                             "shown (the record holds them)"]
    # The caption takes room from the plot: the figure grows by its height instead (never past MAX_HEIGHT_IN).
    grown = fig.get_figheight() + len(wrapped) * CAPTION_POINTS * 1.25 / 72
    fig.set_figheight(min(grown, MAX_HEIGHT_IN))
    fig.supxlabel("\n".join(wrapped), x=0.01, ha="left", fontsize=CAPTION_POINTS, color="#333333")


def mark_missing(ax: Axes, x: float, label: str) -> None:
    """A red cross at the bottom of `ax` at data position `x`, with `label` ("OOM") above it.

    Used where a point has no figure at all: it must show, but never as a value of zero.
    """
    # x in data coordinates, y in axes coordinates: the marker sits on the bottom edge whatever the scale.
    from matplotlib.transforms import blended_transform_factory

    where = blended_transform_factory(ax.transData, ax.transAxes)
    ax.plot([x], [0.03], marker="X", markersize=9, color=MISSING_COLOUR, linestyle="none", transform=where,
            clip_on=False, label="_missing")
    if not label:  # a neighbour's label already names it
        return
    ax.text(x, 0.07, label, transform=where, ha="center", va="bottom", color=MISSING_COLOUR, fontsize=9,
            fontweight="bold")


def mark_na(ax: Axes, x: float) -> None:
    """"n/a" on the bottom edge of `ax` at data position `x`: a null figure's place in a row of bars."""
    from matplotlib.transforms import blended_transform_factory

    where = blended_transform_factory(ax.transData, ax.transAxes)
    ax.text(x, 0.02, NA, transform=where, ha="center", va="bottom", color=MISSING_COLOUR, fontweight="bold")


def point_label(status: str) -> str:
    """What a sweep point without figures is called on a plot: "OOM", "failed" (as the sweep table says), else "n/a"."""
    return STATUS_LABELS[status] if status in ("oom", "failed") else NA


def legend_patch(**style: Any) -> Artist:
    """A filled box for a legend (matplotlib.patches.Patch with `style`: color, facecolor, label, ...)."""
    from matplotlib.patches import Patch  # loaded with the first figure, as in new_figure

    return Patch(**style)


def legend_line(**style: Any) -> Artist:
    """A line for a legend (an empty matplotlib.lines.Line2D with `style`: color, linewidth, label, ...)."""
    from matplotlib.lines import Line2D  # loaded with the first figure, as in new_figure

    return Line2D([], [], **style)
