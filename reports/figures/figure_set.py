"""Drawing a set of figures so that one that cannot be drawn costs only itself: `draw_figures` and `FigureSet`.

Each figure function is called, its texts made plain and bounded (`canvas.plain_texts`), and the figure drawn once
without output (`Figure.draw_without_rendering`: the layout and every text's glyphs, where mathtext or a layout
would fail), its layout then run again with the tick labels written. A figure whose axes the constrained layout cannot fit ("axes sizes collapsed to zero") is laid out
with fixed margins instead (matplotlib would otherwise retry that layout on every draw). A figure function that
raises, or a figure that fails to draw, is replaced by a small figure saying so, and the set's `notes` name it
with the one-line reason: the other figures, the page and the files written are made as usual.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from tbd.reports.figures.canvas import empty_figure, plain_texts

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The fixed margins (figure fractions) of a figure whose constrained layout collapsed.
FIXED_MARGINS = {"left": 0.1, "right": 0.72, "bottom": 0.22, "top": 0.88}
#: The most characters of a failure's reason kept in a note.
_REASON_CHARS = 200


class FigureSet(dict):
    """File stem -> Figure, as every `*_figures` function returns it, with `notes`: file stem -> why that figure
    is a placeholder ("could not be drawn: ValueError: ...") or was laid out with fixed margins.

    A dict, so existing callers iterate it as before; a page or a command shows `notes` beside the figures.
    """

    def __init__(self, figures: Mapping[str, Figure] = (), notes: Mapping[str, str] = ()) -> None:
        super().__init__(figures)
        self.notes: dict[str, str] = dict(notes)


def failure_reason(exc: BaseException) -> str:
    """An exception as one line: "ValueError: Unknown symbol: \\\\undefinedcmd" (its first non-empty line, cut)."""
    message = str(exc)
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    # matplotlib's mathtext errors start with a line break, the text and a caret; their last line says what is wrong.
    text = (lines[-1] if message.startswith("\n") else lines[0]) if lines else ""
    text = text[:_REASON_CHARS] + ("…" if len(text) > _REASON_CHARS else "")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def failed_figure(stem: str, reason: str) -> Figure:
    """The figure that stands where `stem` could not be drawn: its name and the reason, plain."""
    fig = plain_texts(empty_figure(stem.replace("_", " "), f"figure not drawn — {reason}"))
    fig.draw_without_rendering()
    return fig


def draw_one(stem: str, make: Callable[[], Figure | None]) -> tuple[Figure | None, str | None]:
    """Call `make`, make its texts plain and draw it once; (figure, None), (None, None) when `make` has nothing to
    draw, or (a `failed_figure`, the note) when it raised or failed to draw. Never raises an Exception."""
    try:
        fig = make()
        if fig is None:
            return None, None
        plain_texts(fig)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fig.draw_without_rendering()
            # The first draw lays out before the tick labels are written; the layout run again sees them (and warns
            # where they leave the axes no room), at the cost of text extents already measured.
            engine = fig.get_layout_engine()
            if engine is not None:
                engine.execute(fig)
        if any("constrained_layout not applied" in str(w.message) for w in caught):
            fig.set_layout_engine("none")
            fig.subplotpars.update(**FIXED_MARGINS)
            for ax in fig.axes:  # what subplots_adjust does, which refuses a figure that had constrained layout
                spec = ax.get_subplotspec()
                if spec is not None:
                    ax.set_position(spec.get_position(fig))
            fig.draw_without_rendering()
            return fig, "laid out with fixed margins: its labels left the plot no room"
        return fig, None
    except Exception as exc:  # noqa: BLE001 - any failure inside matplotlib or a figure costs that figure only
        note = f"could not be drawn: {failure_reason(exc)}"
        try:
            return failed_figure(stem, note), note
        except Exception:  # noqa: BLE001 - the reason itself would not draw: say only the exception's type
            note = f"could not be drawn: {type(exc).__name__}"
            return failed_figure(stem, note), note


def draw_figures(makers: Mapping[str, Callable[[], Figure | None]]) -> FigureSet:
    """Every figure of `makers` (file stem -> a function returning a Figure, or None for nothing to draw), each
    drawn by `draw_one`: a failed one is a placeholder figure and a note, never an exception.

    Returns: the FigureSet, in the order of `makers`, without the stems whose function returned None.
    """
    figures = FigureSet()
    for stem, make in makers.items():
        fig, note = draw_one(stem, make)
        if fig is not None:
            figures[stem] = fig
        if note:
            figures.notes[stem] = note
    return figures
