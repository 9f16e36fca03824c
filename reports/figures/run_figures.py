"""The figures of one run (a `Profile`): iteration time, memory by category, kernel utilization.

Each function draws what the Profile holds and nothing else (docs/architecture.md:
reports/ computes nothing): times in ms, bytes in the binary unit the largest figure reads best in, percentages as
analysis gave them, on an axis scaled to them. A null figure is left out of the plot and its reason goes in the
caption; a figure with nothing at all to draw is not made (`figure_gaps` says why, and the page says it instead).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tbd.core.profile_result import MEMORY_CATEGORIES, PARTIAL, Memory, Profile
from tbd.reports.console import above_peak, fmt_window, kernel_noun
from tbd.reports.figures.canvas import (
    CATEGORY_COLOURS,
    MISSING_COLOUR,
    SERIES_COLOURS,
    SPLIT_PARTS,
    add_caption,
    byte_unit,
    category_label,
    count_left_out,
    empty_figure,
    legend_line,
    legend_patch,
    mark_na,
    na,
    new_figure,
)
from tbd.reports.kernels.short_names import short_kernel_name
from tbd.reports.numbers import fmt_duration, fmt_pct_cell
from tbd.reports.printable import printable
from tbd.reports.terminal import fmt_bytes, memory_reason_lines, run_lines

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Shading of the run's stages: warm-up grey, timing window blue, trace window orange.
WINDOW_COLOURS = {"warm-up": "#999999", "timing window": "#56B4E9", "trace window": "#E69F00"}
#: A spread of iteration times wider than this (slowest / fastest) is drawn on a log axis, so a
#: first iteration 50x the rest does not flatten the stable phase into a line.
_LOG_SPREAD = 20.0
#: Flagged and ranked groups named on the scatter, longest first (more would overlap).
_NAMED_GROUPS = 6
#: Kernel groups drawn on the scatter, longest first: the rest are counted in the caption.
MAX_GROUPS = 2000
#: Iterations drawn on the iteration-time line: a longer run is drawn every k-th iteration, and the caption says so.
MAX_ITERATIONS = 5000
#: Room above the highest point or line of a percentage axis, as a fraction of it (the labels sit there).
_HEADROOM = 0.15


def run_title(profile: Profile) -> str:
    """"model (framework), batch N, device" from the profile's spec, with PARTIAL when it is one."""
    spec = profile.spec
    batch = spec.get("batch")
    text = (f"{spec.get('model') or 'trace'} ({spec.get('framework') or 'n/a'})"
            f"{f', batch {batch}' if batch is not None else ''}, {spec.get('device') or 'n/a'}")
    return printable(text) + (" — PARTIAL" if profile.status == PARTIAL else "")


def figure_gaps(profile: Profile) -> dict[str, str]:
    """The run's figures that have nothing to draw, and why: no empty "n/a" figure is saved or shown for them.

    Args: profile: a finished Profile.
    Returns: file stem ("iteration_time", "memory", "kernel_utilization") -> the reason, in words; {} when every
        figure has something to draw.
    """
    gaps = {}
    it = profile.iterations
    if it is None or not it.times_s:
        gaps["iteration_time"] = "no iteration was recorded"
    mem = profile.metrics.memory_bytes
    if not _memory_known(mem):
        reasons = "; ".join(memory_reason_lines(mem))
        gaps["memory"] = "no byte count was recorded" + (f" ({reasons})" if reasons else "")
    noun = kernel_noun(profile)
    if not profile.kernels:
        gaps["kernel_utilization"] = f"no {noun} in the trace window"
    elif not _drawable(profile):
        gaps["kernel_utilization"] = f"no {noun[:-1]} group has a FLOP utilization"
    return gaps


def _memory_known(mem: Memory) -> list[int]:
    """The byte counts the memory figure can draw (its categories, the allocator's peak, the split at it)."""
    values = [*(getattr(mem, c) for c in MEMORY_CATEGORIES), mem.allocator_peak, *mem.at_peak.values()]
    return [v for v in values if v is not None]


def _drawable(profile: Profile) -> list:
    """The kernel groups the utilization scatter draws: a utilization and some time."""
    return [r for r in profile.kernels if r.util_pct is not None and r.time_s > 0]


