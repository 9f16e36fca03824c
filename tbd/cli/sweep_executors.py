"""Where `tbd sweep` runs its points: here one after another, as Ray tasks, or as a Slurm job array.

Every executor runs the same point code, `run_point`: `orchestrate.profile_run` on the point's run
directory `DIR/b<batch>/`, its failures turned into a `PointOutcome` (out of memory, a crash, with the
one-line reason `tbd profile` would print). A `PointRunner` takes the points' run specs and yields
their outcomes as they finish; the sweep (tbd/cli/sweep_run.py) turns them into points and writes the sweep.

- `LocalRunner`: this process, one point at a time, with progress bars (today's `tbd sweep`).
- `RayRunner`: one Ray task per point (`num_cpus` = the run's threads, `num_gpus=1` on CUDA).
- `SubmititRunner`: one job per point in a submitit job array (Slurm; without Slurm, local processes).

A remote point runs `run_remote_point` on a worker, which may be another machine: it returns the
profile as profile.json's content (a plain dict, not a pickled object), and the sweep writes it under
DIR/b<batch>/ when the worker's run directory is not that folder. The driver's Ctrl-C cancels what
is still running (a running point is interrupted as `tbd profile` would be, and its partial profile
is kept if it comes back within `CANCEL_GRACE_S`).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ContextManager, Protocol

from tbd.analysis.sweep_plan import FAILED, OOM
from tbd.cli.frameworks import planned_device
from tbd.cli.orchestrate import ProgressSink, profile_run
from tbd.core.errors import DiskFullError, InterruptedRun, OutOfMemoryError, ResultFormatError, TbdError, UsageError
from tbd.core.profile_result import Profile
from tbd.core.records import RunSpec
from tbd.profilers.ceilings import reusable_ceilings

EXECUTORS = ("local", "ray", "submitit")
INTERRUPTED, DISK_FULL = "interrupted", "disk_full"  # a point's failures besides OOM and FAILED
#: After the driver's Ctrl-C, how long cancelled points may take to come back with a partial profile.
CANCEL_GRACE_S = 30.0
_POLL_S = 0.25
#: --executor submitit without --timeout-min: the run's --max-seconds plus this, for the framework's
#: import, the trace window, the GEMM ceiling and the copy bandwidth (a minute or two on a CPU).
TIMEOUT_MARGIN_MIN = 15


@dataclass(frozen=True)
class PointOutcome:
    """What one point's run gave: its profile, or why there is none."""

    batch: int
    profile: Profile | None = None  # complete, or partial (then exit_code is 130/143)
    exit_code: int = 0  # the run's exit code: 0, 130/143 interrupted, 5 disk full
    failure: str | None = None  # OOM, FAILED, INTERRUPTED (nothing measured) or DISK_FULL; None with a profile
    reason: str | None = None  # the failure's one line
    kept: bool = False  # the run directory holds what the point gathered (a failed point's log)
    host: str | None = None  # the worker's host name; None: it ran in this process
    run_dir: str | None = None  # the run directory on `host` (absolute)


def run_point(spec: RunSpec, run_dir: Path, progress: Callable[[], ContextManager[ProgressSink]],
              ceilings: dict | None = None) -> PointOutcome:
    """Run one batch in `run_dir` without the OOM halving probe (the max search bisects by itself);
    `ceilings`: what the sweep's first point lends it (profilers/ceilings.py, `reusable_ceilings`)."""
    batch = spec.batch
    assert batch is not None  # the sweep always sets it
    try:
        with progress() as sink:
            outcome = profile_run(spec, run_dir, sink, probe_oom=False, ceilings=ceilings)
    except OutOfMemoryError as exc:  # its hint ("try a smaller --batch") is what the sweep does anyway
        return PointOutcome(batch, failure=OOM, reason=str(exc), kept=run_dir.is_dir())
    except InterruptedRun as exc:
        return PointOutcome(batch, failure=INTERRUPTED, reason=str(exc), exit_code=exc.exit_code)
    except DiskFullError as exc:
        return PointOutcome(batch, failure=DISK_FULL, reason=exc.one_line(), exit_code=exc.exit_code,
                            kept=run_dir.is_dir())
    except TbdError as exc:
        return PointOutcome(batch, failure=FAILED, reason=exc.one_line(), kept=run_dir.is_dir())
    return PointOutcome(batch, profile=outcome.profile, exit_code=outcome.exit_code, kept=True)


