"""A batch-size sweep on the terminal (one summary table) and as CSV (one row per point).

The table writes figures in human units (3 significant digits, durations in s/ms/µs, memory in
binary units) and "n/a" for a null figure; the throughput with its 95 % interval ("1,227 ±17%"); a
point whose profile says its figures are unreliable reads "unreliable" in the Status column (a
partial one "partial*") and its warning follows the table. The reasons follow the table, grouped so a
reason every point shares is said once. The CSV keeps the figures unformatted (seconds, percent,
bytes; an empty cell for null; `reliable` true/false) for a spreadsheet or a plot. The progress
lines (`plan_line`, `point_line`, `forecast_line`) say the plan before the first point and, after each,
the points still to run and their time at the last point's pace. Renderers format, never compute.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from tbd.core.sweep_result import POINT_MEMORY_KEYS, Forecast, Sweep, SweepPoint
from tbd.reports.console import console_text, listed, new_console, plain_table
from tbd.reports.csv_cells import csv_text
from tbd.reports.numbers import NA, fmt_duration, fmt_pct, fmt_sig
from tbd.reports.printable import printable
from tbd.reports.terminal import fmt_bytes

STATUS_LABELS = {"ok": "ok", "partial": "partial", "oom": "OOM", "failed": "failed"}
#: The CSV's columns, in order: the point, its figures, then each memory key in bytes.
CSV_COLUMNS = ("batch", "status", "reliable", "reason", "throughput", "throughput_low", "throughput_high",
               "throughput_interval_pct", "unit", "iteration_s", "gpu_busy_pct", "flop_util_pct", "cpu_util_pct",
               "run_s", "quality_warnings", *(f"{key}_bytes" for key in POINT_MEMORY_KEYS))
#: Figures shown in the table: key in SweepPoint.reasons -> column label.
_SHOWN = {"throughput": "Throughput", "iteration_s": "Iteration", "gpu_busy_pct": "GPU busy %",
          "flop_util_pct": "FLOP util %", "cpu_util_pct": "CPU util %", "memory.allocator_peak": "Peak memory",
          "memory.feature_maps": "Feature maps"}
_RAN = ("ok", "partial")
#: The narrowest console that shows the feature-maps column.
_MAPS_WIDTH = 100
#: Distinct reasons shown per figure; sweep.json holds them all.
_MAX_REASONS = 2


def status_label(point: SweepPoint) -> str:
    """The point's status as the table writes it: "unreliable" for a point that ran but whose profile
    says its figures are unreliable ("partial*" when it is partial too), else its STATUS_LABELS label."""
    if point.reliable is False and point.status == "ok":
        return "unreliable"
    label = STATUS_LABELS.get(point.status, printable(point.status))
    return label + "*" if point.reliable is False else label


def interval_text(point: SweepPoint) -> str:
    """The throughput's 95 % interval half-width, "±17%" (two significant digits), or "" without one."""
    if point.throughput_interval_pct is None:
        return ""
    return f"±{fmt_sig(point.throughput_interval_pct, 2)}%"


def _unit(sweep: Sweep) -> str | None:
    return next((p.throughput_unit for p in sweep.points if p.throughput_unit), None)


def _batches(batches: list[int], every: bool) -> str:
    if every:
        return "every point that ran"
    return "batch " + ", ".join(str(b) for b in batches)


def _header(sweep: Sweep) -> list[RenderableType]:
    where = printable(sweep.device + (f" ({sweep.device_name})" if sweep.device_name else ""))
    title = Text(f"Batch sweep: {printable(sweep.model)}", style="bold")
    title.append(f" · {printable(sweep.framework)} · {printable(sweep.size)} size · {where}")
    if sweep.memory_limit_bytes:
        title.append(f" · address space capped at {fmt_bytes(sweep.memory_limit_bytes)}")
    mode = ("Searched for the largest batch that fits (doubling, then bisection)." if sweep.mode == "max"
            else "The batches given.")
    fit = "none" if sweep.largest_fitting_batch is None else str(sweep.largest_fitting_batch)
    fail = ("none ran out of memory" if sweep.smallest_failing_batch is None
            else f"smallest out of memory: {sweep.smallest_failing_batch}")
    return [title, Text(f"{mode} Largest batch that ran: {fit}; {fail}.")]


