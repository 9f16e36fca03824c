"""One DAWNBench entry scored by the rules of its README (github.com/stanford-futuredata/dawn-bench-entries).

Training: the time to the quality target is the `hours` of the first TSV row, in file order, whose
metric is at least the target ("reading off the first entry in the above TSV"), not the best
row and not the row with the smallest hours; the cost is those hours times the JSON's costPerHour,
and only where costPerHour is given ("Including cost is optional"). Inference: the latency (ms per
item) and cost (USD per item) as the JSON gives them, the cost derived as costPerHour x latency
where only those are given (labelled derived), and whether the reported quality meets the target.

Scale: the README states CIFAR10 and ImageNet targets in percent (94, 93) and SQuAD's as a fraction
(F1 0.73), and entries do not always follow it: SQuAD/inference/dawn_fastfusionnet-1080ti.json
reports f1Score 82.52. A column (or a reported value) whose every value is at most 1 is read as
fractions against a percent target, one with a value above 1 as percent against a fraction target,
and the comparison says so in its note; no number is rescaled silently.

Pure functions on records: the rows and entries are anything with the attributes of
profilers/dawnbench/reader.py's DawnbenchRow and DawnbenchEntry (the Protocols below), because
analysis never imports a reader (docs/architecture.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType
from typing import Generic, Iterable, Mapping, Protocol, TypeVar

from tbd.core.errors import UsageError

#: milliseconds in an hour: cost per item = costPerHour (USD/h) x latency (ms) / MS_PER_HOUR.
MS_PER_HOUR = 3.6e6
#: A reported cost further than this (relative) from costPerHour x latency gets a note.
COST_MISMATCH = 0.01


class RowLike(Protocol):
    """A TSV row: profilers/dawnbench/reader.py's DawnbenchRow."""

    @property
    def epoch(self) -> float: ...

    @property
    def hours(self) -> float: ...

    @property
    def metrics(self) -> Mapping[str, float]: ...


class EntryLike(Protocol):
    """An entry: profilers/dawnbench/reader.py's DawnbenchEntry (the fields scoring reads)."""

    @property
    def task(self) -> str | None: ...

    @property
    def phase(self) -> str: ...

    @property
    def cost_per_hour(self) -> float | None: ...

    @property
    def latency_ms(self) -> float | None: ...

    @property
    def cost_per_item(self) -> float | None: ...

    @property
    def reported(self) -> Mapping[str, float]: ...

    @property
    def rows(self) -> tuple[RowLike, ...]: ...


R = TypeVar("R", bound=RowLike)


@dataclass(frozen=True, slots=True)
class Target:
    """A quality bar of DAWNBench: `metric` (a TSV column or JSON field) at least `value`."""

    task: str
    phase: str  # "train" or "inference"
    metric: str
    value: float
    scale: str  # "percent" (0-100) or "fraction" (0-1): how the README states `value`
    source: str  # where the rule is written
    aliases: tuple[str, ...] = ()  # other names entries give the metric


_README = "DAWNBench README"
DEFAULT_TARGETS: Mapping[tuple[str, str], Target] = MappingProxyType({
    ("CIFAR10", "train"): Target(
        "CIFAR10", "train", "top1Accuracy", 94.0, "percent",
        f"{_README}, CIFAR10 Training: hours to a test set top-1 accuracy of at least 94%, "
        "the first TSV row at or above it"),
    ("CIFAR10", "inference"): Target(
        "CIFAR10", "inference", "top1Accuracy", 94.0, "percent",
        f"{_README}, CIFAR10 Inference: a model with test set accuracy of 94% or greater "
        "(field top1Accuracy; the README's example JSON names it accuracy)", aliases=("accuracy",)),
    ("ImageNet", "train"): Target(
        "ImageNet", "train", "top5Accuracy", 93.0, "percent",
        f"{_README}, ImageNet Training: hours to a top-5 validation accuracy of at least 93%, "
        "the first TSV row at or above it"),
    ("ImageNet", "inference"): Target(
        "ImageNet", "inference", "top5Accuracy", 93.0, "percent",
        f"{_README}, ImageNet Inference: a model with top-5 validation accuracy of 93% or greater"),
    # The README says 0.73 in both SQuAD sections; the repository's own CI (tests/test_submissions.py
    # there) checks 0.75. The README is the published rule.
    ("SQuAD", "train"): Target(
        "SQuAD", "train", "f1Score", 0.73, "fraction",
        f"{_README}, SQuAD Training: hours to a dev set F1 score of at least 0.73 (f1Score, a fraction "
        "from 0 to 1), the first TSV row at or above it"),
    ("SQuAD", "inference"): Target(
        "SQuAD", "inference", "f1Score", 0.73, "fraction",
        f"{_README}, SQuAD Inference: a model with dev set F1 of 0.73 or greater (f1Score, a fraction)"),
})


