"""The figures of a batch-size sweep (a `Sweep`): throughput, utilization and memory against the batch.

A point that ran out of memory or failed has no figures: it is drawn as a red cross on the axis at
its batch, labelled "OOM" or "failed", never as a value of zero, and its reason goes in the caption.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tbd.core.profile_result import MEMORY_CATEGORIES
from tbd.core.sweep_result import Sweep, SweepPoint
from tbd.reports.figures.canvas import (
    CATEGORY_COLOURS,
    SERIES_COLOURS,
    add_caption,
    byte_unit,
    category_label,
    empty_figure,
    legend_patch,
    mark_missing,
    na,
    new_figure,
    point_label,
)
from tbd.reports.printable import printable
from tbd.reports.terminal import fmt_bytes

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: The utilization series of a sweep: the point's field and how it is labelled.
UTILIZATION_SERIES = (("gpu_busy_pct", "GPU busy %"), ("flop_util_pct", "FLOP utilization %"),
                      ("cpu_util_pct", "CPU utilization %"))


def sweep_title(sweep: Sweep, what: str) -> str:
    """"<what> — model (framework) on device name" for a sweep's figures."""
    device = sweep.device + (f" ({sweep.device_name})" if sweep.device_name else "")
    return printable(f"{what} — {sweep.model} ({sweep.framework}) on {device}")


def _batch_axis(ax: Axes, sweep: Sweep) -> None:
    """A log2 x axis with a tick at every batch of the sweep, labelled at the powers of two and at
    the largest batch that ran (a bisection's batches, 416, 420, 421, ..., would print over each other)."""
    ax.set_xscale("log", base=2)
    batches = [p.batch for p in sweep.points]
    edge = sweep.largest_fitting_batch
    labelled = [b for b in batches if b & (b - 1) == 0 and (edge is None or not edge / 1.15 < b < edge * 1.15)]
    if edge is not None:
        labelled = sorted({*labelled, edge})
    ax.minorticks_off()
    ax.set_xticks(labelled, [str(b) for b in labelled])
    ax.set_xticks(batches, minor=True)
    ax.set_xlabel("batch size (log2 scale)")
    if len(batches) == 1:
        ax.set_xlim(batches[0] / 2, batches[0] * 2)


def _mark_missing_points(ax: Axes, points: Sequence[SweepPoint], missing: Callable[[SweepPoint], bool],
                         x_of: Callable[[int, SweepPoint], float]) -> None:
    """A cross for each point `missing` says has no figure; a run of neighbours with one status gets one label."""
    previous = None
    for i, p in enumerate(points):
        if not missing(p):
            previous = None
            continue
        label = point_label(p.status)
        mark_missing(ax, x_of(i, p), label if label != previous else "")
        previous = label


def _failed_captions(points: Sequence[SweepPoint]) -> list[str]:
    """The points that produced no figures: the out-of-memory ones in one line (the reason is the same
    sentence for each), every other failure on its own line with its reason."""
    oom = [p.batch for p in points if p.status == "oom"]
    lines = [f"{point_label('oom')} at batch {', '.join(map(str, oom))}: ran out of memory (sweep.json has each "
             "point's reason)"] if oom else []
    return lines + [f"batch {p.batch}: {point_label(p.status)}" + (f" — {printable(p.reason)}" if p.reason else "")
                    for p in points if p.status == "failed"]


def sweep_throughput_figure(sweep: Sweep) -> Figure:
    """Throughput against batch size (log2 x axis); points without one marked with their status.

    Args: sweep: a finished Sweep; each point's `throughput` is drawn (partial points hollow: a
        timing window cut short gives a lower bound), points with none as "OOM" / "failed" / "n/a".
    Returns: the Figure; a "n/a" figure for a sweep without points.
    """
    title = sweep_title(sweep, "Throughput")
    if not sweep.points:
        return empty_figure(title, na("the sweep has no points"))
    fig = new_figure(8.0, 4.5)
    ax = fig.add_subplot()
    drawn = [p for p in sweep.points if p.throughput is not None]
    unit = next((p.throughput_unit for p in sweep.points if p.throughput_unit), None) or "samples/s"
    ax.plot([p.batch for p in drawn], [p.throughput for p in drawn], color=SERIES_COLOURS[0], marker="o",
            label=printable(unit), zorder=3)
    partial = [p for p in drawn if p.status == "partial"]
    if partial:
        ax.plot([p.batch for p in partial], [p.throughput for p in partial], linestyle="none", marker="o",
                markersize=10, markerfacecolor="white", color=SERIES_COLOURS[0], label="partial run", zorder=4)
    _mark_missing_points(ax, sweep.points, lambda p: p.throughput is None, lambda i, p: p.batch)
    _batch_axis(ax, sweep)
    ax.set_ylim(bottom=0)
    ax.set_ylabel(f"throughput ({printable(unit)})")
    ax.set_title(title, loc="left")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    captions = _failed_captions(sweep.points)
    captions += [f"batch {p.batch}: throughput {na(p.reasons.get('throughput'))}" for p in sweep.points
                 if p.throughput is None and p.status not in ("oom", "failed")]
    if sweep.largest_fitting_batch is not None:
        captions.append(f"largest batch that ran: {sweep.largest_fitting_batch}")
    add_caption(fig, captions)
    return fig


