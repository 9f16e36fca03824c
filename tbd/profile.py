"""The `Profile`: tbd's result, saved as versioned JSON (`"schema": "tbd.profile/1"`).

DESIGN.md's "profile.json, version 1" is the contract. Keys may be added; none may be renamed
without a schema bump. Loading validates and raises `ResultFormatError` on anything malformed.
Never pickle.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from tbd.errors import ResultFormatError

SCHEMA = "tbd.profile/1"
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
    value: float | None
    unit: str
    also: dict[str, float] = field(default_factory=dict)  # e.g. {"tokens/s": 12345.0}
    reason: str | None = None


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
class Metrics:
    throughput: Throughput
    gpu_busy_pct: Value
    gpu_busy_nvml_pct: Value
    flop_util_pct: FlopUtil
    cpu_util_pct: Value
    memory_bytes: Memory
    no_flop_formula: NoFlopFormula | None = None


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


@dataclass(frozen=True)
class Iterations:
    warmup: int
    warmup_s: float
    warmup_detected: bool
    stable: bool | None  # None: not checked (iterations read from a trace)
    timing_window: list[int] | None
    trace_window: list[int] | None
    times_s: list[float]
    source: str = "run"  # "run": timed by tbd; "trace": a trace's ProfilerStep spans
    step_numbers: list[int] | None = None  # the N of each ProfilerStep#N (source "trace")


@dataclass(frozen=True)
class Profile:
    status: str
    spec: dict[str, Any]
    environment: dict[str, Any]
    iterations: Iterations | None
    metrics: Metrics
    kernels: list[KernelRow]
    low_util_kernels: list[KernelRow]
    notes: list[str]
    provenance: dict[str, Any] = field(default_factory=dict)
    schema: str = SCHEMA

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data; NaN and infinities never leave as numbers."""
        data = asdict(self)
        data = {"schema": data.pop("schema"), **data}
        return _finite(data)

    @classmethod
    def from_dict(cls, data: Any) -> "Profile":
        """Validate and rebuild; raises ResultFormatError with the offending key."""
        return _load_profile(data)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _require(data: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(data, dict) or key not in data:
        raise ResultFormatError(f"profile is missing '{where}{key}'")
    value = data[key]
    if not isinstance(value, kind):
        raise ResultFormatError(f"profile key '{where}{key}' has type {type(value).__name__}")
    return value


_NUM = (int, float)
_OPT_NUM = (int, float, type(None))
_OPT_STR = (str, type(None))


def _build(cls: type, data: Any, where: str, types: dict[str, tuple]) -> Any:
    if not isinstance(data, dict):
        raise ResultFormatError(f"profile key '{where.rstrip('.')}' is not an object")
    kwargs = {}
    for name, kind in types.items():
        if name in data or type(None) not in (kind if isinstance(kind, tuple) else (kind,)):
            kwargs[name] = _require(data, name, kind, where)
    return cls(**kwargs)


def _load_kernel_rows(rows: Any, where: str) -> list[KernelRow]:
    if not isinstance(rows, list):
        raise ResultFormatError(f"profile key '{where}' is not a list")
    types = {"name": str, "calls": int, "time_s": _NUM, "time_share_pct": _NUM,
             "flops": _OPT_NUM, "flop_source": _OPT_STR, "precision": str, "util_pct": _OPT_NUM,
             "util_note": _OPT_STR}
    return [_build(KernelRow, r, f"{where}[{i}].", types) for i, r in enumerate(rows)]


def _load_no_flop_formula(data: Any) -> NoFlopFormula | None:
    if data is None:
        return None
    where = "metrics.no_flop_formula."
    causes = _require(data, "causes", list, where)
    return NoFlopFormula(
        pct=_require(data, "pct", _OPT_NUM, where),
        causes=[_build(FlopGap, c, f"{where}causes[{i}].", {"cause": str, "pct": _NUM, "detail": str, "ops": list})
                for i, c in enumerate(causes)],
        communication_overlap_pct=data.get("communication_overlap_pct") if isinstance(
            data.get("communication_overlap_pct"), _NUM) else None)


def _load_profile(data: Any) -> Profile:
    if not isinstance(data, dict):
        raise ResultFormatError("profile is not a JSON object")
    schema = data.get("schema")
    if schema != SCHEMA:
        raise ResultFormatError(f"unknown profile schema {schema!r}, expected {SCHEMA!r}")
    status = _require(data, "status", str, "")
    if status not in (COMPLETE, PARTIAL):
        raise ResultFormatError(f"profile status {status!r} is neither complete nor partial")
    m = _require(data, "metrics", dict, "")
    value_types = {"value": _OPT_NUM, "reason": _OPT_STR}
    memory = _require(m, "memory_bytes", dict, "metrics.")
    metrics = Metrics(
        throughput=_build(Throughput, _require(m, "throughput", dict, "metrics."), "metrics.throughput.",
                          {"value": _OPT_NUM, "unit": str, "also": dict, "reason": _OPT_STR}),
        gpu_busy_pct=_build(Value, _require(m, "gpu_busy_pct", dict, "metrics."), "metrics.gpu_busy_pct.", value_types),
        gpu_busy_nvml_pct=_build(Value, _require(m, "gpu_busy_nvml_pct", dict, "metrics."),
                                 "metrics.gpu_busy_nvml_pct.", value_types),
        flop_util_pct=_build(FlopUtil, _require(m, "flop_util_pct", dict, "metrics."), "metrics.flop_util_pct.", {
            "value": _OPT_NUM, "reason": _OPT_STR, "source": str, "peak_flops": _OPT_NUM, "peak_source": str,
            "hardware_peak_flops": _OPT_NUM, "hardware_peak_reason": _OPT_STR,
            "measured_ceiling_flops": _OPT_NUM, "flops": _OPT_NUM, "busy_s": _OPT_NUM,
            "unattributed_busy_pct": _OPT_NUM, "kernel_average_pct": _OPT_NUM, "peak_formula": _OPT_STR,
            "peaks_by_precision": (dict, type(None))}),
        cpu_util_pct=_build(Value, _require(m, "cpu_util_pct", dict, "metrics."), "metrics.cpu_util_pct.", value_types),
        memory_bytes=_build(Memory, memory, "metrics.memory_bytes.", {
            **{c: (int, type(None)) for c in MEMORY_CATEGORIES}, "allocator_peak": (int, type(None)),
            "at_peak": dict, "reasons": dict, "cross_check": (dict, type(None))}),
        no_flop_formula=_load_no_flop_formula(m.get("no_flop_formula")),
    )
    it = data.get("iterations")
    iterations = None if it is None else _build(Iterations, it, "iterations.", {
        "warmup": int, "warmup_s": _NUM, "warmup_detected": bool, "stable": (bool, type(None)),
        "timing_window": (list, type(None)), "trace_window": (list, type(None)), "times_s": list,
        "source": _OPT_STR, "step_numbers": (list, type(None))})
    return Profile(
        status=status,
        spec=_require(data, "spec", dict, ""),
        environment=_require(data, "environment", dict, ""),
        iterations=iterations,
        metrics=metrics,
        kernels=_load_kernel_rows(_require(data, "kernels", list, ""), "kernels"),
        low_util_kernels=_load_kernel_rows(_require(data, "low_util_kernels", list, ""), "low_util_kernels"),
        notes=[str(n) for n in _require(data, "notes", list, "")],
        provenance=data.get("provenance") or {},
    )
