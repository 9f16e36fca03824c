"""Interval maths over half-open [start, end) integer-nanosecond intervals, vectorised.

Every busy-time figure in tbd goes through here: the union of kernel intervals across streams
(formula (1), docs/architecture.md), clipping to a window, covered length, and the overlap of two sets of intervals.
"""

from __future__ import annotations

import numpy as np


def merge(start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as disjoint, sorted intervals; touching intervals are joined.

    Args:
        start_ns, end_ns: equal-length integer arrays, end >= start (empty intervals are dropped).
    Returns:
        (starts, ends) of the merged intervals, int64, sorted by start.
    """
    s = np.asarray(start_ns, dtype=np.int64)
    e = np.asarray(end_ns, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if s.size == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    # A new merged interval starts wherever a start lies beyond every earlier end.
    running_end = np.maximum.accumulate(e)
    new_group = np.empty(s.size, dtype=bool)
    new_group[0] = True
    new_group[1:] = s[1:] > running_end[:-1]
    group_first = np.flatnonzero(new_group)
    group_last = np.append(group_first[1:] - 1, s.size - 1)
    return s[group_first], running_end[group_last]


def clip(start_ns: np.ndarray, end_ns: np.ndarray, lo_ns: int, hi_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Intervals cut to the window [lo, hi); those wholly outside become empty (start == end)."""
    s = np.clip(np.asarray(start_ns, dtype=np.int64), lo_ns, hi_ns)
    e = np.clip(np.asarray(end_ns, dtype=np.int64), lo_ns, hi_ns)
    return s, np.maximum(s, e)


def union_length_ns(start_ns: np.ndarray, end_ns: np.ndarray) -> int:
    """Total length covered by at least one interval, in ns."""
    s, e = merge(start_ns, end_ns)
    return int((e - s).sum())


def covered_in_window_ns(start_ns: np.ndarray, end_ns: np.ndarray, lo_ns: int, hi_ns: int) -> int:
    """Length of [lo, hi) covered by the union of the intervals, in ns."""
    s, e = clip(start_ns, end_ns, lo_ns, hi_ns)
    return union_length_ns(s, e)


def overlap_length_ns(a_start_ns: np.ndarray, a_end_ns: np.ndarray, b_start_ns: np.ndarray,
                      b_end_ns: np.ndarray) -> int:
    """Length covered by both the union of the a intervals and the union of the b intervals, in ns.

    |A ∩ B| = |A| + |B| - |A ∪ B|, each a union length: exact in integers.
    """
    both_s = np.concatenate([np.asarray(a_start_ns, dtype=np.int64), np.asarray(b_start_ns, dtype=np.int64)])
    both_e = np.concatenate([np.asarray(a_end_ns, dtype=np.int64), np.asarray(b_end_ns, dtype=np.int64)])
    return union_length_ns(a_start_ns, a_end_ns) + union_length_ns(b_start_ns, b_end_ns) - union_length_ns(both_s, both_e)


def difference(a_start_ns: np.ndarray, a_end_ns: np.ndarray, b_start_ns: np.ndarray,
               b_end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of the a intervals less the union of the b intervals, as disjoint sorted intervals.

    Cut at every end point of either set; a piece [p_i, p_i+1) is kept when a point p_i lies
    inside A (starts <= p_i minus ends <= p_i of A's merged intervals is 1) and outside B.
    """
    a_s, a_e = merge(a_start_ns, a_end_ns)
    b_s, b_e = merge(b_start_ns, b_end_ns)
    if a_s.size == 0 or b_s.size == 0:
        return a_s, a_e
    points = np.unique(np.concatenate([a_s, a_e, b_s, b_e]))
    lo, hi = points[:-1], points[1:]
    in_a = np.searchsorted(a_s, lo, side="right") > np.searchsorted(a_e, lo, side="right")
    in_b = np.searchsorted(b_s, lo, side="right") > np.searchsorted(b_e, lo, side="right")
    keep = in_a & ~in_b
    return merge(lo[keep], hi[keep])
