"""Why the GPU sat idle: the trace window's idle time split by cause.

The categories follow HTA's idle time breakdown (HolisticTraceAnalysis,
hta/analyzers/breakdown_analysis.py, `get_idle_time_breakdown`), taken over the whole device
(the union of kernel intervals on every stream, as GPU busy %, formula (1)) instead of per stream:

- **memcpy**: the part of an idle interval a memcpy or memset covers (`TraceRecords.copies`): busy
  copying, not computing (HTA counts copies as busy; tbd's busy % counts kernels only).
- **synchronisation**: what is left of an interval that is host bound (below) and began while the
  host sat in a synchronisation call (`TraceRecords.syncs`: cudaStreamSynchronize, .item(), ...): the
  host waited for the GPU to drain, and the GPU then waited for the host's next launch.
- **host_bound**: the kernel that ends an idle interval was launched (its runtime call started)
  after the interval began: the GPU ran out of queued work and waited on the host (HTA's "host
  wait": `ts_runtime > prev_end_ts`). The idle tail of the window (the host still in its last step,
  nothing left on the GPU) counts here too: no kernel ends it, the host was working.
- **launch_gap**: the next kernel was already queued and the interval is shorter than
  `launch_gap_ns`: the back-to-back launch latency of the GPU itself (HTA's "kernel wait",
  `consecutive_kernel_delay`).
- **other**: the next kernel was already queued and still waited longer: on an event from another
  stream, or a kernel whose launching call the trace lacks (HTA's "other").

A reader that keeps no copies or synchronisation calls leaves those causes null with a reason; their
time is then inside the others.

HTA sums gaps between consecutive kernels, memcpys and memsets of each stream; tbd's idle time is
the window less the union of kernels on all streams (a stream idle while another runs is not GPU
idle time), so the two agree on a one-stream trace without copies and differ elsewhere.
"""

from __future__ import annotations

import numpy as np

from tbd.analysis.intervals import clip, difference, merge
from tbd.core.profile_result import GpuIdle
from tbd.core.records import TraceRecords

#: A shorter gap with the next kernel queued is launch latency (ns): HTA's default `consecutive_kernel_delay=30`,
#: in its trace's unit, microseconds (its docstring says ns; on pt19_resnet50_v100 its split matches a recompute
#: at 30 us and not at 30 ns).
LAUNCH_GAP_NS = 30_000
#: The causes in the order they are shown.
CAUSES = ("host_bound", "synchronisation", "memcpy", "launch_gap", "other")
NOT_READ = {
    "synchronisation": "the trace reader keeps no synchronisation calls: their idle time is inside host_bound",
    "memcpy": "the trace reader keeps no memcpy/memset intervals: their idle time is inside the other causes",
}


def idle_gaps(trace: TraceRecords) -> tuple[np.ndarray, np.ndarray]:
    """The device's idle intervals in the trace window: the window less the union of its busy intervals.

    Returns:
        (start_ns, end_ns) int64 arrays, sorted, disjoint, each of positive length.
    """
    lo, hi = trace.window_start_ns, trace.window_end_ns
    s, e = merge(*clip(trace.busy_start_ns, trace.busy_end_ns, lo, hi))
    starts = np.concatenate(([lo], e)).astype(np.int64)
    ends = np.concatenate((s, [hi])).astype(np.int64)
    keep = ends > starts
    return starts[keep], ends[keep]


