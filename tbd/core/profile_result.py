"""The `Profile`: tbd's result, saved as versioned JSON (`"schema": "tbd.profile/2"`).

docs/profile-json.md is the contract. Keys may be added; none may be renamed without a schema
bump. Version 2 added the kernel drill-down (launch configuration, launching ops, bytes, roofline,
the Nsight Compute command, measured counters), `metrics.memory_bandwidth` and
`low_bandwidth_kernels`; version 1 files still load (the new keys empty). Loading validates and
raises `ResultFormatError` on anything malformed. Never pickle.

The records below are the schema, declared once: each field's annotation is its rule on loading
(tbd/core/field_checks.py says how they read: `Pct` a number in [0, 100], `Amount` a finite
number >= 0, `Count` an integer >= 0, `| None` null allowed, a default: the key may be absent).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, TypedDict

from tbd.core import field_checks as c
from tbd.core.counters import MeasuredCounters
from tbd.core.errors import ResultFormatError
from tbd.core.field_checks import REQUIRED, VERSION_TAG, Amount, Count, IterationIndex, Keys, Name, Notes, Pct, Range
from tbd.core.profile_cluster import Cluster

SCHEMA = "tbd.profile/2"
READABLE_SCHEMAS = ("tbd.profile/1", SCHEMA)
COMPLETE = "complete"
PARTIAL = "partial"
MEMORY_CATEGORIES = ("weights", "gradients", "feature_maps", "workspace", "dynamic")


def partial_reason(notes: list[str]) -> str | None:
    """Why a partial profile stopped: its "partial: ..." note without that prefix (the caller says
    "partial" itself, once); None when no note says."""
    for note in notes:
        if note.lower().startswith("partial:"):
            return note[len("partial:"):].strip() or None
    return None


class SpecKeys(TypedDict, total=False):
    """The keys of the free-form `spec` that renderers print; the others are kept unchecked."""

    model: Name | None
    framework: Name | None
    precision: Name | None
    device: Name | None
    trace: str | None
    batch: Annotated[int, Range(0, 1 << 24)] | None  # samples in one step (field_checks.Batch, 0 kept as read)


#: One dimension of a grid or block: CUDA caps grids at 2**31 - 1 and blocks at 1024; the trace's own figure is kept.
Dim = Annotated[int, Range(0, 1 << 32)]


class LaunchKeys(TypedDict, total=False):
    """The keys of a kernel group's free-form `launch` that the kernel tables and CSV print (analysis.drilldown's
    LaunchConfig): a grid or block that is not three whole numbers would print as junk or break the CSV's dim3."""

    grid: Annotated[list[Dim], c.Size(3)] | None
    block: Annotated[list[Dim], c.Size(3)] | None
    registers_per_thread: Count | None
    shared_memory_bytes: Count | None
    occupancy_pct: Amount | None
    configs: Count | None
    share_pct: Pct | None


class DeviceNames(TypedDict, total=False):
    """The keys of `environment.gpu` and `environment.cpu` that renderers print."""

    name: Name | None
    model: Name | None


class EnvironmentKeys(TypedDict, total=False):
    gpu: Annotated[dict[str, Any], Keys(DeviceNames)] | None
    cpu: Annotated[dict[str, Any], Keys(DeviceNames)] | None


class CrossCheckKeys(TypedDict, total=False):
    """The keys of `metrics.memory_bytes.cross_check` that renderers print."""

    peak_bytes: dict[str, Count | None] | None
    at_peak: dict[str, Count | None] | None
    maps_to: dict[str, str] | None
    total_peak_bytes: Count | None
    reason: str | None
    device: str | int | None


@dataclass(frozen=True)
class Value:
    """A measured figure, or null with the reason it could not be measured."""

    value: Pct | None
    reason: str | None = None

    @classmethod
    def null(cls, reason: str) -> "Value":
        return cls(None, reason)


@dataclass(frozen=True)
class Throughput:
    value: Amount | None  # over the timing window; with several (--repeat), the median of theirs
    unit: str
    also: Annotated[dict[str, Amount], REQUIRED] = field(default_factory=dict)  # e.g. {"tokens/s": 12345.0}
    reason: str | None = None
    repeats: list[Amount] = field(default_factory=list)  # each timing window's own, in run order
    spread_pct: Amount | None = None  # (max - min) / median of `repeats`; null with one window
    interval_pct: Amount | None = None  # half-width of the 95 % interval of their mean, % of `value`


