"""`tbd train`: N runs of a suite model on its real-data task, each to the quality target, logged the MLPerf way.

Each run (seed `seed + i`) is timed and logged as MLPerf Training defines it, with mlperf-logging's
mllog (profilers/mlperf/writer.py): init_start/init_stop around building the model and loading the
data (untimed), run_start, then per epoch epoch_start/epoch_stop (with samples_count) and
eval_start/eval_accuracy/eval_stop on the held-out split, until the target is reached (run_stop
status "success") or `max_epochs` pass ("aborted"). The run directory holds:

    results/<system>/<model>/result_N.txt   one MLPerf log per run
    dawnbench/<model>_run<N>.json, .tsv     the same run as a DAWNBench entry (epoch, hours, accuracy)
    tta.json                                the TtaResult (`tbd report` renders it again)

The figures come from reading those logs back with the same reader and analysis as `tbd tta`
(profilers/mlperf/log.py, analysis/mlperf_runs.py), so what tbd reports of its own runs is what it
would report of anyone's. Over the runs, the score is MLPerf's olympic mean, computed by
mlperf-logging's own `_compute_olympic_average` (a run that did not converge is dropped as the
slowest; two are a failed score).
"""

from __future__ import annotations

import contextlib
import dataclasses
import platform
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tbd.analysis.mlperf_runs import run_timeline
from tbd.analysis.time_to_accuracy import olympic_verdicts, spread, summarize_runs, with_ratios
from tbd.cli.api import profile_step
from tbd.cli.signals import interrupt_handler
from tbd.core import rundir
from tbd.core.tta_result import TtaResult, TtaRun, TtaSystem, TtaTable
from tbd.models.tasks.catalog import SAMPLES_PER_STEP, TRAIN_STEP, TaskSpec
from tbd.profilers.dawnbench.writer import write_entry
from tbd.profilers.energy import meter_for
from tbd.profilers.framework_hook import gpu_index
from tbd.profilers.mlperf import scoring
from tbd.profilers.mlperf.log import read_log
from tbd.profilers.mlperf.writer import RunLog

if TYPE_CHECKING:
    import torch

SYSTEM = "local"
#: MLPerf Training drops this many runs at each end of the olympic mean (all benchmarks but unet3d).
MAX_DROPPED = 1


@dataclasses.dataclass(frozen=True)
class TrainOptions:
    model: str
    spec: TaskSpec
    runs: int
    batch: int
    max_epochs: int
    target: float
    size: str
    seed: int
    cost_per_hour: float | None
    out: Path
    device: str = "auto"  # as `tbd profile --device`: auto, cpu, cuda or cuda:N
    profile: bool = True  # also time one training step with tbd's profiler (the stable-phase throughput)


def train(options: TrainOptions, progress: Callable[[str], None] | None = None) -> TtaResult:
    """Run the N runs into `options.out` and return their TtaResult (also saved as tta.json).

    tta.json is written (atomically) after each finished run, marked partial until the last, so a
    SIGKILL keeps the runs already finished; the run it cut short keeps its lines as
    `.result_N.txt.partial`. A Ctrl-C, SIGTERM or SIGHUP ends the current run as "aborted" (run_stop
    with reason "interrupted"; its log kept, a note on it) and the result holds the runs done so far;
    KeyboardInterrupt is raised again once the result is saved.
    """
    bench = options.out / "results" / SYSTEM / options.model
    bench.mkdir(parents=True, exist_ok=True)
    (options.out / "dawnbench").mkdir(exist_ok=True)
    done: dict[int, _RunDone] = {}
    interrupted, profiled = False, Profiled(None, None, "interrupted")
    device = _device(options.device)
    with _stops_as_interrupt() as stops:
        try:
            for i in range(options.runs):
                if progress is not None:
                    progress(f"run {i + 1} of {options.runs}")
                done[i] = run = _one_run(options, device, i, bench / f"result_{i}.txt", stops.signal_name)
                write_entry(options.out / "dawnbench" / f"{options.model}_run{i}", {
                    "author": "tbd train", "model": options.model, "hardware": _hardware(device),
                    "framework": "PyTorch", "timestamp": time.strftime("%Y-%m-%d"),
                    **({"costPerHour": options.cost_per_hour} if options.cost_per_hour is not None else {})},
                    run.rows, options.spec.dawnbench_column)
                if run.interrupted:
                    raise KeyboardInterrupt
                if i + 1 < options.runs:  # the runs so far, for a SIGKILL to leave behind
                    _save(options, device, done, Profiled(None, None, "not yet measured: runs still going"),
                          f"partial: {i + 1} of {options.runs} runs finished (tbd train was still running, or killed)")
            if progress is not None and options.profile:
                progress("profiling one training step (stable phase)")
            profiled = _profiled(options, device) if options.profile else \
                Profiled(None, None, "not asked (--no-profile)")
        except KeyboardInterrupt:
            interrupted = True
        stops.disarm()  # a second signal while the result is saved is recorded, not raised
        result = _save(options, device, done, profiled,
                       f"interrupted ({stops.signal_name()}): the runs done so far" if interrupted else None)
    if interrupted:
        raise TrainInterrupted(stops.received or signal.SIGINT)
    return result


