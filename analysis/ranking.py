"""Kernels grouped by name and the paper's low-utilization long kernels (Tables V/VI)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tbd.records import KernelTable


@dataclass(frozen=True)
class KernelGroup:
    """All calls of one kernel (or CPU op) name in the window."""

    name: str
    calls: int
    time_ns: int
    time_share_pct: float  # of the summed time of all rows
    flops: float  # NaN when any call's FLOPs are unknown
    flop_source: str  # "analytic", "measured" or "" (unknown)
    precision: str  # the precision most of the group's time ran in
    util_pct: float  # flops / (peak x time) x 100, NaN when unknown


def group_kernels(kernels: KernelTable, util_pct: np.ndarray) -> list[KernelGroup]:
    """Group rows by name, longest total time first.

    A group's utilization is Σ flops / Σ (peak x duration), i.e. its rows' utilizations weighted by
    duration; it is NaN if any row's FLOPs are unknown, so a partly-counted kernel never looks idle.
    """
    if len(kernels) == 0:
        return []
    total_ns = float(kernels.dur_ns.sum())
    names, inverse = np.unique(kernels.name.astype(str), return_inverse=True)
    time_ns = np.bincount(inverse, weights=kernels.dur_ns.astype(np.float64), minlength=names.size)
    calls = np.bincount(inverse, minlength=names.size)
    flops = np.bincount(inverse, weights=np.nan_to_num(kernels.flops, nan=0.0), minlength=names.size)
    unknown = np.bincount(inverse, weights=~np.isfinite(kernels.flops), minlength=names.size) > 0
    # Σ over rows of util x dur = Σ flops / peak-rate seconds: the duration-weighted mean.
    weighted = np.bincount(inverse, weights=np.nan_to_num(util_pct * kernels.dur_ns, nan=0.0), minlength=names.size)
    util_unknown = np.bincount(inverse, weights=~np.isfinite(util_pct), minlength=names.size) > 0
    groups = []
    for g in np.argsort(-time_ns, kind="stable"):
        rows = inverse == g
        prec, prec_ns = _dominant(kernels.precision[rows], kernels.dur_ns[rows])
        sources = {s for s in kernels.flop_source[rows] if s}
        groups.append(KernelGroup(
            name=str(names[g]),
            calls=int(calls[g]),
            time_ns=int(time_ns[g]),
            time_share_pct=100.0 * time_ns[g] / total_ns if total_ns > 0 else float("nan"),
            flops=float("nan") if unknown[g] else float(flops[g]),
            flop_source="" if unknown[g] or len(sources) != 1 else sources.pop(),
            precision=prec,
            util_pct=float("nan") if util_unknown[g] or time_ns[g] <= 0 else float(weighted[g] / time_ns[g]),
        ))
    return groups


def _dominant(precisions: np.ndarray, dur_ns: np.ndarray) -> tuple[str, int]:
    best, best_ns = "", -1
    for p in set(precisions):
        ns = int(dur_ns[precisions == p].sum())
        if ns > best_ns:
            best, best_ns = str(p), ns
    return best, best_ns


def average_util_pct(groups: list[KernelGroup]) -> float:
    """Busy-time-weighted average utilization of the groups whose utilization is known; NaN if none."""
    known = [g for g in groups if np.isfinite(g.util_pct)]
    time = sum(g.time_ns for g in known)
    if time <= 0:
        return float("nan")
    return sum(g.util_pct * g.time_ns for g in known) / time


def low_util_kernels(groups: list[KernelGroup], threshold_pct: float) -> list[KernelGroup]:
    """Groups with known utilization below `threshold_pct`, longest share of time first (Table V)."""
    low = [g for g in groups if np.isfinite(g.util_pct) and g.util_pct < threshold_pct]
    return sorted(low, key=lambda g: -g.time_ns)
