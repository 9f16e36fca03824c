"""The per-thread op tree of a Kineto trace, op self times, and FLOP attribution over the tree.

cpu_ops nest by time on their thread; `op_tree` finds each op's parent, `enclosing_op` the
innermost op open at a launch call, `self_times` each op's self time. `formula_roots` finds the
outermost ancestor with a FLOP formula and `split_flops` shares its FLOPs among the rows beneath
it, as `profilers.kineto` describes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tbd.profilers.kineto_events import thread_codes
from tbd.profilers.trace_events import column, us_to_ns
from tbd.records import OpShapes


@dataclass(frozen=True)
class OpTree:
    """cpu_ops sorted by (thread, start, longest first) so every parent precedes its children."""

    events: list
    name: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    thread: np.ndarray
    tid: np.ndarray
    parent: np.ndarray  # index of the enclosing op on the same thread, -1 for roots
    first: dict  # thread code -> (first index, one past last index)
    codes: dict  # (pid, tid) -> thread code


def op_tree(events: list, source: str) -> OpTree:
    start = np.array(column(events, source, "cpu_op", lambda e: us_to_ns(e["ts"])), dtype=np.int64)
    end = start + np.array(column(events, source, "cpu_op", lambda e: us_to_ns(e["dur"])), dtype=np.int64)
    codes: dict = {}
    thread = thread_codes(events, codes)
    tid = np.array(column(events, source, "cpu_op", lambda e: int(e["tid"])), dtype=np.int64)
    order = np.lexsort((-end, start, thread))
    start, end, thread, tid = start[order], end[order], thread[order], tid[order]
    evs = [events[i] for i in order]
    name = np.array([str(e.get("name", "")) for e in evs], dtype=object)
    parent = _parents(start.tolist(), end.tolist(), thread.tolist())
    bounds = np.flatnonzero(np.diff(thread)) + 1 if len(thread) else np.array([], dtype=np.int64)
    lo = np.concatenate(([0], bounds)).astype(int) if len(thread) else np.array([], dtype=int)
    hi = np.concatenate((bounds, [len(thread)])).astype(int) if len(thread) else np.array([], dtype=int)
    first = {int(thread[a]): (int(a), int(b)) for a, b in zip(lo, hi)}
    return OpTree(evs, name, start, end, thread, tid, parent, first, codes)


def _parents(start: list, end: list, thread: list) -> np.ndarray:
    """Parent of each op by time nesting: the nearest earlier op on the thread still open at its start."""
    parent = np.full(len(start), -1, dtype=np.int64)
    stack: list[int] = []
    current = None
    for i, (s, t) in enumerate(zip(start, thread)):
        if t != current:
            stack, current = [], t
        # An op that ended at or before this start is a finished sibling subtree, not a parent.
        while stack and end[stack[-1]] <= s:
            stack.pop()
        if stack:
            parent[i] = stack[-1]
        stack.append(i)
    return parent


def enclosing_op(ops: OpTree, thread: int, t_ns: int) -> int:
    """Innermost op on `thread` with start <= t < end, or -1."""
    span = ops.first.get(thread)
    if span is None:
        return -1
    lo, hi = span
    # The last op starting at or before t is the enclosing op or a descendant of it.
    i = lo + int(np.searchsorted(ops.start_ns[lo:hi], t_ns, side="right")) - 1
    while i >= lo and ops.end_ns[i] <= t_ns:
        i = int(ops.parent[i])
    return i if i >= lo else -1


def self_times(ops: OpTree) -> np.ndarray:
    """Self time of every op in ns: its duration minus its direct children's, per thread."""
    n = len(ops.name)
    dur = ops.end_ns - ops.start_ns
    child = ops.parent >= 0
    # A child's time counts against its parent only up to the parent's end (clock quirks).
    inside = np.minimum(ops.end_ns[child], ops.end_ns[ops.parent[child]]) - ops.start_ns[child]
    return dur - np.bincount(ops.parent[child], weights=inside, minlength=n).astype(np.int64)


def _shapes(ev: dict):
    args = ev.get("args") or {}
    return OpShapes(
        name=str(ev.get("name", "")),
        input_dims=_tuples(args.get("Input Dims", ())),
        input_types=tuple(args.get("Input type", ())),
        concrete_inputs=tuple(args.get("Concrete Inputs", ())),
    )


def _tuples(value):
    """Nested JSON lists -> nested tuples (hashable, immutable); other values unchanged."""
    if type(value) is not list:
        return value
    # Fast path for the usual shape lists of ints; TensorList inputs nest one level deeper.
    return tuple(v if type(v) is not list else (tuple(v) if all(type(x) is int for x in v) else _tuples(v))
                 for v in value)


def formula_roots(ops: OpTree, wanted: np.ndarray, flops_of) -> tuple[np.ndarray, dict]:
    """For each op in `wanted`, its outermost ancestor-or-self with a formula (-1 if none).

    Returns the per-op root index (for all ops; -1 where not computed or none) and {root: FLOPs}.
    Parents precede children, so one forward pass sees each root before its descendants.
    """
    need = np.zeros(len(ops.name), dtype=bool)
    for i in np.unique(wanted[wanted >= 0]).tolist():
        while i >= 0 and not need[i]:  # mark the whole ancestor chain
            need[i] = True
            i = int(ops.parent[i])
    root = np.full(len(ops.name), -1, dtype=np.int64)
    flops: dict[int, float] = {}
    for i in np.flatnonzero(need).tolist():
        p = int(ops.parent[i])
        if p >= 0 and root[p] >= 0:
            root[i] = root[p]
            continue
        value = flops_of(_shapes(ops.events[i]))
        if value is not None:
            root[i] = i
            flops[i] = float(value)
    return root, flops


def split_flops(total: dict, root: np.ndarray, weight_ns: np.ndarray) -> np.ndarray:
    """Each root's FLOPs shared among the rows under it in proportion to `weight_ns`; NaN elsewhere."""
    out = np.full(len(root), np.nan)
    has = root >= 0
    if not has.any():
        return out
    keys, inverse = np.unique(root[has], return_inverse=True)
    w = weight_ns[has].astype(np.float64)
    sums = np.bincount(inverse, weights=w, minlength=keys.size)
    counts = np.bincount(inverse, minlength=keys.size)
    value = np.array([total[int(k)] for k in keys])
    # All-zero weights (zero-length rows) share equally rather than dividing by zero.
    share = np.where(sums[inverse] > 0, w / np.where(sums[inverse] > 0, sums[inverse], 1), 1.0 / counts[inverse])
    out[has] = value[inverse] * share
    return out
