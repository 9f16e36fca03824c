"""The `Profile`: tbd's result, saved as versioned JSON (`"schema": "tbd.profile/2"`).

docs/profile-json.md is the contract. Keys may be added; none may be renamed without a schema
bump. Version 2 added the kernel drill-down (launch configuration, launching ops, bytes, roofline,
the Nsight Compute command, measured counters), `metrics.memory_bandwidth` and
`low_bandwidth_kernels`; version 1 files still load (the new keys empty). Loading validates and
raises `ResultFormatError` on anything malformed. Never pickle.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tbd.core import field_checks as c
from tbd.core.errors import ResultFormatError
from tbd.core.profile_cluster import Cluster, load_cluster

SCHEMA = "tbd.profile/2"
READABLE_SCHEMAS = ("tbd.profile/1", SCHEMA)
COMPLETE = "complete"
PARTIAL = "partial"
MEMORY_CATEGORIES = ("weights", "gradients", "feature_maps", "workspace", "dynamic")


@dataclass(frozen=True)
class Value:
    """A measured figure, or null with the reason it could not be measured."""

    value: float | None
    reason: str | None = None

    @classmethod
    def null(cls, reason: str) -> "Value":
        return cls(None, reason)


@dataclass(frozen=True)
class Throughput:
    value: float | None  # over the timing window; with several (--repeat), the median of theirs
    unit: str
    also: dict[str, float] = field(default_factory=dict)  # e.g. {"tokens/s": 12345.0}
    reason: str | None = None
    repeats: list[float] = field(default_factory=list)  # each timing window's own, in run order
    spread_pct: float | None = None  # (max - min) / median of `repeats`; null with one window
    interval_pct: float | None = None  # half-width of the 95 % interval of their mean, % of `value`


@dataclass(frozen=True)
class Quality:
    """How far the run's figures can be trusted on the machine it ran on (analysis/quality.py)."""

    reliable: bool  # no warning below
    warnings: list[str]  # each thing that makes the figures unreliable, in words
    cores: int | None
    wall_s: float  # the timing windows' wall time, summed
    workload_cores: float | None  # this workload's process tree: CPU seconds / wall time
    other_load_cores: float | None  # every other process but the tbd parent, likewise
    tbd_parent_cores: float | None  # the tbd parent (progress display), likewise
    other_processes: list[dict[str, Any]]  # the heaviest others: name, pid, cores
    gemm_ceiling_flops: dict[str, float | None]  # "before" and "after" the windows, FLOP/s
    gemm_spread_pct: float | None  # (higher - lower) / higher
    clock_mhz: dict[str, float | None]  # mean over cores at "start" and "end", null if not shown
    throughput_median: float | None
    throughput_spread_pct: float | None
    throughput_interval_pct: float | None  # half-width of the 95 % interval of the windows' mean, % of the median
    cpu_util_median_pct: float | None  # the timing windows' CPU utilization (formula (3)), median
    cpu_util_range_pct: list[float] | None  # and its lowest and highest, percent
    repeats: list[dict[str, Any]]  # per timing window: iterations, wall_s, throughput, cpu_util_pct, other_load_cores
    reasons: dict[str, str] = field(default_factory=dict)  # why a figure above is null


@dataclass(frozen=True)
class FlopUtil:
    """Formula (2): FLOPs in the window / (peak FLOP/s x device busy time)."""

    value: float | None
    reason: str | None
    source: str  # "analytic" (formula table) or "measured" (hardware counters)
    peak_flops: float | None  # the denominator actually used
    peak_source: str  # "gpu_table", "hardware_model", "user" (--peak-flops), "measured_gemm" or "none"
    hardware_peak_flops: float | None  # from the hardware model, null with a reason if unknown
    hardware_peak_reason: str | None
    measured_ceiling_flops: float | None
    flops: float | None  # FLOPs counted in the trace window
    busy_s: float | None  # device busy time in the trace window
    unattributed_busy_pct: float | None  # share of busy time in kernels with no FLOP formula
    # Busy-time-weighted average utilization of kernel groups with known FLOPs: the threshold of
    # the low-utilization ranking. Equals `value` unless some busy time has no FLOP formula or
    # kernels overlap on several streams.
    kernel_average_pct: float | None = None
    peak_formula: str | None = None  # how the FP32 peak was found, in words
    peaks_by_precision: dict[str, float] = field(default_factory=dict)  # every peak used, FLOP/s


