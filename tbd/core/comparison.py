"""The `Comparison`: runs or traces side by side, saved as JSON (`"schema": "tbd.compare/1"`).

docs/sweep-compare-json.md is the contract. The first run is the reference: every ratio is
"this run / the first". Runs of different models, batches, frameworks or devices may be compared;
`differences` says which of those differ, and a gap between runs that are not the same workload claims
no speed ratio, so a reader never takes a batch change for a speed-up.
Loading validates and raises `ResultFormatError` on anything malformed. Never pickle.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Annotated, Any

from tbd.core import field_checks as c
from tbd.core.errors import ResultFormatError
from tbd.core.field_checks import VERSION_TAG, Amount, Count, Delta, Name, Notes, Range

COMPARISON_SCHEMA = "tbd.compare/1"


@dataclass(frozen=True)
class ComparedRun:
    """One side of the comparison: what ran, where, and the device's peaks."""

    label: str  # "A", "B", ... in the order given
    source: str  # the run directory, profile.json or trace given on the command line
    status: str  # the profile's status: "complete" or "partial"
    model: Name | None
    framework: str | None
    batch: Annotated[int, Range(0, 1 << 24)] | None  # samples in one step, as its profile says
    device: str | None  # "cpu", "cuda", "cuda:1"
    device_name: str | None  # GPU name, else CPU model
    peak_fp32_flops: Amount | None  # the FP32 denominator of the run's FLOP utilization
    peak_source: str | None  # "gpu_table", "user", "measured_gemm", ...
    memory_bandwidth: Amount | None  # bytes/s, the roofline's slope
    traced_iterations: Count | None  # iterations (ProfilerSteps) the op times are divided by; None: no steps
    compute_units: Count | None = None  # SMs (NVIDIA), CUs (AMD) or logical cores (CPU)
    compute_unit_name: str | None = None  # "SMs", "CUs" or "cores"
    device_memory_bytes: Count | None = None  # the GPU's memory; None on the CPU or when not recorded
    peaks_by_precision: dict[str, Amount] = field(default_factory=dict)  # every peak the run used, FLOP/s
    # What every table and figure calls the run: --label, else "model · device · batch N" (made unique).
    name: str = ""
    # The run's measurement quality (profile.json's quality.reliable): False when a warning made it
    # unreliable, null when there is no quality record (a trace tbd did not run; an older tbd), why in quality_reason.
    reliable: bool | None = None
    quality_warnings: list[str] = field(default_factory=list)
    quality_reason: str | None = None
    # Half-width of the 95 % interval of the throughput, % of it (profile.json's throughput.interval_pct).
    throughput_interval_pct: Amount | None = None


@dataclass(frozen=True)
class MetricComparison:
    """One figure across the runs, and each run's ratio to the first."""

    key: str  # "throughput", "iteration_s", "gpu_busy_pct", "flop_util_pct", "cpu_util_pct", "memory.weights", ...
    label: str  # "Throughput", "Iteration time", ...
    unit: str  # "samples/s", "s", "%", "bytes"
    values: list[Delta | None]
    reasons: list[str | None]  # why a value is null
    ratios: list[Amount | None]  # value / the first run's; null where either is null or the first is 0
    higher_is_better: bool | None  # None: neither (memory is a cost, not a score)
    # The 95 % interval of each ratio, from both runs' intervals (analysis.compare_runs.ratio_interval);
    # empty lists where the figure has none (only throughput has one), null where a run lacks one.
    ratio_low: list[Amount | None] = field(default_factory=list)
    ratio_high: list[Amount | None] = field(default_factory=list)  # null also where the interval is unbounded
    # Each run's unit where the runs' differ (throughput in images/s and sentences/s: no ratio); empty
    # where every run's is `unit`.
    units: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class OpComparison:
    """The kernel (GPU) or op self (CPU) time one launching op accounts for, per traced iteration, in each run.

    Kernel names differ between GPUs and libraries (volta_sgemm vs ampere_sgemm vs nvjet), so ops
    are matched by the op that launched the kernels (aten::convolution_backward, aten::addmm).
    """

    op: str
    time_per_iteration_s: list[Amount | None]  # None: the run has no such op (or no iterations to divide by)
    util_pct: list[Amount | None]  # FLOP utilization of the op's kernels, each against its own precision's peak
    delta_s: list[Delta | None]  # time_per_iteration_s minus the first run's (0 where the op is absent)
    gap_share_pct: list[Delta | None]  # delta / the total kernel-time delta per iteration x 100


@dataclass(frozen=True)
class Gap:
    """Run `label` against the first: the peak ratio set against the measured speed ratio."""

    label: str
    peak_ratio: Amount | None  # this run's FP32 peak / the first's
    speed_ratio: Amount | None  # how many times faster this run ran (> 1: faster)
    speed_basis: str | None  # "throughput", "iteration time" or "kernel time per iteration"
    speed_reason: str | None  # why speed_ratio is null
    kernel_time_delta_s: Delta | None  # total kernel time per iteration minus the first's
    top_op: str | None  # the op that moved most in the direction of that delta
    top_op_delta_s: Delta | None  # its time per iteration minus the first's
    # Its share of the delta; null when the net change is below analysis.compare_runs.MATERIAL_CHANGE_PCT
    # of the first run's kernel time (ops moving both ways around a near-zero total).
    top_op_share_pct: Delta | None
    # The 95 % interval of speed_ratio (throughput's, from both runs' intervals); high null: unbounded.
    speed_ratio_low: Amount | None = None
    speed_ratio_high: Amount | None = None
    speed_interval_reason: str | None = None  # why there is no interval (or why it is unbounded above)
    # False when either run is unreliable, null when either has no quality record.
    reliable: bool | None = None
    # False when the two runs are not the same workload (model, batch or framework differ, or two
    # traces launch different ops): no speed ratio, no op attribution; why in not_comparable_reason.
    comparable: bool = True
    not_comparable_reason: str | None = None


@dataclass(frozen=True)
class Comparison:
    runs: list[ComparedRun]
    metrics: list[MetricComparison]
    ops: list[OpComparison]  # largest absolute delta first
    gaps: list[Gap]  # one per run after the first
    differences: list[str]  # what differs besides the device: "model: resnet50 / seq2seq", "batch: 32 / 64"
    notes: Notes = field(default_factory=list)
    schema: Annotated[str, VERSION_TAG] = COMPARISON_SCHEMA

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
        comparison = _LOAD(data)
        n = len(comparison.runs)
        for kind, keys in (("metrics", ("values", "reasons", "ratios")),
                           ("ops", ("time_per_iteration_s", "util_pct", "delta_s", "gap_share_pct"))):
            for i, row in enumerate(getattr(comparison, kind)):
                for key in keys:
                    if len(getattr(row, key)) != n:
                        raise ResultFormatError(f"comparison key '{kind}[{i}].{key}' has {len(getattr(row, key))} "
                                                f"entries for {n} runs")
        for i, row in enumerate(comparison.metrics):
            for key in ("ratio_low", "ratio_high", "units"):
                if getattr(row, key) and len(getattr(row, key)) != n:
                    raise ResultFormatError(f"comparison key 'metrics[{i}].{key}' has {len(getattr(row, key))} "
                                            f"entries for {n} runs")
        return comparison


_LOAD = c.loader(Comparison)
