"""The figures of a comparison (a `Comparison`): metric ratios, op times, memory by category, per run.

The first run is the reference: ratios are the record's own (`MetricComparison.ratios`), drawn as
bars against a line at 1; nothing is divided here. A null value or ratio has no bar, "n/a" in its
place and the reason in the caption.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tbd.core.comparison import ComparedRun, Comparison, MetricComparison
from tbd.core.profile_result import MEMORY_CATEGORIES
from tbd.reports.comparison_text import fmt_metric, fmt_ratio, fmt_ratio_cell
from tbd.reports.console import shorten_middle
from tbd.reports.figures.canvas import (
    CATEGORY_COLOURS,
    MISSING_COLOUR,
    SERIES_COLOURS,
    add_caption,
    byte_unit,
    category_label,
    count_left_out,
    empty_figure,
    legend_patch,
    na,
    new_figure,
)
from tbd.reports.numbers import fmt_duration
from tbd.reports.printable import printable
from tbd.reports.terminal import fmt_bytes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Ops drawn in the op figure: the record's first (largest absolute delta first).
TOP_OPS = 10
#: Runs drawn side by side (the first, the reference, included) and metrics drawn as groups of bars: the caption
#: counts the rest, which the comparison's table and JSON keep.
MAX_RUNS = 8
MAX_METRICS = 30
_OP_NAME_CHARS = 40
_RUN_NAME_CHARS = 56
MEMORY_PREFIX = "memory."


def run_name(run: ComparedRun) -> str:
    """"A: resnet50 · NVIDIA H100 80GB HBM3 · batch 64", shortened for a tick label or legend; an
    unreliable run ends in "(UNRELIABLE)", never shortened away."""
    mark = " (UNRELIABLE)" if run.reliable is False else ""
    name = run.name or run.device_name or run.device or "n/a"
    return shorten_middle(printable(f"{run.label}: {name}"), _RUN_NAME_CHARS - len(mark)) + mark


def _run_captions(comparison: Comparison) -> list[str]:
    """Caption lines every comparison figure carries: runs that are not the same workload, unreliable ones."""
    ref = comparison.runs[0].label if comparison.runs else "the first run"
    lines = [f"{g.label} is not the same workload as {ref}: its ratios are not speed-ups" for g in comparison.gaps
             if not g.comparable]
    lines += [f"{r.label} is UNRELIABLE: {r.quality_warnings[0] if r.quality_warnings else 'see its profile'}"
              for r in comparison.runs if r.reliable is False]
    return [printable(line) for line in lines]


def compare_title(comparison: Comparison, what: str) -> str:
    """"<what> — A vs B vs C"."""
    labels = [r.label for r in comparison.runs[:MAX_RUNS]]
    more = len(comparison.runs) - len(labels)
    return printable(f"{what} — " + " vs ".join(labels) + (f" and {more} more" if more > 0 else ""))


def _left_out(comparison: Comparison) -> list[str]:
    """The caption line counting the runs a figure leaves out (`MAX_RUNS`)."""
    return count_left_out(min(len(comparison.runs), MAX_RUNS), len(comparison.runs), "runs (the last given)")


def compare_metrics_figure(comparison: Comparison) -> Figure:
    """Each metric's ratio to the first run as grouped horizontal bars, each bar labelled with its value.

    Args: comparison: a finished Comparison; every metric but the `memory.*` ones (the memory
        figure draws those) is a group, one bar per run, length = the record's ratio.
    Returns: the Figure; a "n/a" figure when there is no such metric.
    """
    # A figure no run has (NVML on CPU runs, throughput of traces) says nothing side by side.
    every = [m for m in comparison.metrics
             if not m.key.startswith(MEMORY_PREFIX) and any(v is not None for v in m.values)]
    metrics = every[:MAX_METRICS]
    title = compare_title(comparison, f"Ratio to {comparison.runs[0].label if comparison.runs else 'the first run'}")
    if not metrics or not comparison.runs:
        return empty_figure(title, na("no metric to compare"))
    shown = comparison.runs[:MAX_RUNS]
    runs = len(shown)
    fig = new_figure(9.5, 1.4 + len(metrics) * (0.32 * runs + 0.35))
    ax = fig.add_subplot()
    band = 0.8 / runs  # each group shares 0.8 of the unit between metrics
    captions = []
    for i, metric in enumerate(metrics):
        for j in range(runs):
            y = i - 0.4 + band * (j + 0.5)
            captions += _ratio_bar(ax, y, band, metric, shown, j)
    ax.axvline(1.0, color="#333333", linewidth=1, linestyle="--")
    ax.set_yticks(range(len(metrics)), [_metric_label(m) for m in metrics])
    ax.set_ylim(len(metrics) - 0.5, -0.5)  # the record's first metric on top, rows without bars kept inside
    ax.set_xlabel(f"ratio to run {printable(comparison.runs[0].label)} (1 = the same)")
    ax.set_title(title, loc="left")
    ax.grid(True, axis="x", alpha=0.3)
    ax.margins(x=0.35)  # room right of the longest bar for its value label
    ax.set_xlim(left=0)
    ax.legend(handles=[legend_patch(color=SERIES_COLOURS[j % len(SERIES_COLOURS)], label=run_name(r))
                       for j, r in enumerate(shown)], fontsize=8, loc="lower right")
    if any(m.ratio_low for m in metrics):
        captions.append("whiskers: the ratio's 95 % interval, from both runs' intervals (an arrow: unbounded above)")
    captions += _left_out(comparison) + count_left_out(len(metrics), len(every), "metrics (the last)")
    add_caption(fig, [*_run_captions(comparison), *captions])
    return fig


def _metric_label(metric: MetricComparison) -> str:
    """A metric's tick label: its name and which way is better."""
    better = {True: "higher is better", False: "lower is better"}.get(metric.higher_is_better)
    return printable(metric.label) + (f"\n({better})" if better else "")


