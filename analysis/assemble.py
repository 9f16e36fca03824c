"""Assemble a `Profile` from raw records: every metric of DESIGN.md's contract, or null + reason.

Pure: records in, a Profile out. The caller reads the run directory or a trace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tbd.analysis import ranking, stability, utilization
from tbd.analysis.peaks import PeakModel
from tbd.profile import COMPLETE, FlopUtil, Iterations, KernelRow, Memory, Metrics, Profile, Throughput, Value
from tbd.records import CpuSample, IterationLog, NvmlSample, TraceRecords


@dataclass(frozen=True)
class WorkloadInfo:
    samples_per_step: float | None
    throughput_unit: str
    units_per_step: dict[str, float] = field(default_factory=dict)


def _nan_to_none(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def throughput(log: IterationLog | None, workload: WorkloadInfo | None) -> Throughput:
    """Samples/s over the timing window only (never the traced iterations)."""
    unit = workload.throughput_unit if workload else "samples/s"
    if workload is None or workload.samples_per_step is None:
        return Throughput(None, unit, reason="a trace alone does not say how many samples an iteration holds")
    if log is None or log.timing_window is None or not log.timing_window_ns:
        return Throughput(None, unit, reason="no timing window was completed")
    first, last = log.timing_window
    steps = last - first + 1
    if log.timing_window_samples is not None:
        # Several workers: the workload counted every worker's samples over the window.
        value = utilization.throughput_per_s(log.timing_window_samples, 1, log.timing_window_ns)
    else:
        value = utilization.throughput_per_s(workload.samples_per_step, steps, log.timing_window_ns)
    also = {u: utilization.throughput_per_s(n, steps, log.timing_window_ns)
            for u, n in workload.units_per_step.items()}
    return Throughput(value, unit, also)


def iterations_block(log: IterationLog | None) -> Iterations | None:
    if log is None:
        return None
    return Iterations(
        warmup=log.warmup, warmup_s=log.warmup_seconds, warmup_detected=log.warmup_detected,
        stable=log.stable,
        timing_window=list(log.timing_window) if log.timing_window else None,
        trace_window=list(log.trace_window) if log.trace_window else None,
        times_s=[float(t) / 1e9 for t in log.times_ns])


def gpu_busy(trace: TraceRecords | None, no_gpu_reason: str) -> Value:
    if trace is None:
        return Value.null("no trace window was recorded")
    if trace.device_kind != "cuda":
        return Value.null(no_gpu_reason)
    return Value(utilization.gpu_busy_pct(trace))


def nvml_busy(nvml: NvmlSample | None, reason: str) -> Value:
    if nvml is None or nvml.utilization_pct.size == 0:
        return Value.null(reason)
    return Value(utilization.nvml_busy_pct(nvml))


def cpu_util(cpu: CpuSample | None, reason: str) -> Value:
    if cpu is None:
        return Value.null(reason)
    too_short = utilization.cpu_window_too_short(cpu)
    if too_short:
        return Value.null(too_short)
    return Value(utilization.cpu_util_pct(cpu))


def one_core_note(util: Value, cpu: CpuSample | None, spec: dict[str, Any]) -> list[str]:
    """A note when the run kept about one of several cores busy and the framework chose its threads."""
    if cpu is None or util.value is None or cpu.cores < 2 or spec.get("threads"):
        return []
    if util.value > 125.0 / cpu.cores:  # more than a quarter of a second core busy: it used several
        return []
    return [f"CPU utilization {util.value:.0f} % of {cpu.cores} cores: the framework kept about one core busy "
            f"with its own thread count; --threads {cpu.cores} gives it every core"]


def flop_util(trace: TraceRecords | None, peaks: PeakModel) -> tuple[FlopUtil, np.ndarray | None]:
    """Formula (2) and the per-row utilizations it is made of."""
    used, peak_source, hw_reason = peaks.denominators()
    fp32 = peaks.by_precision.get("fp32")
    common = dict(source="analytic", peak_flops=used.get("fp32"), peak_source=peak_source,
                  hardware_peak_flops=fp32.value if fp32 else None,
                  hardware_peak_reason=hw_reason, measured_ceiling_flops=peaks.measured_ceiling_flops)
    if trace is None or len(trace.kernels) == 0:
        return FlopUtil(None, "no kernels or ops were traced", flops=None, busy_s=None,
                        unattributed_busy_pct=None, **common), None
    busy_ns = utilization.device_busy_ns(trace)
    flops = float(np.nansum(trace.kernels.flops))
    unattributed = utilization.unattributed_busy_pct(trace.kernels)
    util_rows = utilization.kernel_util_pct(trace.kernels, used)
    if not used:
        return FlopUtil(None, f"peak FLOP/s unknown: {hw_reason}", flops=flops, busy_s=busy_ns / 1e9,
                        unattributed_busy_pct=unattributed, **common), util_rows
    if not np.isfinite(trace.kernels.flops).any():
        return FlopUtil(None, "no traced op has a FLOP formula with recorded shapes", flops=None,
                        busy_s=busy_ns / 1e9, unattributed_busy_pct=unattributed, **common), util_rows
    value = utilization.flop_util_pct(trace.kernels, busy_ns, used)
    return FlopUtil(value, None, flops=flops, busy_s=busy_ns / 1e9, unattributed_busy_pct=unattributed,
                    **common), util_rows


def _kernel_row(g: ranking.KernelGroup) -> KernelRow:
    return KernelRow(name=g.name, calls=g.calls, time_s=g.time_ns / 1e9, time_share_pct=g.time_share_pct,
                     flops=_nan_to_none(g.flops), flop_source=g.flop_source or None, precision=g.precision,
                     util_pct=_nan_to_none(g.util_pct))


def kernel_tables(trace: TraceRecords | None, util_rows: np.ndarray | None,
                  top: int | None = None) -> tuple[list[KernelRow], list[KernelRow], float]:
    """All groups (longest first, `top` of them if given), the low-utilization ranking, and its threshold."""
    if trace is None or util_rows is None or len(trace.kernels) == 0:
        return [], [], float("nan")
    groups = ranking.group_kernels(trace.kernels, util_rows)
    threshold = ranking.average_util_pct(groups)
    low = ranking.low_util_kernels(groups, threshold) if math.isfinite(threshold) else []
    shown = groups if top is None else groups[:top]
    return [_kernel_row(g) for g in shown], [_kernel_row(g) for g in low], threshold


def assemble_profile(*, spec: dict[str, Any], environment: dict[str, Any], log: IterationLog | None,
                     workload: WorkloadInfo | None, cpu: CpuSample | None, nvml: NvmlSample | None,
                     trace: TraceRecords | None, memory: Memory, peaks: PeakModel,
                     status: str = COMPLETE, notes: list[str] | None = None,
                     reasons: dict[str, str] | None = None, provenance: dict[str, Any] | None = None,
                     kernel_rows: int | None = 200) -> Profile:
    """Every metric of the contract from the records given; what they cannot tell is null + reason.

    `reasons` overrides the default null reasons: keys "gpu", "nvml", "cpu".
    """
    reasons = reasons or {}
    notes = list(notes or [])
    no_gpu = reasons.get("gpu", "no CUDA device: the run used the CPU")
    fu, util_rows = flop_util(trace, peaks)
    kernels, low, threshold = kernel_tables(trace, util_rows, kernel_rows)
    fu = replace(fu, kernel_average_pct=_nan_to_none(threshold))
    if log is not None and not log.stable:
        notes.append("NOT STABLE: the stable phase was never reached; figures cover an unsteady run")
    if log is not None:
        notes.extend(stability.trace_window_outliers(log.times_ns, log.timing_window, log.trace_window,
                                                     log.timing_window_ns))
    cpu_pct = cpu_util(cpu, reasons.get("cpu", "no timing window was completed"))
    notes.extend(one_core_note(cpu_pct, cpu, spec))
    if trace is not None:
        notes.extend(trace.notes)
    metrics = Metrics(
        throughput=throughput(log, workload),
        gpu_busy_pct=gpu_busy(trace, no_gpu),
        gpu_busy_nvml_pct=nvml_busy(nvml, reasons.get("nvml", no_gpu)),
        flop_util_pct=fu,
        cpu_util_pct=cpu_pct,
        memory_bytes=memory,
    )
    return Profile(status=status, spec=spec, environment=environment, iterations=iterations_block(log),
                   metrics=metrics, kernels=kernels, low_util_kernels=low, notes=notes,
                   provenance=provenance or {})
