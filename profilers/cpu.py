"""Per-core CPU time counters around a window, the input of formula (3) (docs/architecture.md, "The metric contract").

Records only; `analysis.utilization.cpu_utilization_pct` turns a `CpuSample` into a percent.

What counts as busy: time the core spent running code, user or kernel: user, nice, system,
irq, softirq (Linux; `interrupt` and `dpc` on Windows). Not busy: idle, iowait (the core was
idle while I/O was pending) and steal (the hypervisor ran another guest: not our work, and a
VM cannot use that time). guest and guest_nice are left out of both sums because Linux
already counts them inside user and nice (proc(5); psutil docs for cpu_times), so adding them
would double count.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import psutil

from tbd.core.errors import TbdError
from tbd.core.records import CpuSample

BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq", "interrupt", "dpc")
NOT_BUSY_FIELDS = ("idle", "iowait", "steal")


def _per_core_seconds(times: list[Any], fields: tuple[str, ...]) -> np.ndarray:
    """Sum of the named fields per core (seconds); fields a platform lacks count as 0."""
    return np.array([sum(float(getattr(t, f, 0.0)) for f in fields) for t in times], dtype=np.float64)


def _delta(before: list[Any], after: list[Any], fields: tuple[str, ...]) -> np.ndarray:
    # Linux idle/iowait counters can step backwards by a tick on tickless kernels (proc(5),
    # "iowait ... can decrease"); a negative delta means zero time, not negative time.
    per_field = [np.maximum(_per_core_seconds(after, (f,)) - _per_core_seconds(before, (f,)), 0.0) for f in fields]
    return np.sum(per_field, axis=0) if per_field else np.zeros(len(after))


class CpuWindow:
    """Reads per-core counters at start() and stop(); stop() returns the differences."""

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns,
                 read_times: Callable[..., list[Any]] = psutil.cpu_times):
        """`clock`: integer ns; `read_times(percpu=True)`: per-core records with psutil's field names."""
        self._clock = clock
        self._read_times = read_times
        self._start: tuple[int, list[Any]] | None = None

    def start(self) -> None:
        """Take the opening reading."""
        self._start = (int(self._clock()), list(self._read_times(percpu=True)))

    def stop(self) -> CpuSample:
        """Take the closing reading; busy_s and total_s per core in seconds, wall time in ns."""
        if self._start is None:
            raise RuntimeError("CpuWindow.stop() called before start()")
        t0, before = self._start
        after = list(self._read_times(percpu=True))
        t1 = int(self._clock())
        self._start = None
        if len(after) != len(before):
            raise TbdError(f"CPU count changed during the window ({len(before)} -> {len(after)} cores)")
        busy = _delta(before, after, BUSY_FIELDS)
        total = busy + _delta(before, after, NOT_BUSY_FIELDS)
        return CpuSample(busy_s=busy, total_s=total, wall_ns=t1 - t0, cores=len(after))
