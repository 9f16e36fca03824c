"""The per-thread op tree of a Kineto trace, op self times, and FLOP attribution over the tree.

cpu_ops nest by time on their thread. `op_tree` sorts them so that parents precede children and
finds each op's parent: the latest earlier op on the thread still open at its start (exactly what
a stack of open ops gives, clock quirks included). `enclosing_ops` finds, for many launch calls at
once, the innermost op open at each; `self_times` each op's self time; `formula_roots` the
outermost ancestor-or-self with a FLOP formula; `split_flops` shares a root's FLOPs among the rows
beneath it. Conventions: `profilers.kineto.reader`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tbd.profilers.kineto.columns import OpColumns


@dataclass(frozen=True)
class OpTree:
    """cpu_ops sorted by (thread, start, longest first), so every parent precedes its children."""

    name: np.ndarray  # int32 name code (KinetoTrace.names)
    start_ns: np.ndarray
    end_ns: np.ndarray
    thread: np.ndarray  # int64 thread key (KinetoTrace: one per (pid, tid) pair)
    tid: np.ndarray  # int64 thread id
    signature: np.ndarray  # int32 signature code (KinetoTrace.signatures)
    parent: np.ndarray  # int64 index of the enclosing op on the same thread, -1 for roots
    depth: np.ndarray  # int64: 0 for roots
    sequence: np.ndarray | None = None  # int64 autograd sequence number, -1 none (OpColumns.sequence)
    stack: np.ndarray | None = None  # int32 "Call stack" code (KinetoTrace.stack_texts)

    def __len__(self) -> int:
        return len(self.start_ns)


def op_tree(ops: OpColumns) -> OpTree:
    """The tree of the trace's cpu_ops (see the module docstring)."""
    end = ops.start_ns + ops.dur_ns
    order = np.lexsort((-end, ops.start_ns, ops.thread))
    start, end, thread = ops.start_ns[order], end[order], ops.thread[order]
    lo = _thread_first(thread)
    # A stack of open ops gives each op the top of the stack after popping the ops that ended at
    # or before its start: exactly the latest earlier op on its thread whose end lies after it.
    parent = latest_above(end, lo, np.arange(len(start)) - 1, start)
    return OpTree(ops.name[order], start, end, thread, ops.tid[order], ops.signature[order], parent,
                  _depths(parent), None if ops.sequence is None else ops.sequence[order],
                  None if ops.stack is None else ops.stack[order])


def _thread_first(thread: np.ndarray) -> np.ndarray:
    """Per row of a thread-sorted array: the index of its thread's first row."""
    new = np.ones(len(thread), dtype=bool)
    new[1:] = thread[1:] != thread[:-1]
    firsts = np.flatnonzero(new)
    return np.repeat(firsts, np.diff(np.append(firsts, len(thread))))


def _depths(parent: np.ndarray) -> np.ndarray:
    """Depth of every node (roots 0), by walking all nodes up at once: as many rounds as levels."""
    depth = np.zeros(len(parent), dtype=np.int64)
    up = parent.copy()
    live = np.flatnonzero(up >= 0)
    while live.size:
        depth[live] += 1
        up[live] = parent[up[live]]
        live = live[up[live] >= 0]
    return depth


