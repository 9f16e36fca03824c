"""A benchmark folder of an MLPerf Training submission, scored by mlperf-logging's own result_summarizer.

tbd re-derives none of MLPerf's rules: the score is what `result_summarizer` computes (the
compliance check of each run, a non-converged run counted as the slowest, the olympic mean over
the runs, the scaling.json factor, the RCP check and samples to converge for the closed division,
the energy of MLPerf Power logs), by calling its functions on the folder:
`_compute_strong_scaling_scores` (what `summarize_results` calls per system) and
`_compute_strong_score_standalone` (the same function with each run's time kept).

Two things about that code shape how it is called:

- It writes into the folder it scores: the RCP check of a closed-division benchmark deletes
  `scaling.json` and writes a new one (seen on Google's v4.0 tpu-v5p-3072 gpt3: its scaling.json,
  factor 1.0104, was gone after one run of the summarizer). A user's submission is never touched:
  the benchmark folder is copied (result logs, power logs, scaling.json; regular files only, each
  size-capped) into a temporary folder, and the tools run on the copy.
- It is not robust to every real folder: on smc-ac-power's v4.0 bert (MLPerf Power logs) it raises
  ZeroDivisionError inside `_compute_power_node`, which loses the whole row. A failure while
  scoring energy is caught, said in one line naming the file, and the score is computed again
  without the power logs, so time to train is still reported; each run's energy is then tried
  alone, so the runs whose power logs can be read keep theirs.

What the tools print (notices, the compliance checker's failed rules, tracebacks) is captured, never
shown as is: the lines about one result file become the reason that run was dropped.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import logging
import math
import os
import re
import shutil
import stat
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tbd.core.errors import TbdError
from tbd.profilers.mlperf.log import read_log

#: The largest file copied for the tools: a result or power log far larger is not one a run wrote.
MAX_COPY_BYTES = 512 << 20
#: The longest `:::MLLOG` line given to the tools. Their parsers strip each line with
#: `re.sub(".*:::MLLOG ", ...)`, which backtracks in time quadratic in the line's length (a 300 kB
#: line took minutes); real events are a few hundred characters (the longest in the v4.0 logs: 277).
MAX_EVENT_LINE = 8 << 10
_TOKEN = b":::MLLOG"
#: A log line the tools quote back in a message: never repeated (it may hold anything, "NaN" included).
_ECHOED_EVENT = re.compile(r":::MLLOG .*?(?=; |$)")
#: What `_compute_strong_score_standalone` prints for a run it drops: "<error> in <file>".
_DROPPED = re.compile(r"^(?P<error>.*) in (?P<file>\S*result_[^/\s]*\.txt)$")


@dataclass(frozen=True)
class BenchmarkScore:
    """One system's benchmark, as result_summarizer scores it."""

    benchmark: str  # the summarizer's name for it (folder `mask` is `maskrcnn`)
    score_min: float | None  # result_summarizer's time to train: olympic mean x scaling factor, minutes
    score_reason: str | None
    run_min: dict[str, float]  # result file name -> that run's minutes (run_start to run_stop)
    dropped: dict[str, str]  # result file name -> why result_summarizer did not count it
    scaling_factor: float | None
    max_dropped: int  # runs the olympic mean drops at each end (4 for unet3d, else 1)
    energy_j: float | None
    energy_reason: str | None
    run_energy_j: dict[str, float]
    run_energy_reason: dict[str, str]
    gbs: float | None
    to_converge: float | None  # the summarizer's samples_to_converge (closed division)
    run_converge: dict[str, float]  # result file name -> the RCP checker's epochs/samples to converge
    rcp: str | None
    runs_required: int | None
    problems: list[str] = field(default_factory=list)  # "<file>: <what failed>", tool failures
    version: str = ""  # mlperf-logging's version


def tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("mlperf-logging")
    except PackageNotFoundError:
        return ""


@functools.cache
def rulesets() -> frozenset[str]:
    from mlperf_logging.compliance_checker.mlp_compliance import rule_choices
    return frozenset(rule_choices())


