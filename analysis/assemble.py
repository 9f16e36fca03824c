"""Assemble a `Profile` from raw records: every metric of the contract in docs/architecture.md, or null + reason.

Pure: records in, a Profile out. The caller reads the run directory or a trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tbd.analysis import (
    flop_gaps,
    flop_terms,
    idle_time,
    kernel_rows,
    op_groups,
    quality,
    ranking,
    stability,
    utilization,
)
from tbd.analysis.peaks import PeakModel
from tbd.core.profile_result import (
    COMPLETE,
    Bandwidth,
    FlopUtil,
    Iterations,
    Memory,
    Metrics,
    Profile,
    Quality,
    Throughput,
    Value,
)
from tbd.core.records import (
    NO_FORMULA,
    NO_LAUNCH_OP,
    SHAPES_NOT_RECORDED,
    SHAPES_UNREADABLE,
    CpuSample,
    IterationLog,
    NvmlSample,
    StepSpan,
    TraceRecords,
)


@dataclass(frozen=True)
class WorkloadInfo:
    samples_per_step: float | None
    throughput_unit: str
    units_per_step: dict[str, float] = field(default_factory=dict)


NO_CUDA = "no CUDA device: the run used the CPU"
NO_SAMPLES = "a trace alone does not say how many samples an iteration holds"


@dataclass(frozen=True)
class NullReasons:
    """Why a figure is null where the records it is made of are absent; the defaults fit a run tbd ran on the CPU."""

    gpu_busy: str = NO_CUDA  # gpu_busy_pct, when the trace holds no CUDA kernels
    gpu_busy_nvml: str = NO_CUDA  # gpu_busy_nvml_pct, when there are no NVML samples
    cpu_util: str = "no timing window was completed"  # cpu_util_pct, when there are no CPU counters
    throughput: str = NO_SAMPLES  # throughput, when the samples per iteration are not known


@dataclass(frozen=True, kw_only=True)
class ProfileInputs:
    """Everything a Profile is assembled from (`assemble_profile`): the run's records, where None
    means the record does not exist, what the device can do, and why a figure is null without its records."""

    spec: dict[str, Any]  # what ran: spec.json, or what a trace tells
    environment: dict[str, Any]  # host, CPU, GPU, versions
    log: IterationLog | None  # the iteration log, or a trace's ProfilerStep spans
    workload: WorkloadInfo | None  # samples per iteration and the throughput's unit
    cpu: CpuSample | None  # per-core CPU counters over the timing window
    nvml: NvmlSample | None  # NVML utilization samples
    trace: TraceRecords | None  # the trace window's kernels and ops
    memory: Memory  # the memory breakdown, as the framework's reader split it
    peaks: PeakModel  # peak FLOP/s per precision
    # The device's memory bandwidth: (bytes/s, source, how) as analysis.peaks.device_bandwidth gives it.
    bandwidth: tuple[float | None, str, str] | None = None
    status: str = COMPLETE
    notes: list[str] = field(default_factory=list)  # the caller's notes, before those the analysis adds
    null_reasons: NullReasons = NullReasons()
    provenance: dict[str, Any] = field(default_factory=dict)
    kernel_rows_shown: int | None = 200  # kernel groups kept, longest first; None: all
    quality_records: dict[str, Any] | None = None  # raw/quality.json of a run tbd ran (analysis/quality.py)
    gemm: dict[str, Any] | None = None  # raw/gemm.json of a run tbd ran


def throughput(log: IterationLog | None, workload: WorkloadInfo | None,
               no_samples_reason: str = NO_SAMPLES) -> Throughput:
    """Samples/s over the timing window only (never the traced iterations of a run tbd timed)."""
    unit = workload.throughput_unit if workload else "samples/s"
    if workload is None or workload.samples_per_step is None:
        return Throughput(None, unit, reason=no_samples_reason)
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


def threads_of(spec: dict[str, Any], environment: dict[str, Any]) -> int | None:
    """The workload's CPU threads: --threads, else the count its framework reported, else None."""
    for value in (spec.get("threads"), (environment.get("versions") or {}).get("threads")):
        try:
            if value is not None and int(value) > 0:
                return int(value)
        except (TypeError, ValueError):
            continue
    return None


