"""DAWNBench entries -> `TtaTable`s, one per task and phase ("CIFAR10 train", "ImageNet inference").

Each entry is read by profilers/dawnbench/reader.py and scored by the rules of DAWNBench's README
(analysis/dawnbench_scoring.py): the first TSV row at or above the task's target, its hours times
costPerHour; for inference the latency and cost per item and whether the reported quality meets
the target. `--target` replaces the task's target value (the metric stays the task's).
"""

from __future__ import annotations

from pathlib import Path

from tbd.analysis.dawnbench_scoring import Target, score_entry, target_for
from tbd.core.errors import TbdError
from tbd.core.tta_result import AccuracyPoint, TtaProblem, TtaRun, TtaSystem, TtaTable
from tbd.profilers.dawnbench.reader import DawnbenchEntry, read_entry


def dawnbench_tables(entries: list[Path], problems: list[TtaProblem], *, benchmark: str | None = None,
                     target: float | None = None) -> list[TtaTable]:
    tables: dict[str, TtaTable] = {}
    for path in entries:
        try:
            entry = read_entry(path)
        except TbdError as exc:
            problems.append(TtaProblem.of(path, exc.one_line()))
            continue
        task = entry.task or "unknown task"
        if benchmark is not None and benchmark.lower() not in (task.lower(), f"{task} {entry.phase}".lower()):
            continue
        chosen = _target(entry, target)
        name = f"{task} {entry.phase}"
        if name not in tables:
            tables[name] = TtaTable(source="dawnbench", benchmark=name, ruleset=None, ruleset_source=None,
                                    metric=chosen.metric if chosen else None,
                                    target=chosen.value if chosen else None,
                                    target_source=chosen.source if chosen else None, systems=[], notes=[])
        tables[name].systems.append(_system(path, entry, chosen))
    return list(tables.values())


def _target(entry: DawnbenchEntry, given: float | None) -> Target | None:
    default = target_for(entry.task, entry.phase)
    if given is None:
        return default
    if default is not None:
        metric = default.metric
    else:
        columns = [m for row in entry.rows for m in row.metrics] or list(entry.reported)
        if not columns:
            return None
        metric = columns[0]
    return Target(entry.task or "unknown", entry.phase, metric, given, "fraction" if given <= 1 else "percent",
                  f"--target {given:g} on {metric}")


def _system(path: Path, entry: DawnbenchEntry, target: Target | None) -> TtaSystem:
    score = score_entry(entry, target) if target is not None else None
    label = " · ".join(x for x in (entry.author, entry.model) if x) or path.stem
    notes = list(entry.notes)
    common = dict(label=label, path=str(path), submitter=entry.author, system=entry.model, division=None,
                  availability=None, framework=entry.framework, accelerator=entry.hardware, accelerator_count=None,
                  host_processors=None, accelerator_time_s=None, energy_j=None,
                  energy_reason="DAWNBench entries state no energy", cost_per_hour=entry.cost_per_hour,
                  to_converge=None, converge_unit=None, global_batch_size=None, rcp=None, rcp_scaling_factor=None,
                  runs_required=None, ratio_time=None, ratio_accelerator_time=None, ratio_energy=None,
                  ratio_cost=None)
    why = score.reason if score is not None else "no target: the task is unknown and --target was not given"
    if entry.phase == "inference":
        latency = score.latency if score else None
        cost = score.cost if score else None
        quality = score.quality if score else None
        for part in (latency, cost, quality):
            if part is not None and part.note:
                notes.append(part.note)
        if quality is not None and quality.meets is False:
            notes.append(f"reported {quality.metric} {quality.value:g} is below the target {quality.threshold:g}")
        return TtaSystem(**common, score=latency.value if latency else entry.latency_ms, score_unit="ms",
                         score_reason=(latency.reason if latency else why), time_to_target_s=None,
                         cost_usd=None, cost_reason=cost.reason if cost else why, latency_ms=entry.latency_ms,
                         cost_per_item_usd=cost.value if cost else None,
                         accuracy=quality.value if quality else None, epochs_to_target=None, runs=[], notes=notes)
    hit = score.time if score else None
    cost = score.cost if score else None
    if hit is not None and hit.note:
        notes.append(hit.note)
    hours = hit.hours if hit is not None else None
    metric = hit.metric if hit is not None else None
    curve = [AccuracyPoint(row.hours * 3600.0, row.metrics[metric], row.epoch)
             for row in entry.rows if metric is not None and metric in row.metrics and row.hours >= 0]
    run = TtaRun(file=entry.tsv_path or str(path), used=True, dropped_reason=None, status=None, score=hours,
                 score_reason=hit.reason if hit is not None else why, to_converge=None,
                 epochs_to_converge=hit.epoch if hit is not None else None, samples_to_converge=None,
                 samples_reason="DAWNBench TSVs log epochs, not samples", init_s=None,
                 run_s=hours * 3600.0 if hours is not None else None, eval_s=None, train_s=None, energy_j=None,
                 energy_reason=None, throughput=[], accuracy=curve, notes=[])
    return TtaSystem(**common, score=hours, score_unit="h",
                     score_reason=None if hours is not None else (hit.reason if hit is not None else why),
                     time_to_target_s=hours * 3600.0 if hours is not None else None,
                     cost_usd=cost.value if cost else None, cost_reason=cost.reason if cost else why,
                     latency_ms=None, cost_per_item_usd=None, accuracy=hit.value if hit is not None else None,
                     epochs_to_target=hit.epoch if hit is not None else None, runs=[run], notes=notes)
