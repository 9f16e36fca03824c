"""The figures of a batch-size sweep (a `Sweep`): throughput, utilization and memory against the batch.

A point that ran out of memory or failed has no figures: it is drawn as a red cross on the axis at
its batch, labelled "OOM" or "failed", never as a value of zero, and its reason goes in the caption.
The throughput carries each point's 95 % interval as an error bar (its `throughput_low` and
`throughput_high`); a point whose profile says its figures are unreliable is ringed in orange in every
figure and named in the caption.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from tbd.core.profile_result import MEMORY_CATEGORIES
from tbd.core.sweep_result import Sweep, SweepPoint
from tbd.reports.figures.canvas import (
    CATEGORY_COLOURS,
    SERIES_COLOURS,
    SPLIT_PARTS,
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
from tbd.reports.numbers import fmt_pct
from tbd.reports.printable import printable
from tbd.reports.terminal import fmt_bytes

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: The utilization series of a sweep: the point's field and how it is labelled.
#: A sweep's FLOP utilization whose highest point is below this gets its own axis (`sweep_utilization_figure`).
FLOP_OWN_AXIS_BELOW_PCT = 20.0
#: Points drawn, the sweep's first (a real sweep has tens): the caption counts the rest, which sweep.json keeps.
MAX_POINTS = 64
UTILIZATION_SERIES = (("gpu_busy_pct", "GPU busy %"), ("flop_util_pct", "FLOP utilization %"),
                      ("cpu_util_pct", "CPU utilization %"))


def sweep_title(sweep: Sweep, what: str) -> str:
    """"<what> — model (framework) on device name" for a sweep's figures."""
    device = sweep.device + (f" ({sweep.device_name})" if sweep.device_name else "")
    return printable(f"{what} — {sweep.model} ({sweep.framework}) on {device}")


def _capped(sweep: Sweep) -> tuple[Sweep, list[str]]:
    """The sweep with its first `MAX_POINTS` points, and the caption line counting the rest."""
    if len(sweep.points) <= MAX_POINTS:
        return sweep, []
    rest = sweep.points[MAX_POINTS:]
    return replace(sweep, points=sweep.points[:MAX_POINTS]), [
        f"{len(rest):,} more points not shown (batch {rest[0].batch} to {rest[-1].batch}; sweep.json has them all)"]


def _batch_axis(ax: Axes, sweep: Sweep) -> None:
    """A log2 x axis with a tick at every batch of the sweep, labelled at the powers of two and at
    the largest batch that ran (a bisection's batches, 416, 420, 421, ..., would print over each other)."""
    ax.set_xscale("log", base=2)
    batches = [p.batch for p in sweep.points]
    edge = sweep.largest_fitting_batch
    labelled = [b for b in batches if b & (b - 1) == 0 and (edge is None or not edge / 1.3 < b < edge * 1.3)]
    if edge is not None:
        labelled = sorted({*labelled, edge})
    ax.minorticks_off()
    ax.set_xticks(labelled, [str(b) for b in labelled])
    ax.set_xticks(batches, [""] * len(batches), minor=True)  # unlabelled: the log formatter would print "2^8"
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
    sweep, left_out = _capped(sweep)
    title = sweep_title(sweep, "Throughput")
    if not sweep.points:
        return empty_figure(title, na("the sweep has no points"))
    fig = new_figure(8.0, 4.5)
    ax = fig.add_subplot()
    drawn = [p for p in sweep.points if p.throughput is not None]
    unit = next((p.throughput_unit for p in sweep.points if p.throughput_unit), None) or "samples/s"
    ax.plot([p.batch for p in drawn], [p.throughput for p in drawn], color=SERIES_COLOURS[0], marker="o",
            label=printable(unit), zorder=3)
    barred = [p for p in drawn if p.throughput_low is not None and p.throughput_high is not None]
    if barred:
        ax.errorbar([p.batch for p in barred], [p.throughput for p in barred],
                    yerr=[[p.throughput - p.throughput_low for p in barred],
                          [p.throughput_high - p.throughput for p in barred]],
                    linestyle="none", ecolor=SERIES_COLOURS[0], elinewidth=1.2, capsize=4, label="95 % interval",
                    zorder=2)
    _ring_unreliable(ax, drawn, lambda p: p.throughput)
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
    unbarred = [p.batch for p in drawn if p.throughput_low is None]
    if unbarred:
        reason = next((p.reasons.get("throughput_interval") for p in drawn if p.throughput_low is None), None)
        captions.append(f"no interval at batch {', '.join(map(str, unbarred))}" + (f": {printable(reason)}"
                                                                                   if reason else ""))
    captions += _unreliable_captions(sweep.points)
    if sweep.largest_fitting_batch is not None:
        captions.append(f"largest batch that ran: {sweep.largest_fitting_batch}")
    add_caption(fig, captions + left_out)
    return fig


