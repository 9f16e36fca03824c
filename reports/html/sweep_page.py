"""A batch-size sweep (`Sweep`) as one self-contained HTML page: the summary table and the sweep figures.

One row per point: batch, status (with the reason of an OOM, failed or partial point; "unreliable"
where the point's profile says its figures are, its quality warnings in the tooltip and under the
table), throughput with its 95 % interval, iteration time, the utilizations and memory by category.
A null figure is "n/a" with its reason as the cell's tooltip, and the reasons are listed under the
table, one line per reason. The column heads break over two lines, so the table fits a 1400 px wide
window without scrolling sideways (tests/browser/test_sweep_page.py).
"""

from __future__ import annotations

from tbd.core.sweep_result import POINT_MEMORY_KEYS, Sweep, SweepPoint
from tbd.reports.figures.saving import sweep_figures
from tbd.reports.html.page import Cell, bytes_cell, esc, facts, figures_section, notes_list, num, page, section, table
from tbd.reports.numbers import NA, fmt_duration, fmt_pct, fmt_sig
from tbd.reports.printable import printable
from tbd.reports.sweep_table import STATUS_LABELS, interval_text, status_label
from tbd.reports.terminal import fmt_bytes

#: The figures of a point other than memory: field, column head, how it is written.
_FIGURES = (("iteration_s", "Iteration", fmt_duration), ("gpu_busy_pct", "GPU busy %", fmt_pct),
            ("flop_util_pct", "FLOP util %", fmt_pct), ("cpu_util_pct", "CPU util %", fmt_pct))
#: Two-line column heads (the table must fit 1400 px): a figure's head, then its memory keys'.
_HEADS = {"Iteration": ("Iteration", "(median)"), "GPU busy %": ("GPU", "busy %"), "FLOP util %": ("FLOP", "util %"),
          "CPU util %": ("CPU", "util %"), "feature_maps": ("feature", "maps"), "allocator_peak": ("allocator", "peak")}


def _head(first: str, second: str = "") -> Cell:
    """A column head over two lines (each escaped); its text reads "first second" (the break is a space)."""
    return Cell(esc(first) + ("<br> " + esc(second) if second else ""), markup=True)


def sweep_html(sweep: Sweep) -> str:
    """The sweep as one self-contained HTML page.

    Args: sweep: a finished Sweep.
    Returns: the HTML document: header, summary table with the reasons beneath, notes, figures.
    """
    title = f"tbd sweep · {printable(sweep.model)} ({printable(sweep.framework)}) on {printable(sweep.device)}"
    unit = next((p.throughput_unit for p in sweep.points if p.throughput_unit), None) or "samples/s"
    heads = [_head("Batch"), _head("Status"), _head("Throughput", f"({printable(unit)})"), _head("±95 %", "interval"),
             *(_head(*_HEADS.get(h, (h,))) for _, h, _ in _FIGURES),
             *(_head(*_HEADS.get(key, (key.replace("_", " "),))) for key in POINT_MEMORY_KEYS)]
    rows = [_row(p) for p in sweep.points]
    body = [f"<header>\n<h1>{esc(title)}</h1>", facts(_facts(sweep)), "</header>",
            section("Summary", table(heads, rows), notes_list(_reasons(sweep)), anchor="summary"),
            section("Notes", notes_list(sweep.notes), anchor="notes") if sweep.notes else "",
            figures_section(sweep_figures(sweep))]
    return page(title, body)


def _facts(sweep: Sweep) -> list[tuple[str, str]]:
    mode = "the largest batch that fits (doubling, then bisection)" if sweep.mode == "max" else "the batches given"
    fits = NA if sweep.largest_fitting_batch is None else str(sweep.largest_fitting_batch)
    pairs = [("Model", f"{sweep.model} ({sweep.framework}), {sweep.size} size"),
             ("Device", sweep.device + (f" — {sweep.device_name}" if sweep.device_name else "")),
             ("Searched", mode),
             ("Largest batch that ran", fits),
             ("Smallest out of memory", "none" if sweep.smallest_failing_batch is None
              else str(sweep.smallest_failing_batch))]
    if sweep.memory_limit_bytes:
        pairs.append(("Address space capped at", fmt_bytes(sweep.memory_limit_bytes)))
    ran = [p for p in sweep.points if p.status in ("ok", "partial")]
    if any(p.reliable is not None for p in ran):  # profiles without a quality record give no verdict
        unreliable = sweep.unreliable_batches
        pairs.append(("Unreliable points", "none" if not unreliable else
                      f"{len(unreliable)} of {len(ran)}: batch {', '.join(map(str, unreliable))}"))
    return pairs


def _status_cell(point: SweepPoint) -> Cell:
    """The point's status ("unreliable" when its profile says so); its reason or warnings in the tooltip and in
    the list under the table."""
    title = "; ".join(filter(None, [point.reason, *point.quality_warnings])) or None
    return Cell(status_label(point), title=title, cls=None if point.status == "ok" and point.reliable is not False
                else "na")


def _figure_cell(text: str, value, point: SweepPoint, key: str) -> Cell:
    """A point's figure, or "n/a" with the reason as tooltip (an OOM or failed point's is in its status cell)."""
    if value is not None:
        return num(text)
    return Cell(NA, title=point.reasons.get(key) or point.reason, cls="num na")


def _row(point: SweepPoint) -> list:
    cells = [num(str(point.batch)), _status_cell(point),
             _figure_cell(fmt_sig(point.throughput), point.throughput, point, "throughput"),
             _figure_cell(interval_text(point), point.throughput_interval_pct, point, "throughput_interval")]
    cells += [_figure_cell(fmt(getattr(point, key)), getattr(point, key), point, key) for key, _, fmt in _FIGURES]
    for key in POINT_MEMORY_KEYS:
        value = point.memory_bytes.get(key)
        cells.append(bytes_cell(value) if value is not None else
                     _figure_cell("", None, point, f"memory.{key}"))
    return cells


def _reasons(sweep: Sweep) -> list[str]:
    """Why a point did not run or stopped ("batch 512: OOM — ..."), then why figures of the points that ran are
    null, one line per reason ("GPU busy %: n/a at batch 2, 4, 8 — no CUDA device")."""
    names = {key: head for key, head, _ in _FIGURES} | {"throughput": "throughput",
                                                          "throughput_interval": "throughput interval",
                                                          "reliable": "measurement quality"}
    names |= {f"memory.{k}": k.replace("_", " ") for k in POINT_MEMORY_KEYS}
    lines = [f"batch {p.batch}: {STATUS_LABELS.get(p.status, printable(p.status))} — {printable(p.reason)}"
             for p in sweep.points if p.reason]
    lines += [f"batch {p.batch}: unreliable — {printable('; '.join(p.quality_warnings) or 'no warning given')}"
              for p in sweep.points if p.reliable is False]
    grouped: dict[tuple[str, str], list[int]] = {}
    for point in sweep.points:
        if point.status in ("oom", "failed"):
            continue  # its own line says why: none of its figures exists
        for key, reason in point.reasons.items():
            grouped.setdefault((names.get(key, key), reason), []).append(point.batch)
    return lines + [f"{printable(name)}: n/a at batch {', '.join(map(str, batches))} — {printable(reason)}"
                    for (name, reason), batches in grouped.items()]