def run_remote_point(spec: dict, out: str) -> dict:
    """A worker's point: `run_point` on OUT/b<batch> (a temporary folder where OUT cannot be made).

    Args:
        spec: the point's `RunSpec.to_dict()`. out: the sweep directory, absolute, as the driver names it.
    Returns:
        the outcome as plain data (`outcome_to_wire`): profile.json's content, not a pickled Profile.
    """
    run_spec = RunSpec.from_dict(spec)
    name = f"b{run_spec.batch}"
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
        run_dir = Path(out) / name
    except OSError:  # another machine without the driver's file system
        run_dir = Path(tempfile.mkdtemp(prefix=f"tbd-{Path(out).name}-")) / name
    try:
        with _signals_unblocked():
            outcome = run_point(run_spec, run_dir, lambda: contextlib.nullcontext(lambda event: None))
    except Exception as exc:  # noqa: BLE001 - a bug in one point must come back as that point's reason
        outcome = PointOutcome(run_spec.batch or 0, failure=FAILED, reason=_one_line(exc), kept=run_dir.is_dir())
    return outcome_to_wire(replace(outcome, host=socket.gethostname(), run_dir=str(run_dir)))


@contextlib.contextmanager
def _signals_unblocked() -> Iterator[None]:
    """SIGINT and SIGTERM unblocked in this thread while inside. A Ray worker's main thread blocks
    SIGINT (its mask has it, measured with Ray 2.60), and a child inherits the mask: the runner child
    would never see the Ctrl-C that profile_run forwards to it when the driver cancels the point."""
    old = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def outcome_to_wire(outcome: PointOutcome) -> dict:
    """The outcome as JSON-ready data: the profile as profile.json holds it."""
    return {**outcome.__dict__, "profile": outcome.profile.to_dict() if outcome.profile is not None else None}


def outcome_from_wire(data: dict) -> PointOutcome:
    """A worker's outcome, its profile validated; one that does not load is a failed point saying why."""
    try:
        profile = Profile.from_dict(data["profile"]) if data["profile"] is not None else None
    except ResultFormatError as exc:
        return PointOutcome(data["batch"], failure=FAILED, reason=f"the worker's profile does not load: {exc}",
                            kept=data["kept"], host=data["host"], run_dir=data["run_dir"])
    return PointOutcome(**{**data, "profile": profile})


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else 'no message'}"


class PointRunner(Protocol):
    """Runs a sweep's points somewhere and yields their outcomes as they finish."""

    remote: bool  # the points run outside this process (no progress bars; the driver's Ctrl-C cancels)
    parallel: bool  # a list sweep may hand it every point at once

    def describe(self, points: int, search: bool) -> str | None:
        """One line saying where `points` points run (None: nothing to say); `search`: the max search."""

    def submit(self, specs: Sequence[RunSpec], out: Path, stopped: Callable[[], bool]) -> Iterator[PointOutcome]:
        """Run the points (batches set) in sweep directory `out`; yield each outcome as it finishes.

        Once `stopped()` turns true, what is still running is cancelled; outcomes that come back
        within `CANCEL_GRACE_S` are still yielded, the others are dropped.
        """


class LocalRunner:
    """This process, one point after another, each with its progress display.

    The first point that completes measures everything; the later points skip the GEMM ceiling after
    the windows and take its copy bandwidth (`ceilings`, profilers/ceilings.py): the same device and
    dtype, so the same figures. Workers (Ray, Slurm) measure their own: they may run on other machines.
    """

    remote = False
    parallel = False

    def __init__(self, progress: Callable[[], ContextManager[ProgressSink]]) -> None:
        self.progress = progress
        self.ceilings: dict | None = None  # the first point's, once it has measured them

    def describe(self, points: int, search: bool) -> str | None:
        return None

    def submit(self, specs: Sequence[RunSpec], out: Path, stopped: Callable[[], bool]) -> Iterator[PointOutcome]:
        for spec in specs:
            run_dir = out / f"b{spec.batch}"
            outcome = run_point(spec, run_dir, self.progress, ceilings=self.ceilings)
            if self.ceilings is None and outcome.profile is not None and outcome.profile.status == "complete" \
                    and spec.world_size == 1:
                self.ceilings = reusable_ceilings(run_dir, spec.batch or 0)
            yield outcome


