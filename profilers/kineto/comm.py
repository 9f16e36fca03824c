"""Communication and compute intervals of one rank's Kineto trace, for the cluster summary.

What counts as what (docs/profile-json.md, "cluster"), over the trace window `profilers.kineto.reader`
defines (the one GPU busy % uses), all times integer ns on the trace's own origin:

- GPU trace (it has kernels): the rows of `TraceRecords.kernels` (kernels that start inside the
  window; memcpy/memset are not kernels, as for busy %). Communication: NCCL/RCCL kernels by name
  (`ncclKernel_AllReduce_RING_LL_Sum_float(...)`, `ncclDevKernel_SendRecv(...)`, anything naming
  nccl or rccl, any case), on any stream. Compute: every other kernel. The host side of a
  collective (`c10d::allreduce_`, `record_param_comms`, `nccl:all_reduce` annotations) only
  launches it and is never counted.
- CPU trace (no kernels): communication is the collective spans a CPU backend records as
  user annotations on its worker threads, named `<backend>:<collective>` (Gloo: `gloo:all_reduce`,
  `gloo:broadcast`; also `mpi:` and `ucc:`), starting inside the window. The main thread's
  `c10d::allreduce_` op is a launch and not counted as communication. Compute: the roots of each
  thread's op tree that start inside the window (the CPU busy intervals), on the threads that
  record no collective span, less the time inside collective calls on those threads (`wait`:
  ops named `c10d::*`, `record_param_comms`, `ProcessGroup*`, `<backend>:*`, at any depth). DDP
  calls `c10d::allreduce_` from inside an autograd op, and there it can block for milliseconds
  (measured 3.5 ms of a 4.5 ms step in tests/fixtures/multirank/gloo_cpu_ddp): waiting, not compute.

Each kind is vectorised over columns the reader already decoded: names are classified once per
distinct name (the trace's name table). Only the CPU case rebuilds the op tree (`kineto.tree.op_tree`) for the roots' threads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from tbd.core.records import TraceRecords
from tbd.profilers.kineto.columns import KinetoTrace
from tbd.profilers.kineto.tree import op_tree

_NCCL = re.compile(r"nccl", re.IGNORECASE)
_RCCL = re.compile(r"rccl", re.IGNORECASE)
_CPU_COLLECTIVE = re.compile(r"^(gloo|mpi|ucc):")
_COLLECTIVE_CALL = re.compile(r"^(c10d::|record_param_comms|ProcessGroup|gloo:|nccl:|mpi:|ucc:)")


@dataclass(frozen=True)
class CommIntervals:
    """One rank's communication and compute intervals (not yet merged or clipped) and its window."""

    backend_kind: str  # "nccl", "rccl", "gloo", "mpi", "ucc"; "none" when the trace holds no collective
    window_start_ns: int
    window_end_ns: int
    steps: int  # ProfilerStep spans in the window (0: the trace has none)
    comm_start_ns: np.ndarray  # int64
    comm_end_ns: np.ndarray
    compute_start_ns: np.ndarray
    compute_end_ns: np.ndarray
    # Host time inside collective calls on the compute threads (CPU traces), to leave out of compute.
    wait_start_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    wait_end_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def comm_intervals(trace: KinetoTrace, records: TraceRecords) -> CommIntervals:
    """The communication and compute intervals of a trace whose records `kineto.reader.trace_records` built.

    Args:
        trace: the decoded trace (`kineto.reader.read_trace_file`).
        records: `kineto.trace_records(trace, ...)`: its window, kernels and CPU busy intervals.
    Returns:
        CommIntervals (module docstring for what each holds).
    """
    lo, hi, steps = records.window_start_ns, records.window_end_ns, len(records.steps)
    if records.device_kind == "cuda":
        # The same rows as records.kernels (those starting in the window), in file order: the
        # name codes classify each distinct name once.
        k = trace.kernels
        keep = (k.start_ns >= lo) & (k.start_ns <= hi)
        nccl = _name_hits(trace.names, _NCCL)[k.name] & keep
        rccl = _name_hits(trace.names, _RCCL)[k.name] & keep
        comm = nccl | rccl
        compute = keep & ~comm
        kind = "rccl" if rccl.any() else "nccl" if nccl.any() else "none"
        end = k.start_ns + k.dur_ns
        return CommIntervals(kind, lo, hi, steps, k.start_ns[comm], end[comm], k.start_ns[compute], end[compute])
    return _cpu_intervals(trace, lo, hi, steps)


def _cpu_intervals(trace: KinetoTrace, lo: int, hi: int, steps: int) -> CommIntervals:
    empty = np.zeros(0, dtype=np.int64)
    marks = trace.annotations
    start, end, comm_threads, kind = empty, empty, empty, "none"
    if marks is not None and len(marks.start_ns):
        comm = _name_hits(trace.names, _CPU_COLLECTIVE)[marks.name] & (marks.start_ns >= lo) & (marks.start_ns <= hi)
        if comm.any():
            kind = str(trace.names[marks.name[np.flatnonzero(comm)[0]]]).split(":", 1)[0]
        start, end, comm_threads = marks.start_ns[comm], marks.start_ns[comm] + marks.dur_ns[comm], marks.thread[comm]
    tree = op_tree(trace.ops)
    ours = (tree.start_ns >= lo) & (tree.start_ns <= hi) & ~np.isin(tree.thread, comm_threads)
    roots = ours & (tree.parent < 0)
    wait = ours & _name_hits(trace.names, _COLLECTIVE_CALL)[tree.name]
    return CommIntervals(kind, lo, hi, steps, start, end, tree.start_ns[roots], tree.end_ns[roots],
                         tree.start_ns[wait], tree.end_ns[wait])


def _name_hits(names: np.ndarray, pattern: re.Pattern) -> np.ndarray:
    """Per name code of the trace's name table: whether `pattern` matches that name."""
    return np.fromiter((bool(pattern.search(n)) for n in names.tolist()), dtype=bool, count=len(names))
