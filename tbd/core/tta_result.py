"""The `TtaResult`: time to accuracy read from others' logs, saved as JSON (`"schema": "tbd.tta/1"`).

docs/tta-json.md is the contract. `tbd tta` reads MLPerf Training submissions (scored by
mlperf-logging's own result_summarizer) and DAWNBench entries (scored by DAWNBench's README rules)
and puts the systems of each benchmark or task side by side in one `TtaTable`; the first system of
a table is the reference of every ratio. A file or a tool that failed is one `TtaProblem` and the
rest is still reported. Loading validates and raises `ResultFormatError` on anything malformed.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any

from tbd.core import field_checks as c
from tbd.core.errors import ResultFormatError
from tbd.core.field_checks import VERSION_TAG, Amount, Count, Delta

TTA_SCHEMA = "tbd.tta/1"
#: Where a table's systems come from: published MLPerf or DAWNBench results, or `tbd train` here.
SOURCES = ("mlperf", "dawnbench", "tbd")
#: The unit a system's score is stated in by its source's own rules: MLPerf's result_summarizer
#: prints minutes, a DAWNBench TSV gives hours, a DAWNBench inference entry milliseconds per item.
SCORE_UNITS = ("min", "h", "ms")


@dataclass(frozen=True)
class EpochThroughput:
    """One logged block or epoch of a run: its samples over its wall time."""

    index: Delta  # the block's first epoch (MLPerf first_epoch_num / epoch_num), or its order from 0
    start_s: Amount  # seconds from run_start
    seconds: Amount
    samples: Amount | None  # None: the log gives no samples count for it (`samples_reason`)
    samples_per_s: Amount | None


@dataclass(frozen=True)
class AccuracyPoint:
    """One evaluation of a run: when (from run_start, or the TSV's hours) and what it scored."""

    seconds: Amount
    value: Delta
    epoch: Delta | None = None  # the eval's epoch_num (MLPerf) or the TSV's epoch
    samples: Amount | None = None  # the eval's samples_count where the log gives one


@dataclass(frozen=True)
class TtaRun:
    """One training run (an MLPerf result_N.txt, a DAWNBench TSV)."""

    file: str
    used: bool  # counted in the system's score
    dropped_reason: str | None  # why not: "fastest run (olympic mean)", "did not converge: ...", ...
    status: str | None  # MLPerf run_stop status: "success", "aborted"; None: no run_stop
    score: Amount | None  # this run's time to train as its source states it (MLPerf: minutes, by result_summarizer)
    score_reason: str | None
    to_converge: Amount | None  # the RCP checker's epochs or samples to converge (`TtaSystem.converge_unit`)
    epochs_to_converge: Amount | None  # the last eval's epoch_num before run_stop
    samples_to_converge: Amount | None  # the last eval's samples_count, else epochs x train_samples
    samples_reason: str | None
    init_s: Amount | None  # init_start -> init_stop
    run_s: Amount | None  # run_start -> run_stop: MLPerf's time to train
    eval_s: Amount | None  # the eval_start -> eval_stop intervals inside the run
    train_s: Amount | None  # run_s - eval_s
    energy_j: Amount | None  # MLPerf Power: result_summarizer's energy of this run, joules (docs/tta-json.md)
    energy_reason: str | None
    throughput: list[EpochThroughput] = field(default_factory=list)
    accuracy: list[AccuracyPoint] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TtaSystem:
    """One system (MLPerf) or entry (DAWNBench) of a table, with its ratios to the table's first."""

    label: str  # "tinycorp/tinybox_green", "Stanford DAWN · ResNet 56 · 1 K80"
    path: str  # the benchmark folder or the entry's JSON/TSV
    submitter: str | None
    system: str | None
    division: str | None  # MLPerf: closed / open
    availability: str | None  # MLPerf system status: available, preview, rdi, cloud, onprem
    framework: str | None
    accelerator: str | None
    accelerator_count: Count | None
    host_processors: Count | None
    score: Amount | None  # time to target in `score_unit`: MLPerf olympic mean (minutes), DAWNBench hours
    score_unit: str
    score_reason: str | None  # why `score` is null
    time_to_target_s: Amount | None  # the score in seconds (inference: None)
    accelerator_time_s: Amount | None  # time_to_target_s x accelerator_count: accelerator-seconds to train
    energy_j: Amount | None  # MLPerf Power: result_summarizer's olympic mean energy, joules (docs/tta-json.md)
    energy_reason: str | None
    cost_usd: Amount | None  # DAWNBench: hours to target x costPerHour
    cost_per_hour: Amount | None
    cost_reason: str | None
    latency_ms: Amount | None  # DAWNBench inference: mean latency per item
    cost_per_item_usd: Amount | None  # DAWNBench inference: cost per item
    accuracy: Delta | None  # DAWNBench: the metric at the row that reached the target (or reported, inference)
    epochs_to_target: Amount | None  # DAWNBench: the TSV epoch of that row
    to_converge: Amount | None  # MLPerf: result_summarizer's samples_to_converge (the RCP checker's olympic mean)
    converge_unit: str | None  # "epochs" or "samples": which the RCP checker counts for this benchmark
    global_batch_size: Amount | None
    rcp: str | None  # MLPerf closed division: Pass, Fail, Missing, No RCP, ...
    rcp_scaling_factor: Amount | None  # the scaling.json factor result_summarizer multiplied the score by
    runs_required: Count | None  # MLPerf: result files the benchmark needs (benchmark_meta)
    runs: list[TtaRun]
    ratio_time: Amount | None  # time_to_target / the first system's
    ratio_accelerator_time: Amount | None
    ratio_energy: Amount | None
    ratio_cost: Amount | None
    notes: list[str] = field(default_factory=list)
    # Where the time went, over the runs the score counted (MLPerf: the olympic mean's runs): means
    # of init, training and evaluation seconds, and the median samples/s of their logged blocks.
    init_s: Amount | None = None
    train_s: Amount | None = None
    eval_s: Amount | None = None
    samples_per_s: Amount | None = None
    # `tbd train`: the spread of the converged runs' times to target, and the DAWNBench rule's time
    # (evaluation left out), the mean over them.
    time_min_s: Amount | None = None
    time_median_s: Amount | None = None
    time_max_s: Amount | None = None
    time_cv_pct: Amount | None = None
    time_without_eval_s: Amount | None = None
    samples_to_target: Amount | None = None
    # `tbd train`: energy_j / samples_to_target (energy_reason says what the meter covered).
    energy_per_sample_j: Amount | None = None
    # `tbd train`: tbd's profiler on one training step of the same model, data and batch (warm-up found,
    # timing windows): its stable-phase samples/s, the spread of its windows, and samples_to_target over it.
    profiled_samples_per_s: Amount | None = None
    profiled_spread_pct: Amount | None = None
    profiled_train_s: Amount | None = None
    profiled_reason: str | None = None


@dataclass(frozen=True)
class TtaTable:
    """One benchmark (MLPerf) or task (DAWNBench), its systems side by side."""

    source: str  # "mlperf" or "dawnbench"
    benchmark: str  # "resnet", "llama2_70b_lora"; "CIFAR10 train", "ImageNet inference"
    ruleset: str | None  # MLPerf: "4.0.0"
    ruleset_source: str | None  # "path" (training_results_vX.Y), "--ruleset", "assumed: ..."
    metric: str | None  # DAWNBench: the TSV column compared: top1Accuracy, top5Accuracy, f1
    target: Delta | None
    target_source: str | None  # "DAWNBench README: ...", "--target", "MLPerf compliance rules"
    systems: list[TtaSystem]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TtaProblem:
    """A path, file or tool that could not be read or failed: one line, and the rest still reported."""

    path: str
    reason: str

    @classmethod
    def of(cls, path: str | os.PathLike, text: str) -> "TtaProblem":
        """The problem of `path`, its reason without the path an error's one line starts with."""
        prefix = f"{os.fspath(path)}: "
        return cls(os.fspath(path), text[len(prefix):] if text.startswith(prefix) else text)


@dataclass(frozen=True)
class TtaResult:
    sources: list[str]  # the paths given on the command line
    tables: list[TtaTable]
    problems: list[TtaProblem]
    tool: dict[str, str] = field(default_factory=dict)  # {"mlperf-logging": "4.1.68"}: what scored
    schema: Annotated[str, VERSION_TAG] = TTA_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {"schema": data.pop("schema"), **data}

    @classmethod
    def from_dict(cls, data: Any) -> "TtaResult":
        """Validate and rebuild; raises ResultFormatError naming the offending key."""
        with c.checking("time-to-accuracy result"):
            if not isinstance(data, dict):
                raise ResultFormatError("time-to-accuracy result is not a JSON object")
            if data.get("schema") != TTA_SCHEMA:
                raise ResultFormatError(f"unknown time-to-accuracy schema {str(data.get('schema'))[:80]!r}, "
                                        f"expected {TTA_SCHEMA!r}")
            result = _LOAD(data)
            for i, table in enumerate(result.tables):
                if table.source not in SOURCES:
                    raise ResultFormatError(f"time-to-accuracy key 'tables[{i}].source' is {table.source[:40]!r}, "
                                            f"not one of {', '.join(SOURCES)}")
                for j, system in enumerate(table.systems):
                    if system.score_unit not in SCORE_UNITS:
                        raise ResultFormatError(f"time-to-accuracy key 'tables[{i}].systems[{j}].score_unit' is "
                                                f"{system.score_unit[:40]!r}, not one of {', '.join(SCORE_UNITS)}")
            return result


_LOAD = c.loader(TtaResult)
