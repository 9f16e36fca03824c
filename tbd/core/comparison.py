"""The `Comparison`: runs or traces side by side, saved as JSON (`"schema": "tbd.compare/1"`).

docs/sweep-compare-json.md is the contract. The first run is the reference: every ratio is
"this run / the first". Runs of different models, batches, frameworks or devices may be compared;
`differences` says which of those differ, so a reader never takes a batch change for a speed-up.
Loading validates and raises `ResultFormatError` on anything malformed. Never pickle.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tbd.core import field_checks as c
from tbd.core.errors import ResultFormatError

COMPARISON_SCHEMA = "tbd.compare/1"


@dataclass(frozen=True)
class ComparedRun:
    """One side of the comparison: what ran, where, and the device's peaks."""

    label: str  # "A", "B", ... in the order given
    source: str  # the run directory, profile.json or trace given on the command line
    status: str  # the profile's status: "complete" or "partial"
    model: str | None
    framework: str | None
    batch: int | None
    device: str | None  # "cpu", "cuda", "cuda:1"
    device_name: str | None  # GPU name, else CPU model
    peak_fp32_flops: float | None  # the FP32 denominator of the run's FLOP utilization
    peak_source: str | None  # "gpu_table", "user", "measured_gemm", ...
    memory_bandwidth: float | None  # bytes/s, the roofline's slope
    traced_iterations: int | None  # iterations (ProfilerSteps) the op times are divided by; None: no steps
    compute_units: int | None = None  # SMs (NVIDIA), CUs (AMD) or logical cores (CPU)
    compute_unit_name: str | None = None  # "SMs", "CUs" or "cores"
    device_memory_bytes: int | None = None  # the GPU's memory; None on the CPU or when not recorded
    peaks_by_precision: dict[str, float] = field(default_factory=dict)  # every peak the run used, FLOP/s


@dataclass(frozen=True)
class MetricComparison:
    """One figure across the runs, and each run's ratio to the first."""

    key: str  # "throughput", "iteration_s", "gpu_busy_pct", "flop_util_pct", "cpu_util_pct", "memory.weights", ...
    label: str  # "Throughput", "Iteration time", ...
    unit: str  # "samples/s", "s", "%", "bytes"
    values: list[float | None]
    reasons: list[str | None]  # why a value is null
    ratios: list[float | None]  # value / the first run's; null where either is null or the first is 0
    higher_is_better: bool | None  # None: neither (memory is a cost, not a score)


@dataclass(frozen=True)
class OpComparison:
    """The kernel (GPU) or op self (CPU) time one launching op accounts for, per traced iteration, in each run.

    Kernel names differ between GPUs and libraries (volta_sgemm vs ampere_sgemm vs nvjet), so ops
    are matched by the op that launched the kernels (aten::convolution_backward, aten::addmm).
    """

    op: str
    time_per_iteration_s: list[float | None]  # None: the run has no such op (or no iterations to divide by)
    util_pct: list[float | None]  # FLOP utilization of the op's kernels, each against its own precision's peak
    delta_s: list[float | None]  # time_per_iteration_s minus the first run's (0 where the op is absent)
    gap_share_pct: list[float | None]  # delta / the total kernel-time delta per iteration x 100


@dataclass(frozen=True)
class Gap:
    """Run `label` against the first: the peak ratio set against the measured speed ratio."""

    label: str
    peak_ratio: float | None  # this run's FP32 peak / the first's
    speed_ratio: float | None  # how many times faster this run ran (> 1: faster)
    speed_basis: str | None  # "throughput", "iteration time" or "kernel time per iteration"
    speed_reason: str | None  # why speed_ratio is null
    kernel_time_delta_s: float | None  # total kernel time per iteration minus the first's
    top_op: str | None  # the op that moved most in the direction of that delta
    top_op_delta_s: float | None  # its time per iteration minus the first's
    # Its share of the delta; null when the net change is below analysis.compare_runs.MATERIAL_CHANGE_PCT
    # of the first run's kernel time (ops moving both ways around a near-zero total).
    top_op_share_pct: float | None


