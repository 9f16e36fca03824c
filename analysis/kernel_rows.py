"""The kernel table of a profile: groups with their drill-down and roofline, and the two rankings.

Pure: the trace's kernel rows, their per-row utilizations, the peaks and the bandwidth in; the
`KernelRow`s of profile.json out.

The default ranking is by the time that could be won back: each group's time x (1 - achieved /
attainable on the roofline) (`ranking.recoverable_ns`), most first, compute- and memory-bound
groups together (issue 28): a long group at half its roof comes before a tiny one at a tenth of it,
so the top of the list is where an engineer should start. The paper's Table V is kept as a view, in
two rankings:

- compute: compute-bound groups on this device's roofline below the run's average FLOP
  utilization (`ranking.average_util_pct`);
- memory: memory-bound groups (data movement included: FLOPs known to be 0) below the average
  bandwidth utilization of the memory-bound groups, time-weighted.

A copy or a fill never appears as "low FLOP utilization": it does no arithmetic to utilize. A group
whose bound is unknown (bytes not derivable, or a peak or the bandwidth unknown) is in neither: it
is listed apart (`KernelTables.bound_unknown`), with why in its `roofline_note`. A share above
100 % (a misestimate, not a kernel beating its device) keeps its group out of the threshold, as
`ranking.average_util_pct` keeps out groups above their peak, and its `roofline_note` says why.
Each ranked group carries the Nsight Compute command that measures it (`ncu_target` says what to
run under ncu; without it the command names a placeholder).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from tbd.analysis import drilldown, ranking, recommendations
from tbd.analysis.ncu import FOREIGN_SKIP_FROM, TARGET_PLACEHOLDER, kernel_function_name, ncu_command, shell_line
from tbd.analysis.op_bytes.ops import NO_BYTES, has_bytes_formula
from tbd.analysis.roofline import COMPUTE, MEMORY, RooflinePoint, roofline_point
from tbd.core.errors import UsageError
from tbd.core.profile_result import KernelRow, Recommendation
from tbd.core.records import ANALYTIC, SHAPES_NOT_RECORDED, KernelTable, TraceRecords

NVTX_TRACE_WINDOW = "tbd.trace_window"  # the NVTX push/pop range around tbd's trace window


@dataclass(frozen=True)
class KernelTables:
    rows: list[KernelRow]  # every group (the first `top`), longest first
    low_compute: list[KernelRow]  # the paper's Table V, compute-bound groups only
    low_memory: list[KernelRow]
    flop_threshold_pct: float  # NaN when no peak or no known utilization
    bandwidth_threshold_pct: float  # NaN when no memory-bound group has a known bandwidth share
    # Groups whose bound is unknown, longest first: in neither ranking (each row's roofline_note says why).
    bound_unknown: list[KernelRow] = field(default_factory=list)
    flop_threshold_reason: str | None = None  # why flop_threshold_pct is NaN
    bandwidth_threshold_reason: str | None = None  # why bandwidth_threshold_pct is NaN
    groups: list[ranking.KernelGroup] = field(default_factory=list)  # every group, longest first (rows: the first `top`)
    # The default ranking: groups by recoverable time, most first (those with a known bound and a share within 100 %).
    recoverable: list[KernelRow] = field(default_factory=list)
    points: dict[str, RooflinePoint] = field(default_factory=dict)  # each group's roofline point, by name
    recommendations: list[Recommendation] = field(default_factory=list)  # analysis.recommendations


def finite_or_none(x: float | None) -> float | None:
    """`x` as a float, None when it is None, NaN or infinite (profile.json holds no NaN)."""
    return None if x is None or not math.isfinite(x) else float(x)


def kernel_tables(trace: TraceRecords, util_rows: np.ndarray, peaks_used: dict[str, float], bandwidth: float | None,
                  util_note, top: int | None = None, ncu_target: list[str] | None = None) -> KernelTables:
    """The kernel rows and rankings of `trace` (module docstring).

    Args:
        util_rows: per-row FLOP utilization (utilization.kernel_util_pct).
        peaks_used: peak FLOP/s per precision actually used as denominators.
        bandwidth: the device's memory bandwidth in bytes/s, None unknown.
        util_note: callable(KernelGroup) -> the group's utilization note (assemble.util_note).
        top: rows kept in `rows` (the rankings look at every group).
        ncu_target: the command ncu runs to reproduce the trace window (tbd's own run), or None.
    """
    groups = ranking.group_kernels(trace.kernels, util_rows)
    details = drilldown.group_details(trace.kernels, [g.name for g in groups], kernel_function_name)
    why_no_bytes = bytes_reasons(trace.kernels)
    points = {g.name: roofline_point(g.flops, details[g.name].bytes, g.time_ns / 1e9,
                                     peaks_used.get(g.precision), bandwidth,
                                     why_no_bytes.get(g.name, "bytes unknown")) for g in groups}
    threshold, flop_why = flop_threshold(groups, bool(peaks_used))
    low = [g for g in ranking.low_util_kernels(groups, threshold)
           if points[g.name].bound == COMPUTE] if math.isfinite(threshold) else []
    # A share above 100 % is a misestimate (roofline.ABOVE_BANDWIDTH): not in the threshold, not ranked.
    memory_bound = [g for g in groups if points[g.name].bound == MEMORY
                    and points[g.name].bandwidth_util_pct is not None
                    and points[g.name].bandwidth_util_pct <= 100.0]
    bw_threshold = _weighted_average([(points[g.name].bandwidth_util_pct, g.time_ns) for g in memory_bound])
    low_bw = sorted([g for g in memory_bound if points[g.name].bandwidth_util_pct < bw_threshold],
                    key=lambda g: -g.time_ns) if math.isfinite(bw_threshold) else []
    bw_why = None if math.isfinite(bw_threshold) else "memory bandwidth unknown" if not bandwidth else (
        "every memory-bound group with known bytes is above 100 % of the bandwidth (a misestimate)"
        if any(points[g.name].bound == MEMORY and points[g.name].bandwidth_util_pct is not None for g in groups)
        else "no memory-bound group with known bytes")
    unknown = [g for g in groups if points[g.name].bound is None]
    total_ns = float(sum(g.time_ns for g in groups))
    recoverable = {g.name: ranking.recoverable_ns(g.time_ns, points[g.name].roofline_pct)
                   if points[g.name].bound is not None else float("nan") for g in groups}
    won_back = ranking.by_recoverable_time(groups, recoverable)
    ranked = {g.name for g in low} | {g.name for g in low_bw} | {g.name for g in won_back if recoverable[g.name] > 0}

    def row(g: ranking.KernelGroup) -> KernelRow:
        ncu = _ncu(g, details[g.name], trace, ncu_target) if g.name in ranked and trace.device_kind == "cuda" else None
        rec = recoverable[g.name]
        return replace(_row(g, details[g.name], points[g.name], util_note(g), ncu),
                       recoverable_s=rec / 1e9 if math.isfinite(rec) else None,
                       recoverable_pct=100.0 * rec / total_ns if math.isfinite(rec) and total_ns > 0 else None)

    shown = [row(g) for g in (groups if top is None else groups[:top])]
    won = [row(g) for g in won_back]
    advice = recommendations.recommendations(shown, won, points, peaks_used, bandwidth,
                                             "kernel" if trace.device_kind == "cuda" else "op")
    return KernelTables(shown, [row(g) for g in low], [row(g) for g in low_bw], threshold, bw_threshold,
                        [row(g) for g in unknown], flop_why, bw_why, groups=groups, recoverable=won, points=points,
                        recommendations=advice)


def flop_threshold(groups: list[ranking.KernelGroup], have_peak: bool) -> tuple[float, str | None]:
    """The compute ranking's threshold (`ranking.average_util_pct`) and, when it is NaN, why.

    NaN without a peak, and where no group does arithmetic with a known utilization within its
    peak: the zeros of data movement alone would average to 0 % and rank nothing honestly.
    """
    if not have_peak:
        return float("nan"), "no peak FLOP/s known for the precisions the kernels ran in"
    if not any(g.flops > 0 and math.isfinite(g.util_pct) and not g.above_peak for g in groups):
        return float("nan"), ("no group with FLOPs counted and a utilization within its peak: each moves data "
                              "(0 FLOPs), has no FLOP count or is above its peak")
    value = ranking.average_util_pct(groups)
    return value, None if math.isfinite(value) else "no group with a known utilization"


def bytes_reasons(kernels: KernelTable) -> dict[str, str]:
    """Why each group with unknown bytes has them unknown, by kernel name: from the op that launched
    most of its unknown rows' time (op_bytes.ops.NO_BYTES, no formula, shapes not recorded or unreadable)."""
    if kernels.bytes is None:
        return {str(n): "bytes not derivable: this trace's reader gives no byte estimates" for n in
                dict.fromkeys(kernels.name.tolist())}
    unknown = np.flatnonzero(~np.isfinite(kernels.bytes))
    if len(unknown) == 0:
        return {}
    gaps = kernels.flop_gap[unknown] if kernels.flop_gap is not None else np.full(len(unknown), "", dtype=object)
    keys = list(zip(kernels.name[unknown].tolist(), kernels.op[unknown].tolist(), gaps.tolist()))
    code, distinct = ranking.factorize(keys)
    time = np.bincount(code, weights=kernels.dur_ns[unknown].astype(np.float64), minlength=len(distinct))
    out: dict[str, str] = {}
    best: dict[str, float] = {}
    for (name, op, gap), t in zip(distinct, time.tolist()):
        if name not in best or t > best[name]:
            best[name], out[name] = t, _bytes_reason(str(op), str(gap))
    return out


def _bytes_reason(op: str, gap: str) -> str:
    if not op:
        return "bytes not derivable: no launching op in the trace"
    if op in NO_BYTES:
        return f"bytes not derivable for {op}: {NO_BYTES[op]}"
    if not has_bytes_formula(op):
        return f"bytes not derivable: no byte formula for {op}"
    if gap == SHAPES_NOT_RECORDED:
        return f"bytes not derivable: the trace recorded no shapes for {op}"
    return f"bytes not derivable: {op}'s recorded arguments do not give them"


def _weighted_average(pairs: list[tuple[float, int]]) -> float:
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total > 0 else float("nan")


def _row(g: ranking.KernelGroup, d: drilldown.GroupDetail, p: RooflinePoint, note: str | None,
         ncu: dict | None) -> KernelRow:
    seconds = g.time_ns / 1e9
    return KernelRow(
        name=g.name, calls=g.calls, time_s=seconds, time_share_pct=g.time_share_pct, flops=finite_or_none(g.flops),
        flop_source=g.flop_source or None, precision=g.precision, util_pct=finite_or_none(g.util_pct), util_note=note,
        mean_s=seconds / g.calls if g.calls else None, flops_per_s=finite_or_none(p.flops_per_s), bytes=finite_or_none(d.bytes),
        bytes_source=ANALYTIC if math.isfinite(d.bytes) else None, intensity=finite_or_none(p.intensity), bound=p.bound,
        attainable_flops_per_s=finite_or_none(p.attainable_flops_per_s), roofline_pct=finite_or_none(p.roofline_pct),
        bandwidth_util_pct=finite_or_none(p.bandwidth_util_pct), roofline_note=p.reason,
        launch=asdict(d.launch) if d.launch else None, ops=[asdict(o) for o in d.ops], ncu=ncu,
        uncounted_calls=g.uncounted_calls if math.isfinite(g.flops) else 0,
        uncounted_time_s=g.uncounted_time_ns / 1e9 if math.isfinite(g.flops) else 0.0)


def _ncu(g: ranking.KernelGroup, d: drilldown.GroupDetail, trace: TraceRecords, target: list[str] | None) -> dict:
    """The Nsight Compute command measuring the group's launches of one traced iteration."""
    nvtx = NVTX_TRACE_WINDOW if target else None
    try:  # a trace tbd did not run: the program that recorded it is a placeholder the user fills in
        argv = ncu_command(g.name, d.launches.skip, d.launches.count, target or list(TARGET_PLACEHOLDER),
                           nvtx_range=nvtx, name_base=d.launches.name_base)
    except UsageError as exc:  # a name no kernel can have (a NUL, a line break): nothing to select
        return {"command": None, "reason": str(exc)}
    counted_from = "the start of tbd's trace window (the NVTX range)" if nvtx else FOREIGN_SKIP_FROM
    return {"command": shell_line(argv), "argv": argv, "launch_skip": d.launches.skip,
            "launch_count": d.launches.count, "launches_in_step": d.launches.in_step,
            "step": d.launches.step, "nvtx_range": nvtx,
            "name_base": d.launches.name_base,
            "skip_counts_from": counted_from,
            "target_placeholder": None if target else shell_line(list(TARGET_PLACEHOLDER))}
