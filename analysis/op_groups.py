"""Kernel time grouped by the op that launched it: the rows `tbd compare` matches runs by.

Kernel names differ between GPUs and libraries (volta_sgemm on a V100, ampere_sgemm or a cuBLASLt
nvjet kernel elsewhere, cuDNN's engine of the day), so two runs of one model rarely share kernel
names; the launching op (aten::convolution_backward, aten::addmm) is what they share. On the CPU
the rows are ops already (their self time) and `op` is the op whose FLOPs they inherit, else the
row's own name.

Pure: a KernelTable and its per-row utilizations in, records out.
"""

from __future__ import annotations

import numpy as np

from tbd.analysis.ranking import factorize
from tbd.core.profile_result import OpGroupRow
from tbd.core.records import KernelTable

NO_LAUNCH_OP = "(no launching op)"


def op_groups(kernels: KernelTable, util_pct: np.ndarray) -> list[OpGroupRow]:
    """Rows grouped by launching op, longest summed time first (ties: by name).

    Args:
        kernels: the trace window's kernels (ops on the CPU).
        util_pct: each row's FLOP utilization against its own precision's peak, NaN unknown
            (analysis.utilization.kernel_util_pct).
    Returns:
        One row per op: calls, summed time (s), share of the summed time (%), FLOPs of the rows
        whose count is known (null when none is), and the time-weighted utilization of the rows
        whose utilization is known (null when none is).
    """
    n = len(kernels)
    if n == 0:
        return []
    # A CPU row is an op itself: without a formula root it stands for itself. A GPU kernel whose
    # launching call or op is missing from the trace has no op to be matched by.
    cpu_row = kernels.device < 0
    ops = np.where(kernels.op != "", kernels.op, np.where(cpu_row, kernels.name, NO_LAUNCH_OP))
    code, names = factorize(ops)
    size = len(names)
    dur = kernels.dur_ns.astype(np.float64)
    time_ns = np.bincount(code, weights=dur, minlength=size)
    calls = np.bincount(code, minlength=size)
    flops_known = np.isfinite(kernels.flops)
    flops = np.bincount(code, weights=np.where(flops_known, kernels.flops, 0.0), minlength=size)
    any_flops = np.bincount(code, weights=flops_known.astype(np.float64), minlength=size) > 0
    util_known = np.isfinite(util_pct) & (dur > 0)
    util_weighted = np.bincount(code, weights=np.where(util_known, util_pct * dur, 0.0), minlength=size)
    util_time = np.bincount(code, weights=np.where(util_known, dur, 0.0), minlength=size)
    total = float(time_ns.sum())
    order = sorted(range(size), key=lambda i: (-time_ns[i], str(names[i])))
    return [OpGroupRow(name=str(names[i]), calls=int(calls[i]), time_s=float(time_ns[i]) / 1e9,
                       time_share_pct=100.0 * float(time_ns[i]) / total if total > 0 else 0.0,
                       flops=float(flops[i]) if any_flops[i] else None,
                       util_pct=float(util_weighted[i] / util_time[i]) if util_time[i] > 0 else None)
            for i in order]
