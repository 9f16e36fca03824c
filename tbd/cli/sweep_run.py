"""The shell of `tbd sweep`: run one `tbd profile` run per batch, keep going past failures, write the sweep.

Each point is `orchestrate.profile_run` on its own run directory `DIR/b<batch>/`, without the
OOM halving probe (the max search bisects by itself), run by a `PointRunner` (tbd/cli/sweep_executors.py):
here one after another (the default), or on workers (Ray tasks, a submitit job array), a list
sweep's points all at once and the max search one at a time. A point that runs out of memory or
fails is recorded with its one-line reason and the sweep goes on; Ctrl-C (or SIGTERM) stops it: the
running point is interrupted as `tbd profile` would be (its partial profile kept; on workers, what
still runs is cancelled), the points done so far are written and the command exits 130 (143).
sweep.json is rewritten after every point, so even a sweep killed outright leaves the points it finished.

Files in DIR: sweep.json (`Sweep.to_dict()`), sweep.csv, figures/ (when tbd.reports.figures.saving is
installed), the points' run directories (a point whose worker ran on another machine: its
profile.json only, and a note in sweep.json says where its raw records stayed) and, with
--executor submitit, submitit/ (the jobs' pickles and logs).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ContextManager

from tbd.analysis.sweep_plan import (
    FAILED,
    LIST,
    MAX,
    OOM,
    doubling_batches,
    failed_point,
    fits,
    forecast,
    make_sweep,
    next_batch,
    profile_device,
)
from tbd.analysis.sweep_plan import sweep_point as point_from_profile
from tbd.cli.frameworks import planned_device
from tbd.cli.orchestrate import ProgressSink, prepare_out_dir
from tbd.cli.signals import interrupt_handler
from tbd.cli.sweep_executors import DISK_FULL, INTERRUPTED, LocalRunner, PointOutcome, PointRunner
from tbd.core import rundir
from tbd.core.errors import OutOfMemoryError, ResultFormatError, WorkloadError
from tbd.core.records import RunSpec
from tbd.core.run_ownership import DirClaim
from tbd.core.sweep_result import Sweep, SweepPoint
from tbd.core.targets import SWEEP_JSON, Kind, read_result
from tbd.reports.renderers import SweepRenderer, save
from tbd.reports.sweep_table import forecast_line, plan_line, point_line

SWEEP_CSV = "sweep.csv"
FIGURES = "figures"


@dataclass(frozen=True)
class SweepPlan:
    """Which batches to run: `batches` exactly, in order; or (batches None) the max search."""

    batches: tuple[int, ...] | None
    start: int = 1  # max search: the first batch
    cap: int = 4096  # max search: no batch above it is tried

    @property
    def mode(self) -> str:
        return LIST if self.batches is not None else MAX


@dataclass(frozen=True)
class SweepOutcome:
    """A finished (or interrupted) sweep, what was written, and the exit code the command returns."""

    sweep: Sweep
    exit_code: int  # 0; 130/143 interrupted; 5 disk full; 3/4 when no point ran at all
    figures: list[Path] = field(default_factory=list)
    figures_note: str | None = None  # why no figures were written


def default_sweep_dir(spec: RunSpec, root: str | os.PathLike = "runs") -> Path:
    """runs/sweep-<model>-<framework>-<device>-<YYYYmmdd-HHMMSS>, like a run directory's name."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    device = planned_device(spec.device).replace(":", "")  # "auto" without a GPU driver: "cpu"
    return Path(root) / f"sweep-{spec.model}-{spec.framework}-{device}-{stamp}"


def new_sweep_dir(spec: RunSpec, root: str | os.PathLike = "runs") -> Path:
    """A new, empty sweep directory named as `default_sweep_dir`, created now; -2, -3, ... when taken."""
    return rundir.unique_dir(default_sweep_dir(spec, root))


def prepare_sweep_dir(out: Path, force: bool) -> DirClaim:
    """Create `out` for a new sweep, locked and marked as tbd's until the returned claim is released
    (`with prepare_sweep_dir(...)`, around the whole sweep); a non-empty one is refused unless `force`
    and tbd wrote all of it (its points' run directories by their own markers).

    Raises:
        UsageError: a control character in the path, `out` is a file, another tbd holds it (named),
            a non-empty folder not asked to be replaced, or (even with `force`) a folder holding
            anything tbd did not write: tbd never empties a folder it did not write.
    """
    return prepare_out_dir(out, force, SWEEP_JSON, "sweep")


def load_sweep(path: str | os.PathLike) -> Sweep:
    """Load DIR/sweep.json (or the file itself), validated.

    Raises:
        ResultFormatError: no such file, not a regular file, far too large, not JSON, or not a
            valid sweep (the key named), in one line starting with the path.
    """
    path = Path(path)
    if path.is_dir():
        path = path / SWEEP_JSON
    hint = "give a sweep directory written by `tbd sweep` or its sweep.json"
    data = read_result(path, Kind.SWEEP_JSON, hint)  # its size cap with the other results' (core.targets)
    try:
        return Sweep.from_dict(data)
    except ResultFormatError as exc:
        text = str(exc)
        raise ResultFormatError(text if text.startswith(str(path)) else f"{path}: {text}", hint=hint) from None