class TrainInterrupted(KeyboardInterrupt):
    """`train` stopped by a signal once the runs so far were saved; `signum` the first one (SIGINT for Ctrl-C)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = int(signum)


def _save(options: TrainOptions, device: torch.device, done: dict[int, _RunDone], profiled: Profiled,
          partial: str | None) -> TtaResult:
    """The TtaResult of the runs in `done` (read back from their logs), written atomically to tta.json."""
    runs, latencies = [], []
    for i, run in sorted(done.items()):
        entry = _run(run.path, run_timeline(read_log(run.path)), run.joules, run.energy_reason)
        if run.interrupted and entry.status != "success":
            entry = dataclasses.replace(entry, notes=[*entry.notes, "interrupted: this run was cut short"])
        runs.append(entry)
        if run.latency_s is not None:
            latencies.append(run.latency_s)
    result = _result(options, _hardware(device), runs, latencies, partial, profiled)
    rundir.atomic_write_json(options.out / "tta.json", result.to_dict())
    return result


class _Stops:
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt once (the first), then are only recorded."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.armed = True

    def handle(self, signum: int, frame) -> None:
        self.received = self.received or signum
        if self.armed:
            self.armed = False
            raise KeyboardInterrupt

    def disarm(self) -> None:
        self.armed = False

    def signal_name(self) -> str:
        return {signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}.get(self.received, "Ctrl-C")


@contextlib.contextmanager
def _stops_as_interrupt() -> Iterator[_Stops]:
    stops = _Stops()
    with interrupt_handler(stops.handle):
        yield stops


@dataclasses.dataclass(frozen=True)
class _RunDone:
    path: Path
    rows: list[tuple[int, float, float]]  # DAWNBench's TSV: epoch, hours since run_start, the metric (percent
    # for a fraction)
    latency_s: float | None  # inference latency per item, for a run that reached the target
    joules: float | None
    energy_reason: str  # what joules covers, or why it is None
    interrupted: bool


@dataclasses.dataclass(frozen=True)
class Profiled:
    samples_per_s: float | None
    spread_pct: float | None
    reason: str | None


def _profiled(options: TrainOptions, device: torch.device) -> Profiled:
    """tbd's profiler on one training step of a fresh run (seed SEED): the same model, data and batch as the
    runs, warm-up found and timed as `tbd profile` times it, so the epochs' throughput can be set beside it."""
    task = options.spec.build(options.batch, options.seed, options.size, device)
    step = getattr(task, TRAIN_STEP, None)
    if step is None:
        return Profiled(None, None, f"the {options.spec.task} task offers no single training step to profile")
    profile = profile_step(step, samples_per_step=getattr(task, SAMPLES_PER_STEP, options.batch), model=getattr(task, "model", None),
                           optimizer=getattr(task, "optimizer", None), name=f"{options.model}-{options.spec.task}",
                           device=str(device), trace_iterations=0, max_seconds=120.0)
    throughput = profile.metrics.throughput
    return Profiled(throughput.value, throughput.spread_pct, throughput.reason)


def _device(requested: str) -> torch.device:
    """The torch.device `requested` names, as profilers.pytorch.hook.resolve_device. torch is imported here, not at
    the top: every tbd command imports this module (tbd.cli.main), and torch would add ~1-2 s and ~200 MB to each."""
    import torch

    index = gpu_index(requested, torch.cuda.device_count() if torch.cuda.is_available() else 0, "PyTorch",
                      "install a CUDA build of torch")
    return torch.device("cpu") if index < 0 else torch.device("cuda", index)


def _hardware(device: torch.device) -> str:
    if device.type == "cuda":
        import torch

        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine()