@dataclass(frozen=True)
class Quality:
    """How far the run's figures can be trusted on the machine it ran on (analysis/quality.py)."""

    reliable: bool  # no warning below
    warnings: list[str]  # each thing that makes the figures unreliable, in words
    cores: Count | None
    wall_s: Amount  # the timing windows' wall time, summed
    workload_cores: Amount | None  # this workload's process tree: CPU seconds / wall time
    other_load_cores: Amount | None  # every other process but the tbd parent, likewise
    tbd_parent_cores: Amount | None  # the tbd parent (progress display), likewise
    other_processes: list[dict[str, Any]]  # the heaviest others: name, pid, cores
    gemm_ceiling_flops: dict[str, Amount | None]  # "before" and "after" the windows, FLOP/s
    gemm_spread_pct: Amount | None  # (higher - lower) / higher
    clock_mhz: dict[str, Amount | None]  # mean over cores at "start" and "end", null if not shown
    throughput_median: Amount | None
    throughput_spread_pct: Amount | None
    throughput_interval_pct: Amount | None  # half-width of the 95 % interval of the windows' mean, % of the median
    cpu_util_median_pct: Pct | None  # the timing windows' CPU utilization (formula (3)), median
    cpu_util_range_pct: list[Pct] | None  # and its lowest and highest, percent
    repeats: list[dict[str, Any]]  # per timing window: iterations, wall_s, throughput, cpu_util_pct, other_load_cores
    reasons: dict[str, str] = field(default_factory=dict)  # why a figure above is null


@dataclass(frozen=True)
class PrecisionWork:
    """The window's FLOPs in one precision and the peak they are held to (docs/profile-json.md).

    Over the precisions with a peak, `seconds_at_peak` adds up to FlopUtil.value x busy_s / 100: a reader
    redoes formula (2) from these rows alone.
    """

    precision: str  # "fp32", "tf32", "fp16", ...; "" where the trace does not tell it
    flops: Amount
    share_pct: Pct  # of the window's counted FLOPs
    peak_flops: Amount | None  # null: no peak for it, so its FLOPs are left out of the utilization
    seconds_at_peak: Amount | None  # flops / peak_flops


@dataclass(frozen=True)
class FlopUtil:
    """Formula (2): FLOPs in the window / (peak FLOP/s x device busy time)."""

    value: Pct | None
    reason: str | None
    source: str  # "analytic" (formula table) or "measured" (hardware counters)
    peak_flops: Amount | None  # the denominator actually used
    peak_source: str  # "gpu_table", "hardware_model", "user" (--peak-flops), "measured_gemm" or "none"
    hardware_peak_flops: Amount | None  # from the hardware model, null with a reason if unknown
    hardware_peak_reason: str | None
    measured_ceiling_flops: Amount | None
    flops: Amount | None  # FLOPs counted in the trace window
    busy_s: Amount | None  # device busy time in the trace window
    unattributed_busy_pct: Pct | None  # share of busy time in kernels with no FLOP formula
    # Busy-time-weighted average utilization of kernel groups with known FLOPs: the threshold of
    # the low-utilization ranking. Equals `value` unless some busy time has no FLOP formula or
    # kernels overlap on several streams.
    kernel_average_pct: Pct | None = None
    peak_formula: str | None = None  # how the FP32 peak was found, in words
    peaks_by_precision: dict[str, Amount] = field(default_factory=dict)  # every peak used, FLOP/s
    kernel_average_reason: str | None = None  # why kernel_average_pct is null (absent in older files)
    by_precision: list[PrecisionWork] = field(default_factory=list)  # the work per precision and its peak
    # Kernel groups above their precision's peak (a fast algorithm, Winograd or FFT, does fewer operations
    # than the direct count): their share of the counted FLOPs, and `value` with each capped at 100 % of its
    # peak over its time. Null when no group is above its peak.
    above_peak_flops_pct: Pct | None = None
    value_capped_pct: Pct | None = None
    # FLOPs of the kernel groups past the profile's `kernels` list (it keeps the longest): with them, the
    # listed groups' FLOPs add up to `flops`. 0 when every group is listed.
    flops_unlisted: Amount = 0.0


@dataclass(frozen=True)
class Memory:
    """Peak live bytes by category (the paper's measure) and the split at the allocator's peak."""

    weights: Count | None
    gradients: Count | None
    feature_maps: Count | None
    workspace: Count | None
    dynamic: Count | None
    allocator_peak: Count | None
    at_peak: dict[str, Count | None]  # categories + "unattributed"; sums to allocator_peak
    reasons: Annotated[dict[str, str], REQUIRED] = field(default_factory=dict)  # why a category is null
    # PyTorch's own memory-profiler categories
    cross_check: Annotated[dict[str, Any], Keys(CrossCheckKeys)] | None = None
    # How each figure was found: "measured" (live arrays, allocator records) or "analytic" (derived from
    # the graph's shapes, e.g. MXNet's and TensorFlow's feature maps). Empty in files written before it.
    sources: dict[str, str] = field(default_factory=dict)