def _table(sweep: Sweep, width: int) -> Table:
    """One row per batch; below 100 columns the feature-maps column is left out (sweep.csv has it)."""
    maps = width >= _MAPS_WIDTH
    # Narrow: two spaces between columns instead of three, so "unreliable" and an interval fit 80 columns.
    table = plain_table(**({} if maps else {"padding": (0, 0, 0, 1)}))
    unit = _unit(sweep)
    # Two-line headers, so the figures keep their width at 80 columns.
    table.add_column("Batch", justify="right", no_wrap=True)
    table.add_column("Status", no_wrap=True)
    table.add_column("Throughput\n" + (printable(unit) if unit else ""), justify="right", no_wrap=True)
    table.add_column("Iteration\n(median)", justify="right", no_wrap=True)
    for header in ("GPU\nbusy %", "FLOP\nutil %", "CPU\nutil %", "Peak\nmemory", *(("Feature\nmaps",) if maps else ())):
        table.add_column(header, justify="right", no_wrap=True)
    for p in sweep.points:
        if p.status not in _RAN:
            table.add_row(str(p.batch), status_label(p), *["—"] * (7 if maps else 6))
            continue
        own_unit = f" {printable(p.throughput_unit)}" if p.throughput_unit and p.throughput_unit != unit else ""
        interval = f" {interval_text(p)}" if interval_text(p) else ""
        table.add_row(str(p.batch), status_label(p),
                      fmt_sig(p.throughput) + (own_unit + interval if p.throughput is not None else ""),
                      fmt_duration(p.iteration_s), fmt_pct(p.gpu_busy_pct, suffix=""),
                      fmt_pct(p.flop_util_pct, suffix=""), fmt_pct(p.cpu_util_pct, suffix=""),
                      fmt_bytes(p.memory_bytes.get("allocator_peak")),
                      *((fmt_bytes(p.memory_bytes.get("feature_maps")),) if maps else ()))
    return table


def _reasons(sweep: Sweep, width: int) -> Table | None:
    """Why a point failed, then why a shown figure is n/a: each distinct reason once, with its batches.

    A figure with many distinct reasons (a window length in each) shows the first few and a count:
    sweep.json keeps every one.
    """
    # An out-of-memory reason says so itself ("batch 64 ran out of memory on cpu").
    rows = [(f"batch {p.batch}", printable(p.reason) if p.status == "oom" else f"{p.status}: {printable(p.reason)}")
            for p in sweep.points if p.status != "ok" and p.reason]
    ran = [p for p in sweep.points if p.status in _RAN]
    if any(p.throughput_interval_pct is not None for p in ran):
        rows.insert(0, ("±", "the throughput's 95 % interval over the timing windows, % of it"))
    unreliable = [p for p in ran if p.reliable is False]
    for p in unreliable[:_MAX_REASONS]:
        warning = p.quality_warnings[0] if p.quality_warnings else "its profile gives no warning"
        more = f" (+{len(p.quality_warnings) - 1} more)" if len(p.quality_warnings) > 1 else ""
        rows.append((f"batch {p.batch}", f"unreliable: {printable(warning)}{more}"))
    if len(unreliable) > _MAX_REASONS:
        rest = [str(p.batch) for p in unreliable[_MAX_REASONS:]]
        rows.append(("unreliable", f"batch {', '.join(rest)} too (each point's warnings are in sweep.json)"))
    shown = {k: v for k, v in _SHOWN.items() if width >= _MAPS_WIDTH or k != "memory.feature_maps"}
    for key, label in shown.items():
        by_reason: dict[str, list[int]] = {}
        for p in ran:
            if key in p.reasons:
                by_reason.setdefault(p.reasons[key], []).append(p.batch)
        for i, (reason, batches) in enumerate(by_reason.items()):
            if i == _MAX_REASONS:
                rest = sum(len(b) for b in list(by_reason.values())[i:])
                rows.append((label.replace("\n", " "), f"{NA} at {rest} more point{'s' if rest > 1 else ''} "
                                                         f"(each reason is in sweep.json)"))
                break
            rows.append((label.replace("\n", " "), f"{NA} — {printable(reason)} "
                                                     f"({_batches(batches, len(batches) == len(ran) > 1)})"))
    if not rows:
        return None
    return _hanging([("  " + label + ":", text) for label, text in rows])