def _import(module: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(f"--executor {extra} needs {module}, which is not installed",
                         hint=f'pip install "tbd[{extra}]"') from None


def _gather(specs: Sequence[RunSpec], launch: Callable[[Sequence[RunSpec]], list], limit: int,
            finished: Callable[[list], list], fetch: Callable[[Any, int], PointOutcome | None],
            cancel: Callable[[Any], None], stopped: Callable[[], bool]) -> Iterator[PointOutcome]:
    """The remote runners' loop: launch up to `limit` points at once, yield each as it finishes.

    `launch` starts points and returns their handles; `finished` returns the handles that are done
    (waiting up to about `_POLL_S`); `fetch` turns one into its outcome (None: it was cancelled).
    """
    queue = deque(specs)
    running: dict[Any, int] = {}
    deadline: float | None = None
    try:
        while queue or running:
            if deadline is None and stopped():
                queue.clear()
                for handle in running:
                    cancel(handle)
                deadline = time.monotonic() + CANCEL_GRACE_S
            if deadline is not None and (not running or time.monotonic() > deadline):
                return
            if queue and len(running) < limit:
                batch = [queue.popleft() for _ in range(min(len(queue), limit - len(running)))]
                running.update(zip(launch(batch), (s.batch for s in batch)))
            for handle in finished(list(running)):
                outcome = fetch(handle, running.pop(handle))
                # Once cancelled, a point that failed most likely failed of the cancel: only profiles count.
                if outcome is not None and (deadline is None or outcome.profile is not None):
                    yield outcome
    finally:  # an exception (a second Ctrl-C) or the sweep stopping early: leave nothing running
        for handle in running:
            with contextlib.suppress(Exception):
                cancel(handle)


def _resources(spec: RunSpec, gpus_here: bool) -> tuple[int, int]:
    """The CPUs (the run's threads, else 1) and GPUs (1 on CUDA; "auto" where there are any) a point needs."""
    cuda = spec.device.startswith("cuda") or (spec.device == "auto" and gpus_here)
    return spec.threads or 1, 1 if cuda else 0


class RayRunner:
    """Each point a Ray task; a Ray started here when no address is given (and shut down after)."""

    remote = True
    parallel = True

    def __init__(self, address: str | None = None) -> None:
        self.ray = _import("ray", "ray")
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self._owned = False

    def __enter__(self) -> "RayRunner":
        ray = self.ray
        if ray.is_initialized():  # the caller's own ray.init: use it, leave it running
            return self
        if self.address not in (None, "auto", "local"):
            _check_reachable(self.address)
        options: dict[str, Any] = {"address": self.address, "logging_level": logging.WARNING, "log_to_driver": False}
        if self.address in (None, "local"):
            options["include_dashboard"] = False
        try:
            ray.init(**options)
        except Exception as exc:  # noqa: BLE001 - ConnectionError, RuntimeError, ValueError: one line for all
            what = f"connect to the Ray cluster at {self.address}" if self.address else "start a local Ray"
            raise UsageError(f"could not {what}: {_one_line(exc)}",
                             hint="check --ray-address (or RAY_ADDRESS) and that the cluster runs") from None
        self._owned = True
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._owned:
            self.ray.shutdown()
            self._owned = False

    def describe(self, points: int, search: bool) -> str:
        ray = self.ray
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        total = ray.cluster_resources()
        gpus = f", {total['GPU']:g} GPUs" if total.get("GPU") else ""
        what = "the max search, one point at a time," if search else f"{points} point(s)"
        return f"ray: {what} on {nodes} node(s), {total.get('CPU', 0):g} CPUs{gpus}"

    def submit(self, specs: Sequence[RunSpec], out: Path, stopped: Callable[[], bool]) -> Iterator[PointOutcome]:
        ray = self.ray
        task = ray.remote(run_remote_point)
        gpus_here = bool(ray.cluster_resources().get("GPU"))
        where = str(out.resolve())

        def launch(batch: Sequence[RunSpec]) -> list:
            refs = []
            for spec in batch:
                cpus, gpus = _resources(spec, gpus_here)
                # No retries: a point that dies (its worker killed for memory) is a result, not a fault.
                refs.append(task.options(num_cpus=cpus, num_gpus=gpus, max_retries=0, name=f"tbd-sweep-b{spec.batch}")
                            .remote(spec.to_dict(), where))
            return refs

        def finished(refs: list) -> list:
            return ray.wait(refs, num_returns=len(refs), timeout=_POLL_S)[0]

        def fetch(ref: Any, batch: int) -> PointOutcome | None:
            try:
                return outcome_from_wire(ray.get(ref))
            except ray.exceptions.TaskCancelledError:
                return None
            except ray.exceptions.OutOfMemoryError as exc:  # Ray's memory monitor killed the worker
                return PointOutcome(batch, failure=OOM, reason=f"ray: {_first_line(exc)}")
            except ray.exceptions.RayError as exc:
                cause = getattr(exc, "cause", None) or exc
                return PointOutcome(batch, failure=FAILED, reason=f"ray: {_one_line(cause)}")

        yield from _gather(specs, launch, len(specs), finished, fetch, lambda ref: ray.cancel(ref), stopped)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Refuse an address nothing listens on now: ray.init would retry it for minutes."""
    client = address.startswith("ray://")
    hostport = address.removeprefix("ray://")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        host, port = hostport, "10001" if client else "6379"
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise UsageError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}",
                         hint="check --ray-address (or RAY_ADDRESS): host:port of its head node, or ray://host:10001") from None


class SubmititRunner:
    """Each point a submitit job: a Slurm job array where Slurm is, else local processes."""

    remote = True
    parallel = True

    def __init__(self, cluster: str | None = None, partition: str | None = None,
                 timeout_min: int | None = None) -> None:
        self.submitit = _import("submitit", "submitit")
        self.cluster, self.partition, self.timeout_min = cluster, partition, timeout_min
        self.executor: Any = None

    def __enter__(self) -> "SubmititRunner":
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass

    def _executor(self, out: Path) -> Any:
        if self.executor is None:
            self.executor = self.submitit.AutoExecutor(folder=out.resolve() / "submitit", cluster=self.cluster)
        return self.executor

    def describe(self, points: int, search: bool) -> str:
        cluster = self.cluster or self.submitit.AutoExecutor.which()
        what = "the max search, one job at a time" if search else f"{points} point(s)"
        if cluster == "slurm":
            partition = f" on partition {self.partition}" if self.partition else ""
            return f"submitit: {what} as a Slurm job array{partition}"
        return f"submitit ({cluster}, no Slurm here): {what} as local processes"

    def submit(self, specs: Sequence[RunSpec], out: Path, stopped: Callable[[], bool]) -> Iterator[PointOutcome]:
        executor = self._executor(out)
        where = str(out.resolve())
        slurm, local = executor.cluster == "slurm", executor.cluster == "local"
        # "auto" asks a GPU where this machine has one (local processes); on Slurm --device cuda does.
        cpus, gpus = _resources(specs[0], gpus_here=not slurm and planned_device("auto") != "cpu")
        timeout = self.timeout_min or math.ceil((specs[0].max_seconds or 600) / 60) + TIMEOUT_MARGIN_MIN
        executor.update_parameters(name=f"tbd-sweep-{specs[0].model}", timeout_min=timeout, cpus_per_task=cpus,
                                   gpus_per_node=gpus, slurm_partition=self.partition)
        errors = self.submitit.core.utils.UncompletedJobError

        def launch(batch: Sequence[RunSpec]) -> list:
            # Local controllers write to the stderr they inherit: a terminal's Ctrl-C reaches them too, and
            # each would print its KeyboardInterrupt traceback among the sweep's lines.
            with _stderr_to(executor.folder / "controllers.log") if local else contextlib.nullcontext(), \
                    _sigint_ignored() if local else contextlib.nullcontext():
                return executor.map_array(run_remote_point, [s.to_dict() for s in batch], [where] * len(batch))

        def finished(jobs: list) -> list:
            time.sleep(_POLL_S)
            return [job for job in jobs if job.done()]

        def fetch(job: Any, batch: int) -> PointOutcome | None:
            try:
                return outcome_from_wire(job.result())
            except errors as exc:
                text = str(exc)
                status = OOM if "OUT_OF_MEMORY" in text else FAILED  # Slurm's job state for an OOM kill
                return PointOutcome(batch, failure=status, reason=f"submitit job {job.job_id}: {_error_line(text)}")

        def cancel(job: Any) -> None:
            if local:  # the controller (its pid is the job id) forwards SIGTERM to the job, which keeps its
                with contextlib.suppress(ProcessLookupError):  # partial profile; job.cancel's SIGINT makes the
                    os.kill(int(job.job_id), signal.SIGTERM)  # controller print a traceback and SIGKILL the job
            else:
                job.cancel(check=False)

        # Slurm schedules the whole array; local processes are kept to the cores here, and to one at a
        # time on a GPU (submitit's local executor gives every job the first gpus_per_node GPUs).
        limit = len(specs) if slurm else 1 if gpus else max(1, (os.cpu_count() or 1) // cpus)
        yield from _gather(specs, launch, limit, finished, fetch, cancel, stopped)


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored while inside, so that processes started meanwhile inherit it ignored.

    submitit's local controllers share the terminal's process group: a Ctrl-C reached them too, and
    a controller's KeyboardInterrupt SIGKILLs its job, racing the job's own save of its partial
    profile (the sweep lost one of its running points under load). Started with SIGINT ignored, a
    controller leaves Ctrl-C to the job (whose signal handlers, installed when its run starts,
    replace the inherited SIG_IGN) and the driver's cancel (SIGTERM, forwarded to the job).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """File descriptor 2 writes to `path` while inside: processes started meanwhile inherit it."""
    sys.stderr.flush()
    saved = os.dup(2)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _error_line(text: str) -> str:
    """The exception line of a failed job's trace (`ValueError: ...`), else the message's first line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if not line.startswith(("File ", "Traceback", "-", "^", "~"))
              and ":" in line and line.split(":", 1)[0].replace(".", "").isidentifier()
              and line.split(":", 1)[0].endswith(("Error", "Exception", "Interrupt", "Exit"))]
    return errors[-1] if errors else (lines[0] if lines else "failed without a message")