def with_repeats(value: Throughput, record: Quality | None) -> Throughput:
    """The throughput as the median of the timing windows when there were several (--repeat), with
    each window's figure and their spread; the other units scale with it. One window: as it was."""
    if record is None or value.value is None or record.throughput_median is None or len(record.repeats) < 2:
        return value
    scale = record.throughput_median / value.value
    return replace(value, value=record.throughput_median, also={u: v * scale for u, v in value.also.items()},
                   repeats=[r["throughput"] for r in record.repeats if r["throughput"] is not None],
                   spread_pct=record.throughput_spread_pct, interval_pct=record.throughput_interval_pct)


def iterations_block(log: IterationLog | None) -> Iterations | None:
    if log is None:
        return None
    return Iterations(
        warmup=log.warmup, warmup_s=log.warmup_seconds, warmup_detected=log.warmup_detected,
        stable=None if log.from_trace else log.stable,
        timing_window=list(log.timing_window) if log.timing_window else None,
        trace_window=list(log.trace_window) if log.trace_window else None,
        times_s=[float(t) / 1e9 for t in log.times_ns],
        source="trace" if log.from_trace else "run",
        step_numbers=list(log.step_numbers) if log.from_trace else None,
        warmup_run=None if log.from_trace else log.warmup_run)


def iteration_log_from_steps(steps: tuple[StepSpan, ...]) -> IterationLog | None:
    """The iterations of a trace that tbd did not record: its ProfilerStep spans, in order.

    Each iteration's time is its span (host start to the end of its last kernel); the "timing
    window" is all of them, first start to latest end, so a throughput over it counts every
    traced step. Nothing about warm-up or stability can be told from the spans alone.
    """
    if not steps:
        return None
    times = np.array([s.end_ns - s.start_ns for s in steps], dtype=np.int64)
    window_ns = max(s.end_ns for s in steps) - steps[0].start_ns
    last = len(steps) - 1
    return IterationLog(times_ns=times, warmup=0, warmup_detected=False, stable=True, timing_window=(0, last),
                        trace_window=(0, last), timing_window_ns=int(window_ns), from_trace=True,
                        step_numbers=tuple(s.number for s in steps))


def gpu_busy(trace: TraceRecords | None, no_gpu_reason: str) -> Value:
    """Formula (1) over the trace window: kernel-interval union / the window's wall time."""
    if trace is None:
        return Value.null("no trace window was recorded")
    if trace.device_kind != "cuda":
        return Value.null(no_gpu_reason)
    if trace.window_end_ns <= trace.window_start_ns:
        return Value.null(NO_WINDOW)
    return Value(utilization.gpu_busy_pct(trace))


def gpu_busy_of_run(trace: TraceRecords | None, log: IterationLog | None,
                    no_gpu_reason: str) -> tuple[Value, Value | None, list[str]]:
    """(GPU busy, GPU busy as traced or None, notes).

    A run tbd timed: the kernels' busy time per traced iteration over the timing window's iteration time,
    since the tracer slows the host and stretches the traced iterations, not the kernels
    (utilization.busy_per_untraced_iteration_pct); the trace window's own figure is kept beside it. A trace
    alone has no untraced iterations: its figure is the trace window's, and None is the second.
    """
    traced = gpu_busy(trace, no_gpu_reason)
    if (traced.value is None or log is None or log.from_trace or not log.trace_window or not log.timing_window
            or not log.timing_window_ns):
        return traced, None, []
    # The trace's own steps where it has them: a trace cut to fewer steps than the run traced still divides right.
    n_traced = len(trace.steps) if trace.steps else log.trace_window[1] - log.trace_window[0] + 1
    n_timed = log.timing_window[1] - log.timing_window[0] + 1
    busy_ns = utilization.device_busy_ns(trace)
    value = utilization.busy_per_untraced_iteration_pct(busy_ns, n_traced, log.timing_window_ns, n_timed)
    notes = []
    if value > 100.0:
        notes.append(f"GPU busy: the kernels ran {busy_ns / n_traced / 1e6:.2f} ms per traced iteration, "
                     f"{value - 100:.1f} % more than an untraced iteration took ({log.timing_window_ns / n_timed / 1e6:.2f} "
                     "ms): the tracer slowed the kernels too, or the two windows differ; shown as 100 %")
        value = 100.0
    return Value(value), traced, notes


NO_WINDOW = "the trace window has no length (every event at one instant)"
def traced_kernels(trace: TraceRecords | None) -> bool:
    """Whether the trace window holds CUDA kernels over a window of positive length (GPU idle time needs both)."""
    return (trace is not None and trace.device_kind == "cuda" and len(trace.kernels) > 0
            and trace.window_end_ns > trace.window_start_ns)


