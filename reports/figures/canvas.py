"""What every figure shares: the canvas, colours, units, captions and "n/a" markers.

Figures are explicit `matplotlib.figure.Figure` objects, never pyplot: no global figure registry,
no backend switch, so rendering in a library or a test leaves nothing behind. Colours are the
Okabe-Ito palette, which stays distinguishable for the common kinds of colour blindness. A figure
that is null in the record is never drawn as zero: its place gets "n/a" and the caption the reason.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from tbd.core.profile_result import MEMORY_CATEGORIES
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
_BYTE_UNITS = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def new_figure(width: float = 9.0, height: float = 4.5) -> Figure:
    """A blank figure on its own canvas, laid out by matplotlib's constrained layout.

    Args: width, height: size in inches (at `DPI`).
    Returns: the Figure.
    """
    # Loaded on the first figure drawn, not with every `tbd` command (matplotlib is 0.4 s of start-up).
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


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
    chars = max(40, int(fig.get_figwidth() * 72 / (CAPTION_POINTS * 0.55)))
    wrapped = [part for line in lines for part in textwrap.wrap(line, chars) or [""]]
    # The caption takes room from the plot: the figure grows by its height instead.
    fig.set_figheight(fig.get_figheight() + len(wrapped) * CAPTION_POINTS * 1.25 / 72)
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
