"""Measured memory bandwidth: the best bytes/s a large copy reaches, the CPU roofline's slope.

A copy of n bytes reads n and writes n: 2n bytes of traffic (STREAM's "Copy" convention, McCalpin
1995). The buffers (128 MiB each by default) are far larger than any last-level cache, so the
figure is DRAM's, and the best of `repeats` copies is kept, as for the GEMM ceiling: slower
repeats measure other processes, not the memory. numpy's copy is framework-neutral, and on the
CPU every framework reads the same memory.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tbd.profilers.gemm import best_seconds_per_call


def measured_copy_bandwidth(copy: Callable[[], Any], sync: Callable[[], Any], nbytes: int,
                            repeats: int = 5) -> dict:
    """{"bytes_per_s", "nbytes", "seconds", "repeats", "copies_per_repeat"} of `copy()` moving `nbytes`."""
    if nbytes <= 0 or repeats <= 0:
        raise ValueError(f"nbytes and repeats must be positive, got {nbytes}, {repeats}")
    best, inner = best_seconds_per_call(copy, sync, repeats, min_repeat_s=0.05)
    return {"bytes_per_s": 2.0 * nbytes / best, "nbytes": nbytes, "seconds": best, "repeats": repeats,
            "copies_per_repeat": inner}


def host_copy_bandwidth(nbytes: int = 128 << 20, repeats: int = 5) -> dict:
    """The host memory's copy bandwidth, with numpy; {"error": ...} when the buffers do not fit."""
    try:
        src = np.ones(nbytes // 8, dtype=np.float64)
        dst = np.empty_like(src)
    except MemoryError:
        return {"error": f"no memory for two {nbytes >> 20} MiB buffers under the run's memory limit"}
    src = np.ones(nbytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    record = measured_copy_bandwidth(lambda: np.copyto(dst, src), lambda: None, src.nbytes, repeats)
    return {**record, "device": "cpu", "method": "numpy.copyto"}
