"""The parent side of `tbd profile`: start the runner child, show progress, keep what it gathered.

The child runs in its own session, so a terminal's Ctrl-C reaches only this process; the parent
forwards it (signals.py): the first SIGINT, SIGTERM or SIGHUP goes to the child as SIGINT, and the child
saves what its stage gathered and exits; a second one is sent on as SIGTERM, a third as SIGKILL.
Whatever happens, the parent then writes profile.json (complete, or partial saying where the run
stopped) before it returns; the caller prints the report and exits 130 (SIGINT), 143 (SIGTERM) or
129 (SIGHUP: the terminal is gone, so the streams that were a terminal now go to /dev/null).
Signals that arrive while the parent analyses are held until profile.json is written.

Out of memory is reported only for a real one: the child's own verdict (MemoryError, CUDA OOM,
std::bad_alloc), or a SIGKILL the parent did not send (the kernel's OOM killer). It names the
largest batch that fit (probed by halving, one iteration each) and leaves no half-written files.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from tbd import __version__
from tbd.cli.frameworks import runtime
from tbd.cli.run_analysis import profile_from_run_dir
from tbd.cli.runner import EXIT_DISK_FULL, EXIT_INTERRUPTED, EXIT_OK, EXIT_OOM, EXIT_USAGE, child_command
from tbd.cli.signals import ForwardedSignals
from tbd.core import rundir
from tbd.core.errors import DiskFullError, InterruptedRun, OutOfMemoryError, TbdError, UsageError, WorkloadError
from tbd.core.profile_result import PARTIAL, Profile
from tbd.core.records import RunSpec
from tbd.core.run_ownership import DirClaim, claim_dir
from tbd.profilers.ceilings import REUSED

ProgressSink = Callable[[dict], None]
SIGKILL_EXIT = -9  # the kernel's OOM killer ends a process with SIGKILL
SIGABRT_EXIT = -6  # std::bad_alloc escaping C++ code aborts the process
_LOG_TAIL_BYTES = 16384


@dataclass(frozen=True)
class ChildExit:
    """How the runner child ended, and which signal (if any) the user sent the parent meanwhile."""

    code: int
    signal: int | None  # SIGINT, SIGTERM or SIGHUP received by the parent, None if none
    killed_by_parent: bool  # the parent escalated to SIGKILL


@dataclass(frozen=True)
class RunOutcome:
    """A finished `tbd profile`: the profile written, and the exit code the command should return."""

    profile: Profile
    exit_code: int  # 0, or 130/143/129 when interrupted (the profile is then partial)
    run_dir: Path | None = None  # where it was written (a default "-auto-" folder is renamed after the device)


def _child_command(run_dir: Path) -> list[str]:
    spec = rundir.read_json(run_dir / rundir.SPEC, "run spec")
    return child_command(runtime(spec.get("framework", "pytorch")).python, run_dir.resolve())


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": os.environ.get("PYTHONUNBUFFERED", "1")}


def run_child(run_dir: Path, progress: ProgressSink | None, signals: ForwardedSignals | None = None,
              command: list[str] | None = None) -> ChildExit:
    """Run the runner child on `run_dir` (or `command`: torchrun over the ranks' children), forwarding
    its progress events and the user's signals. A progress sink that fails to write (its terminal
    hung up) is dropped; the child runs on."""
    own = signals is None
    signals = signals or ForwardedSignals()
    with open(run_dir / rundir.LOG, "ab") as log:
        # Its own session: a terminal's Ctrl-C reaches the parent only, which forwards it once.
        proc = subprocess.Popen(command or _child_command(run_dir), stdout=subprocess.PIPE, stderr=log,
                                stdin=subprocess.DEVNULL, env=_child_env(), start_new_session=True)
        try:
            with signals.forward_to(proc) if own else signals.target(proc):
                assert proc.stdout is not None  # Popen with stdout=PIPE always has it
                for line in proc.stdout:
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue  # a workload printing to stdout is not a progress event
                    if isinstance(event, dict) and progress is not None:
                        try:
                            progress(event)
                        except (OSError, ValueError):
                            # The terminal went away (SIGHUP: EIO; a closed pipe; a closed stream):
                            # the progress display stops, the run and its records go on.
                            progress = None
                code = proc.wait()
        finally:
            if proc.poll() is None:  # the parent is failing: do not leave the child behind
                proc.kill()
                proc.wait()
    return ChildExit(code, signals.received, signals.killed)


def _status_message(run_dir: Path) -> str:
    status = rundir.read_optional(run_dir, rundir.STATUS, "runner status") or {}
    return str(status.get("message") or "")


def _log_tail(run_dir: Path) -> str:
    try:
        with open(run_dir / rundir.LOG, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - _LOG_TAIL_BYTES))
            return log.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _is_out_of_memory(child: ChildExit, run_dir: Path) -> bool:
    """The child ran out of memory: its own verdict, a SIGKILL the parent did not send, or a C++
    std::bad_alloc (importing or running native code under a tight --memory-limit-gib)."""
    if child.code == EXIT_OOM:
        return True
    if child.code == SIGKILL_EXIT and not child.killed_by_parent:
        return True
    tail = _log_tail(run_dir)
    return child.code in (SIGABRT_EXIT, 1) and ("std::bad_alloc" in tail or "MemoryError" in tail)


def _fits(spec: RunSpec, batch: int, scratch: Path, signals: ForwardedSignals) -> bool:
    """One warm-up iteration at `batch` in a fresh child: does it run without running out of memory?"""
    probe = scratch / f"probe-b{batch}"
    probe.mkdir(parents=True)
    trial = replace(spec, batch=batch, warmup=1, iterations=1, trace_iterations=0)
    rundir.atomic_write_json(probe / rundir.SPEC, trial.to_dict())
    child = run_child(probe, lambda event: None, signals)
    if child.signal is not None:
        raise InterruptedRun("interrupted while probing for the largest batch that fits; nothing more was written")
    return child.code == EXIT_OK


def largest_fitting_batch(spec: RunSpec, failed_batch: int, scratch: Path, signals: ForwardedSignals | None = None,
                          tries: int = 6) -> int | None:
    """Halve the batch from `failed_batch` until one iteration fits; None if none of `tries` fit."""
    signals = signals or ForwardedSignals()
    batch = failed_batch // 2
    for _ in range(tries):
        if batch < 1:
            return None
        if _fits(spec, batch, scratch, signals):
            return batch
        batch //= 2
    return None


def prepare_run_dir(run_dir: Path, force: bool) -> DirClaim:
    """Create `run_dir` for a new run, locked and marked as tbd's until the returned claim is released
    (`with prepare_run_dir(...)`); a non-empty one is refused unless `force` and tbd wrote all of it.

    Raises:
        UsageError: the path holds a control character or is a file; another tbd holds the folder
            (named); a non-empty folder not asked to be replaced; or (even with `force`) a folder
            holding anything tbd did not write, or no ownership marker: tbd never empties a folder
            it did not write (core/run_ownership.py).
    """
    return prepare_out_dir(run_dir, force, rundir.SPEC, "run")


def prepare_out_dir(out: Path, force: bool, marker: str, kind: str) -> DirClaim:
    """Create `out` for a new `kind` ("run", "sweep", "train directory"), locked and marked as tbd's
    until the returned claim is released; with `force`, a previous tbd `kind` there is removed, only the
    files its marker lists (`marker`, the file every such folder holds, only names why a folder without
    an ownership marker is refused). See run_ownership.claim_dir."""
    return claim_dir(out, force=force, kind=kind, version=__version__, legacy=marker)


def profile_run(spec: RunSpec, run_dir: Path, progress: ProgressSink, probe_oom: bool = True,
                force: bool = False, rename_after_device: bool = False, ceilings: dict | None = None) -> RunOutcome:
    """Run the workload in a child; write RUN_DIR/profile.json and return it with the exit code.

    Raises OutOfMemoryError (nothing left behind if nothing was gathered), WorkloadError (crash:
    log path in the message), DiskFullError, UsageError, or InterruptedRun when interrupted
    before anything was gathered. An interrupt after that returns the partial profile with exit
    code 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP). `rename_after_device`: `run_dir` is a default one named
    "-auto-" when the parent could not tell the device; it is renamed after the one that ran.
    `ceilings`: a sweep's later point, what its first point lends it (profilers/ceilings.py,
    `reusable_ceilings`): the child skips the GEMM ceiling after the windows and takes its bandwidth.
    """
    with prepare_run_dir(run_dir, force) as claim:  # released (its files listed) however the run ends
        rundir.atomic_write_json(run_dir / rundir.SPEC, spec.to_dict())
        if ceilings is not None:
            rundir.atomic_write_json(run_dir / REUSED, ceilings)
        signals = ForwardedSignals()
        with signals.installed():
            child = run_child(run_dir, progress, signals)
            with signals.held():  # a Ctrl-C now waits until profile.json is written
                if rename_after_device:
                    run_dir = rundir.named_after_device(run_dir)
                    claim.moved(run_dir)
                return replace(_conclude(spec, run_dir, child, probe_oom, signals), run_dir=run_dir)


def _conclude(spec: RunSpec, run_dir: Path, child: ChildExit, probe_oom: bool,
              signals: ForwardedSignals) -> RunOutcome:
    """profile.json from what the child left, or the error that says why there is none."""
    message = _status_message(run_dir)
    gathered = (run_dir / rundir.ITERATIONS).exists()
    if child.code == EXIT_OK:
        profile = _write_profile(run_dir, None, [])
        return RunOutcome(profile, signals.exit_code() if child.signal else 0)
    if child.code == EXIT_USAGE:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise UsageError(message or "the runner rejected the run spec")
    if child.code == EXIT_DISK_FULL:
        kept = ", ".join(sorted(p.name for p in run_dir.iterdir())) if run_dir.exists() else "nothing"
        raise DiskFullError(f"no space left on the device while writing {run_dir} (kept: {kept})",
                            hint="free some space and run again")
    if child.signal is not None or child.code == EXIT_INTERRUPTED:
        if not gathered:
            shutil.rmtree(run_dir, ignore_errors=True)
            raise InterruptedRun("interrupted before any iteration completed; nothing was written",
                                 exit_code=signals.exit_code())
        why = message or f"interrupted by {signals.name()} during the run"
        return RunOutcome(_write_profile(run_dir, PARTIAL, [f"partial: {why}"] if not message else []),
                          signals.exit_code())
    if _is_out_of_memory(child, run_dir):
        _out_of_memory(spec, run_dir, child, message, gathered, probe_oom, signals)
    if gathered:
        _write_profile(run_dir, PARTIAL, [] if message else [f"partial: workload exited with code {child.code}"])
    raise WorkloadError(f"workload exited with code {child.code}, log at {run_dir / rundir.LOG}",
                        hint=message.splitlines()[0][:200] if message else None)


def _out_of_memory(spec: RunSpec, run_dir: Path, child: ChildExit, message: str, gathered: bool, probe: bool,
                   signals: ForwardedSignals) -> None:
    batch = spec.batch
    what = message or (f"workload killed by signal {-child.code} (the kernel's OOM killer, most likely)"
                       if child.code < 0 else "out of memory")
    if gathered:
        _write_profile(run_dir, PARTIAL, [f"partial: {what}"] if not message else [])
    else:
        shutil.rmtree(run_dir, ignore_errors=True)
    hint = "try a smaller --batch"
    if probe and batch and batch > 1:
        scratch = run_dir.parent / f".oom-probe-{run_dir.name}"
        try:
            fit = largest_fitting_batch(spec, batch, scratch, signals)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        hint = (f"the largest batch that fit was {fit}; {2 * fit} did not (halving, one iteration each)"
                if fit else f"no batch down to {max(batch // 64, 1)} fit either (halving, one iteration each)")
    where = f"; partial profile kept in {run_dir}" if gathered else ""
    raise OutOfMemoryError(f"batch {batch} ran out of memory on {spec.device}{where}", hint=hint)


def _write_profile(run_dir: Path, status: str | None, notes: list[str]) -> Profile:
    """Analyse the run directory and write profile.json; a partial run that cannot make a profile
    keeps its raw files and raises WorkloadError naming them."""
    try:
        profile = profile_from_run_dir(run_dir, status=status, extra_notes=notes)
    except TbdError as exc:
        if status != PARTIAL:
            raise
        raise WorkloadError(f"the run stopped before it could be analysed ({exc.one_line()}); its raw records "
                            f"are in {run_dir}") from None
    try:
        rundir.atomic_write_json(run_dir / rundir.PROFILE, profile.to_dict())
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise DiskFullError(f"no space left on the device writing {run_dir / rundir.PROFILE}; the raw records "
                                f"are kept in {run_dir} (`tbd report` analyses them)") from None
        raise
    return profile
