"""A batch-size sweep, in pure functions: which batch to run next, and each point's figures.

`next_batch` plans `tbd sweep --batch max`: double from the start batch until a batch does not
fit (or the cap is reached), then bisect between the largest batch that fit and the smallest that
did not until they are adjacent. A start that does not fit is halved until one does (down to 1).
With "fits" monotone in the batch (fits below N) it ends with the largest fitting batch
min(N - 1, cap) after at most about 2 log2(max(N, start)) + 2 points.

`sweep_point` reads one point's figures from its `Profile`, `failed_point` records a point that has
none, and `make_sweep` assembles the `Sweep` with its largest fitting and smallest failing batch and
the notes a reader needs to trust them. No I/O here: the shell (tbd/cli/sweep_run.py) runs the points.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping

from tbd.core.profile_result import PARTIAL, Profile
from tbd.core.sweep_result import POINT_MEMORY_KEYS, Sweep, SweepPoint

OK, OOM, FAILED = "ok", "oom", "failed"
#: Statuses of a point that ran: its batch fits.
RAN = (OK, PARTIAL)
LIST, MAX = "list", "max"


def fits(point: SweepPoint) -> bool:
    """Whether the point's batch fits, as the max search reads it: it ran (ok or partial).

    A failure that is not out of memory (a crash) counts as "does not fit" too: under an
    address-space cap a failed allocation often surfaces as a crash (a thread that cannot get its
    stack, a library that cannot map itself), and treating it as a bound keeps the search monotone
    and O(log N). `make_sweep` notes it when such a crash is what bounded the search.
    """
    return point.status in RAN


def next_batch(outcomes: Mapping[int, bool], start: int, cap: int) -> int | None:
    """The next batch the max search should run, or None when it is done.

    Args:
        outcomes: batch -> whether it fit, for every batch run so far.
        start: the first batch (clamped to [1, cap]).
        cap: the largest batch ever tried (--max-batch); reaching it with a fit ends the search.
    Returns:
        a batch not in `outcomes`, or None: the largest fitting and the smallest failing batch are
        adjacent, batch 1 does not fit, or `cap` fits.
    """
    if cap < 1:
        raise ValueError(f"cap must be at least 1, got {cap}")
    if not outcomes:
        return max(1, min(start, cap))
    failing = [b for b, ok in outcomes.items() if not ok]
    hi = min(failing) if failing else None
    lo = max((b for b, ok in outcomes.items() if ok and (hi is None or b < hi)), default=0)
    if hi is None:  # doubling: nothing has failed yet
        return None if lo >= cap else min(2 * lo, cap)
    if lo == 0:  # nothing fits below the smallest failure: halve towards 1
        return hi // 2 or None
    return (lo + hi) // 2 if hi - lo > 1 else None


def _finite(value: float | None) -> float | None:
    """`value` as a plain float, or None when it is None, NaN or infinite (JSON holds neither)."""
    return float(value) if value is not None and math.isfinite(value) else None


def median_iteration_s(profile: Profile) -> tuple[float | None, str | None]:
    """The median iteration time over the timing window (inclusive indices), seconds, or None and why."""
    it = profile.iterations
    if it is None:
        return None, "the profile has no iteration log"
    if not it.timing_window:
        return None, "the run has no timing window"
    first, last = it.timing_window
    window = it.times_s[first:last + 1]
    if not window:
        return None, "the timing window holds no iteration"
    value = _finite(float(statistics.median(window)))
    return value, None if value is not None else "an iteration time is not a finite number"


def _partial_reason(profile: Profile) -> str:
    for note in profile.notes:
        if note.startswith("partial"):
            return note
    return "partial profile: the run stopped before its end"


def sweep_point(batch: int, profile: Profile, run_dir: str | None) -> SweepPoint:
    """One batch's figures, as its profile gives them; a null figure keeps its reason.

    Args:
        batch: the batch the point ran.
        profile: its profile (complete or partial).
        run_dir: its run directory relative to the sweep directory ("b64").
    Returns:
        a SweepPoint with status "ok" (complete) or "partial"; throughput in the profile's unit per
        second, iteration_s in seconds, percentages 0-100, memory in bytes.
    """
    m = profile.metrics
    reasons: dict[str, str] = {}

    def figure(key: str, value: float | None, reason: str | None) -> float | None:
        number = _finite(value)
        if number is None:
            reasons[key] = reason or ("not a finite number" if value is not None else "not measured")
        return number

    iteration_s, iteration_reason = median_iteration_s(profile)
    memory: dict[str, int | None] = {}
    for key in POINT_MEMORY_KEYS:
        value = getattr(m.memory_bytes, key)
        memory[key] = None if value is None else int(value)
        if value is None:
            reasons[f"memory.{key}"] = m.memory_bytes.reasons.get(key) or "not measured"
    partial = profile.status == PARTIAL
    return SweepPoint(
        batch=batch, status=PARTIAL if partial else OK, reason=_partial_reason(profile) if partial else None,
        run_dir=run_dir,
        throughput=figure("throughput", m.throughput.value, m.throughput.reason),
        throughput_unit=m.throughput.unit,
        iteration_s=figure("iteration_s", iteration_s, iteration_reason),
        gpu_busy_pct=figure("gpu_busy_pct", m.gpu_busy_pct.value, m.gpu_busy_pct.reason),
        flop_util_pct=figure("flop_util_pct", m.flop_util_pct.value, m.flop_util_pct.reason),
        cpu_util_pct=figure("cpu_util_pct", m.cpu_util_pct.value, m.cpu_util_pct.reason),
        stable=None if profile.iterations is None else profile.iterations.stable,
        memory_bytes=memory, reasons=reasons)


def failed_point(batch: int, status: str, reason: str, run_dir: str | None = None) -> SweepPoint:
    """A batch that gave no profile: status "oom" or "failed", the one-line reason, every figure null."""
    if status not in (OOM, FAILED):
        raise ValueError(f"a failed point's status is oom or failed, not {status!r}")
    why = "out of memory" if status == OOM else "the run failed"
    return SweepPoint(batch=batch, status=status, reason=reason, run_dir=run_dir, throughput=None,
                      throughput_unit=None, iteration_s=None, gpu_busy_pct=None, flop_util_pct=None,
                      cpu_util_pct=None, stable=None, memory_bytes={k: None for k in POINT_MEMORY_KEYS},
                      reasons={k: why for k in ("throughput", "iteration_s", "gpu_busy_pct", "flop_util_pct",
                                                "cpu_util_pct", *(f"memory.{m}" for m in POINT_MEMORY_KEYS))})


def profile_device(profile: Profile) -> tuple[str | None, str | None]:
    """The device a profile ran on ("cpu", "cuda:0") and its name (GPU name, else CPU model)."""
    device = profile.spec.get("device")
    env = profile.environment
    gpu, cpu = env.get("gpu") or {}, env.get("cpu") or {}
    name = gpu.get("name") if isinstance(gpu, dict) else None
    if not name and isinstance(cpu, dict):
        name = cpu.get("model")
    return (str(device) if device is not None else None), (str(name) if name else None)


def make_sweep(*, model: str, framework: str, device: str, device_name: str | None, size: str, mode: str,
               points: Iterable[SweepPoint], memory_limit_bytes: int | None = None, cap: int | None = None,
               notes: Iterable[str] = ()) -> Sweep:
    """The Sweep of `points` (sorted by batch), with its largest fitting and smallest failing batch.

    Args:
        mode: "list" or "max". cap: the max search's --max-batch (None in list mode).
        notes: the caller's notes (an interruption); the notes that qualify the two batches follow them.
    """
    ordered = sorted(points, key=lambda p: p.batch)
    largest = max((p.batch for p in ordered if p.status in RAN), default=None)
    smallest = min((p.batch for p in ordered if p.status == OOM), default=None)
    out = list(notes)
    bound = min((p for p in ordered if p.status in (OOM, FAILED)), key=lambda p: p.batch, default=None)
    if mode == MAX and bound is not None and bound.status == FAILED:
        out.append(f"the search took batch {bound.batch}, which failed without running out of memory, as not "
                   f"fitting ({bound.reason}); the largest batch that fits may be larger")
    if mode == MAX and cap is not None and largest == cap and bound is None:
        out.append(f"reached --max-batch {cap} without running out of memory: the largest batch that fits may be larger")
    if largest is not None and smallest is not None and largest > smallest:
        out.append(f"batch {largest} ran although batch {smallest} ran out of memory: memory use is not monotone "
                   "in the batch here (allocator fragmentation, a run near the limit)")
    return Sweep(model=model, framework=framework, device=device, device_name=device_name, size=size, mode=mode,
                 points=ordered, largest_fitting_batch=largest, smallest_failing_batch=smallest,
                 memory_limit_bytes=memory_limit_bytes, notes=out)