@dataclass(frozen=True)
class Memory:
    """Peak live bytes by category (the paper's measure) and the split at the allocator's peak."""

    weights: int | None
    gradients: int | None
    feature_maps: int | None
    workspace: int | None
    dynamic: int | None
    allocator_peak: int | None
    at_peak: dict[str, int | None]  # categories + "unattributed"; sums to allocator_peak
    reasons: dict[str, str] = field(default_factory=dict)  # why a category is null
    cross_check: dict[str, Any] | None = None  # PyTorch's own memory-profiler categories
    # How each figure was found: "measured" (live arrays, allocator records) or "analytic" (derived from
    # the graph's shapes, e.g. MXNet's and TensorFlow's feature maps). Empty in files written before it.
    sources: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FlopGap:
    """One cause of kernel time without a FLOP count (analysis/flop_gaps.py)."""

    cause: str  # "communication", "compiled_region", "shapes_not_recorded", "shapes_unreadable",
    #             "no_launch_op", "no_formula"
    pct: float  # share of the summed kernel time in the window
    detail: str  # what it means, or how to fix it
    ops: list[dict] = field(default_factory=list)  # [{"name", "pct"}]: its top ops by time


@dataclass(frozen=True)
class NoFlopFormula:
    """Kernel time without a FLOP count, split by cause."""

    pct: float | None  # share of the summed kernel time (= flop_util_pct.unattributed_busy_pct)
    causes: list[FlopGap]
    # Share of the collectives' busy time (union of their intervals) during which other kernels ran.
    communication_overlap_pct: float | None = None


@dataclass(frozen=True)
class Bandwidth:
    """The device's memory bandwidth, the roofline's slope: from its datasheet (GPU) or measured (CPU)."""

    value: float | None  # bytes/s
    source: str  # "gpu_table", "measured_copy" or "none"
    reason: str | None = None  # why null, or how it was found
    # Busy-time-weighted average bandwidth utilization of the memory-bound groups with known bytes:
    # the threshold of the low-bandwidth ranking.
    kernel_average_pct: float | None = None


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


@dataclass(frozen=True)
class KernelRow:
    """Kernels (ops on the CPU) grouped by name."""

    name: str
    calls: int
    time_s: float
    time_share_pct: float  # of the summed kernel time in the trace window
    flops: float | None
    flop_source: str | None
    precision: str
    util_pct: float | None
    # Why util_pct cannot be read as it stands: "above peak: ..." (a number above 100 %), or why it
    # is null ("no FLOP formula", "no fp16 peak known for ..."). None: a plain figure.
    util_note: str | None = None
    # -- the drill-down (schema 2) --
    mean_s: float | None = None  # time per call
    flops_per_s: float | None = None  # achieved: flops / time_s
    bytes: float | None = None  # bytes moved; `bytes_source` says how they are known
    bytes_source: str | None = None  # "analytic" (inputs read + outputs written once) or "measured" (DRAM)
    intensity: float | None = None  # FLOPs per byte
    bound: str | None = None  # "compute" or "memory" on this device's roofline; null: unknown (roofline_note)
    attainable_flops_per_s: float | None = None  # min(peak, intensity x bandwidth)
    roofline_pct: float | None = None  # achieved / attainable (bandwidth share for data movement)
    bandwidth_util_pct: float | None = None  # bytes/s over the device's memory bandwidth
    roofline_note: str | None = None  # why bound or a share is null
    launch: dict[str, Any] | None = None  # grid, block, registers_per_thread, shared_memory_bytes, ...
    ops: list[dict[str, Any]] = field(default_factory=list)  # launching ops: name, shapes, stack, share_pct
    ncu: dict[str, Any] | None = None  # command, kernel_regex, launch_skip, launch_count, nvtx_range, step
    measured: dict[str, Any] | None = None  # counters merged in: source, flops, dram_bytes, differences


@dataclass(frozen=True)
class OpGroupRow:
    """Kernel time (GPU) or op self time (CPU) grouped by the op that launched it.

    The key `tbd compare` matches runs by: kernel names differ between GPUs and libraries, the
    launching op (aten::convolution_backward, aten::addmm) does not.
    """

    name: str  # the launching op; "(no launching op)" for kernels whose op the trace lacks
    calls: int  # kernels (ops on the CPU) it accounts for in the trace window
    time_s: float  # summed kernel (op self) time in the trace window
    time_share_pct: float  # of the summed kernel time in the trace window
    flops: float | None  # FLOPs of its kernels; null when any is unknown
    util_pct: float | None  # its kernels' FLOPs over (each kernel's precision peak x its time), time-weighted


