"""Systems side by side on time to accuracy: which runs a score counted, and each system against the first.

The MLPerf score is mlperf-logging's (profilers/mlperf/scoring.py); here it is only explained:
which runs the olympic mean kept and which it dropped, checked against the score the tool gave
(the mean of the kept runs times the scaling factor must give it back, or the table says so).
"""

from __future__ import annotations

import dataclasses
import math
import statistics

from tbd.core.tta_result import TtaRun, TtaSystem

#: How close the mean of the runs named as kept must come to the tool's score (relative).
SCORE_CHECK_TOLERANCE = 1e-9


@dataclasses.dataclass(frozen=True)
class RunVerdict:
    used: bool
    reason: str | None  # why a run was not counted


def olympic_verdicts(run_min: dict[str, float], dropped: dict[str, str], max_dropped: int,
                     scaling: float | None, score: float | None) -> tuple[dict[str, RunVerdict], str | None]:
    """Each run's part in an olympic mean as MLPerf Training's rules state it, and a note when the
    tool's score does not come back from the runs so named.

    The rules (and result_summarizer): a run that failed the compliance check or did not converge is
    dropped and counts as the slowest; then `max_dropped` fastest runs and `max_dropped` minus the
    failed ones of the slowest are dropped; the rest are averaged.
    """
    verdicts = {name: RunVerdict(False, f"not counted, as the slowest: {why}") for name, why in dropped.items()}
    if len(dropped) > max_dropped:
        for name in run_min:
            verdicts[name] = RunVerdict(False, f"no score: {len(dropped)} runs failed, MLPerf allows {max_dropped}")
        return verdicts, None
    ordered = sorted(run_min, key=lambda name: (run_min[name], name))
    slowest_dropped = max_dropped - len(dropped)
    kept = ordered[max_dropped:len(ordered) - slowest_dropped]
    for i, name in enumerate(ordered):
        if name in kept:
            verdicts[name] = RunVerdict(True, None)
        elif i < max_dropped:
            verdicts[name] = RunVerdict(False, "fastest run, dropped by the olympic mean")
        else:
            verdicts[name] = RunVerdict(False, "slowest run, dropped by the olympic mean")
    note = None
    if score is not None and kept:
        mean = sum(run_min[name] for name in kept) / len(kept) * (scaling if scaling is not None else 1.0)
        if not math.isclose(mean, score, rel_tol=SCORE_CHECK_TOLERANCE):
            note = (f"the runs marked used average {mean:.6g} min, not result_summarizer's {score:.6g}: "
                    "which runs it kept could not be told apart")
    return verdicts, note


def with_ratios(systems: list[TtaSystem]) -> list[TtaSystem]:
    """Each system with its ratios to the first system's figures (null where either side is null or 0)."""
    if not systems:
        return []
    first = systems[0]

    def ratio(value: float | None, reference: float | None) -> float | None:
        if value is None or reference is None or reference <= 0:
            return None
        quotient = value / reference
        return quotient if math.isfinite(quotient) else None  # a reference near 0 (5e-324 h) gives no ratio

    return [dataclasses.replace(
        system,
        ratio_time=ratio(system.time_to_target_s, first.time_to_target_s)
        if system.score_unit != "ms" else ratio(system.latency_ms, first.latency_ms),
        ratio_accelerator_time=ratio(system.accelerator_time_s, first.accelerator_time_s),
        ratio_energy=ratio(system.energy_j, first.energy_j),
        ratio_cost=ratio(system.cost_usd if system.score_unit != "ms" else system.cost_per_item_usd,
                         first.cost_usd if first.score_unit != "ms" else first.cost_per_item_usd),
    ) for system in systems]


@dataclasses.dataclass(frozen=True)
class RunSummary:
    init_s: float | None
    train_s: float | None
    eval_s: float | None
    samples_per_s: float | None


def summarize_runs(runs: list[TtaRun]) -> RunSummary:
    """Means of init, train and eval seconds over the used runs (all runs when none is marked used),
    and the median samples/s over their blocks: where the time to train went."""
    chosen = [r for r in runs if r.used] or runs

    def mean(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) / len(known) if known and len(known) == len(values) else None

    rates = [b.samples_per_s for r in chosen for b in r.throughput if b.samples_per_s is not None]
    return RunSummary(mean([r.init_s for r in chosen]), mean([r.train_s for r in chosen]),
                      mean([r.eval_s for r in chosen]), statistics.median(rates) if rates else None)


@dataclasses.dataclass(frozen=True)
class Spread:
    mean: float | None
    minimum: float | None
    median: float | None
    maximum: float | None
    cv_pct: float | None  # sample standard deviation / mean x 100; None for fewer than 2 values


def spread(values: list[float]) -> Spread:
    """Mean, min, median, max and coefficient of variation of the converged runs' times."""
    if not values:
        return Spread(None, None, None, None, None)
    mean = statistics.fmean(values)
    cv = statistics.stdev(values) / mean * 100.0 if len(values) > 1 and mean > 0 else None
    return Spread(mean, min(values), statistics.median(values), max(values), cv)
