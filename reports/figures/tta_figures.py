"""The figures of a time-to-accuracy result (a `TtaResult`): per benchmark or task, the time to target of each
system, each run's accuracy against wall time (the DAWNBench paper's Figure 6) and each run's throughput per epoch.

Every number drawn is the record's own: bars are `time_to_target_s` (inference: `latency_ms`), `energy_j`,
`cost_usd`, labelled with the record's ratio to the table's first system; nothing is divided here but to
write a figure in a unit. A system without a score keeps its row, empty, with its reason abbreviated beside
the axis and whole in the caption. Runs of one system share its colour (the same in every figure of the
table); runs dropped from the score are dashed and faded.

Names come from others' logs and may hold `$` or backslashes: `tta_table_figures` draws each figure through
`figure_set.draw_figures`, which makes every text plain (`canvas.plain_text`), so matplotlib never reads it as
mathtext (an unknown `\\command` between dollars would fail the whole figure). A table draws at most `MAX_SYSTEMS`
systems and `MAX_RUN_LINES` runs, each at most `MAX_LINE_POINTS` points; the caption counts the rest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tbd.core.tta_result import TtaResult, TtaRun, TtaSystem, TtaTable
from tbd.reports.comparison_text import fmt_ratio
from tbd.reports.console import ELLIPSIS, shorten_middle
from tbd.reports.figures.canvas import (
    MISSING_COLOUR,
    SERIES_COLOURS,
    add_caption,
    count_left_out,
    empty_figure,
    legend_line,
    na,
    new_figure,
    plain_text,  # noqa: F401 - re-exported: tests and callers of this module's former helper
)
from tbd.reports.figures.figure_set import FigureSet, draw_figures
from tbd.reports.numbers import NA, fmt_sig
from tbd.reports.printable import printable

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: How each source is named in a title.
SOURCE_NAMES = {"mlperf": "MLPerf Training", "dawnbench": "DAWNBench", "tbd": "tbd train"}
#: Units of a time axis: (the largest value from which it is used, seconds per unit, name).
TIME_UNITS = ((2 * 3600, 3600, "h"), (2 * 60, 60, "min"), (0, 1, "s"))
#: Style of a run counted in its system's score, and of a run dropped from it.
USED_STYLE = {"linestyle": "-", "alpha": 1.0}
DROPPED_STYLE = {"linestyle": "--", "alpha": 0.45}
TARGET_COLOUR = "#333333"
_LABEL_CHARS = 36
_SLUG_CHARS = 60
#: Systems drawn as bars (the table's first, its own order) and batch points; runs drawn as lines; points per line;
#: systems named in a legend. A caption line counts what is left out.
MAX_SYSTEMS = 40
MAX_RUN_LINES = 60
MAX_LINE_POINTS = 2000
MAX_LEGEND_SYSTEMS = 16
_REASON_CHARS = 38
_TARGET_SOURCE_CHARS = 60


def time_unit(seconds: Iterable[float | None]) -> tuple[int, str]:
    """The unit (seconds per unit, name) a time axis reads best in: hours from 2 h up, minutes from 2 min, else s.

    Args: seconds: the durations drawn, None for unknown ones.
    Returns: (3600, "h"), (60, "min") or (1, "s") for the largest known value.
    """
    largest = max((abs(s) for s in seconds if s is not None and math.isfinite(s)), default=0.0)
    return next((size, name) for floor, size, name in TIME_UNITS if largest >= floor)


def table_slugs(result: TtaResult) -> list[str]:
    """Each table's name in file stems ("resnet", "cifar10-train"), unique in the result (a repeat gets "-2").

    Args: result: a finished TtaResult.
    Returns: one slug per table, in order.
    """
    slugs: list[str] = []
    for i, table in enumerate(result.tables, 1):
        # Cut to _SLUG_CHARS: a file name has at most 255 bytes, and a benchmark name is others' data.
        base = re.sub(r"[^a-z0-9]+", "-", table.benchmark[:4 * _SLUG_CHARS].lower())[:_SLUG_CHARS].strip("-") \
            or f"table-{i}"
        slug, n = base, 1
        while slug in slugs:
            n += 1
            slug = f"{base}-{n}"
        slugs.append(slug)
    return slugs


def tta_figures(result: TtaResult) -> FigureSet:
    """Every figure of a time-to-accuracy result, by file stem.

    Args: result: a finished TtaResult.
    Returns: per table (in order) "tta-<slug>-time", then "tta-<slug>-accuracy" when a run logged an
        evaluation and "tta-<slug>-throughput" when a run logged samples per second (`tta_table_figures`);
        {"tta": a "n/a" figure} when the result has no table.
    """
    if not result.tables:
        why = f"no benchmark could be read ({len(result.problems)} problems)" if result.problems \
            else "no benchmark was given"
        return draw_figures({"tta": lambda: empty_figure("Time to target", na(why))})
    figures = FigureSet()
    for table, slug in zip(result.tables, table_slugs(result)):
        drawn = tta_table_figures(table, slug)
        figures |= drawn
        figures.notes |= drawn.notes
    return figures


def tta_table_figures(table: TtaTable, slug: str) -> FigureSet:
    """The figures of one table: {"tta-<slug>-time"[, "tta-<slug>-accuracy"][, "tta-<slug>-throughput"]
    [, "tta-<slug>-batch"]}, drawn by `figure_set.draw_figures` (`notes` names one that could not be drawn)."""
    return draw_figures({f"tta-{slug}-time": lambda: time_to_target_figure(table),
                         f"tta-{slug}-accuracy": lambda: accuracy_figure(table),
                         f"tta-{slug}-throughput": lambda: throughput_figure(table),
                         f"tta-{slug}-batch": lambda: batch_sweep_figure(table)})


def _thinned(values: Sequence, most: int = MAX_LINE_POINTS) -> Sequence:
    """`values`, or every k-th of them (the last kept) when there are more than `most`: a line's shape, bounded."""
    if len(values) <= most:
        return values
    step = -(-len(values) // most)
    return [*values[:-1:step], values[-1]]


def batch_sweep_figure(table: TtaTable) -> Figure | None:
    """`tbd sweep --tta`: throughput and time to target against batch size, on one batch axis.

    Args: table: a "tbd" table whose systems are batch sizes (`global_batch_size`); each system's
        `samples_per_s` (median epoch of the runs counted) and `time_to_target_s` (olympic mean;
        a batch without one is marked n/a), its converged runs' min and max as the bar of the point.
    Returns: the Figure, or None for a table that is not a batch sweep.
    """
    every = [s for s in table.systems if s.global_batch_size is not None]
    if table.source != "tbd" or len({s.global_batch_size for s in every}) < 2:
        return None
    points = every[:MAX_SYSTEMS]
    fig = new_figure(9.5, 4.5)
    ax = fig.add_subplot()
    batch = [s.global_batch_size for s in points]
    ax.plot(batch, [math.nan if s.samples_per_s is None else s.samples_per_s for s in points],
            color=SERIES_COLOURS[0], marker="o", label="throughput (samples/s)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(batch, [f"{b:.0f}" for b in batch])
    ax.set_xlabel("batch size")
    ax.set_ylabel("throughput (samples/s)", color=SERIES_COLOURS[0])
    ax.set_ylim(bottom=0)
    right = ax.twinx()
    minutes = [math.nan if s.time_to_target_s is None else s.time_to_target_s for s in points]
    low = [0.0 if s.time_min_s is None or s.time_to_target_s is None else s.time_to_target_s - s.time_min_s
           for s in points]
    high = [0.0 if s.time_max_s is None or s.time_to_target_s is None else s.time_max_s - s.time_to_target_s
            for s in points]
    right.errorbar(batch, minutes, yerr=[low, high], color=SERIES_COLOURS[1], marker="s", capsize=4,
                   label="time to target (s): olympic mean, bar min to max")
    right.set_ylabel("time to target (s)", color=SERIES_COLOURS[1])
    right.set_ylim(bottom=0)
    ax.set_title(printable(table_title(table, "Throughput and time to target against batch size")), loc="left")
    ax.grid(True, alpha=0.3)
    handles = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    ax.legend(handles, [h.get_label() for h in handles], loc="upper left", fontsize="small")
    add_caption(fig, [printable(target_text(table))] + [
        printable(f"batch {s.global_batch_size:.0f}: no time to target — {s.score_reason or NA}")
        for s in points if s.time_to_target_s is None] + count_left_out(len(points), len(every), "batch sizes"))
    return fig


def table_title(table: TtaTable, what: str) -> str:
    """"<what> — resnet (MLPerf Training 4.0.0)", printable (not yet escaped for matplotlib)."""
    source = SOURCE_NAMES.get(table.source, table.source)
    if table.ruleset:
        source += f" {table.ruleset}"
    return printable(f"{what} — {table.benchmark} ({source})")


def is_inference(table: TtaTable) -> bool:
    """Whether the table ranks inference (every system scored in ms per item) rather than time to train."""
    return bool(table.systems) and all(s.score_unit == "ms" for s in table.systems)


def target_text(table: TtaTable) -> str:
    """"target 0.759 eval_accuracy (MLPerf compliance rules)", printable; "no target" when there is none."""
    if table.target is None:
        return "no target"
    metric = f" {table.metric}" if table.metric else ""
    source = f" ({table.target_source})" if table.target_source else ""
    return printable(f"target {fmt_sig(table.target)}{metric}{source}")


def system_colour(index: int) -> str:
    """The colour of the table's `index`-th system (and of its runs), the same in every figure."""
    return SERIES_COLOURS[index % len(SERIES_COLOURS)]


def system_tick(system: TtaSystem) -> str:
    """A system's tick label: its label shortened, and "8 × H100" on a line beneath
    when the record names the accelerator (each line made plain on its own: `printable` would escape the break)."""
    lines = [shorten_middle(printable(system.label), _LABEL_CHARS)]
    if system.accelerator or system.accelerator_count is not None:
        count = f"{system.accelerator_count} × " if system.accelerator_count is not None else ""
        lines.append(shorten_middle(printable(f"{count}{system.accelerator or 'accelerators'}"), _LABEL_CHARS))
    return "\n".join(printable(line) for line in lines)


def abbreviate(reason: str | None, chars: int = _REASON_CHARS) -> str:
    """"n/a — reason" cut to `chars` characters at its end (the caption has it whole)."""
    text = na(reason)
    return text if len(text) <= chars else text[:chars - len(ELLIPSIS)].rstrip() + ELLIPSIS


# -- time to target ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Panel:
    """One row of bars of the time figure: what each system's bar is, in which unit, with which ratio."""

    title: str
    axis_label: str
    value: Callable[[TtaSystem], float | None]
    reason: Callable[[TtaSystem], str | None]
    ratio: Callable[[TtaSystem], float | None]
    size: float  # record units per drawn unit
    unit: str  # the drawn unit, written after each bar's value


def _panels(table: TtaTable) -> list[_Panel]:
    systems = table.systems
    panels = []
    if is_inference(table):
        panels.append(_Panel("Latency per item", "latency per item (ms)", lambda s: s.latency_ms,
                             lambda s: s.score_reason, lambda s: s.ratio_time, 1, "ms"))
        if any(s.cost_per_item_usd is not None for s in systems):
            panels.append(_Panel("Cost per item", "cost per item (USD)", lambda s: s.cost_per_item_usd,
                                 lambda s: s.cost_reason, lambda s: s.ratio_cost, 1, "USD"))
        return panels
    size, unit = time_unit(s.time_to_target_s for s in systems)
    panels.append(_Panel("Time to target", f"time to target ({unit})", lambda s: s.time_to_target_s,
                         lambda s: s.score_reason, lambda s: s.ratio_time, size, unit))
    if any(s.energy_j is not None for s in systems):
        panels.append(_Panel("Energy to target", "energy to target (MJ)", lambda s: s.energy_j,
                             lambda s: s.energy_reason, lambda s: s.ratio_energy, 1e6, "MJ"))
    if any(s.cost_usd is not None for s in systems):
        panels.append(_Panel("Cost to target", "cost to target (USD)", lambda s: s.cost_usd,
                             lambda s: s.cost_reason, lambda s: s.ratio_cost, 1, "USD"))
    return panels


def time_to_target_figure(table: TtaTable) -> Figure:
    """Each system's time to target as horizontal bars, the first system on top; energy and cost beside it.

    Args: table: one TtaTable; a training table draws `time_to_target_s` in minutes or hours
        (`time_unit`), plus `energy_j` (kJ) and `cost_usd` panels when a system has one; an inference
        table (scores in ms) draws `latency_ms`, plus `cost_per_item_usd`. Each bar is labelled with
        its value and the record's ratio to the first system; a null value leaves its row empty with
        "n/a — reason" (abbreviated) and the whole reason in the caption.
    Returns: the Figure; a "n/a" figure for a table without systems.
    """
    what = "Latency per item" if is_inference(table) else "Time to target"
    title = table_title(table, what)
    if not table.systems:
        return empty_figure(printable(title), na("the table has no system"))
    panels = _panels(table)
    systems = table.systems[:MAX_SYSTEMS]
    count = len(systems)
    width = 9.5 + 3.5 * (len(panels) - 1)
    fig = new_figure(width, 1.5 + count * 0.5)
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False,
                        width_ratios=[3] + [2] * (len(panels) - 1))[0]
    captions = [target_text(table)]
    ratios = False
    for ax, panel in zip(axes, panels):
        captions += _bar_panel(ax, systems, panel, room=0.3 if ax is axes[0] else 0.55)
        ratios = ratios or any(panel.value(s) is not None and panel.ratio(s) is not None for s in systems)
    axes[0].set_yticks(range(count), [system_tick(s) for s in systems])
    axes[0].set_ylim(count - 0.5, -0.5)  # the first system (the reference of every ratio) on top
    fig.suptitle(printable(title), x=0.01, ha="left")
    if ratios:
        captions.append(f"ratios (x) are to {table.systems[0].label}")
    captions += count_left_out(count, len(table.systems), "systems (the table's last)")
    add_caption(fig, [printable(line) for line in captions])
    return fig


def _bar_panel(ax: Axes, systems: Sequence[TtaSystem], panel: _Panel, room: float) -> list[str]:
    """Draw `panel`'s bar of each system on `ax` (`room`: the share of the x axis kept right of the longest bar
    for its label; a narrow side panel needs more); returns the caption lines of the null ones."""
    captions = []
    for j, system in enumerate(systems):
        value = panel.value(system)
        if value is None:
            ax.text(0, j, " " + printable(abbreviate(panel.reason(system))), va="center", fontsize=8,
                    color=MISSING_COLOUR)
            captions.append(f"{system.label}: {panel.title.lower()} {na(panel.reason(system))}")
            continue
        ratio = panel.ratio(system)
        text = f"{fmt_sig(value / panel.size)} {panel.unit}" + (f" ({fmt_ratio(ratio)})" if ratio is not None else "")
        bars = ax.barh([j], [value / panel.size], height=0.6, color=system_colour(j))
        ax.bar_label(bars, [printable(text)], fontsize=8, padding=3)
    ax.set_title(printable(panel.title), loc="left", fontsize=10)
    ax.set_xlabel(printable(panel.axis_label))
    ax.grid(True, axis="x", alpha=0.3)
    ax.margins(x=room)
    ax.set_xlim(left=0)
    return captions


# -- accuracy and throughput against time --------------------------------------------------------------


def _drawn_runs(table: TtaTable, has: Callable[[TtaRun], bool]) -> list[tuple[int, TtaSystem, TtaRun]]:
    """(system index, system, run) of every run that `has` something to draw, in the table's order."""
    return [(j, s, r) for j, s in enumerate(table.systems) for r in s.runs if has(r)]


def _capped(drawn: list[tuple[int, TtaSystem, TtaRun]]) -> tuple[list[tuple[int, TtaSystem, TtaRun]], list[str]]:
    """The first `MAX_RUN_LINES` of `drawn`, and the caption lines saying what was left out or thinned."""
    lines = count_left_out(min(len(drawn), MAX_RUN_LINES), len(drawn), "runs (the table's last)")
    return drawn[:MAX_RUN_LINES], lines


def _run_legend(ax: Axes, drawn: Sequence[tuple[int, TtaSystem, TtaRun]], extra: Sequence = ()) -> None:
    """A legend beside the plot: one entry per system drawn (its colour), and the dropped runs' style if any."""
    seen: dict[int, TtaSystem] = {}
    for j, system, _ in drawn:
        seen.setdefault(j, system)
    handles = [legend_line(color=system_colour(j), label=printable(shorten_middle(printable(s.label), _LABEL_CHARS)))
               for j, s in list(seen.items())[:MAX_LEGEND_SYSTEMS]]
    if len(seen) > MAX_LEGEND_SYSTEMS:
        handles.append(legend_line(color="none", label=f"{len(seen) - MAX_LEGEND_SYSTEMS} more systems"))
    if any(not run.used for _, _, run in drawn):
        handles.append(legend_line(color="#777777", label="run dropped from the score", **DROPPED_STYLE))
    handles += extra
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)