def _one_run(options: TrainOptions, device: torch.device, index: int, path: Path,
             why: Callable[[], str]) -> _RunDone:
    log = RunLog(path)
    meter = meter_for(-1 if device.type == "cpu" else int(device.index))
    joules = None
    seed = options.seed + index
    rows: list[tuple[int, float, float]] = []
    status, interrupted, latency = "aborted", False, None
    try:
        for key, value in (("submission_org", "tbd"), ("submission_platform", platform.node() or SYSTEM),
                           ("submission_division", "open"), ("submission_status", "research"),
                           ("submission_benchmark", options.model)):
            log.event(key, value)
        log.event("cache_clear", True)
        log.start("init_start")
        log.event("seed", seed)
        task = options.spec.build(options.batch, seed, options.size, device)
        log.event("global_batch_size", options.batch)
        log.event("train_samples", task.train_samples)
        log.event("eval_samples", task.eval_samples)
        for key, value in task.hyperparameters.items():
            log.event(key, value)
        log.end("init_stop")
        log.start("run_start")
        meter.start()
        started = time.monotonic()
        samples = 0
        for epoch in range(1, options.max_epochs + 1):
            log.start("epoch_start", epoch_num=epoch)
            samples += task.train_epoch()
            log.end("epoch_stop", epoch_num=epoch, samples_count=samples)
            log.start("eval_start", epoch_num=epoch)
            quality = task.evaluate()
            log.event("eval_accuracy", quality, epoch_num=epoch)
            log.end("eval_stop", epoch_num=epoch)
            rows.append((epoch, (time.monotonic() - started) / 3600.0,
                         quality * 100.0 if options.spec.fraction else quality))
            if options.spec.reached(quality, options.target):
                status = "success"
                break
        joules = meter.stop()
        log.end("run_stop", status=status)
    except KeyboardInterrupt:
        log.end("run_stop", status="aborted", reason=f"interrupted ({why()})")
        interrupted = True
    finally:
        log.close()
    if status == "success":
        try:
            latency = task.latency_per_item_s()  # after run_stop: DAWNBench times inference apart
        except KeyboardInterrupt:
            interrupted = True  # the run itself is complete; only its inference latency is lost
    why = meter.scope if joules is not None else meter.reason or "interrupted before run_stop"
    return _RunDone(path, rows, latency, joules, why, interrupted)


def _run(path: Path, timeline, joules: float | None, energy_reason: str | None) -> TtaRun:
    minutes = timeline.run_s / 60.0 if timeline.status == "success" and timeline.run_s is not None else None
    return TtaRun(
        file=str(path), used=minutes is not None, dropped_reason=None, status=timeline.status, score=minutes,
        score_reason=None if minutes is not None else f"did not reach the target (run_stop: {timeline.status})",
        to_converge=timeline.epochs_to_converge, epochs_to_converge=timeline.epochs_to_converge,
        samples_to_converge=timeline.samples_to_converge, samples_reason=timeline.samples_reason,
        init_s=timeline.init_s, run_s=timeline.run_s, eval_s=timeline.eval_s, train_s=timeline.train_s,
        energy_j=joules, energy_reason=energy_reason, throughput=timeline.throughput,
        accuracy=timeline.accuracy, notes=timeline.notes)


