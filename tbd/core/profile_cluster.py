"""The cluster section of a profile.json: a multi-rank (torch.distributed) job as a whole.

Its records (`Cluster`, one `ClusterRank` per rank, one `ScalingRow` per process count), written
as profile.json's "cluster" and read back with the same validation as the rest of the profile: each
field's annotation is its rule (tbd/core/field_checks.py). analysis/cluster.py computes them;
docs/profile-json.md is the contract.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tbd.core import field_checks as c
from tbd.core.field_checks import Amount, Count, Pct, PositiveInt


@dataclass(frozen=True)
class ClusterRank:
    """One rank of a multi-rank (torch.distributed) job: its own figures and its communication.

    comm_s, compute_s and overlap_s are per traced step (seconds); the shares are of its trace
    window's wall time (analysis/cluster.py, docs/profile-json.md "cluster")."""

    rank: Count | None  # the process's global rank; None when the trace does not say
    host: str | None
    source: str  # its run directory or trace file
    status: str  # its profile's: "complete" or "partial"
    throughput: Amount | None  # its own, per second
    throughput_unit: str
    iteration_s: Amount | None  # median of its timing window's iteration times
    busy_pct: Pct | None  # GPU busy % (formula (1)); null on the CPU
    flop_util_pct: Pct | None
    cpu_util_pct: Pct | None
    allocator_peak_bytes: Count | None
    backend_kind: str | None  # "nccl", "rccl", "gloo", "none" (no collective in its trace); null: not measured
    steps: Count | None  # traced steps the per-step figures divide by
    window_s: Amount | None  # its trace window's wall time
    comm_s: Amount | None  # per step: union of its communication intervals
    compute_s: Amount | None  # per step: union of its compute intervals
    overlap_s: Amount | None  # per step: time both ran
    comm_share_pct: Pct | None  # comm / window
    overlap_pct: Pct | None  # overlap / comm
    exposed_comm_share_pct: Pct | None  # (comm - overlap) / window
    reasons: dict[str, str] = field(default_factory=dict)  # field name -> why it is null


@dataclass(frozen=True)
class ScalingRow:
    """Throughput with `processes` ranks, and its scaling efficiency against one process."""

    processes: PositiveInt
    throughput: Amount | None
    unit: str
    source: str | None  # the run it was measured by
    efficiency_pct: Amount | None  # throughput(n) / (n x throughput(1)) x 100; above 100 is superlinear
    reason: str | None = None  # why throughput or efficiency is null


@dataclass(frozen=True)
class Cluster:
    """The cluster summary of a multi-rank job (analysis/cluster.py; docs/profile-json.md "cluster")."""

    world_size: PositiveInt | None  # ranks in the job (distributedInfo, or the launch); may exceed the ranks here
    nnodes: PositiveInt | None
    backend: str | None  # the process group's backend as recorded ("nccl", "gloo")
    ranks_measured: Count  # ranks with a profile here
    global_throughput: Amount | None  # sum of the ranks' throughputs
    throughput_unit: str | None
    comm_share_mean_pct: Pct | None  # mean over ranks of comm_share_pct
    comm_share_max_pct: Pct | None
    overlap_mean_pct: Pct | None  # mean over ranks of overlap_pct
    exposed_comm_share_mean_pct: Pct | None
    straggler_rank: Count | None  # the rank with the most compute per step
    straggler_source: str | None  # its source (ranks without a number are told apart by it)
    straggler_lag_s: Amount | None  # its compute per step minus the median of the others'
    ranks: list[ClusterRank]
    scaling: list[ScalingRow] = field(default_factory=list)
    scaling_reason: str | None = None  # why `scaling` is empty, or a row's efficiency null
    reasons: dict[str, str] = field(default_factory=dict)  # field name -> why it is null


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
    return _LOAD(data, where)


_LOAD = c.loader(Cluster)