def sweep_utilization_figure(sweep: Sweep) -> Figure:
    """GPU busy %, FLOP utilization % and CPU utilization % against batch size.

    Args: sweep: a finished Sweep; a series with no value at any point is named in the legend as
        "GPU busy %: n/a" and its reason is in the caption; points without figures marked by status.
    Returns: the Figure; a "n/a" figure for a sweep without points.
    """
    sweep, left_out = _capped(sweep)
    title = sweep_title(sweep, "Utilization")
    if not sweep.points:
        return empty_figure(title, na("the sweep has no points"))
    fig = new_figure(8.0, 4.5)
    ax = fig.add_subplot()
    captions = _failed_captions(sweep.points)
    ringed = False
    flop = [p.flop_util_pct for p in sweep.points if p.flop_util_pct is not None]
    # FLOP utilization far below the others (0.02-2 % beside 90 % busy) is flat on their 0-100 axis: it
    # gets its own, on the right, scaled to its values.
    flop_axis = ax.twinx() if flop and max(flop) < FLOP_OWN_AXIS_BELOW_PCT else None
    for (key, label), colour in zip(UTILIZATION_SERIES, SERIES_COLOURS):
        target = flop_axis if key == "flop_util_pct" and flop_axis is not None else ax
        drawn = [p for p in sweep.points if getattr(p, key) is not None]
        if not drawn:
            # The legend only names the missing series; its reason (often a sentence) goes in the
            # caption, which wraps: a long legend entry squeezes the plot to nothing.
            reason = next((p.reasons[key] for p in sweep.points if p.reasons.get(key)), None)
            ax.plot([], [], color=colour, marker="o", label=f"{label}: n/a")
            captions.append(f"{label}: {na(reason)}")
            continue
        target.plot([p.batch for p in drawn], [getattr(p, key) for p in drawn], color=colour, marker="o",
                    label=label + (" (right axis)" if target is flop_axis else ""))
        ringed = _ring_unreliable(target, drawn, lambda p, key=key: getattr(p, key), legend=not ringed) or ringed
        if target is flop_axis:
            top = max(flop) * 1.15 or 1.0
            flop_axis.set_ylim(0, top)
            flop_axis.set_ylabel("FLOP utilization (%)", color=colour)
            captions.append(f"FLOP utilization on the right axis, 0-{fmt_pct(top)}: below "
                            f"{FLOP_OWN_AXIS_BELOW_PCT:g} % it would be flat on the left one's 0-100 %")
    captions += _unreliable_captions(sweep.points)
    _mark_missing_points(ax, sweep.points, lambda p: p.status in ("oom", "failed"), lambda i, p: p.batch)
    _batch_axis(ax, sweep)
    ax.set_ylim(0, 105)
    ax.set_ylabel("utilization (%)")
    ax.set_title(title, loc="left")
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if flop_axis is not None:
        more = flop_axis.get_legend_handles_labels()
        handles, labels = handles + more[0], labels + more[1]
    ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.12 if flop_axis else 1.0, 1.0),
              frameon=False)
    add_caption(fig, captions + left_out)
    return fig


#: The ring around an unreliable point's marker.
UNRELIABLE_COLOUR = "#e08214"


def _ring_unreliable(ax: Axes, points: Sequence[SweepPoint], value: Callable[[SweepPoint], float | None],
                     legend: bool = True) -> bool:
    """An orange ring around each point whose profile says its figures are unreliable; whether it drew one."""
    ringed = [p for p in points if p.reliable is False and value(p) is not None]
    if ringed:
        ax.plot([p.batch for p in ringed], [value(p) for p in ringed], linestyle="none", marker="o", markersize=13,
                markerfacecolor="none", markeredgecolor=UNRELIABLE_COLOUR, markeredgewidth=1.6,
                label="unreliable (quality warnings)" if legend else "_unreliable", zorder=5)
    return bool(ringed)


def _unreliable_captions(points: Sequence[SweepPoint]) -> list[str]:
    """One caption naming the points whose figures their profiles call unreliable."""
    batches = [p.batch for p in points if p.reliable is False and p.status in ("ok", "partial")]
    if not batches:
        return []
    return [f"unreliable at batch {', '.join(map(str, batches))}: their profiles' quality warnings (another load, "
            "windows that disagree) say the figures may be off (sweep.json has each warning)"]


