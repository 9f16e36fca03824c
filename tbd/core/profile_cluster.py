"""The cluster section of a profile.json: a multi-rank (torch.distributed) job as a whole.

Its records (`Cluster`, one `ClusterRank` per rank, one `ScalingRow` per process count), written
as profile.json's "cluster" and read back with the same validation as the rest of the profile
(tbd/core/field_checks.py). analysis/cluster.py computes them; docs/profile-json.md is the contract.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tbd.core import field_checks as c


@dataclass(frozen=True)
class ClusterRank:
    """One rank of a multi-rank (torch.distributed) job: its own figures and its communication.

    comm_s, compute_s and overlap_s are per traced step (seconds); the shares are of its trace
    window's wall time (analysis/cluster.py, docs/profile-json.md "cluster")."""

    rank: int | None  # the process's global rank; None when the trace does not say
    host: str | None
    source: str  # its run directory or trace file
    status: str  # its profile's: "complete" or "partial"
    throughput: float | None  # its own, per second
    throughput_unit: str
    iteration_s: float | None  # median of its timing window's iteration times
    busy_pct: float | None  # GPU busy % (formula (1)); null on the CPU
    flop_util_pct: float | None
    cpu_util_pct: float | None
    allocator_peak_bytes: int | None
    backend_kind: str | None  # "nccl", "rccl", "gloo", "none" (no collective in its trace); null: not measured
    steps: int | None  # traced steps the per-step figures divide by
    window_s: float | None  # its trace window's wall time
    comm_s: float | None  # per step: union of its communication intervals
    compute_s: float | None  # per step: union of its compute intervals
    overlap_s: float | None  # per step: time both ran
    comm_share_pct: float | None  # comm / window
    overlap_pct: float | None  # overlap / comm
    exposed_comm_share_pct: float | None  # (comm - overlap) / window
    reasons: dict[str, str] = field(default_factory=dict)  # field name -> why it is null


@dataclass(frozen=True)
class ScalingRow:
    """Throughput with `processes` ranks, and its scaling efficiency against one process."""

    processes: int
    throughput: float | None
    unit: str
    source: str | None  # the run it was measured by
    efficiency_pct: float | None  # throughput(n) / (n x throughput(1)) x 100; above 100 is superlinear
    reason: str | None = None  # why throughput or efficiency is null


@dataclass(frozen=True)
class Cluster:
    """The cluster summary of a multi-rank job (analysis/cluster.py; docs/profile-json.md "cluster")."""

    world_size: int | None  # ranks in the job (distributedInfo, or the launch); may exceed the ranks here
    nnodes: int | None
    backend: str | None  # the process group's backend as recorded ("nccl", "gloo")
    ranks_measured: int  # ranks with a profile here
    global_throughput: float | None  # sum of the ranks' throughputs
    throughput_unit: str | None
    comm_share_mean_pct: float | None  # mean over ranks of comm_share_pct
    comm_share_max_pct: float | None
    overlap_mean_pct: float | None  # mean over ranks of overlap_pct
    exposed_comm_share_mean_pct: float | None
    straggler_rank: int | None  # the rank with the most compute per step
    straggler_source: str | None  # its source (ranks without a number are told apart by it)
    straggler_lag_s: float | None  # its compute per step minus the median of the others'
    ranks: list[ClusterRank]
    scaling: list[ScalingRow] = field(default_factory=list)
    scaling_reason: str | None = None  # why `scaling` is empty, or a row's efficiency null
    reasons: dict[str, str] = field(default_factory=dict)  # field name -> why it is null


_CLUSTER_RANK = {"rank": c.integer(null=True), "host": c.text(null=True), "source": c.text(), "status": c.text(),
                 "throughput": c.number(null=True), "throughput_unit": c.text(), "iteration_s": c.number(null=True),
                 "busy_pct": c.pct(null=True), "flop_util_pct": c.pct(null=True), "cpu_util_pct": c.pct(null=True),
                 "allocator_peak_bytes": c.integer(null=True), "backend_kind": c.text(null=True),
                 "steps": c.integer(null=True), "window_s": c.number(null=True), "comm_s": c.number(null=True),
                 "compute_s": c.number(null=True), "overlap_s": c.number(null=True),
                 "comm_share_pct": c.pct(null=True), "overlap_pct": c.pct(null=True),
                 "exposed_comm_share_pct": c.pct(null=True), "reasons": c.mapping(c.text(), null=True)}
_SCALING_ROW = {"processes": c.integer(low=1), "throughput": c.number(null=True), "unit": c.text(),
                "source": c.text(null=True), "efficiency_pct": c.number(null=True), "reason": c.text(null=True)}
_CLUSTER = {"world_size": c.integer(low=1, null=True), "nnodes": c.integer(low=1, null=True),
            "backend": c.text(null=True), "ranks_measured": c.integer(), "global_throughput": c.number(null=True),
            "throughput_unit": c.text(null=True), "comm_share_mean_pct": c.pct(null=True),
            "comm_share_max_pct": c.pct(null=True), "overlap_mean_pct": c.pct(null=True),
            "exposed_comm_share_mean_pct": c.pct(null=True), "straggler_rank": c.integer(null=True),
            "straggler_source": c.text(null=True), "straggler_lag_s": c.number(null=True), "ranks": c.seq(),
            "scaling": c.seq(null=True), "scaling_reason": c.text(null=True), "reasons": c.mapping(c.text(), null=True)}


def cluster_json(cluster: Cluster) -> dict[str, Any]:
    """The cluster summary as plain JSON (profile.json's "cluster"); NaN and infinities as null."""
    return c.finite_json(asdict(cluster))


def load_cluster(data: Any, where: str = "cluster.") -> Cluster | None:
    """A Cluster from its JSON (`Cluster` as `asdict` writes it), validated; None for null.

    Raises:
        ResultFormatError: a field malformed or out of range, its key named (`where` + key).
    """
    if data is None:
        return None
    values = c.fields(data, where, _CLUSTER)
    values["reasons"] = values.get("reasons") or {}
    values["ranks"] = [c.make_record(ClusterRank, {**(r := c.fields(row, f"{where}ranks[{i}].", _CLUSTER_RANK)),
                                           "reasons": r.get("reasons") or {}})
                       for i, row in enumerate(values["ranks"])]
    values["scaling"] = [c.make_record(ScalingRow, c.fields(row, f"{where}scaling[{i}].", _SCALING_ROW))
                         for i, row in enumerate(values.get("scaling") or [])]
    return c.make_record(Cluster, values)