class OpShare(TypedDict):
    """One of a flop gap's top ops by time."""

    name: str
    pct: Pct


@dataclass(frozen=True)
class FlopGap:
    """One cause of kernel time without a FLOP count (analysis/flop_gaps.py)."""

    cause: str  # "communication", "compiled_region", "shapes_not_recorded", "shapes_unreadable",
    #             "no_launch_op", "no_formula"
    pct: Pct  # share of the summed kernel time in the window
    detail: str  # what it means, or how to fix it
    ops: list[OpShare] = field(default_factory=list)  # [{"name", "pct"}]: its top ops by time


@dataclass(frozen=True)
class NoFlopFormula:
    """Kernel time without a FLOP count, split by cause."""

    pct: Pct | None  # share of the summed kernel time (= flop_util_pct.unattributed_busy_pct)
    causes: list[FlopGap]
    # Share of the collectives' busy time (union of their intervals) during which other kernels ran.
    communication_overlap_pct: Pct | None = None


@dataclass(frozen=True)
class Bandwidth:
    """The device's memory bandwidth, the roofline's slope: from its datasheet (GPU) or measured (CPU)."""

    value: Amount | None  # bytes/s
    source: str  # "gpu_table", "measured_copy" or "none"
    reason: str | None = None  # why null, or how it was found
    # Busy-time-weighted average bandwidth utilization of the memory-bound groups with known bytes:
    # the threshold of the low-bandwidth ranking.
    kernel_average_pct: Amount | None = None
    kernel_average_reason: str | None = None  # why kernel_average_pct is null (absent in older files)


@dataclass(frozen=True)
class GpuIdle:
    """The GPU's idle time in the trace window, split by cause (analysis.idle_time; HTA's idle time breakdown)."""

    window_s: Amount  # the trace window
    idle_s: Amount  # the window less the union of kernel intervals (every stream)
    idle_pct: Pct  # of the window: 100 - the trace window's GPU busy %
    gaps: Count  # idle intervals
    seconds: dict[str, Amount | None]  # per cause: host_bound, synchronisation, memcpy, launch_gap, other
    share_pct: dict[str, Pct | None]  # per cause, of idle_s
    launch_gap_ns: Count  # a shorter gap with the next kernel queued is launch latency (HTA's default, 30 ns)
    reasons: dict[str, str] = field(default_factory=dict)  # why a cause (or the shares) is null


@dataclass(frozen=True)
class Metrics:
    throughput: Throughput
    gpu_busy_pct: Value
    gpu_busy_nvml_pct: Value
    flop_util_pct: FlopUtil
    cpu_util_pct: Value
    memory_bytes: Memory
    no_flop_formula: NoFlopFormula | None = None
    memory_bandwidth: Bandwidth | None = None
    # A run tbd timed: GPU busy over the traced iterations' own wall time, which the tracer stretches
    # (gpu_busy_pct there is the kernels' time per iteration over the untraced iterations' time). None: a
    # trace alone, where gpu_busy_pct is this figure.
    gpu_busy_traced_pct: Value | None = None
    # Why the GPU sat idle in the trace window (absent in older files and on runs without CUDA kernels).
    gpu_idle: GpuIdle | None = None


