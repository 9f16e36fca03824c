"""The cluster summary of a multi-rank (torch.distributed) job: communication, overlap, straggler, scaling.

Per rank, over its trace window (the span of its ProfilerStep spans, the window of GPU busy %):
comm_s is the length of the union of its communication intervals clipped to the window (NCCL/RCCL
kernels on a GPU, the backend's collective spans on a CPU: profilers.kineto.comm), compute_s
likewise for its compute intervals (every other kernel; on a CPU the top-level ops of the threads
that run no collective, less their time inside collective calls), overlap_s the length of the intersection of the two unions, and
exposed_comm_s = comm_s - overlap_s: communication nothing hid. Shares are of the window's wall
time; overlap_pct of comm_s. Per-step figures divide by the traced steps.

Across ranks: the global throughput is the sum of the ranks' own; the communication shares are
averaged (and the largest kept); the straggler is the rank with the most compute per step.

Pure: arrays and records in, records out (docs/profile-json.md, "cluster").
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tbd.analysis.intervals import clip, difference, merge, overlap_length_ns, union_length_ns
from tbd.analysis.quality import interval_pct
from tbd.core.profile_cluster import Cluster, ClusterRank, ScalingRow
from tbd.core.profile_result import Profile, Throughput


@dataclass(frozen=True)
class CommTimes:
    """One rank's communication and compute time over its trace window (seconds, whole window)."""

    window_s: float
    steps: int  # traced steps (0: the trace has no ProfilerStep spans; per-step figures are then null)
    comm_s: float  # union of the communication intervals in the window
    compute_s: float  # union of the compute intervals in the window
    overlap_s: float  # time both ran
    backend_kind: str  # "nccl" | "rccl" | "gloo" | "mpi" | "ucc" | "none" (no collective seen)

    @property
    def exposed_comm_s(self) -> float:
        """Communication time no compute ran beside."""
        return self.comm_s - self.overlap_s


def comm_times(comm_start_ns: np.ndarray, comm_end_ns: np.ndarray, compute_start_ns: np.ndarray,
               compute_end_ns: np.ndarray, *, window_start_ns: int, window_end_ns: int, steps: int,
               backend_kind: str, wait_start_ns: np.ndarray | None = None,
               wait_end_ns: np.ndarray | None = None) -> CommTimes:
    """Union lengths of the two kinds of intervals inside the window, and their overlap.

    Args:
        comm_start_ns, comm_end_ns, compute_start_ns, compute_end_ns: integer-ns intervals, any
            order, overlapping or not (each kind is merged first); they are clipped to the window.
        window_start_ns, window_end_ns: the trace window [start, end) in ns.
        steps: traced steps in the window. backend_kind: recorded as given.
        wait_start_ns, wait_end_ns: time to leave out of compute (a CPU rank's host time inside
            collective calls: profilers.kineto.comm); None: none.
    Returns:
        CommTimes in seconds (exact integer ns until the final division).
    Raises:
        ValueError: the window has no length, or steps is negative.
    """
    if window_end_ns <= window_start_ns:
        raise ValueError("trace window has no length")
    if steps < 0:
        raise ValueError("negative step count")
    cs, ce = merge(*clip(comm_start_ns, comm_end_ns, window_start_ns, window_end_ns))
    ks, ke = merge(*clip(compute_start_ns, compute_end_ns, window_start_ns, window_end_ns))
    if wait_start_ns is not None and wait_end_ns is not None and len(wait_start_ns):
        ks, ke = difference(ks, ke, wait_start_ns, wait_end_ns)
    comm_ns, compute_ns = union_length_ns(cs, ce), union_length_ns(ks, ke)
    overlap_ns = overlap_length_ns(cs, ce, ks, ke)
    return CommTimes((window_end_ns - window_start_ns) / 1e9, steps, comm_ns / 1e9, compute_ns / 1e9,
                     overlap_ns / 1e9, backend_kind)


@dataclass(frozen=True)
class RankInput:
    """One rank as the caller read it: its own profile and, when its trace was readable, its CommTimes."""

    rank: int | None
    host: str | None
    source: str  # run directory or trace path
    profile: Profile  # that rank's own profile
    comm: CommTimes | None
    comm_reason: str | None  # why comm is None


@dataclass(frozen=True)
class ScalingInput:
    """Throughput measured with `processes` ranks (the whole job's)."""

    processes: int
    throughput: float | None
    unit: str
    source: str | None
    reason: str | None = None  # why throughput is None