class _StopRequests:
    """SIGINT/SIGTERM between points: recorded, so the sweep stops before its next point.

    While a point runs here, `profile_run` installs its own handlers (forwarding to the child) and
    puts these back afterwards; while points run on workers, a remote runner reads `received` and
    cancels them. A second signal raises KeyboardInterrupt: the user insists.
    """

    def __init__(self) -> None:
        self.received: int | None = None

    def _handle(self, signum: int, frame) -> None:
        if self.received is not None:
            raise KeyboardInterrupt
        self.received = signum

    @contextlib.contextmanager
    def installed(self) -> Iterator["_StopRequests"]:
        with interrupt_handler(self._handle):
            yield self


@dataclass(frozen=True)
class _Stop:
    """Why the sweep ends before its plan does."""

    note: str
    exit_code: int


def _settle(outcome: PointOutcome, out: Path, remote: bool
            ) -> tuple[SweepPoint | None, tuple[str | None, str | None] | None, _Stop | None, str | None]:
    """One point's outcome as the sweep records it: its point (None if it was interrupted before
    measuring anything), the (device, device name) its profile names, why the sweep must stop after
    it (here, in this process, only), and a note on where a remote point's raw records stayed."""
    batch = outcome.batch
    run_dir, note = _land(outcome, out)
    if outcome.failure == OOM:
        return failed_point(batch, OOM, outcome.reason or "out of memory", run_dir), None, None, note
    if outcome.failure == INTERRUPTED and not remote:
        return None, None, _Stop(f"interrupted at batch {batch}, before it measured anything", outcome.exit_code), note
    if outcome.failure == DISK_FULL and not remote:  # every later point would fail the same way
        return (failed_point(batch, FAILED, outcome.reason or "no space left", run_dir), None,
                _Stop(f"stopped at batch {batch}: no space left on the device", outcome.exit_code), note)
    if outcome.failure is not None or outcome.profile is None:  # a worker's interrupt or full disk is its own
        return failed_point(batch, FAILED, outcome.reason or "the run failed", run_dir), None, None, note
    point = point_from_profile(batch, outcome.profile, run_dir)
    stop = _Stop(f"interrupted at batch {batch} (its partial profile is kept)", outcome.exit_code) \
        if outcome.exit_code and not remote else None
    return point, profile_device(outcome.profile), stop, note


def _land(outcome: PointOutcome, out: Path) -> tuple[str | None, str | None]:
    """The point's run directory in `out` ("b64", None if there is none) and, for a point whose
    worker ran elsewhere, a note saying where its raw records stayed; its profile.json is written here."""
    target = out / f"b{outcome.batch}"
    if outcome.host is None:
        return (target.name if target.is_dir() else None), None
    here = outcome.run_dir is not None and target.is_dir() and Path(outcome.run_dir) == target.resolve()
    if outcome.profile is not None and not (here and (target / rundir.PROFILE).is_file()):
        target.mkdir(exist_ok=True)
        rundir.atomic_write_json(target / rundir.PROFILE, outcome.profile.to_dict())
        return target.name, (f"batch {outcome.batch} ran on {outcome.host}: its profile.json was copied to "
                             f"{target.name}/, its raw records (trace, log) stayed in {outcome.run_dir} there")
    if here:
        return target.name, None
    if outcome.kept:
        return None, f"batch {outcome.batch} ran on {outcome.host}: its log stayed in {outcome.run_dir} there"
    return None, None


def _planned(plan: SweepPlan, points: dict[int, SweepPoint]) -> int | None:
    if plan.batches is not None:
        return next((b for b in plan.batches if b not in points), None)
    return next_batch({b: fits(p) for b, p in points.items()}, plan.start, plan.cap)


def _due(plan: SweepPlan, points: dict[int, SweepPoint], tried: set[int], parallel: bool) -> list[int]:
    """The batches to hand the runner next: a list sweep's remaining ones when it runs them in
    parallel, else the one next batch (the max search always: each next batch depends on the last)."""
    if parallel and plan.batches is not None:
        return [b for b in plan.batches if b not in tried]
    batch = _planned(plan, points)
    return [] if batch is None else [batch]