def _metric_label(table: TtaTable) -> str:
    if table.metric:
        return printable(table.metric)
    return "eval_accuracy (the benchmark's quality metric)" if table.source == "mlperf" else "accuracy"


def accuracy_figure(table: TtaTable) -> Figure | None:
    """Each run's evaluations against wall time since the run started, the target as a horizontal line.

    Args: table: one TtaTable; every run with `accuracy` points is one line (x: `seconds` in minutes or
        hours, y: `value`), in its system's colour, dashed and faded when dropped from the score; the
        target (when the table has one) is a dotted line labelled with its value and source.
    Returns: the Figure, or None when no run logged an evaluation.
    """
    drawn, left_out = _capped(_drawn_runs(table, lambda r: bool(r.accuracy)))
    if not drawn:
        return None
    size, unit = time_unit(p.seconds for _, _, run in drawn for p in run.accuracy)
    fig = new_figure(9.5, 4.8)
    ax = fig.add_subplot()
    for j, _, run in drawn:
        style = USED_STYLE if run.used else DROPPED_STYLE
        points = _thinned(run.accuracy)
        ax.plot([p.seconds / size for p in points], [p.value for p in points], color=system_colour(j),
                marker="o", markersize=3, linewidth=1.4, label=printable(run.file), **style)
    extra = []
    if table.target is not None:
        from matplotlib.transforms import blended_transform_factory  # loaded with the first figure, as canvas does

        ax.axhline(table.target, color=TARGET_COLOUR, linestyle=":", linewidth=1.3, label="target", zorder=1)
        where = blended_transform_factory(ax.transAxes, ax.transData)
        label = shorten_middle(target_text(table), _TARGET_SOURCE_CHARS)
        ax.text(0.01, table.target, printable(label), transform=where, va="bottom", ha="left", fontsize=8,
                color=TARGET_COLOUR)
        extra.append(legend_line(color=TARGET_COLOUR, linestyle=":", label="target"))
    ax.set_xlabel(f"time since the run started ({unit})")
    ax.set_ylabel(printable(_metric_label(table)))
    ax.set_xlim(left=0)
    ax.set_title(printable(table_title(table, "Accuracy against wall time")), loc="left")
    ax.grid(True, alpha=0.3)
    _run_legend(ax, drawn, extra)
    captions = [target_text(table)] if table.target is not None else ["no target: the table names none"]
    captions.append(f"{len(drawn)} runs with evaluations: one line each, a system's runs in its colour")
    captions += left_out + _thinned_caption(run.accuracy for _, _, run in drawn)
    add_caption(fig, [printable(line) for line in captions])
    return fig