@dataclass(frozen=True)
class KernelRow:
    """Kernels (ops on the CPU) grouped by name."""

    name: str
    calls: Count
    time_s: Amount
    time_share_pct: Pct | None  # of the summed kernel time in the trace window
    flops: Amount | None
    flop_source: str | None
    precision: str
    util_pct: Amount | None  # above 100 only with a util_note (checked on loading)
    # Why util_pct cannot be read as it stands: "above peak: ..." (a number above 100 %), or why it
    # is null ("no FLOP formula", "no fp16 peak known for ..."). None: a plain figure.
    util_note: str | None = None
    # -- the drill-down (schema 2) --
    mean_s: Amount | None = None  # time per call
    flops_per_s: Amount | None = None  # achieved: flops / time_s
    bytes: Amount | None = None  # bytes moved; `bytes_source` says how they are known
    bytes_source: str | None = None  # "analytic" (inputs read + outputs written once) or "measured" (DRAM)
    intensity: Amount | None = None  # FLOPs per byte
    bound: str | None = None  # "compute" or "memory" on this device's roofline; null: unknown (roofline_note)
    attainable_flops_per_s: Amount | None = None  # min(peak, intensity x bandwidth)
    roofline_pct: Amount | None = None  # achieved / attainable (bandwidth share for data movement)
    bandwidth_util_pct: Amount | None = None  # bytes/s over the device's memory bandwidth
    roofline_note: str | None = None  # why bound or a share is null, or why a share is above 100 %
    launch: Annotated[dict[str, Any], Keys(LaunchKeys)] | None = None  # grid, block, registers_per_thread, shared_memory_bytes, ...
    ops: list[dict[str, Any]] = field(default_factory=list)  # launching ops: name, shapes, stack, share_pct
    ncu: dict[str, Any] | None = None  # command, kernel_regex, launch_skip, launch_count, nvtx_range, step
    measured: dict[str, Any] | None = None  # counters merged in: source, flops, dram_bytes, differences
    # Calls whose FLOPs are unknown (no launching op in the trace, shapes not recorded) and their time: `flops`
    # and `util_pct` are the counted calls'. Absent (0) when every call is counted.
    uncounted_calls: Count = 0
    uncounted_time_s: Amount = 0.0
    # What reaching the roofline would win back: time_s x (1 - roofline_pct / 100), and that as a share of the
    # summed kernel time. Null where the bound is unknown or a share is above 100 % (absent in older files).
    recoverable_s: Amount | None = None
    recoverable_pct: Pct | None = None


@dataclass(frozen=True)
class Recommendation:
    """A plain recommendation that the figures show, with the figures it rests on."""

    kind: str  # what it is about, a stable key (analysis.recommendations)
    text: str  # the recommendation, its figures quoted
    figures: list[str]  # the profile.json figures it rests on, each "where: value"


@dataclass(frozen=True)
class OpGroupRow:
    """Kernel time (GPU) or op self time (CPU) grouped by the op that launched it.

    The key `tbd compare` matches runs by: kernel names differ between GPUs and libraries, the
    launching op (aten::convolution_backward, aten::addmm) does not.
    """

    name: str  # the launching op; "(no launching op)" for kernels whose op the trace lacks
    calls: Count  # kernels (ops on the CPU) it accounts for in the trace window
    time_s: Amount  # summed kernel (op self) time in the trace window
    time_share_pct: Pct  # of the summed kernel time in the trace window
    flops: Amount | None  # FLOPs of its kernels; null when any is unknown
    util_pct: Amount | None  # its kernels' FLOPs over (each kernel's precision peak x its time), time-weighted


@dataclass(frozen=True)
class Iterations:
    warmup: IterationIndex
    warmup_s: Amount
    warmup_detected: bool
    stable: bool | None  # None: not checked (iterations read from a trace, or --warmup given)
    timing_window: list[IterationIndex] | None
    trace_window: list[IterationIndex] | None
    times_s: list[Amount]
    source: str = "run"  # "run": timed by tbd; "trace": a trace's ProfilerStep spans
    step_numbers: list[Count] | None = None  # the N of each ProfilerStep#N (source "trace")
    # Warm-up iterations run (the timing window starts after them); `warmup` is where the stable
    # phase was found, some iterations earlier. None: a profile from before this field, or a trace.
    warmup_run: IterationIndex | None = None

    @property
    def warmup_run_time_s(self) -> float:
        """Seconds the warm-up iterations run took (the first `warmup_run` iteration times); for a
        profile from before `warmup_run`, `warmup_s` (the time to the stable phase's start)."""
        if self.warmup_run is not None and len(self.times_s) >= self.warmup_run:
            return math.fsum(self.times_s[:self.warmup_run])
        return self.warmup_s


