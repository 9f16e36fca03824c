"""Measured ceilings of this device, the CPU roofline's roof and slope: the best FLOP/s a large square
matmul reaches (the GEMM ceiling) and the best bytes/s a large copy reaches (memory bandwidth).

The GEMM ceiling is reported beside the hardware-model peak (docs/architecture.md, "peak FLOP/s"):
what the BLAS library actually achieves, and the fallback denominator when the clock is hidden
(e.g. in a VM). An n x n by n x n matmul performs n^3 multiply-adds = 2 n^3 FLOPs (the standard
GEMM count, as in LAPACK Working Note 41 and cuBLAS benchmarks).

A copy of n bytes reads n and writes n: 2n bytes of traffic (STREAM's "Copy" convention, McCalpin
1995). The buffers (128 MiB each by default) are far larger than any last-level cache, so the
figure is DRAM's. numpy's copy is framework-neutral, and on the CPU every framework reads the
same memory.

Both keep the best of `repeats` timings: slower repeats measure interference from other
processes, not the device.

A sweep's later points measure less (`reusable_ceilings`, `REUSED`): the GEMM ceiling before the windows
only, and the copy bandwidth not at all, which they take from the sweep's first point with its provenance
(both depend on the device and the dtype, FP32, not on the batch). The one before the windows stays: on
the CPU, freeing its 16 MiB matrices raises glibc's mmap threshold, and the windows after it run faster
(test-size ResNet-50, batch 256, 1 thread: 56-57 ms per step without it, 51 ms after it, 51 ms without
it with MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ set to 16 and 32 MiB); a point without it
would not compare with `tbd profile` at the same batch, nor with the sweep's first point.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tbd.core import rundir
from tbd.core.errors import ResultFormatError

#: In a sweep's later point's run directory: what the sweep's first point lends it (`reusable_ceilings`),
#: written there before the runner child starts; the child's stages (profilers/stages.py) then skip the
#: GEMM ceiling after the windows and write the lent bandwidth as raw/bandwidth.json.
REUSED = "raw/ceilings_reused.json"

# Each timed repeat runs enough matmuls to last at least this long, so timer resolution and
# launch overhead stay below ~0.1 % even for a fast GPU on a small n.
_MIN_REPEAT_S = 0.02


def measured_gemm_ceiling(torch: Any, device: Any, dtype: Any = None, n: int = 2048, repeats: int = 5,
                          allow_tf32: bool = False) -> dict:
    """Best achieved FLOP/s of an n x n matmul on `device`, after one warm-up matmul.

    Args:
        torch: the torch module (passed in so this module imports without torch).
        device: "cpu", "cuda", "cuda:N" or a torch.device.
        dtype: element type, default torch.float32.
        n: matrix side; 2048 takes ~0.1 s per matmul on a 2-core AVX-512 VM.
        repeats: timed repeats; the fastest one counts.
        allow_tf32: for float32 on CUDA, False measures true FP32 (TF32 off for the duration).
    Returns:
        {"flops_per_s", "n", "seconds" (best time of one matmul, s), "repeats", "matmuls_per_repeat",
         "dtype", "device"}.
    """
    if n <= 0 or repeats <= 0:
        raise ValueError(f"n and repeats must be positive, got n={n}, repeats={repeats}")
    dtype = torch.float32 if dtype is None else dtype
    device = torch.device(device)
    saved = (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32)
    try:
        # "highest" keeps float32 matmuls in IEEE fp32 on every backend (no TF32 on CUDA, no
        # bf16 passes in oneDNN on the CPU); restored afterwards for the workload.
        torch.set_float32_matmul_precision("high" if allow_tf32 else "highest")
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
        best_s, inner = _time_matmul(torch, device, dtype, n, repeats)
    finally:
        torch.set_float32_matmul_precision(saved[0])
        torch.backends.cuda.matmul.allow_tf32 = saved[1]
    return {
        "flops_per_s": 2.0 * n**3 / best_s,
        "n": n,
        "seconds": best_s,
        "repeats": repeats,
        "matmuls_per_repeat": inner,
        "dtype": str(dtype).removeprefix("torch."),
        "device": str(device),
    }


def _time_matmul(torch: Any, device: Any, dtype: Any, n: int, repeats: int) -> tuple[float, int]:
    """Fastest seconds per matmul over `repeats`, and matmuls run per repeat."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    gen = torch.Generator(device="cpu").manual_seed(0)
    a = torch.rand(n, n, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)
    b = torch.rand(n, n, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    with torch.inference_mode():
        return best_seconds_per_call(lambda: torch.mm(a, b, out=out), sync, repeats)


def best_seconds_per_call(call: Callable[[], Any], sync: Callable[[], Any], repeats: int,
                          min_repeat_s: float = _MIN_REPEAT_S) -> tuple[float, int]:
    """Fastest seconds per `call()` over `repeats` timed groups, and the calls per group.

    Framework-neutral (every hook's ceiling uses it): one warm-up call (library init, kernel
    selection, caches), one calibration call to size a group to at least `min_repeat_s`, then
    `repeats` groups, each ended by `sync()` so asynchronous devices are timed to completion.
    """
    call()
    sync()
    t0 = time.perf_counter()
    call()
    sync()
    inner = max(1, math.ceil(min_repeat_s / max(time.perf_counter() - t0, 1e-9)))
    best = math.inf
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(inner):
            call()
        sync()
        best = min(best, (time.perf_counter() - t0) / inner)
    return best, inner


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


def reusable_ceilings(run_dir: Path, batch: int) -> dict:
    """What a finished sweep point lends the later points: its copy bandwidth, and where it came from.

    Returns:
        {"bandwidth": its raw/bandwidth.json record, or None when it measured none (a GPU's comes from
        its datasheet; a CPU's buffers may not fit under --memory-limit-gib: the later point then tries
        its own), "provenance": "measured once for the sweep at batch N (bN/raw/bandwidth.json)", "batch": N}.
    """
    bandwidth = _read(run_dir / rundir.BANDWIDTH)
    measured = isinstance(bandwidth, dict) and isinstance(bandwidth.get("bytes_per_s"), (int, float))
    return {"bandwidth": bandwidth if measured else None,
            "provenance": f"measured once for the sweep at batch {batch} ({run_dir.name}/{rundir.BANDWIDTH})",
            "batch": batch}


def _read(path: Path) -> Any:
    try:
        return rundir.read_json(path, path.name) if path.is_file() else None
    except (ResultFormatError, OSError):  # a record not to reuse: the next point measures its own
        return None