@dataclass(frozen=True, slots=True)
class TargetHit(Generic[R]):
    """The first row reaching a target, or (row None) why none does.

    threshold is what the values were compared with: the target, or target/100 or target x 100
    when the column's scale is not the target's (note says which).
    """

    metric: str  # the column compared, as the rows name it
    target: float  # as given
    threshold: float
    row: R | None
    note: str | None = None
    reason: str | None = None  # why row is None

    @property
    def reached(self) -> bool:
        return self.row is not None

    @property
    def hours(self) -> float | None:
        return None if self.row is None else self.row.hours

    @property
    def epoch(self) -> float | None:
        return None if self.row is None else self.row.epoch

    @property
    def value(self) -> float | None:
        return None if self.row is None else self.row.metrics[self.metric]


@dataclass(frozen=True, slots=True)
class Amount:
    """A cost or latency: the number, or None with the reason; derived when computed here, not read."""

    value: float | None
    unit: str  # "USD", "USD/item", "ms/item"
    derived: bool = False
    note: str | None = None  # how it was derived, or what looks wrong with it
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class QualityCheck:
    """Whether an inference entry's reported quality meets the target; meets None where nothing says."""

    metric: str | None  # the JSON field read
    value: float | None
    threshold: float
    meets: bool | None
    note: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class DawnbenchScore:
    """An entry's DAWNBench figures: training fills time and cost, inference latency, cost and quality."""

    task: str | None
    phase: str
    target: Target | None
    time: TargetHit | None = None
    cost: Amount | None = None  # training: USD to the target; inference: USD per item
    latency: Amount | None = None
    quality: QualityCheck | None = None
    reason: str | None = None  # why there is no target to score against


def target_for(task: str | None, phase: str) -> Target | None:
    """DAWNBench's target for a task and phase, or None for an unknown task."""
    return DEFAULT_TARGETS.get((task, phase)) if task else None


def time_to_target(entry_rows: Iterable[R], metric: str, target: float) -> TargetHit[R]:
    """The first row, in file order, whose `metric` is at least `target` (column matched case-insensitively).

    Rows without a value in the column are passed over. A percent target (above 1) against a column
    whose every value is at most 1 compares with target/100; a fraction target (at most 1) against a
    column with a value above 1 compares with target x 100; the hit's note says so.

    Raises:
        UsageError: the target is not a positive finite number.
    """
    _check_target(target)
    rows = tuple(entry_rows)
    names = list(dict.fromkeys(name for row in rows for name in row.metrics))
    column = _match(names, (metric,))
    if column is None:
        shown = ", ".join(names) or "none"
        return TargetHit(metric, target, target, None, reason=f"no {metric} column (metric columns: {shown})")
    values = [row.metrics[column] for row in rows if column in row.metrics]
    threshold, note = _threshold(target, values, column, "column")
    for row in rows:
        value = row.metrics.get(column)
        if value is not None and value >= threshold:
            return TargetHit(column, target, threshold, row, note=note)
    best = max(values) if values else None
    why = (f"{column} never reaches {threshold:g} (best {best:g})" if best is not None
           else f"no row has a {column} value")
    return TargetHit(column, target, threshold, None, note=note, reason=why)


def cost_to_target(hit: TargetHit, cost_per_hour: float | None) -> Amount:
    """USD to the target: the hit's hours x costPerHour, None with the reason when either is missing."""
    if hit.row is None:
        return Amount(None, "USD", reason=f"target not reached: {hit.reason}")
    if cost_per_hour is None:
        return Amount(None, "USD", reason="no costPerHour in the JSON (optional in DAWNBench: cost is scored only "
                                          "where it is given)")
    hours = hit.row.hours
    return Amount(hours * cost_per_hour, "USD", derived=True, note=f"{hours:g} h x {cost_per_hour:g} USD/h")


def inference_latency(latency_ms: float | None) -> Amount:
    """Milliseconds per item, as the JSON gives it."""
    if latency_ms is None:
        return Amount(None, "ms/item", reason="no latency in the JSON")
    return Amount(latency_ms, "ms/item")


