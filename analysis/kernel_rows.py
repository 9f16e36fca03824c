"""The kernel table of a profile: groups with their drill-down and roofline, and the two rankings.

Pure: the trace's kernel rows, their per-row utilizations, the peaks and the bandwidth in; the
`KernelRow`s of profile.json out. Two rankings replace the paper's single one (Table V):

- compute: groups that do arithmetic (FLOPs > 0) and are not memory-bound on this device's
  roofline, below the run's average FLOP utilization (`ranking.average_util_pct`);
- memory: memory-bound groups (data movement included: FLOPs known to be 0) below the average
  bandwidth utilization of the memory-bound groups, time-weighted.

A copy or a fill never appears as "low FLOP utilization": it does no arithmetic to utilize.
Each ranked group carries the Nsight Compute command that measures it (`ncu_target` says what to
run under ncu; without it the command names a placeholder).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from tbd.analysis import drilldown, ranking
from tbd.analysis.ncu import kernel_function_name, ncu_command, shell_line
from tbd.analysis.roofline import MEMORY, RooflinePoint, roofline_point
from tbd.core.errors import UsageError
from tbd.core.profile_result import KernelRow
from tbd.core.records import ANALYTIC, TraceRecords

NVTX_TRACE_WINDOW = "tbd.trace_window"  # the NVTX push/pop range around tbd's trace window


@dataclass(frozen=True)
class KernelTables:
    rows: list[KernelRow]  # every group (the first `top`), longest first
    low_compute: list[KernelRow]  # the paper's Table V, compute-bound groups only
    low_memory: list[KernelRow]
    flop_threshold_pct: float  # NaN when no peak or no known utilization
    bandwidth_threshold_pct: float  # NaN when no memory-bound group has a known bandwidth share


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
    points = {g.name: roofline_point(g.flops, details[g.name].bytes, g.time_ns / 1e9,
                                     peaks_used.get(g.precision), bandwidth) for g in groups}
    threshold = ranking.average_util_pct(groups) if peaks_used else float("nan")
    low = [g for g in ranking.low_util_kernels(groups, threshold)
           if g.flops > 0 and points[g.name].bound != MEMORY] if math.isfinite(threshold) else []
    memory_bound = [g for g in groups if points[g.name].bound == MEMORY
                    and points[g.name].bandwidth_util_pct is not None]
    bw_threshold = _weighted_average([(points[g.name].bandwidth_util_pct, g.time_ns) for g in memory_bound])
    low_bw = sorted([g for g in memory_bound if points[g.name].bandwidth_util_pct < bw_threshold],
                    key=lambda g: -g.time_ns) if math.isfinite(bw_threshold) else []
    ranked = {g.name for g in low} | {g.name for g in low_bw}

    def row(g: ranking.KernelGroup) -> KernelRow:
        ncu = _ncu(g, details[g.name], trace, ncu_target) if g.name in ranked and trace.device_kind == "cuda" else None
        return _row(g, details[g.name], points[g.name], util_note(g), ncu)

    shown = groups if top is None else groups[:top]
    return KernelTables([row(g) for g in shown], [row(g) for g in low], [row(g) for g in low_bw], threshold,
                        bw_threshold)


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
        launch=asdict(d.launch) if d.launch else None, ops=[asdict(o) for o in d.ops], ncu=ncu)


def _ncu(g: ranking.KernelGroup, d: drilldown.GroupDetail, trace: TraceRecords, target: list[str] | None) -> dict:
    """The Nsight Compute command measuring the group's launches of one traced iteration."""
    nvtx = NVTX_TRACE_WINDOW if target else None
    try:
        argv = ncu_command(g.name, d.launches.skip, d.launches.count, target, nvtx_range=nvtx,
                           name_base=d.launches.name_base)
    except UsageError as exc:  # a name no kernel can have (a NUL, a line break): nothing to select
        return {"command": None, "reason": str(exc)}
    counted_from = ("the start of tbd's trace window (the NVTX range)" if nvtx else
                    "the start of the trace's window: add the kernel's launches that ran before it")
    return {"command": shell_line(argv), "argv": argv, "launch_skip": d.launches.skip,
            "launch_count": d.launches.count, "launches_in_step": d.launches.in_step,
            "step": d.launches.step, "nvtx_range": nvtx,
            "name_base": d.launches.name_base,
            "skip_counts_from": counted_from}
