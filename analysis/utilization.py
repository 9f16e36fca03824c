"""Utilization metrics: the paper's formulas (1)-(3) and throughput.

Zhu et al., "Benchmarking and Analyzing Deep Neural Network Training" (IISWC 2018), Sec. III-C:
(1) GPU compute utilization = GPU active time / total elapsed time;
(2) FP32 utilization = FLOPs executed / (peak FLOP/s x GPU active time);
(3) CPU utilization = sum over cores of active time / (cores x total elapsed time).
"""

from __future__ import annotations

import numpy as np

from tbd.analysis.intervals import covered_in_window_ns
from tbd.core.records import CpuSample, KernelTable, NvmlSample, TraceRecords


def device_busy_ns(trace: TraceRecords) -> int:
    """Length of the union of the device's busy intervals inside the trace window, in ns."""
    return covered_in_window_ns(trace.busy_start_ns, trace.busy_end_ns, trace.window_start_ns, trace.window_end_ns)


def gpu_busy_pct(trace: TraceRecords) -> float:
    """Formula (1): union of kernel intervals on the device (all streams) / window wall time x 100.

    The window runs from the host start of the first traced iteration to the end of the last kernel
    launched in the last one (the GPU runs behind the CPU, so a host-only span would under-count).
    """
    window_ns = trace.window_end_ns - trace.window_start_ns
    if window_ns <= 0:
        raise ValueError("trace window has no length")
    return 100.0 * device_busy_ns(trace) / window_ns


def busy_per_untraced_iteration_pct(busy_ns: int, traced_iterations: int, timing_window_ns: int,
                                    timing_iterations: int) -> float:
    """GPU busy of a run tbd timed itself: kernel busy time per traced iteration / untimed-by-the-tracer
    iteration time (the timing window's mean) x 100, not capped.

    Why not the traced window's own wall time: the tracer records every op and launch on the host, which
    stretches a traced iteration (on an H100, ResNet-50 at batch 64: 74-166 ms against 37.6 ms untraced)
    while the kernels run as long as ever (36.3 ms per iteration in both). Over the traced wall the GPU then
    reads 33 % busy where NVML says 94 % and an untraced clock 97 % (docs/results/gpu-check-h100.md).
    """
    if traced_iterations <= 0 or timing_iterations <= 0 or timing_window_ns <= 0:
        raise ValueError("no traced or timed iterations")
    return 100.0 * (busy_ns / traced_iterations) / (timing_window_ns / timing_iterations)


def row_peaks(kernels: KernelTable, peak_flops_by_precision: dict[str, float]) -> np.ndarray:
    """Per row, the peak FLOP/s of its precision (NaN where none): one dict lookup per row, in C."""
    precisions = kernels.precision.tolist()
    table = {p: float(peak_flops_by_precision.get(p, np.nan)) for p in set(precisions)}
    return np.fromiter(map(table.__getitem__, precisions), dtype=np.float64, count=len(precisions))


def kernel_util_pct(kernels: KernelTable, peak_flops_by_precision: dict[str, float]) -> np.ndarray:
    """Per-row FLOP utilization: flops / (peak for the row's precision x duration) x 100; NaN if unknown."""
    peaks = row_peaks(kernels, peak_flops_by_precision)
    seconds = kernels.dur_ns.astype(np.float64) / 1e9
    with np.errstate(divide="ignore", invalid="ignore"):
        util = 100.0 * kernels.flops / (peaks * seconds)
    # A known zero (data movement: fills, copies) is 0 % at any peak, even when its precision is
    # unknown (aten::zeros has no floating-point input to tell it).
    util = np.where(kernels.flops == 0, 0.0, util)
    return np.where(seconds > 0, util, np.nan)


def peak_seconds(kernels: KernelTable, peak_flops_by_precision: dict[str, float]) -> float:
    """Seconds the device would need at peak for the rows' known FLOPs, each at its own precision's peak."""
    peaks = row_peaks(kernels, peak_flops_by_precision)
    known = np.isfinite(kernels.flops) & np.isfinite(peaks) & (peaks > 0)
    return float((kernels.flops[known] / peaks[known]).sum())


def flop_util_pct(kernels: KernelTable, busy_ns: int, peak_flops_by_precision: dict[str, float]) -> float:
    """Formula (2) over the window: FLOPs / (peak x busy time) x 100.

    With one precision this is exactly FLOPs / (peak x busy). When kernels ran in several precisions
    (FP32 CUDA cores and TF32 tensor cores in one run) each kernel's FLOPs are weighed by its own
    precision's peak, so the figure stays the busy-time-weighted average of kernel utilizations.
    """
    if busy_ns <= 0:
        raise ValueError("device was never busy in the window")
    return 100.0 * peak_seconds(kernels, peak_flops_by_precision) / (busy_ns / 1e9)


def unattributed_busy_pct(kernels: KernelTable) -> float:
    """Share (%) of summed kernel time spent in kernels whose FLOPs are unknown."""
    # float sums: a corrupt trace's durations can add up past int64.
    total = float(kernels.dur_ns.sum(dtype=np.float64))
    if total <= 0:
        return 0.0
    return 100.0 * float(kernels.dur_ns[~np.isfinite(kernels.flops)].sum(dtype=np.float64)) / total


#: Linux's per-core counters advance in 10 ms ticks (USER_HZ 100). A window must span at least this
#: many of them per core for formula (3) to be within ~10 %; shorter windows are not measured.
MIN_TICKS_PER_CORE = 10
TICK_S = 0.01


def cpu_window_too_short(sample: CpuSample) -> str | None:
    """Why the per-core counters cannot measure this window, or None when they can."""
    counted_s = float(np.sum(sample.total_s)) / max(sample.cores, 1)
    if counted_s < MIN_TICKS_PER_CORE * TICK_S:
        return (f"the timing window ({sample.wall_ns / 1e6:.0f} ms) is shorter than {MIN_TICKS_PER_CORE} ticks of "
                f"the per-core CPU counters ({MIN_TICKS_PER_CORE * TICK_S * 1e3:.0f} ms); use more --iterations")
    return None


def cpu_util_pct(sample: CpuSample) -> float:
    """Formula (3): sum over cores of active time / (cores x window wall time) x 100.

    The denominator is the window as the same per-core counters measured it (the sum over cores
    of every counter field's increase), not the host clock: the kernel's counters advance in ticks
    (10 ms at USER_HZ 100), so on a short window busy time and a clock-measured window disagree by
    up to a tick per core (a 100 ms window read 130 %). Counted in the same ticks, the ratio stays
    within [0, 100] and equals the clock form whenever the window spans many ticks.
    """
    if sample.wall_ns <= 0 or sample.cores <= 0:
        raise ValueError("CPU sample has no duration or no cores")
    counted_s = float(np.sum(sample.total_s))
    denominator = counted_s if counted_s > 0 else sample.cores * sample.wall_ns / 1e9
    return 100.0 * float(np.sum(sample.busy_s)) / denominator


def nvml_busy_pct(sample: NvmlSample) -> float:
    """Mean of NVML's `utilization.gpu` readings over the timing window, in %."""
    if sample.utilization_pct.size == 0:
        raise ValueError("no NVML readings in the window")
    return float(np.mean(sample.utilization_pct))


def throughput_per_s(units_per_step: float, steps: int, window_ns: int) -> float:
    """Units (samples, tokens, audio seconds) per second over a window of `steps` iterations."""
    if window_ns <= 0:
        raise ValueError("timing window has no length")
    return units_per_step * steps / (window_ns / 1e9)