def _ratio_bar(ax, y: float, height: float, metric: MetricComparison, runs: list[ComparedRun], j: int) -> list[str]:
    """Draw run j's bar of `metric` at `y`, labelled "value (ratio)"; returns caption lines for its nulls."""
    value, ratio = metric.values[j], metric.ratios[j]
    text = f"{fmt_metric(metric, value, j)} ({fmt_ratio(ratio)})"
    if ratio is None:
        ax.text(0, y, f" {text}", va="center", fontsize=7, color=MISSING_COLOUR)
        reason = metric.reasons[j] if value is None else f"no ratio: {runs[0].label}'s value is null or zero"
        return [f"{printable(metric.label)}, run {printable(runs[j].label)}: {na(reason)}"]
    low = metric.ratio_low[j] if metric.ratio_low else None
    high = metric.ratio_high[j] if metric.ratio_high else None
    if low is not None:
        text = f"{fmt_metric(metric, value, j)} ({fmt_ratio_cell(metric, j)})"
    bars = ax.barh([y], [ratio], height=height * 0.9, color=SERIES_COLOURS[j % len(SERIES_COLOURS)])
    if low is not None and j > 0:
        # The record's interval: to its upper bound, or an arrow past the bar where it is unbounded.
        right = high if high is not None else ratio * 1.5
        ax.errorbar([ratio], [y], xerr=[[ratio - low], [right - ratio]], fmt="none", ecolor="#222222", capsize=3,
                    linewidth=1, zorder=3)
        if high is None:
            ax.annotate("", xy=(right * 1.1, y), xytext=(right, y),
                        arrowprops={"arrowstyle": "->", "color": "#222222", "linewidth": 1})
    # A white box keeps the label readable where it crosses the line at 1.
    ax.bar_label(bars, [text], fontsize=7, padding=3, bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.6})
    return []


