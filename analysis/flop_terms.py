"""The terms of formula (2) a reader needs to redo it: the work per precision with the peak each is held to,
the share of FLOPs in kernel groups above their peak with the figure capped, and what the kernel list leaves out.

Pure: the window's kernel rows, their groups and the peaks in; numbers out (assemble.flop_util puts them in
the profile's FlopUtil).
"""

from __future__ import annotations

import math

import numpy as np

from tbd.analysis.ranking import KernelGroup
from tbd.core.profile_result import PrecisionWork
from tbd.core.records import KernelTable


def work_by_precision(kernels: KernelTable, peaks_used: dict[str, float]) -> list[PrecisionWork]:
    """The counted FLOPs of each precision, most first, with its peak and its seconds at that peak."""
    counted = np.isfinite(kernels.flops) & (kernels.flops > 0)
    total = float(kernels.flops[counted].sum())
    if total <= 0:
        return []
    out = []
    for precision in sorted(set(kernels.precision[counted].tolist()), key=str):
        flops = float(kernels.flops[counted & (kernels.precision == precision)].sum())
        peak = peaks_used.get(precision) if precision else None
        out.append(PrecisionWork(str(precision), flops, 100.0 * flops / total, peak if peak else None,
                                 flops / peak if peak else None))
    return sorted(out, key=lambda w: (-w.flops, w.precision))


def peak_seconds_of_groups(groups: list[KernelGroup]) -> float:
    """Seconds at peak of kernel groups: each group's utilization x its counted time."""
    return float(sum(g.util_pct / 100.0 * (g.time_ns - g.uncounted_time_ns) / 1e9 for g in groups
                     if np.isfinite(g.util_pct)))


def above_peak_terms(groups: list[KernelGroup], flops: float, busy_ns: int,
                     value_pct: float) -> tuple[float | None, float | None]:
    """(share % of the counted FLOPs in groups above their peak, `value_pct` with those groups capped at 100 %
    of their peak over their counted time), or (None, None) when no group is above its peak.

    A group at u % over its counted time t spends u/100 x t seconds at peak in formula (2); capped, t.
    """
    above = [g for g in groups if g.above_peak]
    if not above or flops <= 0 or busy_ns <= 0:
        return None, None
    share = 100.0 * sum(g.flops for g in above) / flops
    # counted time of a group = its time less its uncounted calls' time
    excess_s = sum((g.util_pct / 100.0 - 1.0) * (g.time_ns - g.uncounted_time_ns) / 1e9 for g in above)
    capped = value_pct - 100.0 * excess_s / (busy_ns / 1e9)
    return share, capped if math.isfinite(capped) else None