NEVER_BUSY = "the device was never busy in the window (every kernel or op has zero duration)"


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
                  hardware_peak_reason=hw_reason, measured_ceiling_flops=peaks.measured_ceiling_flops,
                  peak_formula=(fp32.formula or None) if fp32 and fp32.value else None,
                  peaks_by_precision=dict(used))
    if trace is None or len(trace.kernels) == 0:
        return FlopUtil(None, "no kernels or ops were traced", flops=None, busy_s=None,
                        unattributed_busy_pct=None, **common), None
    busy_ns = utilization.device_busy_ns(trace)
    flops = float(np.nansum(trace.kernels.flops))
    unattributed = utilization.unattributed_busy_pct(trace.kernels)
    util_rows = utilization.kernel_util_pct(trace.kernels, used)
    common["by_precision"] = flop_terms.work_by_precision(trace.kernels, used)
    if not used:
        return FlopUtil(None, f"peak FLOP/s unknown: {hw_reason}", flops=flops, busy_s=busy_ns / 1e9,
                        unattributed_busy_pct=unattributed, **common), util_rows
    if not (np.nan_to_num(trace.kernels.flops, nan=0.0) > 0).any():
        # Only known zeros (copies, fills) or nothing counted: 0 % would read as an idle chip.
        gaps = flop_gaps.no_flop_formula(trace.kernels)
        top = gaps.causes[0] if gaps and gaps.causes else None
        why = f"{top.cause.replace('_', ' ')}: {top.detail}" if top else "no FLOP formula"
        return FlopUtil(None, f"no traced op with arithmetic has a FLOP count ({why})", flops=None,
                        busy_s=busy_ns / 1e9, unattributed_busy_pct=unattributed, **common), util_rows
    if busy_ns <= 0:
        return FlopUtil(None, NEVER_BUSY, flops=flops, busy_s=0.0, unattributed_busy_pct=unattributed,
                        **common), util_rows
    value = utilization.flop_util_pct(trace.kernels, busy_ns, used)
    if value > 100.0:
        # More FLOPs than the device can do at its peaks in the busy time: the count is wrong.
        return FlopUtil(None, f"{ABOVE_PEAK_OVERALL} ({value:.3g} % counted)", flops=flops, busy_s=busy_ns / 1e9,
                        unattributed_busy_pct=unattributed, **common), util_rows
    return FlopUtil(value, None, flops=flops, busy_s=busy_ns / 1e9, unattributed_busy_pct=unattributed,
                    **common), util_rows


def with_group_terms(fu: FlopUtil, tables: kernel_rows.KernelTables, busy_ns: int) -> FlopUtil:
    """`fu` with what the kernel groups tell of it: the share of FLOPs above peak and the figure capped, and the
    FLOPs of the groups past the listed rows (so the listed rows' FLOPs and these add up to the headline's)."""
    listed = sum(r.flops for r in tables.rows if r.flops is not None)
    unlisted = max(float(fu.flops or 0.0) - listed, 0.0) if len(tables.groups) > len(tables.rows) else 0.0
    share, capped = flop_terms.above_peak_terms(tables.groups, fu.flops or 0.0, busy_ns,
                                                fu.value if fu.value is not None else float("nan"))
    if fu.value is None and fu.reason and fu.reason.startswith(ABOVE_PEAK_OVERALL) and fu.flops and busy_ns:
        # Above 100 % overall: the capped figure is still a bound worth giving, if it is one.
        counted = 100.0 * flop_terms.peak_seconds_of_groups(tables.groups) / (busy_ns / 1e9)
        share, capped = flop_terms.above_peak_terms(tables.groups, fu.flops, busy_ns, counted)
    capped = capped if capped is not None and 0.0 <= capped <= 100.0 else None
    return replace(fu, above_peak_flops_pct=kernel_rows.finite_or_none(share), value_capped_pct=capped,
                   flops_unlisted=unlisted)


ABOVE_PEAK_OVERALL = ("FLOPs counted exceed the peak over the busy time: a precision or the peak misdetected, or "
                      "op shapes in the trace that no run could have")


ABOVE_PEAK = ("above peak: the analytic count exceeds what the device can do at this precision (a fast "
              "algorithm such as Winograd or FFT convolution does fewer operations than the direct count, or "
              "the precision or the peak is misdetected)")