def compare_ops_figure(comparison: Comparison, top: int = TOP_OPS) -> Figure:
    """Time per traced iteration of the top ops, each run's bar side by side (horizontal bars, ms).

    Args: comparison: a finished Comparison; its first `top` ops (the record orders them by the
        largest absolute difference) are drawn; an op a run lacks gets "absent" instead of a bar.
    Returns: the Figure; a "n/a" figure when the comparison has no ops.
    """
    ops = comparison.ops[:top]
    title = compare_title(comparison, "Time per iteration by launching op")
    if not ops or not comparison.runs:
        return empty_figure(title, na("no op times to compare"))
    shown = comparison.runs[:MAX_RUNS]
    runs = len(shown)
    fig = new_figure(9.5, 1.4 + len(ops) * (0.28 * runs + 0.3))
    ax = fig.add_subplot()
    band = 0.8 / runs
    for i, op in enumerate(ops):
        for j, seconds in enumerate(op.time_per_iteration_s[:runs]):
            y = i - 0.4 + band * (j + 0.5)
            if seconds is None:
                ax.text(0, y, " absent", va="center", fontsize=7, color=MISSING_COLOUR)
                continue
            bars = ax.barh([y], [seconds * 1000], height=band * 0.9, color=SERIES_COLOURS[j % len(SERIES_COLOURS)])
            ax.bar_label(bars, [fmt_duration(seconds)], fontsize=7, padding=3)
    ax.set_yticks(range(len(ops)), [shorten_middle(printable(op.op), _OP_NAME_CHARS) for op in ops])
    ax.invert_yaxis()
    ax.set_xlabel("kernel (op self) time per traced iteration (ms)")
    ax.set_title(title, loc="left")
    ax.grid(True, axis="x", alpha=0.3)
    ax.margins(x=0.15)
    ax.set_xlim(left=0)
    ax.legend(handles=[legend_patch(color=SERIES_COLOURS[j % len(SERIES_COLOURS)], label=run_name(r))
                       for j, r in enumerate(shown)], fontsize=8, loc="lower right")
    captions = [f"the {len(ops)} ops with the largest difference of {len(comparison.ops)}"] \
        if len(comparison.ops) > len(ops) else []
    captions += _left_out(comparison)
    add_caption(fig, [*_run_captions(comparison), *captions])
    return fig


def compare_memory_figure(comparison: Comparison) -> Figure:
    """Memory by category per run as stacked bars, from the `memory.*` metrics; the allocator's peak as a marker.

    Args: comparison: a finished Comparison; `memory.<category>` metrics are stacked per run (null
        ones left out and named in the caption), `memory.allocator_peak` marked above.
    Returns: the Figure; a "n/a" figure when no memory metric is known.
    """
    by_key = {m.key[len(MEMORY_PREFIX):]: m for m in comparison.metrics if m.key.startswith(MEMORY_PREFIX)}
    title = compare_title(comparison, "Memory by category")
    known = [v for m in by_key.values() for v in m.values]
    if all(v is None for v in known) or not comparison.runs:
        return empty_figure(title, na("no memory figure to compare"))
    size, unit = byte_unit(known)
    fig = new_figure(8.5, 4.8)
    ax = fig.add_subplot()
    captions = []
    shown = comparison.runs[:MAX_RUNS]
    for j, run in enumerate(shown):
        bottom = 0.0
        for name in MEMORY_CATEGORIES:
            metric = by_key.get(name)
            value = metric.values[j] if metric else None
            if value is None:
                if metric:
                    captions.append(f"run {printable(run.label)}: {category_label(name)} {na(metric.reasons[j])}")
                continue
            ax.bar([j], [value / size], bottom=bottom, color=CATEGORY_COLOURS[name], width=0.55, label="_" + name)
            bottom += value / size  # the stack's drawn top: where the next category starts
    handles = [legend_patch(color=CATEGORY_COLOURS[c], label=category_label(c))
               for c in MEMORY_CATEGORIES if c in by_key]
    peak = by_key.get("allocator_peak")
    if peak:
        peaks = [(j, v) for j, v in enumerate(peak.values[:len(shown)]) if v is not None]
        handles += ax.plot([j for j, _ in peaks], [v / size for _, v in peaks], linestyle="none", marker="D",
                           color="#333333", label="allocator peak", zorder=4)
        for j, v in peaks:
            ax.annotate(fmt_bytes(v), (j, v / size), xytext=(0, 7), textcoords="offset points", ha="center",
                        fontsize=8)
    ax.set_xticks(range(len(shown)), [run_name(r) for r in shown])
    ax.set_ylabel(f"bytes ({unit}), each category's own peak")
    ax.set_title(title, loc="left")
    ax.grid(True, axis="y", alpha=0.3)
    ax.margins(y=0.12)
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    add_caption(fig, [*_run_captions(comparison), *captions, *_left_out(comparison)])
    return fig
