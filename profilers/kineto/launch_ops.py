"""The op behind each of some launch calls of a Kineto trace, found by the calls' correlation ids.

`profilers.cupti_counters` pairs the CUPTI range profiler's counter ranges with kernel launch calls
(cudaLaunchKernel, ...) and needs, per call, what `profilers.kineto.reader` gives a kernel row: the
launching op (the innermost cpu_op on the call's thread enclosing the call's start) and the op the
row's FLOPs come from (the outermost enclosing op with a FLOP formula, else the launching op), with
that op call's analytic FLOPs. The rules are the reader's (its module docstring); this module only
answers them for calls that no kernel event names. The caller passes the FLOP formula in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tbd.core.records import NO_FORMULA, NO_LAUNCH_OP, SHAPES_NOT_RECORDED, SHAPES_UNREADABLE
from tbd.profilers.kineto.columns import KinetoTrace
from tbd.profilers.kineto.completion import complete_shapes
from tbd.profilers.kineto.signatures import signature_flops
from tbd.profilers.kineto.tree import enclosing_ops, formula_roots, op_tree


@dataclass(frozen=True)
class LaunchOps:
    """Per correlation id asked, in the order asked.

    Attributes:
        found: a runtime/driver call with that correlation id is in the trace.
        launching_op: the innermost op enclosing the call ("" none).
        op: the op its FLOPs come from: the outermost enclosing op with a formula, else the launching op.
        op_call: that op call's index in the trace's op tree (-1 none): calls of one op are told apart by it.
        op_flops: that op call's analytic FLOPs; NaN where unknown (`op_flops_gap` says why).
        op_flops_gap: "" where known, else `core.records`' NO_LAUNCH_OP, NO_FORMULA, SHAPES_NOT_RECORDED or
            SHAPES_UNREADABLE.
    """

    found: np.ndarray
    launching_op: np.ndarray
    op: np.ndarray
    op_call: np.ndarray
    op_flops: np.ndarray
    op_flops_gap: np.ndarray


def launch_ops(trace: KinetoTrace, correlations: np.ndarray, *, flops_of, precision_of) -> LaunchOps:
    """The ops behind the launch calls with these correlation ids (module docstring).

    Args:
        trace: what `reader.read_trace_file` returned.
        correlations: int64 correlation ids; the first call in the file with an id wins, as in the reader.
        flops_of, precision_of: the FLOP formula and precision rule (`reader.trace_records`).
    """
    n = len(correlations)
    calls = trace.launches
    order = np.argsort(calls.correlation, kind="stable")
    ids, first = np.unique(calls.correlation[order], return_index=True)
    first = order[first]
    pos = np.minimum(np.searchsorted(ids, correlations), max(len(ids) - 1, 0))
    found = (ids[pos] == correlations) if len(ids) else np.zeros(n, dtype=bool)
    tree = op_tree(trace.ops)
    launching = np.full(n, -1, dtype=np.int64)
    call = first[pos[found]]
    launching[found] = enclosing_ops(tree, calls.thread[call], calls.start_ns[call])
    completion = complete_shapes(trace, tree)
    signature = completion.signature
    sig = signature_flops(completion.signatures, flops_of, precision_of)
    root = formula_roots(tree, sig.has_formula[signature]) if len(tree) else np.zeros(0, dtype=np.int64)
    has_op = launching >= 0
    op_call = np.full(n, -1, dtype=np.int64)
    op_call[has_op] = np.where(root[launching[has_op]] >= 0, root[launching[has_op]], launching[has_op])
    rooted = np.zeros(n, dtype=bool)
    rooted[has_op] = root[launching[has_op]] >= 0
    op_flops = np.full(n, np.nan)
    op_flops[rooted] = sig.flops[signature[op_call[rooted]]]
    gap = np.full(n, "", dtype=object)
    gap[~has_op] = NO_LAUNCH_OP
    gap[has_op & ~rooted] = NO_FORMULA
    unknown = rooted & ~np.isfinite(op_flops)
    recorded = sig.shapes_recorded[signature[op_call[unknown]]]
    gap[np.flatnonzero(unknown)] = np.where(recorded, SHAPES_UNREADABLE, SHAPES_NOT_RECORDED)
    return LaunchOps(found, _names(trace, tree, launching), _names(trace, tree, op_call), op_call, op_flops, gap)


def _names(trace: KinetoTrace, tree, index: np.ndarray) -> np.ndarray:
    out = np.full(len(index), "", dtype=object)
    has = index >= 0
    out[has] = trace.names[tree.name[index[has]]]
    return out