def sweep_memory_figure(sweep: Sweep) -> Figure:
    """Memory by category per batch (the paper's Figure 7): above, the split at the allocator's peak
    stacked (it adds up to that peak, marked); below, each category's own peak apart, as lines (own
    peaks need not coincide: stacked, they would pass the allocator's peak).

    Args: sweep: a finished Sweep; each point's `memory_at_peak` is stacked and its `memory_bytes`
        categories drawn below; null categories are left out and named in the caption; points
        without figures marked by status.
    Returns: the Figure; a "n/a" figure when no point has a byte count.
    """
    sweep, left_out = _capped(sweep)
    title = sweep_title(sweep, "Memory by category")
    known = [v for p in sweep.points for v in (*p.memory_bytes.values(), *p.memory_at_peak.values())]
    if all(v is None for v in known):
        return empty_figure(title, na("no point has a memory figure"))
    size, unit = byte_unit(known)
    fig = new_figure(8.5, 6.6)
    split_ax, own_ax = fig.subplots(2, 1, sharex=True, height_ratios=[3.0, 2.0])
    for i, point in enumerate(sweep.points):
        _stack_split(split_ax, i, point, size)
    _mark_missing_points(split_ax, sweep.points, _no_memory, lambda i, p: i)
    handles = [legend_patch(color=CATEGORY_COLOURS[c], label=category_label(c)) for c in SPLIT_PARTS]
    peaks = [(i, p.memory_bytes.get("allocator_peak")) for i, p in enumerate(sweep.points)]
    peaks = [(i, v) for i, v in peaks if v is not None]
    if peaks:
        handles += split_ax.plot([i for i, _ in peaks], [v / size for _, v in peaks], linestyle="none", marker="D",
                                 color="#333333", markersize=6, label="allocator peak", zorder=4)
    for name in MEMORY_CATEGORIES:
        own = [(i, p.memory_bytes.get(name)) for i, p in enumerate(sweep.points)]
        own = [(i, v) for i, v in own if v is not None]
        if own:
            own_ax.plot([i for i, _ in own], [v / size for _, v in own], color=CATEGORY_COLOURS[name], marker="o",
                        markersize=4, label="_" + name)
    split_ax.set_ylabel(f"at the allocator's peak ({unit})")
    split_ax.set_title(title, loc="left")
    split_ax.grid(True, axis="y", alpha=0.3)
    split_ax.margins(y=0.3)  # room above the tallest bar for its upright peak label
    split_ax.set_ylim(bottom=0)
    own_ax.set_ylabel(f"each one's own peak ({unit})")
    own_ax.set_xticks(range(len(sweep.points)), [str(p.batch) for p in sweep.points])
    own_ax.set_xlabel("batch size")
    own_ax.grid(True, axis="y", alpha=0.3)
    own_ax.set_ylim(bottom=0)
    # One legend entry per category, in stacking order, whichever points have it.
    split_ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    add_caption(fig, _failed_captions(sweep.points) + _null_memory_captions(sweep.points)
                + _no_split_captions(sweep.points) + _unreliable_captions(sweep.points) + left_out)
    return fig


def _no_memory(point: SweepPoint) -> bool:
    return point.status in ("oom", "failed") or all(point.memory_bytes.get(c) is None for c in MEMORY_CATEGORIES)


def _stack_split(ax: Axes, position: int, point: SweepPoint, size: int) -> None:
    """One stacked bar of a point's split at the allocator's peak at x = `position` (its parts add up to the
    peak); nothing for a point without figures (a status marker) or without a split (named in the caption)."""
    if _no_memory(point):
        return  # marked by _mark_missing_points
    bottom = 0.0
    for name in SPLIT_PARTS:
        value = point.memory_at_peak.get(name)
        if not value:
            continue
        ax.bar([position], [value / size], bottom=bottom, color=CATEGORY_COLOURS[name], width=0.6,
               label="_" + name)
        bottom += value / size  # the stack's drawn top: where the next part starts
    peak = point.memory_bytes.get("allocator_peak")
    if peak is not None:  # the label goes above whichever is higher, the stack or the peak's marker
        # Upright: a bisection's neighbouring bars would print their labels over each other.
        ax.annotate(f"peak {fmt_bytes(peak)}", (position, max(bottom, peak / size)), xytext=(0, 6),
                    textcoords="offset points", ha="center", va="bottom", rotation=90, fontsize=7)


def _no_split_captions(points: Sequence[SweepPoint]) -> list[str]:
    """The points that ran with category figures but no split at the allocator's peak."""
    batches = [p.batch for p in points if not _no_memory(p) and not p.memory_at_peak]
    return [f"no split at the allocator's peak at batch {', '.join(map(str, batches))} (a sweep.json written before "
            "it, or no allocator peak): their own peaks are below"] if batches else []


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