@functools.cache
def allowed_benchmarks(ruleset: str) -> tuple[str, ...]:
    from mlperf_logging.benchmark_meta import get_allowed_benchmarks
    try:
        return tuple(get_allowed_benchmarks("training", ruleset))
    except Exception:  # noqa: BLE001 - a ruleset the package lists no benchmarks for
        return ()


@functools.cache
def known_benchmarks() -> frozenset[str]:
    """Every MLPerf Training benchmark of every ruleset mlperf-logging knows."""
    return frozenset(b for r in rulesets() for b in allowed_benchmarks(r))


def benchmark_name(folder_name: str) -> str:
    from mlperf_logging.result_summarizer import result_summarizer as rs
    return rs._benchmark_alias(folder_name)


def score_benchmark(folder: Path, system: str, desc: dict[str, Any] | None, ruleset: str,
                    division: str | None, files: list[Path] | None = None,
                    benchmark_folder: str | None = None) -> BenchmarkScore:
    """Score `folder` (results/<system>/<benchmark>) with result_summarizer, on a temporary copy.

    `files`: only these result logs of the folder (a log given alone); `benchmark_folder`: the
    name the copy's folder gets, which the summarizer reads as the benchmark (a loose log's folder
    may be named anything: its submission_benchmark is passed).
    """
    from mlperf_logging.benchmark_meta import get_result_file_counts
    from mlperf_logging.result_summarizer import result_summarizer as rs

    name = benchmark_folder or folder.name
    benchmark = rs._benchmark_alias(name)
    problems: list[str] = []
    required = get_result_file_counts("training").get(benchmark)
    max_dropped = 4 if benchmark == "unet3d" else 1  # as _compute_strong_score_standalone, checked below
    desc = dict(desc) if desc else {"submitter": None}
    with tempfile.TemporaryDirectory(prefix="tbd-mlperf-") as tmp:
        system_dir = Path(tmp) / system
        copy = system_dir / name
        _copy_folder(folder, copy, problems, {f.name for f in files} if files is not None else None)
        has_power = (copy / "power").is_dir()

        # Each run's minutes first (the RCP check below rewrites scaling.json in the copy).
        text, outcome = _captured(rs._compute_strong_score_standalone, benchmark, system, False, str(copy),
                                  "training", ruleset, desc, return_full_scores=True)
        run_min: dict[str, float] = {}
        dropped: dict[str, str] = {}
        scaling = None
        if isinstance(outcome, BaseException):
            problems.append(f"{folder}: result_summarizer failed: {_exception(outcome)}")
        else:
            track, scaling = outcome[0], (outcome[4] if len(outcome) > 4 else None)  # 4.1.68 returns five
            run_min = {Path(f).name: m for f, m in ((f, _float(m)) for f, m in track.items()) if m is not None}
            dropped = _dropped_reasons(text)

        run_energy, run_energy_reason = {}, {}
        if has_power:
            run_energy, run_energy_reason = _run_energies(rs, copy, ruleset, run_min)

        # Then the summarizer's own row: score, energy, RCP, GBS, samples to converge.
        text, outcome = _captured(rs._compute_strong_scaling_scores, desc, str(system_dir), "training", ruleset,
                                  division or "")
        energy_reason = None if has_power else "no MLPerf Power logs (power/) in the folder"
        if isinstance(outcome, BaseException) and has_power:
            energy_reason = f"result_summarizer failed on the power logs: {_exception(outcome)}"
            why = _power_window_problem(folder / "power")
            where = why[0] if why else folder / "power"
            said = f"{energy_reason}{f' ({why[1]})' if why else ''}"
            problems.append(f"{where}: {said}; time to train is scored without the power logs")
            energy_reason = said
            shutil.rmtree(copy / "power", ignore_errors=True)
            _restore_scaling(folder, copy)
            text, outcome = _captured(rs._compute_strong_scaling_scores, desc, str(system_dir), "training",
                                      ruleset, division or "")
        if isinstance(outcome, BaseException):
            problems.append(f"{folder}: result_summarizer failed: {_exception(outcome)}")
            detailed: dict[str, Any] = {}
        else:
            detailed = outcome[1]
        # Rounds before 1.0 had no reference convergence points: the checker refuses them, rightly.
        if "RCP/GBS computation failed" in text and "RCP Checker only supported" not in text:
            problems.append(f"{folder}: result_summarizer's RCP check failed: {_last_error(text)}")

        run_converge = {}
        if run_min:
            from mlperf_logging.rcp_checker import rcp_checker
            for name in run_min:
                _, converged = _captured(rcp_checker.read_submission_file, str(copy / name), ruleset, False)
                if not isinstance(converged, BaseException) and converged[0] == 0 \
                        and _float(converged[1]) is not None:
                    run_converge[name] = _float(converged[1])

    score = _float(detailed.get(f"{benchmark}:time_to_train"))
    energy = _float(detailed.get(f"{benchmark}:Energy"))
    if has_power and energy is None and energy_reason is None:
        energy_reason = "result_summarizer gave no energy (too few runs with power logs)"
    score_reason = None
    if score is None:
        if detailed.get(f"{benchmark}:time_to_train") is not None:
            score_reason = ("result_summarizer's score is negative or not finite (a scaling.json factor, or run "
                            "times, no run can have)")
        elif len(dropped) > max_dropped:
            score_reason = (f"{len(dropped)} runs did not converge or failed the compliance check; MLPerf allows "
                            f"{max_dropped}")
        elif not run_min:
            score_reason = ("no run passed the compliance check" if dropped else "no result_*.txt run could be scored")
        elif len(run_min) + len(dropped) < 2 * max_dropped + 1:
            score_reason = (f"{len(run_min) + len(dropped)} run{'s' * (len(run_min) + len(dropped) != 1)}: the olympic "
                            f"mean drops the {max_dropped} fastest and slowest, so it needs {2 * max_dropped + 1}")
        else:
            score_reason = "result_summarizer gave no score" if detailed or not problems else "result_summarizer failed"
    rcp = detailed.get(f"{benchmark}:RCP") or None
    return BenchmarkScore(
        benchmark, score, score_reason, run_min, dropped,
        _float(detailed.get(f"{benchmark}:rcp_scaling_factor")) or _float(scaling), max_dropped,
        energy if has_power else None, energy_reason if energy is None else None,
        run_energy, run_energy_reason,
        _float(detailed.get(f"{benchmark}:GBS")), _float(detailed.get(f"{benchmark}:samples_to_converge")),
        run_converge, rcp if isinstance(rcp, str) else None, required, problems, tool_version())