def gap_causes(trace: TraceRecords, gap_start_ns: np.ndarray, gap_end_ns: np.ndarray,
               launch_gap_ns: int = LAUNCH_GAP_NS) -> np.ndarray:
    """Each idle interval's cause: "host_bound", "launch_gap" or "other" (object array), as the module says.

    The kernel ending an interval is one starting where it ends; of several, the earliest launched.
    """
    k = trace.kernels
    launch = k.launch_ns if k.launch_ns is not None else np.full(len(k), -1, dtype=np.int64)
    no_call = np.iinfo(np.int64).max
    key = np.where(launch >= 0, launch, no_call)
    order = np.lexsort((key, k.start_ns))  # by start, then launch: the first row at a start is launched first
    starts, keys = k.start_ns[order].astype(np.int64), key[order]
    at = np.searchsorted(starts, gap_end_ns, side="left")
    ended = at < len(starts)
    ended[ended] = starts[at[ended]] == gap_end_ns[ended]
    first_launch = np.where(ended, keys[np.minimum(at, max(len(keys) - 1, 0))] if len(keys) else no_call, no_call)
    known = ended & (first_launch != no_call)
    host = ~ended | (known & (first_launch > gap_start_ns))
    short = ~host & known & (gap_end_ns - gap_start_ns < launch_gap_ns)
    return np.where(host, "host_bound", np.where(short, "launch_gap", "other")).astype(object)


def uncovered_ns(gap_start_ns: np.ndarray, gap_end_ns: np.ndarray,
                 spans: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """Per idle interval, its length in ns that none of `spans` (start_ns, end_ns) covers (all of it for None)."""
    length = gap_end_ns - gap_start_ns
    if spans is None or len(spans[0]) == 0 or len(length) == 0:
        return length
    s, e = difference(gap_start_ns, gap_end_ns, *spans)
    owner = np.searchsorted(gap_start_ns, s, side="right") - 1  # the interval each uncovered piece lies in
    return np.bincount(owner, weights=e - s, minlength=len(length)).astype(np.int64)


def began_in(points_ns: np.ndarray, spans: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """Per point, whether it lies inside one of `spans` (start <= t < end); all False for None."""
    if spans is None or len(spans[0]) == 0:
        return np.zeros(len(points_ns), dtype=bool)
    s, e = merge(*spans)
    if len(s) == 0:  # every span empty (a zero or negative duration)
        return np.zeros(len(points_ns), dtype=bool)
    at = np.searchsorted(s, points_ns, side="right") - 1
    return (at >= 0) & (e[np.maximum(at, 0)] > points_ns)


def gpu_idle(trace: TraceRecords, launch_gap_ns: int = LAUNCH_GAP_NS) -> GpuIdle:
    """The trace window's GPU idle time and its split by cause (module docstring).

    Args:
        trace: a GPU trace's records (device kind "cuda"), its window of positive length.
        launch_gap_ns: below this an interval with the next kernel queued is launch latency.
    Returns:
        GpuIdle: seconds and share of the idle time per cause; causes the reader cannot see are null with why.
    """
    window_ns = trace.window_end_ns - trace.window_start_ns
    if window_ns <= 0:
        raise ValueError("trace window has no length")
    g0, g1 = idle_gaps(trace)
    causes = gap_causes(trace, g0, g1, launch_gap_ns)
    rest = uncovered_ns(g0, g1, trace.copies)
    causes[(causes == "host_bound") & began_in(g0, trace.syncs)] = "synchronisation"
    idle_ns = int((g1 - g0).sum())
    ns = {cause: int(rest[causes == cause].sum()) for cause in CAUSES}
    ns["memcpy"] = idle_ns - int(rest.sum())
    unread = {"memcpy": trace.copies is None, "synchronisation": trace.syncs is None}
    seconds: dict[str, float | None] = {}
    share: dict[str, float | None] = {}
    for cause in CAUSES:
        if unread.get(cause):
            seconds[cause] = share[cause] = None
            continue
        seconds[cause] = ns[cause] / 1e9
        share[cause] = 100.0 * ns[cause] / idle_ns if idle_ns else None
    reasons = {cause: NOT_READ[cause] for cause, missing in unread.items() if missing}
    if not idle_ns:
        reasons["share_pct"] = "the GPU was never idle in the window"
    return GpuIdle(window_s=window_ns / 1e9, idle_s=idle_ns / 1e9, idle_pct=100.0 * idle_ns / window_ns,
                   gaps=int(len(g0)), seconds=seconds, share_pct=share, launch_gap_ns=launch_gap_ns,
                   reasons=reasons)
