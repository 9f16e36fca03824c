"""Kernels grouped by name, ranked by the time that reaching the roofline would win back, and the paper's
low-utilization long kernels (Tables V/VI)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from tbd.core.records import KernelTable


@dataclass(frozen=True)
class KernelGroup:
    """All calls of one kernel (or CPU op) name in the window."""

    name: str
    calls: int
    time_ns: int
    time_share_pct: float  # of the summed time of all rows
    flops: float  # FLOPs of the calls whose FLOPs are known; NaN when none are
    flop_source: str  # "analytic", "measured" or "" (unknown)
    precision: str  # the precision most of the group's time ran in
    util_pct: float  # flops / (peak x time) x 100, NaN when unknown
    # Why its FLOPs are unknown (records.FLOP_GAPS): the gap of most of its unknown rows' time;
    # "" when known or when the reader does not tell.
    flop_gap: str = ""
    # Calls whose FLOPs are unknown, and their time: a group partly counted (the same kernel launched by an op
    # with shapes and by one without) keeps the FLOPs of its counted calls, and its utilization is theirs.
    uncounted_calls: int = 0
    uncounted_time_ns: int = 0

    @property
    def above_peak(self) -> bool:
        """More FLOP/s than its precision's peak: the precision or the peak is wrong, not the kernel."""
        return bool(np.isfinite(self.util_pct) and self.util_pct > 100.0)


def group_kernels(kernels: KernelTable, util_pct: np.ndarray) -> list[KernelGroup]:
    """Group rows by name, longest total time first (ties: by name).

    A group's FLOPs are its counted rows' (NaN when none is counted), so the groups' FLOPs add up to the
    window's. Its utilization is Σ flops / Σ (peak x duration) over the rows whose utilization is known,
    their utilizations weighted by duration: a partly-counted kernel is judged on the calls counted,
    never diluted by the time of calls that were not (`uncounted_calls` says how many). A group's
    precision is the one most of its time ran in (ties: the first by name); its FLOP source is the one
    source all its known rows share, "" if they differ.
    """
    if len(kernels) == 0:
        return []
    total_ns = float(kernels.dur_ns.sum(dtype=np.float64))
    inverse, names = factorize(kernels.name)
    size = len(names)
    dur = kernels.dur_ns.astype(np.float64)
    time_ns = np.bincount(inverse, weights=dur, minlength=size)
    calls = np.bincount(inverse, minlength=size)
    flops = np.bincount(inverse, weights=np.nan_to_num(kernels.flops, nan=0.0), minlength=size)
    uncounted = ~np.isfinite(kernels.flops)
    uncounted_calls = np.bincount(inverse, weights=uncounted, minlength=size).astype(np.int64)
    uncounted_time = np.bincount(inverse, weights=np.where(uncounted, dur, 0.0), minlength=size)
    unknown = uncounted_calls == calls  # no call counted
    # Σ over rows of util x dur = Σ flops / peak-rate seconds: the duration-weighted mean, over known rows.
    util_known = np.isfinite(util_pct)
    weighted = np.bincount(inverse, weights=np.where(util_known, util_pct * dur, 0.0), minlength=size)
    util_time = np.bincount(inverse, weights=np.where(util_known, dur, 0.0), minlength=size)
    util_calls = np.bincount(inverse, weights=util_known, minlength=size)
    precision = _dominant(inverse, size, kernels.precision, dur)
    source = _shared(inverse, size, kernels.flop_source)
    gaps = _dominant(inverse, size, kernels.flop_gap, np.where(np.isfinite(kernels.flops), 0.0, dur)) \
        if kernels.flop_gap is not None else [""] * size
    by_name = np.empty(size, dtype=np.int64)
    by_name[sorted(range(size), key=names.__getitem__)] = np.arange(size)
    groups = []
    for g in np.lexsort((by_name, -time_ns)).tolist():
        groups.append(KernelGroup(
            name=str(names[g]),
            calls=int(calls[g]),
            time_ns=int(time_ns[g]),
            time_share_pct=100.0 * time_ns[g] / total_ns if total_ns > 0 else float("nan"),
            flops=float("nan") if unknown[g] else float(flops[g]),
            flop_source="" if unknown[g] else source[g],
            precision=precision[g],
            util_pct=float("nan") if util_calls[g] == 0 or util_time[g] <= 0 else float(weighted[g] / util_time[g]),
            flop_gap=gaps[g] if uncounted_calls[g] else "",
            uncounted_calls=int(uncounted_calls[g]),
            uncounted_time_ns=int(uncounted_time[g]),
        ))
    return groups