def cluster_summary(ranks: Sequence[RankInput], *, world_size: int | None, nnodes: int | None,
                    backend: str | None, scaling: Sequence[ScalingInput] | None = None,
                    scaling_reason: str | None = None) -> Cluster:
    """The cluster summary of the ranks given (module docstring).

    Args:
        ranks: one RankInput per measured rank, in rank order.
        world_size: ranks in the job (may exceed len(ranks) when only some were traced); None unknown.
        nnodes: hosts in the job; None unknown. backend: the process group's backend as recorded.
        scaling: throughput at several process counts (one with processes == 1 for efficiencies);
            None: not measured, `scaling_reason` says why.
    Returns:
        Cluster; every null figure has its reason in `reasons` (per rank: ClusterRank.reasons).
    Raises:
        ValueError: no ranks.
    """
    if not ranks:
        raise ValueError("no ranks to summarise")
    rows = [cluster_rank(r) for r in ranks]
    reasons: dict[str, str] = {}
    total, unit = global_throughput(rows, world_size, reasons)
    shares = [r.comm_share_pct for r in rows if r.comm_share_pct is not None]
    overlaps = [r.overlap_pct for r in rows if r.overlap_pct is not None]
    exposed = [r.exposed_comm_share_pct for r in rows if r.exposed_comm_share_pct is not None]
    if not shares:
        reasons["comm_share_mean_pct"] = reasons["comm_share_max_pct"] = reasons["exposed_comm_share_mean_pct"] = \
            "no rank's communication was measured (see each rank's reasons)"
    if not overlaps:
        reasons["overlap_mean_pct"] = "no rank communicated in its trace window, or none was measured"
    straggler, lag = _straggler(rows, reasons)
    rows_scaling, why = scaling_rows(scaling, scaling_reason)
    return Cluster(
        world_size=world_size, nnodes=nnodes, backend=backend, ranks_measured=len(rows), global_throughput=total,
        throughput_unit=unit, comm_share_mean_pct=_mean(shares), comm_share_max_pct=max(shares) if shares else None,
        overlap_mean_pct=_mean(overlaps), exposed_comm_share_mean_pct=_mean(exposed),
        straggler_rank=None if straggler is None else straggler.rank,
        straggler_source=None if straggler is None else straggler.source, straggler_lag_s=lag, ranks=rows,
        scaling=rows_scaling, scaling_reason=why, reasons=reasons)


def cluster_rank(r: RankInput) -> ClusterRank:
    """One rank's row: figures from its own profile, communication from its CommTimes."""
    p = r.profile
    m = p.metrics
    reasons: dict[str, str] = {}
    for key, value in (("throughput", m.throughput), ("busy_pct", m.gpu_busy_pct),
                       ("flop_util_pct", m.flop_util_pct), ("cpu_util_pct", m.cpu_util_pct)):
        if value.value is None and value.reason:
            reasons[key] = value.reason
    if m.memory_bytes.allocator_peak is None:
        reasons["allocator_peak_bytes"] = m.memory_bytes.reasons.get("allocator_peak", "not recorded")
    iteration_s = median_iteration_s(p)
    if iteration_s is None:
        reasons["iteration_s"] = "no iterations were timed (a trace without ProfilerStep spans)"
    comm = _comm_figures(r.comm, r.comm_reason, reasons)
    return ClusterRank(
        rank=r.rank, host=r.host if isinstance(r.host, str) else None, source=r.source, status=p.status, throughput=m.throughput.value,
        throughput_unit=m.throughput.unit, iteration_s=iteration_s, busy_pct=m.gpu_busy_pct.value,
        flop_util_pct=m.flop_util_pct.value, cpu_util_pct=m.cpu_util_pct.value,
        allocator_peak_bytes=m.memory_bytes.allocator_peak, backend_kind=None if r.comm is None else r.comm.backend_kind,
        reasons=reasons, **comm)


def median_iteration_s(profile: Profile) -> float | None:
    """Median of the iteration times of the profile's timing window (all of them without one), s."""
    it = profile.iterations
    if it is None or not it.times_s:
        return None
    times = it.times_s
    if it.timing_window is not None and len(it.timing_window) == 2:
        first, last = it.timing_window
        times = times[first:last + 1] or times
    return float(statistics.median(times))


def _comm_figures(comm: CommTimes | None, why: str | None, reasons: dict[str, str]) -> dict:
    """ClusterRank's communication fields (per step, shares), and the reasons of the null ones."""
    keys = ("steps", "window_s", "comm_s", "compute_s", "overlap_s", "comm_share_pct", "overlap_pct",
            "exposed_comm_share_pct")
    if comm is None:
        for key in keys:
            reasons[key] = why or "communication not measured"
        return dict.fromkeys(keys)
    out = {"steps": comm.steps, "window_s": comm.window_s,
           "comm_share_pct": 100.0 * comm.comm_s / comm.window_s,
           "exposed_comm_share_pct": 100.0 * comm.exposed_comm_s / comm.window_s,
           "overlap_pct": 100.0 * comm.overlap_s / comm.comm_s if comm.comm_s > 0 else None}
    if comm.comm_s <= 0:
        reasons["overlap_pct"] = "no communication in the trace window"
    if comm.steps > 0:
        out.update(comm_s=comm.comm_s / comm.steps, compute_s=comm.compute_s / comm.steps,
                   overlap_s=comm.overlap_s / comm.steps)
    else:
        out.update(comm_s=None, compute_s=None, overlap_s=None)
        for key in ("comm_s", "compute_s", "overlap_s"):
            reasons[key] = "the trace has no ProfilerStep spans to divide by (see window_s and the shares)"
    return out