@dataclass(frozen=True)
class Iterations:
    warmup: int
    warmup_s: float
    warmup_detected: bool
    stable: bool | None  # None: not checked (iterations read from a trace, or --warmup given)
    timing_window: list[int] | None
    trace_window: list[int] | None
    times_s: list[float]
    source: str = "run"  # "run": timed by tbd; "trace": a trace's ProfilerStep spans
    step_numbers: list[int] | None = None  # the N of each ProfilerStep#N (source "trace")
    # Warm-up iterations run (the timing window starts after them); `warmup` is where the stable
    # phase was found, some iterations earlier. None: a profile from before this field, or a trace.
    warmup_run: int | None = None


@dataclass(frozen=True)
class Profile:
    status: str
    spec: dict[str, Any]
    environment: dict[str, Any]
    iterations: Iterations | None
    metrics: Metrics
    kernels: list[KernelRow]
    low_util_kernels: list[KernelRow]  # compute-bound groups below the average FLOP utilization (Table V)
    notes: list[str]
    provenance: dict[str, Any] = field(default_factory=dict)
    # Memory-bound groups (data movement included) below the average bandwidth utilization.
    low_bandwidth_kernels: list[KernelRow] = field(default_factory=list)
    # Kernel time by launching op, longest first (added in schema 2; absent in older files).
    op_groups: list[OpGroupRow] = field(default_factory=list)
    # The measurement-quality record (absent in older files, null for a trace tbd did not run).
    quality: Quality | None = None
    # The cluster summary of a multi-rank job (absent in older files and single-process runs).
    cluster: Cluster | None = None
    schema: str = SCHEMA

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data; NaN and infinities never leave as numbers."""
        data = asdict(self)
        data = {"schema": data.pop("schema"), **data}
        if data["cluster"] is None:  # one process: the key stays absent, as in files written before it
            del data["cluster"]
        return c.finite_json(data)

    @classmethod
    def from_dict(cls, data: Any) -> "Profile":
        """Validate and rebuild; raises ResultFormatError with the offending key."""
        return _load_profile(data)


def _require(data: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(data, dict) or key not in data:
        raise ResultFormatError(f"profile is missing '{where}{key}'")
    value = data[key]
    if not isinstance(value, kind):
        raise ResultFormatError(f"profile key '{where}{key}' has type {type(value).__name__}")
    return value


_BYTES = c.integer(null=True)
_VALUE = {"value": c.pct(null=True), "reason": c.text(null=True)}
_KERNEL_ROW = {"name": c.text(), "calls": c.integer(), "time_s": c.number(), "time_share_pct": c.pct(null=True),
               "flops": c.number(null=True), "flop_source": c.text(null=True), "precision": c.text(),
               "util_pct": c.number(null=True), "util_note": c.text(null=True),
               "mean_s": c.number(null=True), "flops_per_s": c.number(null=True), "bytes": c.number(null=True),
               "bytes_source": c.text(null=True), "intensity": c.number(null=True), "bound": c.text(null=True),
               "attainable_flops_per_s": c.number(null=True), "roofline_pct": c.number(null=True),
               "bandwidth_util_pct": c.number(null=True), "roofline_note": c.text(null=True),
               "launch": c.obj(null=True), "ops": c.items(c.obj(), null=True), "ncu": c.obj(null=True),
               "measured": c.obj(null=True)}
_OP_GROUP = {"name": c.text(), "calls": c.integer(), "time_s": c.number(), "time_share_pct": c.pct(),
             "flops": c.number(null=True), "util_pct": c.number(null=True)}
_BANDWIDTH = {"value": c.number(null=True), "source": c.text(), "reason": c.text(null=True),
              "kernel_average_pct": c.number(null=True)}
_FLOP_UTIL = {
    "value": c.pct(null=True), "reason": c.text(null=True), "source": c.text(), "peak_flops": c.number(null=True),
    "peak_source": c.text(), "hardware_peak_flops": c.number(null=True), "hardware_peak_reason": c.text(null=True),
    "measured_ceiling_flops": c.number(null=True), "flops": c.number(null=True), "busy_s": c.number(null=True),
    "unattributed_busy_pct": c.pct(null=True), "kernel_average_pct": c.pct(null=True),
    "peak_formula": c.text(null=True), "peaks_by_precision": c.mapping(c.number(), null=True)}
_CROSS_CHECK = {"peak_bytes": c.mapping(_BYTES, null=True), "at_peak": c.mapping(_BYTES, null=True),
                "maps_to": c.mapping(c.text(), null=True), "total_peak_bytes": _BYTES, "reason": c.text(null=True),
                "device": c.label(null=True)}
_MEMORY = {**{cat: _BYTES for cat in MEMORY_CATEGORIES}, "allocator_peak": _BYTES,
           "at_peak": c.mapping(_BYTES), "reasons": c.mapping(c.text()), "cross_check": c.obj(null=True),
           "sources": c.mapping(c.text(), null=True)}
_ITERATIONS = {"warmup": c.integer(), "warmup_s": c.number(), "warmup_detected": c.flag(), "stable": c.flag(null=True),
               "timing_window": c.items(c.integer(), null=True), "trace_window": c.items(c.integer(), null=True),
               "times_s": c.items(c.number()), "source": c.text(null=True),
               "step_numbers": c.items(c.integer(), null=True), "warmup_run": c.integer(null=True)}
#: The keys of the free-form spec and environment that renderers print.
_SPEC = {"model": c.text(null=True), "framework": c.text(null=True), "precision": c.text(null=True),
         "device": c.text(null=True), "trace": c.text(null=True), "batch": c.integer(null=True)}
_DEVICE = {"gpu": c.obj(null=True), "cpu": c.obj(null=True)}
_DEVICE_NAMES = {"name": c.text(null=True), "model": c.text(null=True)}


def _load_kernel_rows(rows: Any, where: str) -> list[KernelRow]:
    if not isinstance(rows, list):
        raise ResultFormatError(f"profile key '{where}' is not a list")
    out = [c.make_record(KernelRow, _no_null_ops(c.fields(r, f"{where}[{i}].", _KERNEL_ROW)))
           for i, r in enumerate(rows)]
    for i, row in enumerate(out):
        if row.util_pct is not None and row.util_pct > 100.0 + c.PCT_SLACK and not row.util_note:
            raise ResultFormatError(f"profile key '{where}[{i}].util_pct' is {row.util_pct:g} % without a util_note "
                                    "saying why it exceeds 100")
    return out


def _no_null_ops(values: dict[str, Any]) -> dict[str, Any]:
    if values.get("ops") is None:
        values["ops"] = []
    return values


def _load_no_flop_formula(data: Any) -> NoFlopFormula | None:
    if data is None:
        return None
    where = "metrics.no_flop_formula."
    op = c.Checker(lambda v, k: c.fields(v, k + ".", {"name": c.text(), "pct": c.pct()}), False)
    gap = {"cause": c.text(), "pct": c.pct(), "detail": c.text(), "ops": c.items(op, null=True)}
    values = c.fields(data, where, {"pct": c.pct(null=True), "causes": c.seq(),
                                    "communication_overlap_pct": c.pct(null=True)})
    values["causes"] = [c.make_record(FlopGap, c.fields(g, f"{where}causes[{i}].", gap))
                        for i, g in enumerate(values["causes"])]
    return c.make_record(NoFlopFormula, values)


def _load_memory(m: dict) -> Memory:
    values = c.fields(_require(m, "memory_bytes", dict, "metrics."), "metrics.memory_bytes.", _MEMORY)
    if values.get("sources") is None:  # absent (a profile.json written before it) or null: no labels
        values.pop("sources", None)
    memory = c.make_record(Memory, values)
    c.known_keys(memory.cross_check, "metrics.memory_bytes.cross_check.", _CROSS_CHECK)
    return memory


def _load_metrics(data: dict) -> Metrics:
    m = _require(data, "metrics", dict, "")
    return Metrics(
        throughput=c.make_record(Throughput, _no_null_repeats(c.fields(
            _require(m, "throughput", dict, "metrics."), "metrics.throughput.", {
                "value": c.number(null=True), "unit": c.text(), "also": c.mapping(c.number()),
                "reason": c.text(null=True), "repeats": c.items(c.number(), null=True),
                "spread_pct": c.number(null=True), "interval_pct": c.number(null=True)}))),
        gpu_busy_pct=c.make_record(Value, c.fields(_require(m, "gpu_busy_pct", dict, "metrics."),
                                                   "metrics.gpu_busy_pct.", _VALUE)),
        gpu_busy_nvml_pct=c.make_record(Value, c.fields(_require(m, "gpu_busy_nvml_pct", dict, "metrics."),
                                                        "metrics.gpu_busy_nvml_pct.", _VALUE)),
        flop_util_pct=c.make_record(FlopUtil, c.fields(_require(m, "flop_util_pct", dict, "metrics."),
                                                       "metrics.flop_util_pct.", _FLOP_UTIL)),
        cpu_util_pct=c.make_record(Value, c.fields(_require(m, "cpu_util_pct", dict, "metrics."),
                                                   "metrics.cpu_util_pct.", _VALUE)),
        memory_bytes=_load_memory(m),
        no_flop_formula=_load_no_flop_formula(m.get("no_flop_formula")),
        memory_bandwidth=None if m.get("memory_bandwidth") is None else c.make_record(
            Bandwidth, c.fields(m["memory_bandwidth"], "metrics.memory_bandwidth.", _BANDWIDTH)),
    )


def _no_null_repeats(values: dict[str, Any]) -> dict[str, Any]:
    if values.get("repeats") is None:
        values.pop("repeats", None)
    return values


_QUALITY = {"reliable": c.flag(), "warnings": c.items(c.text()), "cores": c.integer(null=True),
            "wall_s": c.number(), "workload_cores": c.number(null=True), "other_load_cores": c.number(null=True),
            "tbd_parent_cores": c.number(null=True), "other_processes": c.items(c.obj()),
            "gemm_ceiling_flops": c.mapping(c.number(null=True)), "gemm_spread_pct": c.number(null=True),
            "clock_mhz": c.mapping(c.number(null=True)), "throughput_median": c.number(null=True),
            "throughput_spread_pct": c.number(null=True), "repeats": c.items(c.obj()),
            "throughput_interval_pct": c.number(null=True),
            "cpu_util_median_pct": c.pct(null=True), "cpu_util_range_pct": c.items(c.pct(), null=True),
            "reasons": c.mapping(c.text(), null=True)}


def _load_quality(data: Any) -> Quality | None:
    if data is None:
        return None
    values = c.fields(data, "quality.", _QUALITY)
    values["reasons"] = values.get("reasons") or {}
    return c.make_record(Quality, values)


def _load_profile(data: Any) -> Profile:
    if not isinstance(data, dict):
        raise ResultFormatError("profile is not a JSON object")
    schema = data.get("schema")
    if schema not in READABLE_SCHEMAS:
        raise ResultFormatError(f"unknown profile schema {str(schema)[:80]!r}, expected {SCHEMA!r}")
    status = _require(data, "status", str, "")
    if status not in (COMPLETE, PARTIAL):
        raise ResultFormatError(f"profile status {status[:80]!r} is neither complete nor partial")
    metrics = _load_metrics(data)
    it = data.get("iterations")
    spec, environment = _require(data, "spec", dict, ""), _require(data, "environment", dict, "")
    c.known_keys(spec, "spec.", _SPEC)
    c.known_keys(environment, "environment.", _DEVICE)
    for part in ("gpu", "cpu"):
        c.known_keys(environment.get(part), f"environment.{part}.", _DEVICE_NAMES)
    return Profile(
        status=status, spec=spec, environment=environment,
        iterations=None if it is None else c.make_record(Iterations, c.fields(it, "iterations.", _ITERATIONS)),
        metrics=metrics,
        kernels=_load_kernel_rows(_require(data, "kernels", list, ""), "kernels"),
        low_util_kernels=_load_kernel_rows(_require(data, "low_util_kernels", list, ""), "low_util_kernels"),
        low_bandwidth_kernels=_load_kernel_rows(data.get("low_bandwidth_kernels") or [], "low_bandwidth_kernels"),
        op_groups=[c.make_record(OpGroupRow, c.fields(g, f"op_groups[{i}].", _OP_GROUP))
                   for i, g in enumerate(c.seq(null=True)(data.get("op_groups"), "op_groups") or [])],
        notes=c.items(c.text())(_require(data, "notes", list, ""), "notes"),
        provenance=c.obj(null=True)(data.get("provenance"), "provenance") or {},
        quality=_load_quality(data.get("quality")),
        cluster=load_cluster(data.get("cluster")),
    )
