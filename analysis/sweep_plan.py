"""A batch-size sweep, in pure functions: which batch to run next, and each point's figures.

`next_batch` plans `tbd sweep --batch max`: double from the start batch until a batch does not
fit (or the cap is reached), then bisect between the largest batch that fit and the smallest that
did not until they are adjacent. A start that does not fit is halved until one does (down to 1).
With "fits" monotone in the batch (fits below N) it ends with the largest fitting batch
min(N - 1, cap) after at most about 2 log2(max(N, start)) + 2 points.

`remaining_points` says how many more points the search can take (fewest and most), from the same
rule, so the shell can announce its plan before the first point and after each.

`sweep_point` reads one point's figures from its `Profile`, with the profile's measurement quality
(reliable or not, its warnings, the throughput's 95 % interval and its bounds), `failed_point`
records a point that has none, and `make_sweep` assembles the `Sweep` with its largest fitting and
smallest failing batch, the points whose figures are unreliable, and the notes a reader needs to
trust them. No I/O here: the shell (tbd/cli/sweep_run.py) runs the points.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence

from tbd.core.profile_result import PARTIAL, Profile, partial_reason
from tbd.core.sweep_result import POINT_MEMORY_KEYS, Forecast, Sweep, SweepPoint

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


def remaining_points(outcomes: Mapping[int, bool], start: int, cap: int) -> tuple[int, int]:
    """How many more points the max search runs, at fewest and at most, whatever the batches that fit.

    Exact for `next_batch`: every batch it may run next either fits or not, and both branches are
    followed to the end (the search's state is only the largest fitting batch below the smallest failing
    one, and that failing one, so the branches are few: about 2 log2(cap) states).

    Args:
        outcomes: batch -> whether it fit, for every batch run so far. start, cap: as `next_batch`.
    Returns:
        (fewest, most) points still to run; (0, 0) when the search is done.
    """
    if cap < 1:
        raise ValueError(f"cap must be at least 1, got {cap}")
    failing = [b for b, ok in outcomes.items() if not ok]
    hi = min(failing) if failing else None
    lo = max((b for b, ok in outcomes.items() if ok and (hi is None or b < hi)), default=0)
    return _remaining(lo, hi, not outcomes, max(1, min(start, cap)), cap)


@functools.lru_cache(maxsize=4096)
def _remaining(lo: int, hi: int | None, empty: bool, start: int, cap: int) -> tuple[int, int]:
    """`remaining_points` of the state (largest fit below hi, or 0; smallest failure, or None)."""
    state = {} if empty else {**({lo: True} if lo else {}), **({hi: False} if hi is not None else {})}
    batch = next_batch(state, start, cap)
    if batch is None:
        return 0, 0
    # next_batch always runs a batch between the two (above lo, below hi): it fits or it does not.
    fit, fail = _remaining(batch, hi, False, start, cap), _remaining(lo, batch, False, start, cap)
    return 1 + min(fit[0], fail[0]), 1 + max(fit[1], fail[1])


def forecast(batches: Sequence[int] | None, outcomes: Mapping[int, bool], start: int, cap: int,
             point_s: float | None = None) -> Forecast:
    """The sweep's remaining points and their time at the last point's pace.

    Args:
        batches: a list sweep's batches in order, or None for the max search (start, cap: its bounds).
        outcomes: batch -> whether it fit, for every batch run so far.
        point_s: the last point's run time in seconds (None: no point has run yet).
    """
    if batches is not None:
        left = [b for b in batches if b not in outcomes]
        fewest = most = len(left)
        upcoming = left[0] if left else None
    else:
        fewest, most = remaining_points(outcomes, start, cap)
        upcoming = next_batch(outcomes, start, cap)
    return Forecast(upcoming, fewest, most, point_s, None if point_s is None else most * point_s)


def doubling_batches(start: int, cap: int) -> list[int]:
    """The batches the max search runs while every one fits: start, 2 start, 4 start, ..., cap at most."""
    batches = [max(1, min(start, cap))]
    while batches[-1] < cap:
        batches.append(min(2 * batches[-1], cap))
    return batches


def throughput_bounds(value: float | None, interval_pct: float | None) -> tuple[float | None, float | None]:
    """The ends of a throughput's 95 % interval: value x (1 - h) and value x (1 + h), h = interval_pct / 100.

    The same reading of profile.json's throughput.interval_pct as a comparison's (analysis/compare_runs.py):
    a half-width in % of the value. The low end is not below 0 (a throughput is not negative).
    Returns (None, None) when either is None.
    """
    if value is None or interval_pct is None:
        return None, None
    h = interval_pct / 100.0
    return max(0.0, value * (1.0 - h)), value * (1.0 + h)


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
    """Why the point is partial, without the word itself: the reports say "partial: <reason>" once."""
    return partial_reason(profile.notes) or "the run stopped before its end"


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
    quality = profile.quality
    if quality is None:
        reasons["reliable"] = ("the profile has no measurement-quality record (a run by an older tbd, or one stopped "
                               "before its first timing window)")
    throughput = figure("throughput", m.throughput.value, m.throughput.reason)
    interval = _finite(m.throughput.interval_pct)
    low, high = throughput_bounds(throughput, interval)
    if low is None:
        reasons["throughput_interval"] = ("no throughput" if throughput is None else
                                          "one timing window (--repeat 1): no interval" if len(m.throughput.repeats) < 2
                                          else "the profile gives no interval for its throughput")
    return SweepPoint(
        batch=batch, status=PARTIAL if partial else OK, reason=_partial_reason(profile) if partial else None,
        run_dir=run_dir,
        throughput=throughput, throughput_unit=m.throughput.unit,
        iteration_s=figure("iteration_s", iteration_s, iteration_reason),
        gpu_busy_pct=figure("gpu_busy_pct", m.gpu_busy_pct.value, m.gpu_busy_pct.reason),
        flop_util_pct=figure("flop_util_pct", m.flop_util_pct.value, m.flop_util_pct.reason),
        cpu_util_pct=figure("cpu_util_pct", m.cpu_util_pct.value, m.cpu_util_pct.reason),
        stable=None if profile.iterations is None else profile.iterations.stable,
        memory_bytes=memory, reasons=reasons,
        memory_at_peak={k: None if v is None else int(v) for k, v in m.memory_bytes.at_peak.items()},
        reliable=None if quality is None else quality.reliable,
        quality_warnings=[] if quality is None else list(quality.warnings),
        throughput_interval_pct=interval if low is not None else None, throughput_low=low, throughput_high=high)


def failed_point(batch: int, status: str, reason: str, run_dir: str | None = None) -> SweepPoint:
    """A batch that gave no profile: status "oom" or "failed", the one-line reason, every figure null."""
    if status not in (OOM, FAILED):
        raise ValueError(f"a failed point's status is oom or failed, not {status!r}")
    why = "out of memory" if status == OOM else "the run failed"
    return SweepPoint(batch=batch, status=status, reason=reason, run_dir=run_dir, throughput=None,
                      throughput_unit=None, iteration_s=None, gpu_busy_pct=None, flop_util_pct=None,
                      cpu_util_pct=None, stable=None, memory_bytes={k: None for k in POINT_MEMORY_KEYS},
                      reasons={k: why for k in ("throughput", "iteration_s", "gpu_busy_pct", "flop_util_pct",
                                                "cpu_util_pct", *(f"memory.{m}" for m in POINT_MEMORY_KEYS),
                                                "reliable", "throughput_interval")})


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
    unreliable = [p.batch for p in ordered if p.status in RAN and p.reliable is False]
    if unreliable:
        ran = sum(1 for p in ordered if p.status in RAN)
        which = "every point that ran" if len(unreliable) == ran > 1 else "batch " + ", ".join(map(str, unreliable))
        out.append(f"unreliable measurement at {which}: its profile's quality warnings ({_first_warning(ordered)}) "
                   "say the figures may be off on this machine; compare the points by their throughput intervals")
    if largest is not None and smallest is not None and largest > smallest:
        out.append(f"batch {largest} ran although batch {smallest} ran out of memory: memory use is not monotone "
                   "in the batch here (allocator fragmentation, a run near the limit)")
    return Sweep(model=model, framework=framework, device=device, device_name=device_name, size=size, mode=mode,
                 points=ordered, largest_fitting_batch=largest, smallest_failing_batch=smallest,
                 memory_limit_bytes=memory_limit_bytes, notes=out, unreliable_batches=unreliable)


def _first_warning(points: list[SweepPoint]) -> str:
    """The first unreliable point's first warning, cut to one clause, and how many others there are."""
    warned = [w for p in points if p.reliable is False for w in p.quality_warnings]
    if not warned:
        return "none given"
    first = warned[0].split(":")[0].split(" (")[0]
    return first + (f"; {len(warned) - 1} more in sweep.json" if len(warned) > 1 else "")