def run_sweep(base: RunSpec, plan: SweepPlan, out: Path, *, announce: Callable[[str], None],
              progress: Callable[[], ContextManager[ProgressSink]], runner: PointRunner | None = None
              ) -> SweepOutcome:
    """Run the plan's points in `out` (an empty directory), writing sweep.json after each.

    Args:
        base: the run spec every point shares; its batch is replaced by each point's.
        plan: the batches, or the max search. out: the sweep directory.
        announce: takes one progress line per point ("batch 64: running").
        progress: makes the progress sink (a context manager) for each point's run.
        runner: where the points run (tbd/cli/sweep_executors.py); default here, one after another.
    Returns:
        the sweep with the exit code: 0 when it ran to its end with at least one point that ran;
        130/143 interrupted, 5 disk full, else 3 (every point out of memory) or 4 (none ran).
    """
    runner = runner or LocalRunner(progress)
    points: dict[int, SweepPoint] = {}
    tried: set[int] = set()
    device: tuple[str | None, str | None] = (None, None)
    stop: _Stop | None = None
    last: int | None = None  # the batch run last
    requests = _StopRequests()
    remote_notes: list[str] = []

    def sweep(notes: list[str]) -> Sweep:
        return make_sweep(model=base.model, framework=base.framework, device=device[0] or base.device,
                          device_name=device[1], size=base.size, mode=plan.mode, points=points.values(),
                          memory_limit_bytes=base.memory_limit_bytes,
                          cap=plan.cap if plan.mode == MAX else None, notes=notes + remote_notes)

    def unfinished(batches: list[int]) -> str:
        missing = [str(b) for b in batches if b not in points]
        return f"; cancelled batch {', '.join(missing)}" if missing else ""

    def outlook(point_s: float | None) -> str | None:
        ran = {b: fits(p) for b, p in points.items()}
        return forecast_line(forecast(plan.batches, ran, plan.start, plan.cap, point_s))

    announce(plan_line(list(plan.batches) if plan.batches is not None else None,
                       doubling_batches(plan.start, plan.cap), forecast(plan.batches, {}, plan.start, plan.cap)))
    due: list[int] = []
    try:
        with requests.installed():
            while due := _due(plan, points, tried, runner.parallel):
                if requests.received is not None:
                    stop = _Stop(f"interrupted before batch {due[0]}", 128 + requests.received)
                    break
                if not runner.remote:
                    announce(f"batch {due[0]}: running")
                elif not tried and (where := runner.describe(len(due), plan.mode == MAX)):
                    announce(where)
                last = due[0]
                tried.update(due)
                started = time.monotonic()
                for outcome in runner.submit([replace(base, batch=b) for b in due], out,
                                             stopped=lambda: requests.received is not None):
                    # One point at a time (here, or the max search on workers): its run time, start to profile.
                    run_s = time.monotonic() - started if len(due) == 1 else None
                    point, named, stop, note = _settle(outcome, out, runner.remote)
                    if point is not None:
                        points[outcome.batch] = point = replace(point, run_s=run_s)
                        announce(point_line(point))
                        if stop is None and len(due) == 1 and (line := outlook(run_s)):
                            announce(line)
                    if note:
                        remote_notes.append(note)
                    if named and named[0] and device[0] is None:
                        device = named
                    if stop is not None:
                        break
                    save(SweepRenderer(sweep([
                        f"incomplete: written after batch {outcome.batch}; if this note remains, the sweep was killed"
                    ])), "json", out / SWEEP_JSON)
                if stop is not None:
                    break
                if runner.remote and requests.received is not None:
                    stop = _Stop("interrupted" + unfinished(due), 128 + requests.received)
                    break
                for batch in due:  # a runner that lost a point: recorded, never handed out again
                    points.setdefault(batch, failed_point(batch, FAILED, "the executor returned no result for it"))
            else:
                if requests.received is not None:  # a signal during the last point's analysis
                    stop = _Stop("interrupted after the last batch", 128 + requests.received)
    except KeyboardInterrupt:  # a second signal between points, or a third one during a point
        where = unfinished(due) if runner.remote else (f" at batch {last}" if last is not None else "")
        stop = _Stop("interrupted" + where, 128 + (requests.received or signal.SIGINT))
    result = sweep([stop.note] if stop else [])
    rendered = SweepRenderer(result)
    save(rendered, "json", out / SWEEP_JSON)
    save(rendered, "csv", out / SWEEP_CSV)
    figures, why = _write_figures(rendered, out / FIGURES)
    return SweepOutcome(result, stop.exit_code if stop else _exit_code(result), figures, why)


def _exit_code(sweep: Sweep) -> int:
    if sweep.largest_fitting_batch is not None or not sweep.points:
        return 0
    return OutOfMemoryError.exit_code if all(p.status == OOM for p in sweep.points) else WorkloadError.exit_code


def _write_figures(rendered: SweepRenderer, folder: Path) -> tuple[list[Path], str | None]:
    """The sweep's figures in `folder`, or no figures and why (the sweep itself is already written)."""
    try:
        return save(rendered, "figures", folder), None
    except Exception as exc:  # noqa: BLE001 - a figure that cannot be drawn must not cost the sweep a traceback
        return [], f"no figures: {type(exc).__name__}: {exc}"