def inference_cost(cost_per_item: float | None, cost_per_hour: float | None, latency_ms: float | None) -> Amount:
    """USD per item: the JSON's cost as given, else costPerHour x latency_ms / 3.6e6 labelled derived.

    A given cost more than COST_MISMATCH away from the one its costPerHour and latency imply is kept,
    with a note: DAWNBench ranks by the number submitted.
    """
    implied = (cost_per_hour * latency_ms / MS_PER_HOUR
               if cost_per_hour is not None and latency_ms is not None else None)
    if cost_per_item is not None:
        note = None
        if implied is not None and abs(cost_per_item - implied) > COST_MISMATCH * max(implied, cost_per_item):
            note = (f"the JSON cost {cost_per_item:g} USD differs from costPerHour x latency = {cost_per_hour:g} "
                    f"x {latency_ms:g} ms / 3.6e6 = {implied:g} USD; the JSON's is kept")
        return Amount(cost_per_item, "USD/item", note=note)
    if implied is not None:
        return Amount(implied, "USD/item", derived=True,
                      note=f"derived: costPerHour x latency = {cost_per_hour:g} USD/h x {latency_ms:g} ms / 3.6e6")
    missing = "costPerHour" if cost_per_hour is None else "latency"
    return Amount(None, "USD/item", reason=f"no cost in the JSON, and no {missing} to derive it from")


def accuracy_at_target(reported: Mapping[str, float], target: Target) -> QualityCheck:
    """Whether the reported quality (target.metric, else one of its aliases) is at least the target."""
    _check_target(target.value)
    field = _match(list(reported), (target.metric, *target.aliases))
    if field is None:
        shown = ", ".join(reported) or "none"
        return QualityCheck(None, None, target.value, None,
                            reason=f"no {target.metric} in the JSON (quality fields: {shown})")
    value = reported[field]
    threshold, note = _threshold(target.value, [value], field, "value")
    if field.lower() != target.metric.lower():
        read = f"{field} read as {target.metric}"
        note = f"{read}; {note}" if note else read
    return QualityCheck(field, value, threshold, value >= threshold, note=note)


def score_entry(entry: EntryLike, target: Target | None = None) -> DawnbenchScore:
    """An entry's figures against `target`, by default DAWNBench's for its task and phase."""
    target = target or target_for(entry.task, entry.phase)
    if target is None:
        return DawnbenchScore(entry.task, entry.phase, None,
                              reason="task unknown (no task folder, and metric names that fit several tasks "
                                     "or none): give a target")
    if entry.phase == "train":
        hit = time_to_target(entry.rows, target.metric, target.value)
        return DawnbenchScore(entry.task, entry.phase, target, time=hit,
                              cost=cost_to_target(hit, entry.cost_per_hour))
    return DawnbenchScore(entry.task, entry.phase, target,
                          cost=inference_cost(entry.cost_per_item, entry.cost_per_hour, entry.latency_ms),
                          latency=inference_latency(entry.latency_ms),
                          quality=accuracy_at_target(entry.reported, target))


def _check_target(target: float) -> None:
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not math.isfinite(target) or target <= 0:
        raise UsageError(f"a DAWNBench target must be a positive number, not {target!r}")


def _match(names: list[str], wanted: tuple[str, ...]) -> str | None:
    """The first of `wanted` among `names`, spelt alike, else case-insensitively."""
    for want in wanted:
        if want in names:
            return want
        for name in names:
            if name.lower() == want.lower():
                return name
    return None


def _threshold(target: float, values: list[float], name: str, what: str) -> tuple[float, str | None]:
    """The number `values` are compared with, rescaled (with a note) when their scale is not the target's."""
    if not values:
        return target, None
    if target > 1 and max(values) <= 1:
        scaled = float(Decimal(repr(target)) / 100)  # exact decimal: 94/100 is the double nearest 0.94
        every = "every value is" if what == "column" else "the value is"
        return scaled, (f"{name}: {every} at most 1, read as a fraction: compared with {target:g}/100 = {scaled:g}")
    if target <= 1 and max(values) > 1:
        scaled = float(Decimal(repr(target)) * 100)  # 0.57 * 100 is 56.99999999999999 in floats; 57 here
        some = "values above 1" if what == "column" else "a value above 1"
        return scaled, (f"{name}: {some}, read as percent: compared with {target:g} x 100 = {scaled:g}")
    return target, None