@dataclass(frozen=True)
class Comparison:
    runs: list[ComparedRun]
    metrics: list[MetricComparison]
    ops: list[OpComparison]  # largest absolute delta first
    gaps: list[Gap]  # one per run after the first
    differences: list[str]  # what differs besides the device: "model: resnet50 / seq2seq", "batch: 32 / 64"
    notes: list[str] = field(default_factory=list)
    schema: str = COMPARISON_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {"schema": data.pop("schema"), **data}

    @classmethod
    def from_dict(cls, data: Any) -> "Comparison":
        """Validate and rebuild; raises ResultFormatError naming the offending key."""
        with c.checking("comparison"):
            return cls._from_dict(data)

    @classmethod
    def _from_dict(cls, data: Any) -> "Comparison":
        if not isinstance(data, dict):
            raise ResultFormatError("comparison is not a JSON object")
        if data.get("schema") != COMPARISON_SCHEMA:
            raise ResultFormatError(f"unknown comparison schema {str(data.get('schema'))[:80]!r}, "
                                    f"expected {COMPARISON_SCHEMA!r}")
        top = c.fields(data, "", _TOP)
        n = len(top["runs"])
        runs = [ComparedRun(**{**_filled(r, f"runs[{i}].", _RUN), "peaks_by_precision": r.get("peaks_by_precision")
                               or {}}) for i, r in enumerate(top["runs"])]
        metrics = [MetricComparison(**_sized(_filled(m, f"metrics[{i}].", _METRIC), f"metrics[{i}].", n,
                                             ("values", "reasons", "ratios")))
                   for i, m in enumerate(top["metrics"])]
        ops = [OpComparison(**_sized(_filled(o, f"ops[{i}].", _OP), f"ops[{i}].", n,
                                     ("time_per_iteration_s", "util_pct", "delta_s", "gap_share_pct")))
               for i, o in enumerate(top["ops"])]
        gaps = [Gap(**_filled(g, f"gaps[{i}].", _GAP)) for i, g in enumerate(top["gaps"])]
        return cls(runs=runs, metrics=metrics, ops=ops, gaps=gaps, differences=top["differences"],
                   notes=top.get("notes") or [])


def _filled(data: Any, where: str, rules: dict[str, c.Checker]) -> dict[str, Any]:
    return {k: None for k in rules} | c.fields(data, where, rules)


def _sized(values: dict[str, Any], where: str, n: int, keys: tuple[str, ...]) -> dict[str, Any]:
    for key in keys:
        if len(values[key]) != n:
            raise ResultFormatError(f"comparison key '{where}{key}' has {len(values[key])} entries for {n} runs")
    return values


_NUMBERS = c.items(c.number(low=float("-inf"), null=True))
_RUN = {"label": c.text(), "source": c.text(), "status": c.text(), "model": c.text(null=True),
        "framework": c.text(null=True), "batch": c.integer(null=True), "device": c.text(null=True),
        "device_name": c.text(null=True), "peak_fp32_flops": c.number(null=True), "peak_source": c.text(null=True),
        "memory_bandwidth": c.number(null=True), "traced_iterations": c.integer(null=True),
        "compute_units": c.integer(null=True), "compute_unit_name": c.text(null=True),
        "device_memory_bytes": c.integer(null=True), "peaks_by_precision": c.mapping(c.number(), null=True)}
_METRIC = {"key": c.text(), "label": c.text(), "unit": c.text(), "values": _NUMBERS,
           "reasons": c.items(c.text(null=True)), "ratios": c.items(c.number(null=True)),
           "higher_is_better": c.flag(null=True)}
_OP = {"op": c.text(), "time_per_iteration_s": c.items(c.number(null=True)), "util_pct": c.items(c.number(null=True)),
       "delta_s": _NUMBERS, "gap_share_pct": _NUMBERS}
_GAP = {"label": c.text(), "peak_ratio": c.number(null=True), "speed_ratio": c.number(null=True),
        "speed_basis": c.text(null=True), "speed_reason": c.text(null=True),
        "kernel_time_delta_s": c.number(low=float("-inf"), null=True), "top_op": c.text(null=True),
        "top_op_delta_s": c.number(low=float("-inf"), null=True),
        "top_op_share_pct": c.number(low=float("-inf"), null=True)}
_TOP = {"runs": c.seq(), "metrics": c.seq(), "ops": c.seq(), "gaps": c.seq(), "differences": c.items(c.text()),
        "notes": c.items(c.text(), null=True)}
