"""Paths given to `tbd tta` -> a `TtaResult`: find the MLPerf runs and DAWNBench entries, score each, set side by side.

A path may be an MLPerf Training result log, a benchmark, system or submission folder, a whole
training_results_vX.Y tree, a DAWNBench entry (its JSON or TSV), or any folder holding either
(walked recursively, symlinked folders not followed, bounded). Runs are grouped into one benchmark
folder each (results/<system>/<benchmark>, scored together by mlperf-logging's result_summarizer,
profilers/mlperf/scoring.py) and entries read one by one (profilers/dawnbench/reader.py); every
path or file that cannot be read is one `TtaProblem`, and the rest is still reported.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tbd.analysis.mlperf_runs import run_timeline
from tbd.analysis.time_to_accuracy import olympic_verdicts, summarize_runs, with_ratios
from tbd.cli.tta_dawnbench import dawnbench_tables
from tbd.core.errors import TbdError, UsageError
from tbd.core.targets import Kind, read_result, sniff
from tbd.core.tta_records import RunLog
from tbd.core.tta_result import TtaProblem, TtaResult, TtaRun, TtaSystem, TtaTable
from tbd.profilers.mlperf import scoring
from tbd.profilers.mlperf.log import read_log

#: What a `tbd train` directory holds: its result (tbd/cli/commands/train.py writes it).
TRAIN_RESULT = "tta.json"
#: A folder walk visits at most this many entries, this many folders deep.
MAX_WALK_ENTRIES = 200_000
MAX_WALK_DEPTH = 10
#: At most this many files are opened to tell what they are (each costs up to a megabyte's head): a whole
#: training_results_v4.0 tree holds a few thousand; past it the rest are counted, not read.
MAX_CANDIDATE_FILES = 10_000
#: A submission tree names its round: github.com/mlcommons/training_results_v4.0.
_ROUND = re.compile(r"^training_results_v(\d+)\.(\d+)$")


@dataclass
class _Group:
    """The result logs of one benchmark of one system: scored together, as the summarizer does."""

    folder: Path
    files: list[Path] = field(default_factory=list)
    whole_folder: bool = True  # every result_*.txt of the folder (a folder given), else only `files`


def analyse(paths: list[str], *, benchmark: str | None = None, target: float | None = None,
            ruleset: str | None = None, progress: Callable[[int, int, str], None] | None = None) -> TtaResult:
    """Read, score and set side by side everything under `paths`.

    `progress(done, total, what)` is called before each benchmark folder is scored (a whole
    training_results tree takes a minute: the compliance checker reads every log).

    Raises:
        UsageError: a `--ruleset` mlperf-logging does not know.
    """
    if ruleset is not None and ruleset not in scoring.rulesets():
        known = ", ".join(sorted(scoring.rulesets(), key=_version_key))
        raise UsageError(f"--ruleset {ruleset[:20]!r} is not one mlperf-logging knows ({known})")
    problems: list[TtaProblem] = []
    groups: dict[Path, _Group] = {}
    entries: list[Path] = []
    trained: list[Path] = []
    for given in paths:
        _collect(Path(given), groups, entries, trained, problems)
    tables: dict[tuple[str, str, str | None], TtaTable] = {}
    for path in trained:
        try:
            saved = TtaResult.from_dict(read_result(path, Kind.TTA_JSON, "a `tbd train` directory's tta.json"))
        except TbdError as exc:
            problems.append(TtaProblem.of(path, exc.one_line()))
            continue
        for table in saved.tables:
            if benchmark is None or table.benchmark.split(" on ")[0] == benchmark:
                tables.setdefault(("tbd", f"{table.benchmark} ({path.parent.name})", None), table)
    for i, group in enumerate(groups.values()):
        if progress is not None:
            progress(i, len(groups), f"{group.folder.parent.name}/{group.folder.name}")
        _mlperf_group(group, tables, problems, ruleset, benchmark)
    if progress is not None:
        progress(len(groups), len(groups), "")
    for table in dawnbench_tables(entries, problems, benchmark=benchmark, target=target):
        tables.setdefault(("dawnbench", table.benchmark, None), table)
    if target is not None:
        for key, table in tables.items():
            if key[0] == "mlperf":
                table.notes.append("--target applies to DAWNBench entries: an MLPerf score is to its rules' target")
    if benchmark is not None and not tables:
        problems.append(TtaProblem(", ".join(paths), f"no benchmark or task named {benchmark!r} was found"))
    ordered = [dataclasses.replace(t, systems=with_ratios(t.systems)) for t in tables.values()]
    return TtaResult(sources=list(paths), tables=ordered, problems=problems,
                     tool={"mlperf-logging": scoring.tool_version()} if groups else {})


# --- finding the inputs -----------------------------------------------------------------------

def _collect(path: Path, groups: dict[Path, _Group], entries: list[Path], trained: list[Path],
             problems: list[TtaProblem]) -> None:
    if not path.is_dir():
        found = sniff(path)
        if found.kind is Kind.MLPERF_LOG:
            group = groups.setdefault(path.parent.resolve(), _Group(path.parent, whole_folder=False))
            if path not in group.files:
                group.files.append(path)
        elif found.kind is Kind.DAWNBENCH_ENTRY:
            entries.append(path)
        else:
            problems.append(TtaProblem(str(path), f"not an MLPerf result log or DAWNBench entry: {found.description}"))
        return
    if (path / TRAIN_RESULT).is_file() and sniff(path / TRAIN_RESULT).kind is Kind.TTA_JSON:
        trained.append(path / TRAIN_RESULT)  # a `tbd train` directory: its own result, not its logs again
        return
    before = (len(groups), len(entries))
    visited, candidates, pending = 0, 0, [(path, 0)]
    while pending:
        here, depth = pending.pop()
        try:
            with os.scandir(here) as it:
                children = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            problems.append(TtaProblem(str(here), f"cannot be listed ({exc.strerror or type(exc).__name__})"))
            continue
        folders = []
        for child in children:  # files in name order; folders after, in name order (a stack: pushed reversed)
            visited += 1
            if visited > MAX_WALK_ENTRIES:
                problems.append(TtaProblem(str(path), f"more than {MAX_WALK_ENTRIES} entries: the rest not read"))
                return
            if child.is_dir(follow_symlinks=False):
                if depth < MAX_WALK_DEPTH and child.name != "power":
                    folders.append((Path(child.path), depth + 1))
            elif _is_file(child) and _candidate(child.name):
                candidates += 1
                if candidates <= MAX_CANDIDATE_FILES:
                    _classify(Path(child.path), groups, entries)
        pending += reversed(folders)
    if candidates > MAX_CANDIDATE_FILES:
        problems.append(TtaProblem(str(path), f"{candidates:,} result logs, JSON or TSV files: the first "
                                              f"{MAX_CANDIDATE_FILES:,} read, {candidates - MAX_CANDIDATE_FILES:,} not"))
    if (len(groups), len(entries)) == before:
        problems.append(TtaProblem(str(path), "holds no MLPerf result log (result_*.txt with :::MLLOG lines) "
                                              "and no DAWNBench entry (JSON + TSV)"))


def _candidate(name: str) -> bool:
    return name.startswith("result_") and name.endswith(".txt") or name.endswith((".json", ".tsv"))


def _classify(path: Path, groups: dict[Path, _Group], entries: list[Path]) -> None:
    kind = sniff(path).kind
    if kind is Kind.MLPERF_LOG:
        group = groups.setdefault(path.parent.resolve(), _Group(path.parent))
        group.files.append(path)
    elif kind is Kind.DAWNBENCH_ENTRY:
        # One entry per pair: its JSON stands for it; a TSV only when it has no JSON beside it.
        if path.suffix == ".json" or not path.with_suffix(".json").is_file():
            entries.append(path)


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file(follow_symlinks=False)
    except OSError:
        return False


# --- MLPerf -----------------------------------------------------------------------------------

def _mlperf_group(group: _Group, tables: dict, problems: list[TtaProblem], ruleset: str | None,
                  only: str | None) -> None:
    logs: dict[Path, RunLog] = {}
    for path in sorted(group.files, key=_natural):
        try:
            logs[path] = read_log(path)
        except TbdError as exc:
            problems.append(TtaProblem.of(path, exc.one_line()))
    if not logs:
        return
    first = next(iter(logs.values()))
    folder_name = group.folder.name
    logged = first.value("submission_benchmark")
    known = scoring.known_benchmarks()
    name = scoring.benchmark_name(folder_name)
    if name not in known and isinstance(logged, str) and scoring.benchmark_name(logged) in known:
        name = scoring.benchmark_name(logged)
    if only is not None and name != only and folder_name != only:
        return
    if name not in known:
        problems.append(TtaProblem(str(group.folder), f"benchmark {str(logged or folder_name)[:40]!r} is not an MLPerf "
                                                      f"Training benchmark mlperf-logging {scoring.tool_version()} knows"))
        return
    chosen, ruleset_source = _ruleset(group.folder, name, ruleset)
    if chosen is None:
        problems.append(TtaProblem(str(group.folder), ruleset_source))
        return
    system = group.folder.parent.name
    org = group.folder.parent.parent.parent if group.folder.parent.parent.name == "results" else None
    desc, desc_note = (scoring.read_system_json(org / "systems" / f"{system}.json") if org is not None
                       else (None, "no systems/<system>.json beside a loose log"))
    division = (desc or {}).get("division") or first.value("submission_division")
    division = division if isinstance(division, str) else None
    score = scoring.score_benchmark(group.folder, system, desc, chosen, division,
                                    None if group.whole_folder else list(logs), benchmark_folder=name)
    for line in score.problems:
        where, _, why = line.partition(": ")
        problems.append(TtaProblem(where, why or line))
    verdicts, check_note = olympic_verdicts(score.run_min, score.dropped, score.max_dropped,
                                            score.scaling_factor, score.score_min)
    runs = [_run(path, log, score, verdicts) for path, log in logs.items()]
    summary = summarize_runs(runs)
    count = _accelerators(desc)
    time_s = score.score_min * 60.0 if score.score_min is not None else None
    notes = [n for n in (desc_note, check_note) if n]
    if score.runs_required and len(logs) < score.runs_required and group.whole_folder:
        notes.append(f"{len(logs)} of the {score.runs_required} runs MLPerf requires for {name}")
    submitter = (desc or {}).get("submitter") or first.value("submission_org")
    submitter = submitter if isinstance(submitter, str) else None
    entry = TtaSystem(
        label=f"{submitter}/{system}" if submitter else system, path=str(group.folder),
        submitter=submitter, system=_text(desc, "system_name") or system, division=division,
        availability=_text(desc, "status"), framework=_text(desc, "framework"),
        accelerator=_text(desc, "accelerator_model_name"), accelerator_count=count,
        host_processors=_product(desc, "host_processors_per_node", "number_of_nodes"),
        score=score.score_min, score_unit="min", score_reason=score.score_reason, time_to_target_s=time_s,
        accelerator_time_s=time_s * count if time_s is not None and count else None,
        energy_j=score.energy_j, energy_reason=score.energy_reason,
        cost_usd=None, cost_per_hour=None, cost_reason="MLPerf results state no price",
        latency_ms=None, cost_per_item_usd=None, accuracy=None, epochs_to_target=None,
        to_converge=score.to_converge, converge_unit=_converge_unit(runs, score),
        global_batch_size=score.gbs, rcp=score.rcp, rcp_scaling_factor=score.scaling_factor,
        runs_required=score.runs_required, runs=runs, ratio_time=None, ratio_accelerator_time=None,
        ratio_energy=None, ratio_cost=None, notes=notes, init_s=summary.init_s, train_s=summary.train_s,
        eval_s=summary.eval_s, samples_per_s=summary.samples_per_s)
    key = ("mlperf", name, chosen)
    if key not in tables:
        value, rule = scoring.quality_target(name, chosen)
        notes = [] if _version_key(chosen) >= (1, 0, 0) else [
            f"MLPerf {chosen} had no reference convergence points (RCPs came with 1.0.0): no RCP check, and no "
            "samples to converge from it"]
        tables[key] = TtaTable(source="mlperf", benchmark=name, ruleset=chosen, ruleset_source=ruleset_source,
                               metric="eval_accuracy", target=value, target_source=rule, systems=[], notes=notes)
    tables[key].systems.append(entry)


def _run(path: Path, log: RunLog, score: scoring.BenchmarkScore, verdicts: dict) -> TtaRun:
    name = scoring.copy_name(path.name)
    timeline = run_timeline(log)
    verdict = verdicts.get(name)
    minutes = score.run_min.get(name)
    reason = None if minutes is not None else (score.dropped.get(name) or "result_summarizer did not score it")
    return TtaRun(
        file=str(path), used=bool(verdict and verdict.used), dropped_reason=verdict.reason if verdict else reason,
        status=timeline.status, score=minutes, score_reason=reason, to_converge=score.run_converge.get(name),
        epochs_to_converge=timeline.epochs_to_converge, samples_to_converge=timeline.samples_to_converge,
        samples_reason=timeline.samples_reason, init_s=timeline.init_s, run_s=timeline.run_s,
        eval_s=timeline.eval_s, train_s=timeline.train_s, energy_j=score.run_energy_j.get(name),
        energy_reason=score.run_energy_reason.get(name) if name not in score.run_energy_j else None,
        throughput=timeline.throughput, accuracy=timeline.accuracy, notes=timeline.notes)


def _converge_unit(runs: list[TtaRun], score: scoring.BenchmarkScore) -> str | None:
    """What the RCP checker counted: samples where a converged run's count equals its samples, else epochs."""
    for run in runs:
        if run.to_converge is not None:
            if run.samples_to_converge is not None and run.to_converge == run.samples_to_converge:
                return "samples"
            if run.epochs_to_converge is not None and abs(run.to_converge - round(run.epochs_to_converge, 3)) < 1e-9:
                return "epochs"
    return None