def latest_above(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """For each query q: the largest j with lo[q] <= j <= hi[q] and values[j] > threshold[q]; -1 if none.

    A query whose values[hi] is above its threshold has its answer at once (an op's first child,
    a launch inside the latest op). The others are searched together with a sparse table of
    block maxima (level k holds the max of the 2^k values starting at each index): from the
    largest block down, each query skips a block that lies inside its range and holds nothing
    above its threshold, so it skips exactly the run of values at or below the threshold that
    ends at hi. O((n + queries) log n) time, n log n memory.
    """
    lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    out = np.full(len(hi), -1, dtype=np.int64)
    some = np.flatnonzero(hi >= lo)  # a non-empty range
    direct = values[hi[some]] > threshold[some]
    out[some[direct]] = hi[some[direct]]
    rest = some[~direct]
    if not rest.size:
        return out
    n = len(values)
    levels = [values]  # levels[k][i]: the max of values[i .. i + 2^k - 1] (a block is only read whole)
    while (1 << len(levels)) <= n:
        prev, half = levels[-1], 1 << (len(levels) - 1)
        levels.append(np.maximum(prev[:-half], prev[half:]))
    p, low, limit = hi[rest] - 1, lo[rest], threshold[rest]  # hi itself is at or below the threshold
    for k in range(len(levels) - 1, -1, -1):
        size = 1 << k
        inside = np.flatnonzero(p - size + 1 >= low)
        skip = inside[levels[k][p[inside] - size + 1] <= limit[inside]]
        p[skip] -= size
    out[rest] = np.where(p >= low, p, -1)
    return out


def enclosing_ops(tree: OpTree, thread: np.ndarray, t_ns: np.ndarray) -> np.ndarray:
    """For each (thread key, time): the innermost op on that thread with start <= t < end, or -1.

    The innermost op open at t is the latest op on the thread starting at or before t whose end
    lies after t (the same rule as a parent, `op_tree`).
    """
    out = np.full(len(t_ns), -1, dtype=np.int64)
    if len(tree) == 0 or len(t_ns) == 0:
        return out
    # Ops are sorted by thread, then start: one searchsorted per thread's block of ops.
    firsts = np.flatnonzero(np.r_[True, tree.thread[1:] != tree.thread[:-1]])
    bounds = np.append(firsts, len(tree))
    threads = tree.thread[firsts]
    block = np.minimum(np.searchsorted(threads, thread), len(threads) - 1)
    known = threads[block] == thread
    lo = np.where(known, bounds[block], 0)
    hi = np.full(len(t_ns), -1, dtype=np.int64)
    for b in np.unique(block[known]).tolist():
        mine = np.flatnonzero(known & (block == b))
        hi[mine] = bounds[b] + np.searchsorted(tree.start_ns[bounds[b]:bounds[b + 1]], t_ns[mine], side="right") - 1
    return latest_above(tree.end_ns, lo, hi, t_ns)


def self_times(tree: OpTree) -> np.ndarray:
    """Self time of every op in ns: its duration minus its direct children's, per thread."""
    n = len(tree)
    dur = tree.end_ns - tree.start_ns
    child = tree.parent >= 0
    # A child's time counts against its parent only up to the parent's end (clock quirks).
    inside = np.minimum(tree.end_ns[child], tree.end_ns[tree.parent[child]]) - tree.start_ns[child]
    return dur - np.bincount(tree.parent[child], weights=inside, minlength=n).astype(np.int64)


def formula_roots(tree: OpTree, has_formula: np.ndarray) -> np.ndarray:
    """For each op, its outermost ancestor-or-self with a formula (`has_formula` per op), else -1.

    Level by level from the roots down: an op inherits its parent's root, or is its own.
    """
    root = np.full(len(tree), -1, dtype=np.int64)
    order = np.argsort(tree.depth, kind="stable")
    bounds = np.searchsorted(tree.depth[order], np.arange(int(tree.depth.max(initial=0)) + 2))
    for d in range(len(bounds) - 1):
        idx = order[bounds[d]:bounds[d + 1]]
        own = np.where(has_formula[idx], idx, -1)
        if d == 0:
            root[idx] = own
        else:
            inherited = root[tree.parent[idx]]
            root[idx] = np.where(inherited >= 0, inherited, own)
    return root


def split_flops(flops_of_root: np.ndarray, root: np.ndarray, weight_ns: np.ndarray,
                carries: np.ndarray | None = None) -> np.ndarray:
    """Each root's FLOPs shared among the rows under it in proportion to `weight_ns`; NaN elsewhere.

    Args:
        flops_of_root: FLOPs per op index (the root's own count; NaN where shapes were missing).
        root: per row, the op index of its formula root, -1 for none.
        weight_ns: per row, its share weight (kernel duration, or op self time).
        carries: per row, whether it may carry its root's FLOPs (False: a layout or set-up kernel, which
            gets 0 when a row under the same root carries them); None: every row.
    """
    out = np.full(len(root), np.nan)
    has = root >= 0
    if not has.any():
        return out
    r = root[has]
    w = weight_ns[has].astype(np.float64)
    size = len(flops_of_root)
    if carries is not None:
        kept = np.where(carries[has], w, 0.0)
        # A root whose every row is a non-carrier keeps the plain split: its FLOPs are never lost.
        carried = np.bincount(r, weights=carries[has], minlength=size)[r] > 0
        w = np.where(carried, kept, w)
        eligible = np.where(carried, carries[has], True)
    else:
        eligible = np.ones(len(r), dtype=bool)
    counts = np.bincount(r, weights=eligible, minlength=size)[r]
    sums = np.bincount(r, weights=w, minlength=size)[r]
    # All-zero weights (zero-length rows) share equally among the eligible rows rather than dividing by zero.
    share = np.where(sums > 0, w / np.where(sums > 0, sums, 1), np.where(eligible, 1.0 / np.maximum(counts, 1), 0.0))
    out[has] = flops_of_root[r] * share
    return out
