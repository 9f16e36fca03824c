"""A folder of per-rank Kineto traces (`tbd analyze FOLDER`): each trace analysed on its own, then the cluster.

As torch.profiler's tensorboard_trace_handler writes them, one file per rank of one job; the rank is
the trace's `distributedInfo.rank`, else the number after "rank" in the file name. Each trace is read
once: its Profile (collect's trace path) and its communication time come from the same records.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tbd.analysis.cluster import CommTimes, RankInput, cluster_summary
from tbd.cli.run_analysis import check_options, comm_of_records, kineto_records, profile_of_kineto, small_int
from tbd.core import rundir
from tbd.core.errors import UsageError
from tbd.core.profile import Profile
from tbd.core.profile_cluster import Cluster
from tbd.profilers.kineto import reader as kineto


@dataclass(frozen=True)
class RankProfile:
    """One trace of a folder of per-rank traces, analysed on its own."""

    rank: int | None  # distributedInfo's rank, else the number in the file name; None if neither
    trace: Path
    profile: Profile
    comm: CommTimes | None = None  # its communication and compute time (analysis/cluster.py)
    comm_reason: str | None = None  # why comm is None
    distributed: dict | None = None  # the trace's distributedInfo, as recorded


TRACE_SUFFIXES = (".json", ".json.gz")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


def trace_files(folder: Path) -> list[Path]:
    """The trace files of a folder (JSON, plain or gzipped), not tbd's own result files."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES)
                  and p.name not in (rundir.PROFILE, rundir.SPEC, rundir.ITERATIONS))


def profiles_from_trace_folder(folder: str | os.PathLike, **options: Any) -> list[RankProfile]:
    """Every trace of a folder (one per rank, as torch.profiler writes them) analysed on its own.

    Each one as `profile_from_trace` with `options`, with its communication time; ordered by
    rank. The rank is the trace's `distributedInfo.rank`, else a number after "rank" in the file name.
    """
    check_options(options.get("peak_flops"), options.get("sm_clock_mhz"), options.get("samples_per_step"))
    folder = Path(folder)
    files = trace_files(folder)
    if not files:
        raise UsageError(f"{folder}: no trace files (*.json, *.json.gz) here",
                         hint="give a trace, a folder of per-rank traces, or a tbd run directory")
    out = []
    for path in files:
        raw = kineto.read_trace_file(path)
        records = kineto_records(raw, str(path))
        profile = profile_of_kineto(raw, path, trace=records, **options)
        comm, why = comm_of_records(raw, records)
        dist = raw.metadata.get("distributedInfo")
        dist = dist if isinstance(dist, dict) else None
        rank = dist.get("rank") if dist and small_int(dist.get("rank"), 1 << 24) is not None else None
        if rank is None:
            found = _RANK_IN_NAME.search(path.name)
            rank = int(found.group(1)) if found else None
        out.append(RankProfile(rank, path, profile, comm, why, dist))
    return sorted(out, key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.trace.name))


def cluster_of_ranks(ranks: list[RankProfile]) -> Cluster:
    """The cluster summary of a folder's ranks (analysis/cluster.py); world size and backend from
    the first distributedInfo that records them, the node count from the hosts when every rank is here."""
    inputs = [RankInput(r.rank, _host(r.profile), str(r.trace), r.profile, r.comm, r.comm_reason) for r in ranks]
    infos = [r.distributed for r in ranks if r.distributed]
    world = next((w for w in (i.get("world_size") for i in infos) if small_int(w, 1 << 24)), None)
    backend = next((b[:40] for b in (i.get("backend") for i in infos) if isinstance(b, str)), None)
    hosts = {i.host for i in inputs}
    nnodes = len(hosts) if world == len(ranks) and None not in hosts else None
    return cluster_summary(inputs, world_size=world, nnodes=nnodes, backend=backend,
                           scaling_reason="not measured: a folder of traces holds one job size")


def _host(profile: Profile) -> str | None:
    host = profile.environment.get("host")
    return host[:200] if isinstance(host, str) else None