def global_throughput(rows: Sequence[ClusterRank], world_size: int | None,
                      reasons: dict[str, str]) -> tuple[float | None, str | None]:
    """Sum of the ranks' throughputs, and its unit; None with `reasons["global_throughput"]` set when
    a rank's is null, the units differ, or fewer ranks were measured than the job ran."""
    unit = rows[0].throughput_unit
    missing = [r for r in rows if r.throughput is None]
    if missing:
        r = missing[0]
        reasons["global_throughput"] = (f"rank {_name(r)} has no throughput: "
                                        f"{r.reasons.get('throughput', 'not measured')}")
        return None, unit
    if any(r.throughput_unit != unit for r in rows):
        reasons["global_throughput"] = "the ranks count throughput in different units: " + ", ".join(
            sorted({r.throughput_unit for r in rows}))
        return None, None
    if world_size is not None and world_size > len(rows):
        reasons["global_throughput"] = (f"only {len(rows)} of the job's {world_size} ranks were measured: the sum "
                                        "of theirs is not the job's")
        return None, unit
    return float(sum(r.throughput for r in rows)), unit


def _straggler(rows: Sequence[ClusterRank], reasons: dict[str, str]) -> tuple[ClusterRank | None, float | None]:
    """The rank with the most compute per step, and its lag over the median of the others', s.

    In synchronous data-parallel training every rank's step takes equally long: the faster ranks
    wait inside the collective for the slowest. Their step times (and their throughputs) agree, so
    step time cannot show who is slow; compute time per step can, since waiting is not compute.
    """
    known = [r for r in rows if r.compute_s is not None]
    if len(known) < 2:
        reasons["straggler_rank"] = reasons["straggler_source"] = reasons["straggler_lag_s"] = (
            "one rank: nothing to compare it with" if len(rows) < 2 else
            f"compute per step is known for {len(known)} of {len(rows)} ranks (see each rank's reasons)")
        return None, None
    slowest = max(known, key=lambda r: r.compute_s)
    others = [r.compute_s for r in known if r is not slowest]
    return slowest, slowest.compute_s - float(statistics.median(others))


def scaling_rows(scaling: Sequence[ScalingInput] | None,
                 reason: str | None) -> tuple[list[ScalingRow], str | None]:
    """Each point's efficiency: throughput(n) / (n x throughput(1)) x 100, sorted by n.

    Returns: the rows, and the reason kept (`reason` when scaling is None; why efficiencies are
    null when no one-process point has a throughput).
    """
    if scaling is None:
        return [], reason or "not measured"
    base = [s for s in scaling if s.processes == 1 and s.throughput]
    one = base[0] if base else None
    if one is None:
        reason = reason or "no one-process run with a throughput to compare with"
    rows = []
    for s in sorted(scaling, key=lambda s: s.processes):
        why = s.reason if s.throughput is None else None
        efficiency = None
        if s.throughput is None:
            why = why or "no throughput"
        elif one is None:
            why = "no one-process throughput to compare with"
        elif one.unit != s.unit:
            why = f"counted in {s.unit}, the one-process run in {one.unit}"
        else:
            efficiency = 100.0 * s.throughput / (s.processes * one.throughput)
        rows.append(ScalingRow(s.processes, s.throughput, s.unit, s.source, efficiency, why))
    return rows, reason


def _mean(values: list[float]) -> float | None:
    return float(statistics.fmean(values)) if values else None


def _name(r: ClusterRank) -> str:
    return str(r.rank) if r.rank is not None else r.source


# The throughput of several ranks trained together: the sum of each rank's own.
# Each rank's throughput covers its own timing windows; the ranks ran the same iterations in lock
# step (DDP's all-reduce holds every rank to the slowest), so their windows overlap in time and the
# cluster processed the sum of their samples per second. With several timing windows (--repeat),
# window r of the cluster is the sum of every rank's window r, which gives the sum its own spread
# and interval, as one process's windows give its own.
def summed_throughput(ranks: list[Throughput], missing: list[str] | None = None) -> Throughput:
    """The ranks' throughputs summed; null with the reason when a rank's is null or a rank is `missing`."""
    unit = ranks[0].unit if ranks else ""
    absent = list(missing or []) + [f"rank {i}" for i, t in enumerate(ranks) if t.value is None]
    if absent or not ranks:
        return Throughput(None, unit, reason=f"no throughput from {', '.join(absent) or 'any rank'}: the cluster's "
                                             "is the sum of every rank's")
    total = float(sum(t.value for t in ranks))  # type: ignore[misc]  # none is None here
    also = {u: float(sum(t.also.get(u, 0.0) for t in ranks)) for u in ranks[0].also
            if all(u in t.also for t in ranks)}
    windows = min(len(t.repeats) for t in ranks)
    repeats = [float(sum(t.repeats[r] for t in ranks)) for r in range(windows)] if windows >= 2 else []
    spread = None
    if repeats:
        spread = (max(repeats) - min(repeats)) / float(np.median(repeats)) * 100.0
    return Throughput(total, unit, also=also, repeats=repeats, spread_pct=spread,
                      interval_pct=interval_pct(repeats) if repeats else None)