def factorize(values: np.ndarray | list) -> tuple[np.ndarray, list]:
    """(codes, distinct values): codes[i] indexes values[i] in the distinct list (first-seen order).

    `values` is an array or a list of any hashables (tuples included).

    A dict over the values, not np.unique: kernel names run to hundreds of characters, and a
    fixed-width string copy of them to sort would cost far more than hashing each once; and one
    C-level lookup per value, the dict numbering a value it lacks as it meets it (its default is its
    own length).
    """
    items = values.tolist() if isinstance(values, np.ndarray) else list(values)
    index: defaultdict = defaultdict(None)
    index.default_factory = index.__len__
    codes = np.fromiter(map(index.__getitem__, items), dtype=np.int64, count=len(items))
    return codes, list(index)


def _dominant(group: np.ndarray, size: int, labels: np.ndarray, dur_ns: np.ndarray) -> list[str]:
    """Per group, the label with the most summed duration (ties: the first by name)."""
    code, distinct = factorize(labels)
    order = sorted(range(len(distinct)), key=lambda i: str(distinct[i]))
    per = np.bincount(group * len(distinct) + code, weights=dur_ns, minlength=size * len(distinct))
    per = per.reshape(size, len(distinct))[:, order]
    return [str(distinct[order[i]]) for i in np.argmax(per, axis=1).tolist()]


def _shared(group: np.ndarray, size: int, labels: np.ndarray) -> list[str]:
    """Per group, the one non-empty label its rows carry, "" when none or several."""
    code, distinct = factorize(labels)
    seen = np.bincount(group * len(distinct) + code, minlength=size * len(distinct)).reshape(size, len(distinct)) > 0
    named = [i for i, label in enumerate(distinct) if label]
    out = [""] * size
    if named:
        count = seen[:, named].sum(axis=1)
        first = np.array(named)[np.argmax(seen[:, named], axis=1)]
        for g in np.flatnonzero(count == 1).tolist():
            out[g] = str(distinct[first[g]])
    return out


def average_util_pct(groups: list[KernelGroup]) -> float:
    """Busy-time-weighted average utilization of the groups whose utilization is known; NaN if none.

    Groups above their peak are left out: their figure is a misdetection, and one TF32 GEMM
    measured against the FP32 peak at 500 % would lift the threshold past every honest kernel.
    """
    known = [g for g in groups if np.isfinite(g.util_pct) and not g.above_peak]
    time = sum(g.time_ns for g in known)
    if time <= 0:
        return float("nan")
    return sum(g.util_pct * g.time_ns for g in known) / time


def low_util_kernels(groups: list[KernelGroup], threshold_pct: float) -> list[KernelGroup]:
    """Groups with known utilization below `threshold_pct`, longest share of time first (Table V)."""
    low = [g for g in groups if np.isfinite(g.util_pct) and not g.above_peak and g.util_pct < threshold_pct]
    return sorted(low, key=lambda g: -g.time_ns)


def recoverable_ns(time_ns: float, roofline_pct: float | None) -> float:
    """Time a group would save running at its roof: time x (1 - achieved / attainable), in ns.

    Args:
        time_ns: the group's summed time.
        roofline_pct: its achieved share of what the roofline allows at its intensity (the bandwidth share
            for data movement), `roofline.roofline_point`'s `roofline_pct`.
    Returns:
        The time, NaN where the share is unknown (bound unknown) or above 100 % (an estimate that counted
        more than the device did: what it could win back is not known, and never below 0).
    """
    if roofline_pct is None or not math.isfinite(roofline_pct) or roofline_pct > 100.0 or roofline_pct < 0.0:
        return float("nan")
    return float(time_ns) * (1.0 - roofline_pct / 100.0)


def by_recoverable_time(groups: list[KernelGroup], recoverable: dict[str, float]) -> list[KernelGroup]:
    """The groups whose recoverable time (`recoverable_ns`, by name) is known, most first (ties: by name).

    The default ranking (issue 28): where the time that reaching the roofline would win back is, the
    long group at a middling share of its roof ahead of the tiny one at a low share. The paper's Table V
    (`low_util_kernels`: below the average utilization, longest first) stays a view beside it.
    """
    known = [g for g in groups if math.isfinite(recoverable.get(g.name, float("nan")))]
    return sorted(known, key=lambda g: (-recoverable[g.name], g.name))