@dataclass(frozen=True)
class Profile:
    status: str  # COMPLETE or PARTIAL (checked on loading)
    spec: Annotated[dict[str, Any], Keys(SpecKeys)]
    environment: Annotated[dict[str, Any], Keys(EnvironmentKeys)]
    iterations: Iterations | None
    metrics: Metrics
    kernels: list[KernelRow]
    low_util_kernels: list[KernelRow]  # compute-bound groups below the average FLOP utilization (Table V)
    notes: Notes
    provenance: dict[str, Any] = field(default_factory=dict)
    # Memory-bound groups (data movement included) below the average bandwidth utilization.
    low_bandwidth_kernels: list[KernelRow] = field(default_factory=list)
    # Groups whose roofline bound is unknown (bytes not derivable, a peak or the bandwidth unknown), longest
    # first: in neither ranking, each row's roofline_note says why (absent in older files).
    bound_unknown_kernels: list[KernelRow] = field(default_factory=list)
    # Kernel time by launching op, longest first (added in schema 2; absent in older files).
    op_groups: list[OpGroupRow] = field(default_factory=list)
    # The measurement-quality record (absent in older files, null for a trace tbd did not run).
    quality: Quality | None = None
    # The cluster summary of a multi-rank job (absent in older files and single-process runs).
    cluster: Cluster | None = None
    # Hardware counters a trace measured (CUPTI range profiler; absent in older files and other traces).
    counters: MeasuredCounters | None = None
    # The default ranking: groups by the time reaching the roofline would win back (recoverable_s), most first;
    # groups whose bound is unknown or whose share is above 100 % are not in it (absent in older files).
    recoverable_kernels: list[KernelRow] = field(default_factory=list)
    # Plain recommendations where the figures show them, each naming its figures (absent in older files).
    recommendations: list[Recommendation] = field(default_factory=list)
    schema: Annotated[str, VERSION_TAG] = SCHEMA

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data; NaN and infinities never leave as numbers."""
        data = asdict(self)
        data = {"schema": data.pop("schema"), **data}
        if data["cluster"] is None:  # one process: the key stays absent, as in files written before it
            del data["cluster"]
        if data["counters"] is None:  # no counters measured: absent, as in files written before it
            del data["counters"]
        # The rankings' later keys, absent when empty or null as in files written before them (read back alike).
        if not data["bound_unknown_kernels"]:
            del data["bound_unknown_kernels"]
        for block in (data["metrics"]["flop_util_pct"], data["metrics"]["memory_bandwidth"] or {}):
            if block.get("kernel_average_reason", "") is None:
                del block["kernel_average_reason"]
        # Issue 27's keys, absent at their defaults as in files written before them (read back alike).
        if data["metrics"]["gpu_busy_traced_pct"] is None:
            del data["metrics"]["gpu_busy_traced_pct"]
        if data["metrics"]["gpu_idle"] is None:
            del data["metrics"]["gpu_idle"]
        fu = data["metrics"]["flop_util_pct"]
        for key, default in (("by_precision", []), ("above_peak_flops_pct", None), ("value_capped_pct", None),
                             ("flops_unlisted", 0.0)):
            if fu.get(key) == default:
                del fu[key]
        for rows in (data["kernels"], data["low_util_kernels"], data["low_bandwidth_kernels"],
                     data.get("bound_unknown_kernels") or [], data["recoverable_kernels"]):
            for row in rows:
                if not row["uncounted_calls"]:
                    del row["uncounted_calls"], row["uncounted_time_s"]
                if row["recoverable_s"] is None and row["recoverable_pct"] is None:  # issue 28's keys, null: absent
                    del row["recoverable_s"], row["recoverable_pct"]
        for key in ("recoverable_kernels", "recommendations"):  # absent when empty, as in files written before them
            if not data[key]:
                del data[key]
        return c.finite_json(data)

    @classmethod
    def from_dict(cls, data: Any) -> "Profile":
        """Validate and rebuild; raises ResultFormatError with the offending key."""
        return _load_profile(data)


#: Profile's and Metrics' own required keys word a type error as they always have ("profile key
#: 'metrics' has type list"); every other key says what it expected.
_LOAD = c.loader(Profile, terse=(Profile, Metrics))


def _load_profile(data: Any) -> Profile:
    if not isinstance(data, dict):
        raise ResultFormatError("profile is not a JSON object")
    schema = data.get("schema")
    if schema not in READABLE_SCHEMAS:
        raise ResultFormatError(f"unknown profile schema {str(schema)[:80]!r}, expected {SCHEMA!r}")
    status = data.get("status")
    if isinstance(status, str) and status not in (COMPLETE, PARTIAL):
        raise ResultFormatError(f"profile status {status[:80]!r} is neither complete nor partial")
    profile = _LOAD(data)
    for where in ("kernels", "low_util_kernels", "low_bandwidth_kernels", "bound_unknown_kernels",
                  "recoverable_kernels"):
        for i, row in enumerate(getattr(profile, where)):
            if row.util_pct is not None and row.util_pct > 100.0 + c.PCT_SLACK and not row.util_note:
                raise ResultFormatError(f"profile key '{where}[{i}].util_pct' is {row.util_pct:g} % without a "
                                        "util_note saying why it exceeds 100")
    return profile
