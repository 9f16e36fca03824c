"""Why kernel time has no FLOP count: the "No FLOP formula" share split by cause.

One undifferentiated "no formula" figure hides what a user can do about it: a trace recorded
without shapes needs `record_shapes=True`; NCCL collectives move data and have nothing to count
(but how much of them overlaps compute matters); torch.compile regions launch Triton kernels
from no ATen op; some kernels have no launching call in the trace at all; and some ops simply
lack a formula yet. Causes, checked in this order for each row with unknown FLOPs:

1. communication: an NCCL/RCCL kernel (by name), or a row whose op is a collective
   (record_param_comms, c10d::*, nccl:*);
2. compiled region: a Triton kernel (name "triton_*") or a row launched from a torch.compile
   region (CompiledFunction, CompiledFunctionBackward, "Torch-Compiled Region");
3. what the trace reader saw (`KernelTable.flop_gap`): no launching op, shapes not recorded,
   shapes unreadable by the formula, no formula for the op. A reader that does not tell counts
   its rows as "no formula".

Shares are of the summed kernel (row) time in the window, as the "No FLOP formula" total is.
"""

from __future__ import annotations

import re

import numpy as np

from tbd.analysis.intervals import overlap_length_ns, union_length_ns
from tbd.analysis.ranking import factorize
from tbd.core.profile_result import FlopGap, NoFlopFormula
from tbd.core.records import NO_FORMULA, NO_LAUNCH_OP, SHAPES_NOT_RECORDED, SHAPES_UNREADABLE, KernelTable

COMMUNICATION = "communication"
COMPILED_REGION = "compiled_region"
_TOP_OPS = 5

_COMM_KERNEL = re.compile(r"nccl|rccl", re.IGNORECASE)
_COMM_OP = re.compile(r"^(record_param_comms|c10d::|nccl:|ProcessGroupNCCL|gloo:)")
_COMPILED_KERNEL = re.compile(r"^triton_")
_COMPILED_OP = re.compile(r"^(CompiledFunction|CompiledFunctionBackward|Torch-Compiled Region|## Call CompiledFxGraph)")

_DETAIL = {
    COMMUNICATION: "NCCL/RCCL collectives: data moved between devices, no arithmetic to count",
    COMPILED_REGION: "Triton kernels of torch.compile regions: the trace records no ATen op with shapes inside them",
    NO_LAUNCH_OP: "kernels whose launching runtime call, or an op around it, is not in the trace",
    SHAPES_NOT_RECORDED: "their ops have FLOP formulas but the trace holds no shapes: record with "
                         "torch.profiler.profile(record_shapes=True)",
    SHAPES_UNREADABLE: "their ops have FLOP formulas but the recorded arguments do not give the count "
                       "(an argument without a default was not recorded)",
    NO_FORMULA: "no FLOP formula for these ops yet",
}
_ORDER = (COMMUNICATION, COMPILED_REGION, SHAPES_NOT_RECORDED, SHAPES_UNREADABLE, NO_LAUNCH_OP, NO_FORMULA)


def row_causes(kernels: KernelTable) -> np.ndarray:
    """Per row: the cause of its unknown FLOPs (module docstring), "" where FLOPs are known."""
    cause = np.full(len(kernels), "", dtype=object)
    unknown = ~np.isfinite(kernels.flops)
    if not unknown.any():
        return cause
    cause[unknown] = NO_FORMULA if kernels.flop_gap is None else kernels.flop_gap[unknown]
    cause[unknown & (cause == "")] = NO_FORMULA
    cause[unknown & (_matches(kernels.op, _COMPILED_OP) | _matches(kernels.name, _COMPILED_KERNEL))] = COMPILED_REGION
    cause[unknown & (_matches(kernels.name, _COMM_KERNEL) | _matches(kernels.op, _COMM_OP))] = COMMUNICATION
    return cause


def communication_rows(kernels: KernelTable) -> np.ndarray:
    """Rows that are collectives (by kernel name or op), whatever their FLOPs."""
    return _matches(kernels.name, _COMM_KERNEL) | _matches(kernels.op, _COMM_OP)


def no_flop_formula(kernels: KernelTable) -> NoFlopFormula | None:
    """The unknown-FLOP share of the summed row time, split by cause; None when there are no rows.

    Each cause lists its top ops by time (for shapes and formulas: the op to look at). For
    communication, `communication_overlap_pct` is the share of the collectives' busy time (union
    of their intervals) during which other kernels ran too.
    """
    total_ns = float(kernels.dur_ns.sum(dtype=np.float64))
    if len(kernels) == 0 or total_ns <= 0:
        return None
    cause = row_causes(kernels)
    gaps = []
    for c in _ORDER:
        rows = cause == c
        if rows.any():
            gaps.append(FlopGap(cause=c, pct=100.0 * float(kernels.dur_ns[rows].sum(dtype=np.float64)) / total_ns, detail=_DETAIL[c],
                                ops=_top_ops(kernels, rows, total_ns)))
    unknown_pct = 100.0 * float(kernels.dur_ns[cause != ""].sum(dtype=np.float64)) / total_ns
    return NoFlopFormula(pct=unknown_pct, causes=gaps, communication_overlap_pct=_overlap_pct(kernels))


def _overlap_pct(kernels: KernelTable) -> float | None:
    comm = communication_rows(kernels)
    if not comm.any():
        return None
    end = kernels.start_ns + kernels.dur_ns
    comm_ns = union_length_ns(kernels.start_ns[comm], end[comm])
    if comm_ns <= 0:
        return None
    both = overlap_length_ns(kernels.start_ns[comm], end[comm], kernels.start_ns[~comm], end[~comm])
    return 100.0 * both / comm_ns


def _top_ops(kernels: KernelTable, rows: np.ndarray, total_ns: float) -> list[dict]:
    """The ops (or, without one, kernel names) taking most of `rows`' time, largest first."""
    labels = np.where(kernels.op[rows] != "", kernels.op[rows], kernels.name[rows]).astype(object)
    codes, names = factorize(labels)
    time = np.bincount(codes, weights=kernels.dur_ns[rows].astype(np.float64), minlength=len(names))
    order = sorted(range(len(names)), key=lambda i: (-time[i], str(names[i])))[:_TOP_OPS]
    return [{"name": str(names[i]), "pct": 100.0 * float(time[i]) / total_ns} for i in order]


def _matches(values: np.ndarray, pattern: re.Pattern) -> np.ndarray:
    """pattern.search on each value, evaluated once per distinct value."""
    if len(values) == 0:
        return np.zeros(0, dtype=bool)
    codes, distinct = factorize(values)
    hit = np.array([bool(pattern.search(str(v))) for v in distinct], dtype=bool)
    return hit[codes]