#: Why a group's FLOPs are unknown, by its flop gap (records.FLOP_GAPS).
_GAP_NOTES = {NO_LAUNCH_OP: "no launching op in the trace", SHAPES_NOT_RECORDED: "shapes not recorded",
              SHAPES_UNREADABLE: "its op's formula needs arguments the trace did not record",
              NO_FORMULA: "no FLOP formula"}


def host_stretch_note(log: IterationLog, trace: TraceRecords) -> str:
    """Why traced iterations slower than the timing window's do not skew the kernel figures on a GPU."""
    first, last = log.trace_window
    traced = log.times_ns[first:last + 1]
    mean_ns = log.timing_window_ns / (log.timing_window[1] - log.timing_window[0] + 1)
    steps = len(trace.steps) or (last - first + 1)
    kernel_ns = utilization.device_busy_ns(trace) / steps
    return (f"traced iterations took {traced.min() / 1e6:.1f}-{traced.max() / 1e6:.1f} ms against the timing "
            f"window's {mean_ns / 1e6:.1f} ms: the tracer's work on the host. Their kernels ran "
            f"{kernel_ns / 1e6:.1f} ms per iteration, within an untraced iteration, so the kernel figures stand "
            "and GPU busy is taken over the untraced iteration time")


NO_PRECISION = ("precision not derived: its op's input types are not in the trace, so no precision's peak "
                "applies")


def util_note(g: ranking.KernelGroup, peaks: PeakModel) -> str | None:
    """Why a group's utilization is flagged (above peak, partly counted) or null; None for a plain figure."""
    partly = None
    if g.uncounted_calls and np.isfinite(g.flops):
        partly = (f"{g.calls - g.uncounted_calls} of {g.calls} calls counted, the rest "
                  f"{_GAP_NOTES.get(g.flop_gap, 'no FLOP formula')}: FLOPs and utilization are the counted calls'")
    note = _util_why(g, peaks)
    return note if partly is None else partly if note is None else f"{note}; {partly}"


def _util_why(g: ranking.KernelGroup, peaks: PeakModel) -> str | None:
    if g.above_peak:
        return ABOVE_PEAK
    if np.isfinite(g.util_pct):
        return None
    if not np.isfinite(g.flops):
        return _GAP_NOTES.get(g.flop_gap, "no FLOP formula")
    if not g.precision:
        return NO_PRECISION
    peak = peaks.by_precision.get(g.precision)
    if peak is None or not peak.value:
        why = peak.reason if peak is not None and peak.reason else f"no {g.precision} peak known for this device"
        return f"peak unknown: {why}"
    return "no time: every counted call lasted 0 ns in the trace"


def kernel_tables(trace: TraceRecords | None, util_rows: np.ndarray | None, peaks: PeakModel,
                  bandwidth: float | None = None, top: int | None = None,
                  ncu_target: list[str] | None = None) -> kernel_rows.KernelTables:
    """All groups (longest first, `top` of them if given) with their drill-down, and the two rankings.

    Without any peak the FLOP threshold is NaN: the only utilizations left would be the known zeros
    of data-movement kernels, and their average (0 %) would rank nothing honestly.
    """
    if trace is None or util_rows is None or len(trace.kernels) == 0:
        return kernel_rows.KernelTables([], [], [], float("nan"), float("nan"))
    used, _, _ = peaks.denominators()
    return kernel_rows.kernel_tables(trace, util_rows, used, bandwidth, lambda g: util_note(g, peaks), top,
                                     ncu_target)


def ncu_target(spec: dict[str, Any], log: IterationLog | None) -> list[str] | None:
    """The `tbd profile` command that repeats a run's windows under ncu, or None (a trace tbd did not run).

    The warm-up is pinned to the iterations this run warmed up for, so the trace window covers the same ones;
    TBD_NO_TRACER=1 keeps the framework's tracer off, since ncu and the tracer cannot both hold CUPTI.
    """
    if log is None or log.from_trace or not spec.get("model") or spec.get("trace"):
        return None
    timing = log.timing_window
    trace = log.trace_window
    argv = ["env", "TBD_NO_TRACER=1", "tbd", "profile", str(spec["model"]), "--framework", str(spec.get("framework")),
            "--device", str(spec.get("device")), "--warmup", str(log.warmup_run if log.warmup_run is not None
                                                                  else log.warmup)]
    for flag, key in (("--batch", "batch"), ("--size", "size"), ("--threads", "threads")):
        if spec.get(key) is not None:
            argv += [flag, str(spec[key])]
    if timing:  # the timing windows back to back, as one: the same iterations, no cut by time
        argv += ["--iterations", str(timing[1] - timing[0] + 1), "--repeat", "1", "--window-seconds", "0"]
    if trace:
        argv += ["--trace-iterations", str(trace[1] - trace[0] + 1)]
    return argv + ["--quiet", "--out", "RUN_DIR-ncu"]


