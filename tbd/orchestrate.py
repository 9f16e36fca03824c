"""The parent side of `tbd profile`: start the runner child, show progress, keep what it gathered.

The child reports progress as JSON lines on stdout; its stderr goes to RUN_DIR/workload.log.
Ctrl-C reaches the child too (same process group): it saves its iterations and exits 130, and the
parent then writes a profile marked partial. An OOM gives a one-line error naming the largest
batch that fit (probed by halving, one iteration each), and no half-written files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Callable

from tbd import rundir
from tbd.collect import profile_from_run_dir
from tbd.errors import InterruptedRun, OutOfMemoryError, TbdError, UsageError, WorkloadError
from tbd.frameworks import runtime
from tbd.profile import PARTIAL, Profile
from tbd.records import RunSpec
from tbd.runner import EXIT_INTERRUPTED, EXIT_OK, EXIT_OOM, EXIT_USAGE, child_command

ProgressSink = Callable[[dict], None]
SIGKILL_EXIT = -9  # the kernel's OOM killer ends a process with SIGKILL


def _child_command(run_dir: Path) -> list[str]:
    spec = rundir.read_json(run_dir / rundir.SPEC, "run spec")
    return child_command(runtime(spec.get("framework", "pytorch")).python, run_dir.resolve())


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": os.environ.get("PYTHONUNBUFFERED", "1")}


def run_child(run_dir: Path, progress: ProgressSink) -> int:
    """Run the runner child on `run_dir`, forwarding its progress events; returns its exit code."""
    with open(run_dir / rundir.LOG, "ab") as log:
        proc = subprocess.Popen(_child_command(run_dir), stdout=subprocess.PIPE, stderr=log,
                                stdin=subprocess.DEVNULL, env=_child_env())
        try:
            assert proc.stdout is not None  # Popen with stdout=PIPE always has it
            for line in proc.stdout:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # a workload printing to stdout is not a progress event
                if isinstance(event, dict):
                    progress(event)
            return proc.wait()
        except KeyboardInterrupt:
            # The child got the same SIGINT; give it time to save what it gathered.
            try:
                return proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                return proc.wait()


def _status_message(run_dir: Path) -> str:
    status = rundir.read_optional(run_dir, rundir.STATUS, "runner status") or {}
    return str(status.get("message") or "")


def _fits(spec: RunSpec, batch: int, scratch: Path) -> bool:
    """One warm-up iteration at `batch` in a fresh child: does it run without running out of memory?"""
    probe = scratch / f"probe-b{batch}"
    probe.mkdir(parents=True)
    trial = replace(spec, batch=batch, warmup=1, iterations=1, trace_iterations=0)
    rundir.atomic_write_json(probe / rundir.SPEC, trial.to_dict())
    code = run_child(probe, lambda event: None)
    if code == EXIT_INTERRUPTED:
        raise InterruptedRun("interrupted while probing for the largest batch that fits; nothing was written")
    return code == EXIT_OK


def largest_fitting_batch(spec: RunSpec, failed_batch: int, scratch: Path, tries: int = 6) -> int | None:
    """Halve the batch from `failed_batch` until one iteration fits; None if none of `tries` fit."""
    batch = failed_batch // 2
    for _ in range(tries):
        if batch < 1:
            return None
        if _fits(spec, batch, scratch):
            return batch
        batch //= 2
    return None


def profile_run(spec: RunSpec, run_dir: Path, progress: ProgressSink, probe_oom: bool = True) -> Profile:
    """Run the workload in a child and return the Profile written to RUN_DIR/profile.json.

    Raises OutOfMemoryError (nothing left behind if nothing was gathered), InterruptedRun (after
    writing a partial profile), WorkloadError (crash: log path in the message) or UsageError.
    """
    if run_dir.exists() and any(run_dir.iterdir()):
        raise UsageError(f"output directory {run_dir} is not empty", hint="choose another --out")
    run_dir.mkdir(parents=True, exist_ok=True)
    rundir.atomic_write_json(run_dir / rundir.SPEC, spec.to_dict())
    code = run_child(run_dir, progress)
    if code == EXIT_OK:
        profile = profile_from_run_dir(run_dir)
        rundir.atomic_write_json(run_dir / rundir.PROFILE, profile.to_dict())
        return profile
    message = _status_message(run_dir)
    gathered = (run_dir / rundir.ITERATIONS).exists()
    if code == EXIT_USAGE:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise UsageError(message or "the runner rejected the run spec")
    if code in (EXIT_OOM, SIGKILL_EXIT):
        batch = spec.batch
        what = message or f"workload killed by signal {-code} (the kernel's OOM killer, most likely)"
        if gathered:
            _write_partial(run_dir, what)
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
        hint = "try a smaller --batch"
        if probe_oom and batch and batch > 1:
            scratch = run_dir.parent / f".oom-probe-{run_dir.name}"
            try:
                fit = largest_fitting_batch(spec, batch, scratch)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            hint = (f"the largest batch that fit was {fit}; {2 * fit} did not (halving, one iteration each)"
                    if fit else f"no batch down to {max(batch // 64, 1)} fit either (halving, one iteration each)")
        where = f"; partial profile kept in {run_dir}" if gathered else ""
        raise OutOfMemoryError(f"batch {batch} ran out of memory on {spec.device}{where}", hint=hint)
    if code == EXIT_INTERRUPTED:
        if gathered:
            _write_partial(run_dir, message or "interrupted")
            raise InterruptedRun(f"interrupted: partial profile written to {run_dir / rundir.PROFILE}")
        shutil.rmtree(run_dir, ignore_errors=True)
        raise InterruptedRun("interrupted before any iteration completed; nothing was written")
    if gathered:
        _write_partial(run_dir, message or f"workload exited with code {code}")
    raise WorkloadError(f"workload exited with code {code}, log at {run_dir / rundir.LOG}",
                        hint=message.splitlines()[0][:200] if message else None)


def _write_partial(run_dir: Path, why: str) -> None:
    try:
        profile = profile_from_run_dir(run_dir, status=PARTIAL)
    except TbdError:
        return  # what the child left cannot make a profile; its raw files stay for inspection
    rundir.atomic_write_json(run_dir / rundir.PROFILE, profile.to_dict())