def _thinned_caption(lines: Iterable[Sequence]) -> list[str]:
    """The caption line of runs drawn thinned (`_thinned`), or []."""
    thinned = sum(1 for points in lines if len(points) > MAX_LINE_POINTS)
    return [f"{thinned} runs with more than {MAX_LINE_POINTS:,} points drawn thinned (every k-th point)"] \
        if thinned else []


def _has_rate(run: TtaRun) -> bool:
    return any(block.samples_per_s is not None for block in run.throughput)


def throughput_figure(table: TtaTable) -> Figure | None:
    """Each run's samples per second against its block or epoch index, one line per run.

    Args: table: one TtaTable; a run is drawn when a block of its `throughput` has `samples_per_s`
        (a block without one breaks its line); runs whose blocks have no samples count are named in
        the caption with the run's `samples_reason`.
    Returns: the Figure, or None when no run has a block with samples per second.
    """
    drawn, left_out = _capped(_drawn_runs(table, _has_rate))
    if not drawn:
        return None
    fig = new_figure(9.5, 4.5)
    ax = fig.add_subplot()
    for j, _, run in drawn:
        style = USED_STYLE if run.used else DROPPED_STYLE
        blocks = _thinned(run.throughput)
        rates = [math.nan if b.samples_per_s is None else b.samples_per_s for b in blocks]
        ax.plot([b.index for b in blocks], rates, color=system_colour(j), marker="o", markersize=3,
                linewidth=1.4, label=printable(run.file), **style)
    block = "the first epoch of each logged block" if table.source == "mlperf" else "epoch"
    ax.set_xlabel(f"epoch ({block})")
    ax.set_ylabel("throughput (samples/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(printable(table_title(table, "Throughput per epoch")), loc="left")
    ax.grid(True, alpha=0.3)
    _run_legend(ax, drawn)
    captions = [f"{system.label}, {run.file}: no samples per second — {run.samples_reason or NA}"
                for system in table.systems for run in system.runs if run.throughput and not _has_rate(run)]
    captions += left_out + _thinned_caption(run.throughput for _, _, run in drawn)
    add_caption(fig, [printable(line) for line in captions])
    return fig