def iteration_time_figure(profile: Profile) -> Figure:
    """Iteration time (ms) over the run's iterations, with warm-up and the two windows shaded.

    Args: profile: a finished Profile; `iterations.times_s` are drawn, the warm-up (the first
        `iterations.warmup`) and the inclusive `timing_window` / `trace_window` shaded. A trace's
        ProfilerSteps (`source == "trace"`) are drawn alone, against their step numbers.
    Returns: the Figure; a "n/a" figure when no iteration was recorded.
    """
    title = f"Iteration time — {run_title(profile)}"
    it = profile.iterations
    if it is None or not it.times_s:
        return empty_figure(title, na("no iteration was recorded"))
    trace = it.source == "trace"
    steps = it.step_numbers if trace and it.step_numbers and len(it.step_numbers) == len(it.times_s) else None
    x = steps if steps is not None else list(range(len(it.times_s)))
    ms = [t * 1000 for t in it.times_s]
    step = -(-len(ms) // MAX_ITERATIONS)  # 1 up to MAX_ITERATIONS iterations
    fig = new_figure(9.0, 4.2)
    ax = fig.add_subplot()
    ax.plot(x[::step], ms[::step], color=SERIES_COLOURS[0], linewidth=1.2, marker="." if len(ms) <= 200 else None,
            label="iteration time", zorder=3)
    captions = [] if trace else _shade_stages(ax, profile)
    if step > 1:
        captions.append(f"every {step}th of {len(ms):,} iterations drawn (iterations.json has them all)")
    if trace:
        captions.append(f"{len(ms)} ProfilerSteps read from a trace: warm-up and stability not checked")
    if min(ms) > 0 and max(ms) / min(ms) > _LOG_SPREAD:
        ax.set_yscale("log")
    ax.set_xlabel("ProfilerStep" if steps is not None else "iteration (0-based)")
    ax.set_ylabel("iteration time (ms)" + (", log scale" if ax.get_yscale() == "log" else ""))
    ax.set_title(title, loc="left")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right", framealpha=0.9)
    add_caption(fig, captions)
    return fig


def _shade_stages(ax: Axes, profile: Profile) -> list[str]:
    """Shade the warm-up iterations run and the two windows (each index i covers i-0.5 .. i+0.5), and mark where
    the stable phase was found; returns caption lines.

    The warm-up's label is the terminal's own words ("warm-up: 20 iterations run in 2.01 s", reports/terminal.py),
    and the stable phase's start ("stable from iteration 1 (detected)") is a line of its own: the detector finds
    it some iterations before it decides, so the two differ (docs/warmup.md).
    """
    it = profile.iterations
    run = it.warmup_run if it.warmup_run is not None else it.warmup
    ran, *stability = run_lines(profile)[0].split(" · ")
    spans = []
    if run > 0:
        spans.append(("warm-up", [0, run - 1], ran))
    for name, window in (("timing window", it.timing_window), ("trace window", it.trace_window)):
        if window:
            spans.append((name, window, f"{name}: iterations {fmt_window(window)}"))
    last = len(it.times_s) - 1  # a span is drawn within the iterations recorded, whatever the record says
    spans = [(name, [max(0, window[0]), min(last, window[-1])], label) for name, window, label in spans
             if window[0] <= last and window[-1] >= 0]
    for name, window, label in spans:
        ax.axvspan(window[0] - 0.5, window[-1] + 0.5, color=WINDOW_COLOURS[name], alpha=0.25, linewidth=0,
                   label=label, zorder=1)
    if it.warmup_detected and it.stable and stability and 0 <= it.warmup <= last + 1:
        ax.axvline(it.warmup - 0.5, color="#333333", linestyle=":", linewidth=1.2, label=stability[0], zorder=2)
    captions = [f"{name} {fmt_window(window)}: none recorded" for name, window in
                (("timing window", it.timing_window), ("trace window", it.trace_window)) if not window]
    if it.stable is False:
        captions.insert(0, "NOT STABLE: iteration times never settled during warm-up; every figure is flagged")
    return captions


def memory_figure(profile: Profile) -> Figure:
    """Memory by category: each category's own peak, and the split at the allocator's peak.

    Args: profile: a finished Profile; `metrics.memory_bytes` is drawn. A null category gets "n/a"
        in its place (never a bar of zero) and its reason in the caption.
    Returns: the Figure (left: own peaks, with the allocator's peak as a line; right: one stacked
        bar of `at_peak`, "unattributed" included); a "n/a" figure when no byte count is known.
    """
    mem = profile.metrics.memory_bytes
    title = f"Memory by category — {run_title(profile)}"
    known = _memory_known(mem)
    if not known:
        return empty_figure(title, na(mem.reasons.get("allocator_peak") or "no memory figure was recorded"))
    size, unit = byte_unit(known)
    fig = new_figure(9.5, 4.6)
    own_ax, split_ax = fig.subplots(1, 2, width_ratios=[3.0, 1.4], sharey=True)
    _own_peaks(own_ax, mem, size, unit)
    _split_at_peak(split_ax, mem, size)
    fig.suptitle(title, x=0.01, ha="left", fontsize="large")
    add_caption(fig, _memory_captions(mem))
    return fig


def _memory_captions(mem: Memory) -> list[str]:
    """The reasons of `mem`, categories sharing a sentence on one line: "weights, gradients: n/a — why"."""
    grouped: dict[str, list[str]] = {}
    for name, reason in mem.reasons.items():
        grouped.setdefault(na(reason) if _is_null(mem, name) else printable(reason), []).append(category_label(name))
    return [f"{', '.join(names)}: {text}" for text, names in grouped.items()]


def _is_null(mem: Memory, name: str) -> bool:
    """Whether the reason for `name` explains a null figure (else it qualifies one that exists)."""
    if name == "at_peak":
        return not mem.at_peak
    return name in (*MEMORY_CATEGORIES, "allocator_peak") and getattr(mem, name) is None


def _own_peaks(ax: Axes, mem: Memory, size: int, unit: str) -> None:
    """Bars of each category's own peak; "n/a" where null; the allocator's peak as a dashed line."""
    for i, name in enumerate(MEMORY_CATEGORIES):
        value = getattr(mem, name)
        if value is None:
            mark_na(ax, i)
            continue
        bars = ax.bar([i], [value / size], color=CATEGORY_COLOURS[name], width=0.7, label=category_label(name))
        ax.bar_label(bars, [fmt_bytes(value)], fontsize=8, padding=2)
    if mem.allocator_peak is not None:
        ax.axhline(mem.allocator_peak / size, color="#333333", linestyle="--", linewidth=1,
                   label=f"allocator peak {fmt_bytes(mem.allocator_peak)}")
        ax.legend(handles=[ax.get_lines()[-1]], fontsize=8, loc="upper left")
    ax.set_xticks(range(len(MEMORY_CATEGORIES)), [category_label(c) for c in MEMORY_CATEGORIES])
    ax.set_xlim(-0.6, len(MEMORY_CATEGORIES) - 0.4)
    ax.set_ylabel(f"bytes ({unit})")
    ax.set_title("each category's own peak", fontsize="medium")
    ax.set_ylim(bottom=0)
    ax.margins(y=0.12)
    ax.grid(True, axis="y", alpha=0.3)


def _split_at_peak(ax: Axes, mem: Memory, size: int) -> None:
    """One bar stacking `at_peak` part by part; "n/a" in its place when the split is unknown."""
    ax.set_title("split at the allocator's peak", fontsize="medium")
    ax.set_xticks([0], ["at peak"])
    ax.set_xlim(-0.8, 0.8)
    ax.grid(True, axis="y", alpha=0.3)
    if not mem.at_peak:
        mark_na(ax, 0)
        return
    bottom = 0.0
    handles = []
    for name in SPLIT_PARTS:
        value = mem.at_peak.get(name)
        label = f"{category_label(name)}: {fmt_bytes(value)}"
        if value is None:  # in the legend as n/a, with no bar
            handles.append(legend_patch(facecolor="white", edgecolor=MISSING_COLOUR, label=label))
            continue
        ax.bar([0], [value / size], bottom=bottom, color=CATEGORY_COLOURS[name], width=0.6)
        handles.append(legend_patch(color=CATEGORY_COLOURS[name], label=label))
        bottom += value / size  # the stack's drawn top: where the next part starts
    if mem.allocator_peak is not None:
        ax.plot([0], [mem.allocator_peak / size], marker="_", markersize=40, markeredgewidth=2, color="#333333",
                linestyle="none")
        peak_label = f"allocator peak: {fmt_bytes(mem.allocator_peak)}"
        handles.append(legend_line(color="#333333", linewidth=2, label=peak_label))
    # Top of the stack first, as the parts lie.
    ax.legend(handles=handles[::-1], fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)


def kernel_utilization_figure(profile: Profile) -> Figure:
    """Each kernel group's FLOP utilization against its time (log), with the run's average and ranking threshold.

    Args: profile: a finished Profile; `kernels` are drawn (null utilization left out and counted in
        the caption; groups flagged "above peak" as red triangles; the compute ranking's groups as
        squares), `metrics.flop_util_pct.value` and `.kernel_average_pct` as horizontal lines.
    Returns: the Figure; a "n/a" figure when the profile has no kernel group.
    """
    noun = kernel_noun(profile)
    title = f"FLOP utilization per {noun[:-1]} group — {run_title(profile)}"
    if not profile.kernels:
        return empty_figure(title, na(f"no {noun} in the trace window"))
    drawable = _drawable(profile)
    drawn = sorted(drawable, key=lambda r: -r.time_s)[:MAX_GROUPS]
    ranked = {r.name for r in profile.low_util_kernels}
    kinds = (("plain", f"{noun[:-1]} groups", "o", SERIES_COLOURS[0]),
             ("ranked", "ranked: compute-bound, below the threshold", "s", SERIES_COLOURS[1]),
             ("above", "above peak ⚠ (not ranked)", "^", MISSING_COLOUR))
    fig = new_figure(9.0, 5.0)
    ax = fig.add_subplot()
    for kind, label, marker, colour in kinds:
        rows = [r for r in drawn if _kind(r, ranked) == kind]
        if rows:
            ax.scatter([r.time_s for r in rows], [r.util_pct for r in rows], marker=marker, color=colour,
                       s=36, alpha=0.85, label=f"{label} ({len(rows)})", zorder=3)
    flop = profile.metrics.flop_util_pct
    if flop.value is not None:
        ax.axhline(flop.value, color="#333333", linewidth=1.2, label=f"run's FLOP utilization {fmt_pct_cell(flop.value)} %")
    if flop.kernel_average_pct is not None:
        ax.axhline(flop.kernel_average_pct, color=SERIES_COLOURS[1], linestyle="--", linewidth=1.2,
                   label=f"ranking threshold {fmt_pct_cell(flop.kernel_average_pct)} %")
    _duration_log_axis(ax)
    _name_ranked(ax, [r for r in drawn if _kind(r, ranked) != "plain"])
    ax.set_xlabel(f"time in the trace window, per {noun[:-1]} group (log scale)")
    ax.set_ylabel("FLOP utilization (%)")
    ax.set_title(title, loc="left")
    ax.grid(True, alpha=0.3)
    # Scaled to what is drawn, never a fixed 0-100: utilizations of 0.02-2 % on a 0-100 axis read as a flat line.
    highest = max([r.util_pct for r in drawn] + [v for v in (flop.value, flop.kernel_average_pct) if v is not None],
                  default=0.0)
    if highest > 0:
        ax.set_ylim(0, highest * (1 + _HEADROOM))
    else:
        ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="upper left", framealpha=0.9)
    add_caption(fig, _utilization_captions(profile, len(drawn))
                + count_left_out(len(drawn), len(drawable), f"{noun[:-1]} groups (the shortest)"))
    return fig