def _hanging(rows: list[tuple[str, str]]) -> Table:
    """Label and text side by side, the text wrapped under itself (a long path folded, not cut)."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for label, text in rows:
        grid.add_row(Text(label), Text(text))
    return grid


def render_sweep(sweep: Sweep, *, width: int = 100, color: bool | None = False) -> str:
    """The sweep's summary as text: a header, one table row per batch, the reasons, the notes.

    Args: width, in terminal cells (80 and up read well); color: True, False (plain) or None (if
    stdout is a terminal). Returns the text, ending in a newline.
    """
    console = new_console(width, color)
    parts: list[RenderableType | None] = [*_header(sweep), None, _table(sweep, width)]
    reasons = _reasons(sweep, width)
    if reasons is not None:
        parts += [None, Text("Why", style="bold"), reasons]
    if sweep.notes:
        notes, more = listed(sweep.notes)
        parts += [None, Text("Notes", style="bold"), _hanging([("  -", printable(n)) for n in notes])]
        parts += [more] if more is not None else []
    return console_text(console, parts)


def point_line(point: SweepPoint) -> str:
    """One line for the progress log once a point is done: "batch 64: 2,742 images/s, 11.7 ms per iteration"."""
    took = f" (ran {fmt_duration(point.run_s)})" if point.run_s is not None else ""
    if point.status == "oom":
        return f"batch {point.batch}: out of memory{took}"
    if point.status == "failed":
        return f"batch {point.batch}: failed{took}: {printable(point.reason)}"
    unit = f" {printable(point.throughput_unit)}" if point.throughput_unit and point.throughput is not None else ""
    interval = f" {interval_text(point)}" if interval_text(point) else ""
    text = (f"batch {point.batch}: {fmt_sig(point.throughput)}{unit}{interval}, {fmt_duration(point.iteration_s)} per "
            f"iteration, peak memory {fmt_bytes(point.memory_bytes.get('allocator_peak'))}{took}")
    text += " — unreliable (see its profile's quality warnings)" if point.reliable is False else ""
    return text + (f" (partial: {printable(point.reason)})" if point.status == "partial" else "")


def plan_line(batches: list[int] | None, doubling: list[int], first: Forecast) -> str:
    """The plan, before the first point: "plan: 3 points, batch 2, 4, 8" or, for the max search, the
    doubling batches and the fewest and most points the search can take.

    Args: batches: a list sweep's batches (None: the max search); doubling: the max search's batches
    while every one fits (analysis.sweep_plan.doubling_batches); first: the forecast before any point.
    """
    if batches is not None:
        return f"plan: {len(batches)} point{'s' if len(batches) != 1 else ''}, batch {', '.join(map(str, batches))}"
    shown = doubling if len(doubling) <= 5 else [*doubling[:3], "...", doubling[-1]]
    return (f"plan: batch {', '.join(map(str, shown))}, doubling until one does not fit, then bisecting to the "
            f"largest that fits: {_count(first)}")


def forecast_line(forecast: Forecast) -> str | None:
    """After a point: what is next and how long the rest should take at the last point's pace; None when done."""
    if forecast.next_batch is None:
        return None
    text = f"next: batch {forecast.next_batch}; {_count(forecast, ' more')}"
    if forecast.point_s is not None and forecast.most_s is not None:
        text += (f", about {fmt_duration(forecast.point_s)} each at the last point's pace: up to "
                 f"~{fmt_duration(forecast.most_s)} (an estimate; larger batches run longer)")
    return text


def _count(forecast: Forecast, more: str = "") -> str:
    if forecast.fewest == forecast.most:
        return f"{forecast.most}{more} point{'s' if forecast.most != 1 else ''}"
    return f"{forecast.fewest} to {forecast.most}{more} points"


def _cell(value) -> str | int | float:
    """A CSV cell: numbers as Python writes them (shortest exact repr), None as empty."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return value


def _bool_cell(value: bool | None) -> str | None:
    """true / false as JSON writes them; None (no quality record) as an empty cell."""
    return None if value is None else "true" if value else "false"


def csv_rows(sweep: Sweep) -> list[dict[str, str | int | float]]:
    """One dict per point, keyed by CSV_COLUMNS."""
    rows = []
    for p in sweep.points:
        values = {"batch": p.batch, "status": p.status, "reliable": _bool_cell(p.reliable), "reason": p.reason,
                  "throughput": p.throughput, "throughput_low": p.throughput_low, "throughput_high": p.throughput_high,
                  "throughput_interval_pct": p.throughput_interval_pct,
                  "unit": p.throughput_unit, "iteration_s": p.iteration_s, "gpu_busy_pct": p.gpu_busy_pct,
                  "flop_util_pct": p.flop_util_pct, "cpu_util_pct": p.cpu_util_pct, "run_s": p.run_s,
                  "quality_warnings": " | ".join(p.quality_warnings) or None,
                  **{f"{key}_bytes": p.memory_bytes.get(key) for key in POINT_MEMORY_KEYS}}
        rows.append({k: _cell(values[k]) for k in CSV_COLUMNS})
    return rows


def sweep_csv(sweep: Sweep) -> str:
    """sweep.csv's text: a header row of CSV_COLUMNS, then one row per point (sorted by batch)."""
    return csv_text(CSV_COLUMNS, ([row[k] for k in CSV_COLUMNS] for row in csv_rows(sweep)))