def _ruleset(folder: Path, benchmark: str, given: str | None) -> tuple[str | None, str]:
    if given is not None:
        return given, "--ruleset"
    for part in reversed(folder.resolve().parts):
        found = _ROUND.match(part)
        if found:
            candidate = f"{int(found[1])}.{int(found[2])}.0"
            if candidate in scoring.rulesets():
                return candidate, f"the path ({part})"
            return None, (f"{part} names ruleset {candidate}, which mlperf-logging {scoring.tool_version()} "
                          "does not know: pass --ruleset")
    having = [r for r in scoring.rulesets() if benchmark in scoring.allowed_benchmarks(r)]
    if not having:
        return None, f"no ruleset of mlperf-logging has benchmark {benchmark}: pass --ruleset"
    newest = max(having, key=_version_key)
    return newest, (f"assumed {newest}, the newest round with {benchmark} (no training_results_vX.Y folder in the "
                    "path): --ruleset sets it")


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def _natural(path: Path) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", path.name))


def _text(desc: dict | None, key: str) -> str | None:
    value = (desc or {}).get(key)
    return value[:200] if isinstance(value, str) and value else None


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return value if isinstance(value, int) and 0 <= value < 1 << 40 else None


def _product(desc: dict | None, a: str, b: str) -> int | None:
    x, y = _int((desc or {}).get(a)), _int((desc or {}).get(b))
    return x * y if x is not None and y is not None else None


def _accelerators(desc: dict | None) -> int | None:
    """accelerators_per_node x number_of_nodes, as result_summarizer counts them."""
    count = _product(desc, "accelerators_per_node", "number_of_nodes")
    return count if count else None