def _duration_log_axis(ax: Axes) -> None:
    """A log x axis of seconds, ticked at 1, 2 and 5 of each decade and labelled "20 ms", not "2x10^-2"."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator  # with the first figure (new_figure)

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda seconds, _: fmt_duration(seconds, 2)))
    ax.xaxis.set_minor_locator(NullLocator())


def _name_ranked(ax: Axes, rows) -> None:
    """Label the flagged and ranked groups with their short names: they are the ones a reader looks up."""
    for row in rows[:_NAMED_GROUPS]:
        ax.annotate(short_kernel_name(row.name, 36), (row.time_s, row.util_pct), xytext=(6, 4),
                    textcoords="offset points", fontsize=7, color="#333333")


def _kind(row, ranked: set[str]) -> str:
    """How a drawn group is marked: flagged above peak, in the compute ranking, or plain."""
    if above_peak(row):
        return "above"
    return "ranked" if row.name in ranked else "plain"


def _utilization_captions(profile: Profile, drawn: int) -> list[str]:
    """The groups left out and why, and the overall figure's reason when it is null."""
    flop = profile.metrics.flop_util_pct
    left_out = [r for r in profile.kernels if r.util_pct is None or r.time_s <= 0]
    lines = []
    if left_out:
        why = sorted({printable(r.util_note) for r in left_out if r.util_note})[:3]
        lines.append(f"{len(left_out)} of {len(profile.kernels)} groups have no utilization and are not drawn"
                     + (f" ({'; '.join(why)})" if why else ""))
    if flop.value is None:
        lines.append(f"run's FLOP utilization: {na(flop.reason)}")
    if not drawn:
        lines.append("no group has a utilization to draw")
    return lines