def sweep_utilization_figure(sweep: Sweep) -> Figure:
    """GPU busy %, FLOP utilization % and CPU utilization % against batch size.

    Args: sweep: a finished Sweep; a series with no value at any point is named in the legend as
        "GPU busy %: n/a" and its reason is in the caption; points without figures marked by status.
    Returns: the Figure; a "n/a" figure for a sweep without points.
    """
    title = sweep_title(sweep, "Utilization")
    if not sweep.points:
        return empty_figure(title, na("the sweep has no points"))
    fig = new_figure(8.0, 4.5)
    ax = fig.add_subplot()
    captions = _failed_captions(sweep.points)
    for (key, label), colour in zip(UTILIZATION_SERIES, SERIES_COLOURS):
        drawn = [p for p in sweep.points if getattr(p, key) is not None]
        if not drawn:
            # The legend only names the missing series; its reason (often a sentence) goes in the
            # caption, which wraps: a long legend entry squeezes the plot to nothing.
            reason = next((p.reasons[key] for p in sweep.points if p.reasons.get(key)), None)
            ax.plot([], [], color=colour, marker="o", label=f"{label}: n/a")
            captions.append(f"{label}: {na(reason)}")
            continue
        ax.plot([p.batch for p in drawn], [getattr(p, key) for p in drawn], color=colour, marker="o", label=label)
    _mark_missing_points(ax, sweep.points, lambda p: p.status in ("oom", "failed"), lambda i, p: p.batch)
    _batch_axis(ax, sweep)
    ax.set_ylim(0, 105)
    ax.set_ylabel("utilization (%)")
    ax.set_title(title, loc="left")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    add_caption(fig, captions)
    return fig


def sweep_memory_figure(sweep: Sweep) -> Figure:
    """Memory by category per batch as stacked bars (the paper's Figure 7), the allocator's peak as a marker.

    Args: sweep: a finished Sweep; each point's `memory_bytes` categories are stacked (each one's own
        peak: they need not coincide, so the stack may pass the allocator's peak); null categories are
        left out and named in the caption; points without figures marked by status.
    Returns: the Figure; a "n/a" figure when no point has a byte count.
    """
    title = sweep_title(sweep, "Memory by category")
    known = [v for p in sweep.points for v in p.memory_bytes.values()]
    if all(v is None for v in known):
        return empty_figure(title, na("no point has a memory figure"))
    size, unit = byte_unit(known)
    fig = new_figure(8.5, 4.8)
    ax = fig.add_subplot()
    for i, point in enumerate(sweep.points):
        _stack_point(ax, i, point, size)
    _mark_missing_points(ax, sweep.points, _no_memory, lambda i, p: i)
    handles = [legend_patch(color=CATEGORY_COLOURS[c], label=category_label(c)) for c in MEMORY_CATEGORIES]
    peaks = [(i, p.memory_bytes.get("allocator_peak")) for i, p in enumerate(sweep.points)]
    peaks = [(i, v) for i, v in peaks if v is not None]
    if peaks:
        handles += ax.plot([i for i, _ in peaks], [v / size for _, v in peaks], linestyle="none", marker="D",
                           color="#333333", markersize=6, label="allocator peak", zorder=4)
    ax.set_xticks(range(len(sweep.points)), [str(p.batch) for p in sweep.points])
    ax.set_xlabel("batch size")
    ax.set_ylabel(f"bytes ({unit}), each category's own peak")
    ax.set_title(title, loc="left")
    ax.grid(True, axis="y", alpha=0.3)
    ax.margins(y=0.3)  # room above the tallest bar for its upright peak label
    ax.set_ylim(bottom=0)
    # One legend entry per category, in stacking order, whichever points have it.
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    add_caption(fig, _failed_captions(sweep.points) + _null_memory_captions(sweep.points))
    return fig


def _no_memory(point: SweepPoint) -> bool:
    return point.status in ("oom", "failed") or all(point.memory_bytes.get(c) is None for c in MEMORY_CATEGORIES)


def _stack_point(ax: Axes, position: int, point: SweepPoint, size: int) -> None:
    """One stacked bar of a point's known categories at x = `position`; a status marker if it has none."""
    if _no_memory(point):
        return  # marked by _mark_missing_points
    bottom = 0.0
    for name in MEMORY_CATEGORIES:
        value = point.memory_bytes.get(name)
        if value is None:
            continue
        ax.bar([position], [value / size], bottom=bottom, color=CATEGORY_COLOURS[name], width=0.6,
               label="_" + name)
        bottom += value / size  # the stack's drawn top: where the next category starts
    peak = point.memory_bytes.get("allocator_peak")
    if peak is not None:  # the label goes above whichever is higher, the stack or the peak's marker
        # Upright: a bisection's neighbouring bars would print their labels over each other.
        ax.annotate(f"peak {fmt_bytes(peak)}", (position, max(bottom, peak / size)), xytext=(0, 6),
                    textcoords="offset points", ha="center", va="bottom", rotation=90, fontsize=7)


def _null_memory_captions(points: Sequence[SweepPoint]) -> list[str]:
    """Null categories of the points that ran, by category and reason: "workspace n/a at batch 8, 16 — why"."""
    groups: dict[tuple[str, str | None], list[int]] = {}
    for p in points:
        if p.status in ("oom", "failed"):
            continue
        for name in MEMORY_CATEGORIES:
            if p.memory_bytes.get(name) is None:
                groups.setdefault((name, p.reasons.get(f"memory.{name}")), []).append(p.batch)
    return [f"{category_label(name)} n/a at batch {', '.join(map(str, batches))}"
            + (f" — {printable(reason)}" if reason else "") for (name, reason), batches in groups.items()]
