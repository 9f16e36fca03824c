"""Read a multi-process run directory (RUN_DIR/ranks/rank-K) and build the cluster's Profile.

Each rank's folder is a run directory of its own (raw records, trace, iterations), analysed as one
(`read_rank`: run_analysis.profile_from_run_dir, which calls this module for a cluster's folder, hence
passed in); its trace gives its communication and compute time (`comm_of`:
run_analysis.comm_times_from_trace); analysis/cluster.py turns
them into the cluster summary. The scaling points `--scaling` ran first are read back from
RUN_DIR/scaling/pN/profile.json, so `tbd report`/`tbd analyze` of the folder later give the same
profile as the run did. I/O lives here; nothing here computes a figure.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Callable

from tbd.analysis.cluster import CommTimes, RankInput, ScalingInput, cluster_summary, summed_throughput
from tbd.core import raw_records, rundir
from tbd.core.errors import ResultFormatError, TbdError
from tbd.core.profile_result import COMPLETE, PARTIAL, Profile
from tbd.core.records import RunSpec
from tbd.profilers.distributed import RANKS, rank_dir

SCALING = "scaling"
#: In RUN_DIR/scaling/pN when that count's run failed: {"message": its one-line error}.
SCALING_FAILED = "failed.json"


def rank_numbers(run_dir: Path) -> list[int]:
    """The ranks that wrote a folder in RUN_DIR/ranks, in order."""
    folder = run_dir / RANKS
    if not folder.is_dir():
        return []
    return sorted(int(p.name[5:]) for p in folder.iterdir() if p.name.startswith("rank-") and p.name[5:].isdigit())


def is_cluster_run(run_dir: str | os.PathLike) -> bool:
    """A multi-process run directory: its records are in ranks/rank-K, none at the top."""
    run_dir = Path(run_dir)
    return bool(rank_numbers(run_dir)) and not (run_dir / rundir.ENVIRONMENT).exists()


def _scaling_inputs(run_dir: Path, load: Callable[[Path], Profile]) -> list[ScalingInput] | None:
    folder = run_dir / SCALING
    if not folder.is_dir():
        return None
    points = []
    for sub in sorted(folder.glob("p*"), key=lambda p: int(p.name[1:]) if p.name[1:].isdigit() else 0):
        if not sub.name[1:].isdigit():
            continue
        n = int(sub.name[1:])
        failed = rundir.read_optional(sub, SCALING_FAILED, "scaling point failure")
        if failed is not None or not (sub / rundir.PROFILE).exists():
            message = failed.get("message") if isinstance(failed, dict) else None
            why = message[:2000] if isinstance(message, str) and message else "its run left no profile.json"
            points.append(ScalingInput(n, None, "", str(sub), f"the {n}-process run failed: {why}"))
            continue
        t = load(sub / rundir.PROFILE).metrics.throughput
        points.append(ScalingInput(n, t.value, t.unit, str(sub), t.reason))
    return points


def cluster_profile(run_dir: Path, *, read_rank: Callable[..., Profile],
                    comm_of: Callable[[Path], tuple[CommTimes | None, str | None]], load: Callable[[Path], Profile],
                    status: str | None = None, extra_notes: list[str] | None = None,
                    write_ranks: bool = False) -> Profile:
    """Rank 0's profile with the cluster summary and the cluster's (summed) throughput.

    Args:
        read_rank(folder, status=...): one rank's folder as a run directory's Profile.
        comm_of(trace): a rank's communication and compute time from its trace, or why not.
        load(path): a profile.json (the scaling points').
        status: PARTIAL to mark the whole profile partial (a failed or interrupted run); each
            rank's own is partial when its raw/status.json does not say complete.
        write_ranks: also write each rank's profile.json into its folder (the run itself does).
    Raises:
        ResultFormatError: no rank's records could be analysed.
    """
    spec = RunSpec.from_dict(raw_records.read_record(run_dir, rundir.SPEC, required=True))
    notes = list(extra_notes or [])
    inputs: list[RankInput] = []
    for r in rank_numbers(run_dir):
        folder = rank_dir(run_dir, r)
        try:
            state = (raw_records.read_record(folder, rundir.STATUS) or {}).get("state")
            profile = read_rank(folder, status=None if state == "complete" else PARTIAL)
        except TbdError as exc:
            notes.append(f"rank {r}: no profile ({exc.one_line()})")
            continue
        if write_ranks:
            rundir.atomic_write_json(folder / rundir.PROFILE, profile.to_dict())
        trace = rundir.find_trace(folder)
        comm, reason = comm_of(trace) if trace else (None, "the rank wrote no trace")
        inputs.append(RankInput(r, profile.environment.get("host"), str(folder), profile, comm, reason))
    if not inputs:
        raise ResultFormatError(f"{run_dir}: no rank's records could be analysed (in {run_dir / RANKS})")
    first = inputs[0].profile
    local = spec.node_rank == 0
    missing = sorted(set(range(spec.world_size)) - {i.rank for i in inputs}) if local else []
    throughput = summed_throughput([i.profile.metrics.throughput for i in inputs],
                                   missing=[f"rank {m}" for m in missing])
    scaling = _scaling_inputs(run_dir, load)
    if scaling is not None:  # the counts run before, and this run's own: N processes
        scaling.append(ScalingInput(spec.world_size, throughput.value, throughput.unit, str(run_dir),
                                    throughput.reason))
    device = str(first.spec.get("device", "cpu"))
    cluster = cluster_summary(inputs, world_size=spec.world_size, nnodes=spec.nnodes,
                              backend="nccl" if device.startswith("cuda") else "gloo", scaling=scaling,
                              scaling_reason=None if scaling is not None else
                              "not measured (--scaling runs 1 .. N processes first)")
    said = [f"throughput: the {len(inputs)} ranks' together (summed; each rank's in cluster.ranks); kernels, "
            "utilization and memory: rank 0's (each rank's own profile.json is in ranks/rank-K)"]
    if missing:
        said.append(f"no records from rank(s) {', '.join(map(str, missing))}")
    if not local:
        said.append(f"node {spec.node_rank}: this machine's ranks only; node 0 assembles the whole cluster")
    partial = status == PARTIAL or any(i.profile.status == PARTIAL for i in inputs) or bool(missing)
    spec_record = {**first.spec, "nproc_per_node": spec.nproc_per_node, "nnodes": spec.nnodes,
                   "node_rank": spec.node_rank, "world_size": spec.world_size}
    return replace(first, status=PARTIAL if partial else COMPLETE, spec=spec_record, cluster=cluster,
                   notes=notes + said + list(first.notes), metrics=replace(first.metrics, throughput=throughput))
