"""Figures of a run, a sweep or a comparison, and how they are saved (SVG and PNG) or embedded (inline SVG).

One function per figure, each taking a finished record and returning an explicit
`matplotlib.figure.Figure` (never pyplot: no global figure list, no backend switch):

- a run (`Profile`): `iteration_time_figure`, `memory_figure`, `kernel_utilization_figure`
  (reports/figures/run_figures.py);
- a sweep (`Sweep`): `sweep_throughput_figure`, `sweep_utilization_figure`, `sweep_memory_figure`
  (reports/figures/sweep_figures.py);
- a comparison (`Comparison`): `compare_metrics_figure`, `compare_ops_figure`, `compare_memory_figure`
  (reports/figures/comparison_figures.py).

`run_figures`, `sweep_figures` and `comparison_figures` give all of one kind by file stem (a run's figure with
nothing to draw is left out: `figure_gaps` says why, and the page says it in its place), as a `FigureSet`
(reports/figures/figure_set.py): each figure's texts made plain, drawn once, and a figure that cannot be drawn
replaced by one saying why, named in the set's `notes`; `save_figures` writes each as .svg and .png (a figure that
fails there is written as that placeholder too). Output is deterministic: the SVG's element ids come from
a fixed salt (`svg.hashsalt`) and it carries no date, the PNG has a fixed dpi (`PNG_DPI`, 200, for slides), so the
same record gives the same bytes (a figure diff in review is a real change).
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tbd.core.comparison import Comparison
from tbd.core.profile_result import Profile
from tbd.core.rundir import atomic_write_bytes
from tbd.core.sweep_result import Sweep
from tbd.reports.figures.canvas import PNG_DPI
from tbd.reports.figures.comparison_figures import compare_memory_figure, compare_metrics_figure, compare_ops_figure
from tbd.reports.figures.figure_set import FigureSet, draw_figures, failed_figure, failure_reason
from tbd.reports.figures.run_figures import figure_gaps, iteration_time_figure, kernel_utilization_figure, memory_figure
from tbd.reports.figures.sweep_figures import sweep_memory_figure, sweep_throughput_figure, sweep_utilization_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "FigureSet", "compare_memory_figure", "compare_metrics_figure", "compare_ops_figure", "comparison_figures",
    "figure_gaps", "figure_png", "figure_svg", "iteration_time_figure", "kernel_utilization_figure", "memory_figure",
    "run_figures", "save_figures", "sweep_figures", "sweep_memory_figure", "sweep_throughput_figure",
    "sweep_utilization_figure",
]
#: Formats `save_figures` writes, in order.
FORMATS = ("svg", "png")


def run_figures(profile: Profile) -> FigureSet:
    """Every figure of one run that has something to draw.

    Args: profile: a finished Profile.
    Returns: {"iteration_time", "memory", "kernel_utilization"} -> Figure, less those `figure_gaps` names (a trace
        without memory records gets no memory figure rather than an empty "n/a" one); `notes` names any that
        could not be drawn.
    """
    draw = {"iteration_time": iteration_time_figure, "memory": memory_figure,
            "kernel_utilization": kernel_utilization_figure}
    try:
        gaps = figure_gaps(profile)
    except Exception as exc:  # noqa: BLE001 - a record the gaps cannot read: each figure tries, and says why
        gaps = {}
        failed = f"could not tell which figures have something to draw: {failure_reason(exc)}"
    else:
        failed = None
    figures = draw_figures({stem: (lambda figure=figure: figure(profile)) for stem, figure in draw.items()
                            if stem not in gaps})
    if failed:
        figures.notes.setdefault("figures", failed)
    return figures


def sweep_figures(sweep: Sweep) -> FigureSet:
    """Every figure of a batch-size sweep.

    Args: sweep: a finished Sweep.
    Returns: {"sweep_throughput", "sweep_utilization", "sweep_memory"} -> Figure; `notes` names any that could
        not be drawn.
    """
    draw = {"sweep_throughput": sweep_throughput_figure, "sweep_utilization": sweep_utilization_figure,
            "sweep_memory": sweep_memory_figure}
    return draw_figures({stem: (lambda figure=figure: figure(sweep)) for stem, figure in draw.items()})


def comparison_figures(comparison: Comparison) -> FigureSet:
    """Every figure of a comparison.

    Args: comparison: a finished Comparison.
    Returns: {"compare_metrics", "compare_ops", "compare_memory"} -> Figure; `notes` names any that could not
        be drawn.
    """
    draw = {"compare_metrics": compare_metrics_figure, "compare_ops": compare_ops_figure,
            "compare_memory": compare_memory_figure}
    return draw_figures({stem: (lambda figure=figure: figure(comparison)) for stem, figure in draw.items()})


def figure_svg(figure: Figure, salt: str = "tbd") -> str:
    """The figure as SVG text, the same text for the same figure and salt.

    Args: figure: the Figure; salt: seeds the SVG's element ids (pages holding several figures
        give each its own, so no two share an id).
    Returns: the SVG document (XML declaration included).
    """
    buffer = io.BytesIO()
    # The SVG writer reads its id salt from rcParams only; without one it salts with a random UUID,
    # so the same figure would differ on every save. rc_context restores the setting on exit.
    import matplotlib  # loaded with the first figure drawn, not with every `tbd` command (0.4 s of start-up)

    with matplotlib.rc_context({"svg.hashsalt": salt}), _glyphs_quiet():
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue().decode("utf-8")


def figure_png(figure: Figure) -> bytes:
    """The figure as PNG bytes at the fixed dpi (`figures.canvas.PNG_DPI`, recorded in the file), white background.

    Args: figure: the Figure.
    Returns: the PNG file's bytes.
    """
    buffer = io.BytesIO()
    with _glyphs_quiet():
        figure.savefig(buffer, format="png", dpi=PNG_DPI, facecolor="white")
    return buffer.getvalue()


def save_figures(figures: Mapping[str, Figure], out_dir: str | os.PathLike) -> list[Path]:
    """Write each figure as `<stem>.svg` and `<stem>.png` in `out_dir`, each file atomically.

    Args: figures: stem -> Figure (as `run_figures` gives them); out_dir: the folder, created if absent.
    Returns: the paths written, in the order of `figures`, SVG before PNG.
    """
    out = Path(out_dir)
    written = []
    for stem, figure in figures.items():
        try:
            encoded = _encoded(figure, stem)
        except Exception as exc:  # noqa: BLE001 - a figure that fails to save costs that figure only
            note = f"could not be saved: {failure_reason(exc)}"
            if isinstance(figures, FigureSet):
                figures.notes[stem] = note
            encoded = _encoded(failed_figure(stem, note), stem)
        for fmt, data in zip(FORMATS, encoded):
            path = out / f"{stem}.{fmt}"
            atomic_write_bytes(path, data)  # a temporary file beside it, then os.replace
            written.append(path)
    return written


def _encoded(figure: Figure, stem: str) -> tuple[bytes, bytes]:
    """The figure's SVG and PNG bytes, in `FORMATS` order."""
    return figure_svg(figure, salt=stem).encode("utf-8"), figure_png(figure)



@contextlib.contextmanager
def _glyphs_quiet() -> Iterator[None]:
    """Matplotlib's "Glyph N missing from font(s)" left unsaid: a name in a script the bundled font lacks (CJK, emoji)
    is drawn as boxes in the figure, and shown whole on the page and in the terminal; a warning per glyph on stderr
    would only bury the command's own lines."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from font")
        yield