def assemble_profile(inputs: ProfileInputs) -> Profile:
    """Every metric of the contract from the records given; what they cannot tell is null + reason."""
    spec, environment, log, trace, peaks = inputs.spec, inputs.environment, inputs.log, inputs.trace, inputs.peaks
    cpu, workload, why = inputs.cpu, inputs.workload, inputs.null_reasons
    notes = list(inputs.notes)
    fu, util_rows = flop_util(trace, peaks)
    bw_value, bw_source, bw_how = inputs.bandwidth or (None, "none", "memory bandwidth not known")
    tables = kernel_tables(trace, util_rows, peaks, bw_value, inputs.kernel_rows_shown, ncu_target(spec, log))
    fu = replace(fu, kernel_average_pct=kernel_rows.finite_or_none(tables.flop_threshold_pct),
                 kernel_average_reason=tables.flop_threshold_reason)
    fu = with_group_terms(fu, tables, round((fu.busy_s or 0.0) * 1e9))  # busy time as flop_util measured it
    if log is not None and log.stable is False and not log.from_trace:  # None: --warmup, not checked
        notes.append("NOT STABLE: the stable phase was never reached; figures cover an unsteady run")
    if log is not None and log.from_trace:
        notes.append(f"iterations: the trace's {len(log.times_ns)} ProfilerStep spans; warm-up and stability "
                     "cannot be told from a trace alone")
    busy, busy_traced, busy_notes = gpu_busy_of_run(trace, log, why.gpu_busy)
    if log is not None and not log.from_trace:
        outliers = stability.trace_window_outliers(log.times_ns, log.timing_window, log.trace_window,
                                                   log.timing_window_ns)
        if outliers and busy_traced is not None and not busy_notes:
            # On a GPU the kernels fit in an untraced iteration: the stretch is the tracer's, on the host.
            notes.append(host_stretch_note(log, trace))
        else:
            notes.extend(outliers)
    notes.extend(busy_notes)
    cpu_pct = cpu_util(cpu, why.cpu_util)
    notes.extend(one_core_note(cpu_pct, cpu, spec))
    if trace is not None:
        notes.extend(trace.notes)
    cores = cpu.cores if cpu is not None else None
    record = quality.measurement_quality(inputs.quality_records, inputs.gemm,
                                         workload.samples_per_step if workload else None, cores,
                                         threads_of(spec, environment))
    if record is not None:
        notes.extend(f"measurement: {w}" for w in record.warnings)
    metrics = Metrics(
        throughput=with_repeats(throughput(log, workload, why.throughput), record),
        gpu_busy_pct=busy,
        gpu_busy_traced_pct=busy_traced,
        gpu_idle=idle_time.gpu_idle(trace) if traced_kernels(trace) else None,
        gpu_busy_nvml_pct=nvml_busy(inputs.nvml, why.gpu_busy_nvml),
        flop_util_pct=fu,
        cpu_util_pct=cpu_pct,
        memory_bytes=inputs.memory,
        no_flop_formula=flop_gaps.no_flop_formula(trace.kernels) if trace is not None else None,
        memory_bandwidth=Bandwidth(bw_value, bw_source, bw_how, kernel_rows.finite_or_none(tables.bandwidth_threshold_pct),
                                   tables.bandwidth_threshold_reason),
    )
    return Profile(status=inputs.status, spec=spec, environment=environment, iterations=iterations_block(log),
                   metrics=metrics, kernels=tables.rows, low_util_kernels=tables.low_compute, notes=notes,
                   provenance=inputs.provenance, low_bandwidth_kernels=tables.low_memory,
                   bound_unknown_kernels=tables.bound_unknown,
                   recoverable_kernels=tables.recoverable, recommendations=tables.recommendations,
                   op_groups=op_groups.op_groups(trace.kernels, util_rows) if trace is not None and util_rows is not None
                   else [], quality=record)