#: The largest figure taken from the tools: from hostile logs they return anything (a scaling.json
#: factor of 1e308 times the runs' minutes); no time in minutes, energy in J or sample count is near it.
MAX_TOOL_FIGURE = 1e15


def _float(value: Any) -> float | None:
    """A finite number in [0, MAX_TOOL_FIGURE] the tools returned (from hostile logs they return NaN, inf,
    negatives or 1e308), else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:
            return None
        if math.isfinite(number) and 0 <= number <= MAX_TOOL_FIGURE:
            return number
    return None


def copy_name(name: str) -> str:
    """The name a result log has in the copy: the summarizer reads only result_*.txt."""
    return name if name.startswith("result_") and name.endswith(".txt") else f"result_{name}.txt"


def _copy_folder(source: Path, target: Path, problems: list[str], only: set[str] | None) -> None:
    """The files the summarizer reads: result_*.txt (or the `only` ones, named result_*.txt in the copy),
    scaling.json, power/<run>/*.txt; regular files, capped."""
    target.mkdir(parents=True)
    for entry in sorted(source.iterdir()):
        if only is not None and entry.name in only:
            _copy_file(entry, target / copy_name(entry.name), problems, events_only=True)
        elif only is None and entry.name.startswith("result_") and entry.name.endswith(".txt"):
            _copy_file(entry, target / entry.name, problems, events_only=True)
        elif entry.name == "scaling.json":
            _copy_file(entry, target / entry.name, problems)
    power = source / "power"
    if power.is_dir() and not power.is_symlink():
        for run in sorted(power.iterdir()):
            if run.is_dir() and not run.is_symlink():
                for entry in sorted(run.iterdir()):
                    if entry.name.endswith(".txt"):
                        (target / "power" / run.name).mkdir(parents=True, exist_ok=True)
                        _copy_file(entry, target / "power" / run.name / entry.name, problems)


def _copy_file(source: Path, target: Path, problems: list[str], events_only: bool = False) -> None:
    """A regular file copied, capped; `events_only`: a result log's `:::MLLOG` lines only (all the
    tools read), each at most MAX_EVENT_LINE long (a longer one is left out and said)."""
    try:
        info = os.stat(source)
        if not stat.S_ISREG(info.st_mode):
            problems.append(f"{source}: not a regular file, skipped")
            return
        if info.st_size > MAX_COPY_BYTES:
            problems.append(f"{source}: {info.st_size >> 20} MB is not a result log, skipped")
            return
        fd = os.open(source, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle, open(target, "wb") as out:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                problems.append(f"{source}: not a regular file, skipped")
                return
            if not events_only:
                shutil.copyfileobj(handle, out, 1 << 20)
                return
            long_lines = _copy_events(handle, out)
        if long_lines:
            problems.append(f"{source}: {long_lines} `:::MLLOG` line{'s' * (long_lines != 1)} longer than "
                            f"{MAX_EVENT_LINE:,} characters not given to result_summarizer")
    except OSError as exc:
        problems.append(f"{source}: cannot be read ({exc.strerror or type(exc).__name__}), skipped")


def _copy_events(handle: Any, out: Any) -> int:
    """The lines of `handle` holding `:::MLLOG`, each at most MAX_EVENT_LINE bytes, into `out`; how many
    longer ones were left out. Read a bounded piece at a time: a line without end costs no memory."""
    long_lines, skipping = 0, False
    while True:
        piece = handle.readline(MAX_EVENT_LINE + 1)
        if not piece:
            return long_lines
        ended = piece.endswith(b"\n")
        if skipping:  # the rest of a line already found too long
            skipping = not ended
            continue
        if not ended and len(piece) > MAX_EVENT_LINE:
            long_lines += _TOKEN in piece
            skipping = True
            continue
        if _TOKEN in piece:
            out.write(piece if ended else piece + b"\n")


def _restore_scaling(source: Path, copy: Path) -> None:
    """The submission's own scaling.json again (the failed call's RCP check may have rewritten it)."""
    (copy / "scaling.json").unlink(missing_ok=True)
    if (source / "scaling.json").is_file():
        _copy_file(source / "scaling.json", copy / "scaling.json", [])


def _run_energies(rs: Any, copy: Path, ruleset: str,
                  run_min: dict[str, float]) -> tuple[dict[str, float], dict[str, str]]:
    """Each run's energy alone, with result_summarizer's `_compute_total_power`, so one bad power log
    costs only its own run's figure."""
    from mlperf_logging.compliance_checker.mlp_parser import parse_file

    energy, reasons = {}, {}
    for name in run_min:
        path = str(copy / name)
        loglines, _ = parse_file(path, ruleset)
        _, span = _captured(rs._query_run_start_stop, loglines)
        if isinstance(span, BaseException):
            reasons[name] = _exception(span)
            continue
        start, stop = span
        _, value = _captured(rs._compute_total_power, str(copy), path, stop - start, ruleset)
        if isinstance(value, BaseException):
            why = _power_window_problem(copy / "power" / Path(name).stem)
            reasons[name] = (f"result_summarizer failed on its power log: {_exception(value)}"
                             + (f" ({Path(why[0]).name}: {why[1]})" if why else ""))
        elif _float(value) is not None and value >= 0:
            energy[name] = float(value)
        else:
            reasons[name] = f"result_summarizer's energy is {value!r}"
    return energy, reasons


def _power_window_problem(folder: Path) -> tuple[Path, str] | None:
    """The first power log under `folder` whose measurement window the summarizer divides by and that
    is empty: (file, why). result_summarizer computes energy as the readings' sum times time to train
    over (power_measurement_stop - power_measurement_start), so a stop logged at the start divides by 0."""
    for path in sorted(folder.rglob("*.txt")) if folder.is_dir() else []:
        try:
            log = read_log(path)
        except TbdError:
            continue
        start, stop = log.first("power_measurement_start"), log.first("power_measurement_stop")
        if start is not None and stop is not None and stop.time_ms <= start.time_ms:
            readings = sum(e.key == "power_reading" for e in log.events)
            return path, (f"power_measurement_stop is logged at time_ms {stop.time_ms:.0f}, "
                          f"{'the same as' if stop.time_ms == start.time_ms else 'before'} power_measurement_start, "
                          f"before its {readings} power_reading lines: the measured window is empty")
    return None


def _captured(function: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """Call one of the tools with what it prints and logs captured, in order: (text, result or exception)."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.setLevel(logging.WARNING)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    try:
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy's "Mean of empty slice" on one run, said by score_reason
            try:
                result: Any = function(*args, **kwargs)
            except (Exception, AssertionError) as exc:  # noqa: BLE001 - the tools raise anything on odd logs
                result = exc
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    return buffer.getvalue(), result


def _dropped_reasons(text: str) -> dict[str, str]:
    """result file name -> the lines the tools printed about it before "<error> in <file>"."""
    reasons, pending = {}, []
    for raw in text.splitlines():
        line = raw.strip()
        match = _DROPPED.match(line)
        if match:
            said = [p for p in pending if p and not set(p) <= {"-"} and "Running compliance" not in p]
            text = "; ".join([match["error"], *said])
            reasons[Path(match["file"]).name] = _ECHOED_EVENT.sub(":::MLLOG line", text)[:300]
            pending = []
        elif line and not line.startswith(("NOTICE:", "CRITICAL ERROR", "** CRITICAL", "WARNING: Power")):
            pending.append(line)
    return reasons


def _exception(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _last_error(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:160] if lines else "no message"


def read_system_json(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """A systems/<system>.json (size-capped), or why not."""
    try:
        info = os.stat(path)
    except OSError:
        return None, f"{path} is missing (result_summarizer skips a system without one)"
    if not stat.S_ISREG(info.st_mode) or info.st_size > 1 << 20:
        return None, f"{path} is not a system description (not a regular file under 1 MB)"
    try:
        data = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (OSError, ValueError, RecursionError) as exc:
        return None, f"{path} is not JSON ({type(exc).__name__})"
    if not isinstance(data, dict):
        return None, f"{path} is not a JSON object"
    return data, None


#: The target in a closed-division eval_accuracy rule: "v['value'] >= 0.7590", "(v['value'] <= 2.69)".
_TARGET_RULE = re.compile(r"v\['value'\]\s*(>=|<=)\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)")


def quality_target(benchmark: str, ruleset: str) -> tuple[float | None, str | None]:
    """The quality target of a benchmark, read from mlperf-logging's compliance rule for eval_accuracy
    (training_<ruleset>/closed_<benchmark>.yaml): (value, the rule as written) or (None, None)."""
    import mlperf_logging.compliance_checker as checker

    path = Path(checker.__file__).parent / f"training_{ruleset}" / f"closed_{benchmark}.yaml"
    try:
        text = path.read_text()
    except OSError:
        return None, None
    at = text.find("NAME:  eval_accuracy")
    found = _TARGET_RULE.search(text, at) if at >= 0 else None
    if found is None:
        return None, None
    return float(found[2]), f"eval_accuracy {found[1]} {found[2]} (mlperf-logging training_{ruleset}/{path.name})"