def _result(options: TrainOptions, hardware: str, runs: list[TtaRun], latencies: list[float],
            partial: str | None, profiled: Profiled) -> TtaResult:
    from mlperf_logging.result_summarizer import result_summarizer as rs

    run_min = {Path(r.file).name: r.score for r in runs if r.score is not None}
    dropped = {Path(r.file).name: r.score_reason or "did not converge" for r in runs if r.score is None}
    score, reason = None, None
    if len(dropped) > MAX_DROPPED:
        reason = f"{len(dropped)} runs did not reach the target; MLPerf allows {MAX_DROPPED}"
    elif len(runs) >= 2 * MAX_DROPPED + 1:
        score = rs._compute_olympic_average(list(run_min.values()), len(dropped), MAX_DROPPED)
    elif run_min:
        reason = f"{len(runs)} run{'s' * (len(runs) != 1)}: the olympic mean needs {2 * MAX_DROPPED + 1} (--runs)"
    else:
        reason = "no run reached the target"
    verdicts, note = olympic_verdicts(run_min, dropped, MAX_DROPPED, 1.0, score)
    runs = [dataclasses.replace(r, used=verdicts[Path(r.file).name].used if score is not None else r.used,
                                dropped_reason=verdicts[Path(r.file).name].reason if score is not None
                                else r.score_reason) for r in runs]
    converged = [r for r in runs if r.score is not None]
    times = spread([r.run_s for r in converged])
    # The terms of the time to target over the runs the score counts (all converged ones without a score).
    counted = [r for r in converged if r.used] or converged
    summary = summarize_runs(counted)
    time_s = score * 60.0 if score is not None else None
    without_eval = spread([r.run_s - r.eval_s for r in counted if r.eval_s is not None])
    notes = [n for n in (note,) if n]
    if score is None and times.mean is not None:
        notes.append(f"mean of the {len(converged)} converged run{'s' * (len(converged) != 1)}: "
                     f"{times.mean / 60:.4g} min (not an MLPerf score: {reason})")
    if partial:
        notes.append(partial)
    energies = [r.energy_j for r in counted]
    energy = spread(energies).mean if counted and None not in energies else None
    energy_reason = next((r.energy_reason for r in counted if (r.energy_j is None) == (energy is None)),
                         "no run reached the target")
    samples_to_target = spread([r.samples_to_converge for r in counted if r.samples_to_converge is not None]).mean
    spec = options.spec
    system = TtaSystem(
        label=f"tbd train {options.model} (batch {options.batch}, {options.size})", path=str(options.out),
        submitter="tbd", system=SYSTEM, division="open", availability="research", framework="PyTorch",
        accelerator=hardware or None, accelerator_count=None,
        host_processors=None, score=score, score_unit="min", score_reason=reason, time_to_target_s=time_s,
        accelerator_time_s=None, energy_j=energy, energy_reason=energy_reason,
        cost_usd=time_s / 3600.0 * options.cost_per_hour if time_s is not None and options.cost_per_hour else None,
        cost_per_hour=options.cost_per_hour,
        cost_reason=None if options.cost_per_hour else "no --cost-per-hour",
        latency_ms=spread(latencies).mean * 1000.0 if latencies else None, cost_per_item_usd=None,
        accuracy=None, epochs_to_target=spread([r.epochs_to_converge for r in counted
                                                if r.epochs_to_converge is not None]).mean,
        to_converge=None, converge_unit=None, global_batch_size=float(options.batch), rcp=None,
        rcp_scaling_factor=None, runs_required=None, runs=runs, ratio_time=1.0 if time_s else None,
        ratio_accelerator_time=None, ratio_energy=None, ratio_cost=None, notes=notes,
        init_s=summary.init_s, train_s=summary.train_s, eval_s=summary.eval_s, samples_per_s=summary.samples_per_s,
        time_min_s=times.minimum, time_median_s=times.median, time_max_s=times.maximum, time_cv_pct=times.cv_pct,
        time_without_eval_s=without_eval.mean,
        samples_to_target=samples_to_target,
        energy_per_sample_j=energy / samples_to_target if energy is not None and samples_to_target else None,
        profiled_samples_per_s=profiled.samples_per_s, profiled_spread_pct=profiled.spread_pct,
        profiled_train_s=samples_to_target / profiled.samples_per_s
        if samples_to_target and profiled.samples_per_s else None,
        profiled_reason=profiled.reason)
    table = TtaTable(source="tbd", benchmark=f"{options.model} on {spec.task}", ruleset=None, ruleset_source=None,
                     metric=spec.metric, target=options.target,
                     target_source=f"{spec.metric} {spec.comparison} {options.target:g} on the held-out split "
                                   f"({spec.data})",
                     systems=[system], notes=[])
    return TtaResult(sources=[str(options.out)], tables=[table], problems=[],
                     tool={"mlperf-logging": scoring.tool_version()})



def train_sweep(options: TrainOptions, batches: tuple[int, ...],
                progress: Callable[[str], None] | None = None) -> TtaResult:
    """`tbd sweep MODEL --tta`: `train` at each batch (options.out/b<batch>), one table whose systems are
    the batches, ratios to the first; saved as options.out/tta.json.

    A Ctrl-C keeps the batches done (and the runs of the one cut short) and is raised again.
    """
    systems, table = [], None
    interrupted = False
    for batch in batches:
        point = dataclasses.replace(options, batch=batch, out=options.out / f"b{batch}")
        try:
            result = train(point, progress=(lambda what, b=batch: progress(f"batch {b}: {what}"))
                           if progress is not None else None)
        except KeyboardInterrupt:
            interrupted = True
            result = TtaResult.from_dict(rundir.read_result_json(point.out / "tta.json", "tbd train result",
                                                                 64 << 20, ""))
        (table,) = result.tables
        systems.append(dataclasses.replace(table.systems[0], label=f"batch {batch}"))
        if interrupted:
            break
    assert table is not None  # batches is never empty
    swept = dataclasses.replace(table, benchmark=f"{table.benchmark}, batch sweep", systems=with_ratios(systems),
                                notes=["interrupted: the batches done so far"] if interrupted else [])
    result = TtaResult(sources=[str(options.out)], tables=[swept], problems=[],
                       tool={"mlperf-logging": scoring.tool_version()})
    rundir.atomic_write_json(options.out / "tta.json", result.to_dict())
    if interrupted:
        raise KeyboardInterrupt
    return result
