"""Public Python API: profile a user's own PyTorch training step with the same hook as the suite.

    import tbd
    profile = tbd.profile_step(train_step, samples_per_step=64, model=model, optimizer=opt,
                               out="runs/mine")
    print(profile.metrics.throughput.value)
    if not profile.quality.reliable:          # another load on the machine, or windows far apart
        print("UNRELIABLE:", *profile.quality.warnings)

The step runs in this process (a closure cannot move to a child), through the same stages, raw
records and analysis as `tbd profile`, so the Profile (and run directory) has the same shape.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from tbd.cli.commands import arguments
from tbd.cli.orchestrate import prepare_run_dir
from tbd.cli.run_analysis import profile_from_run_dir
from tbd.core import rundir
from tbd.core.errors import TbdError, UsageError
from tbd.core.profile_result import PARTIAL, Profile
from tbd.core.records import RunSpec
from tbd.models.base import Workload
from tbd.profilers.loop import LoopState
from tbd.reports.progress import StageProgress


def profile_step(step: Callable[[], Any], *, samples_per_step: int, model: Any = None, optimizer: Any = None,
                 inputs: Callable[[], list[Any]] | None = None, name: str = "user-step",
                 throughput_unit: str = "samples/s", units_per_step: dict[str, float] | None = None,
                 device: str = "auto", warmup: int | None = None, iterations: int = 20,
                 trace_iterations: int = 3, max_seconds: float = 600.0,
                 out: str | os.PathLike | None = None, progress: bool = False, force: bool = False) -> Profile:
    """Profile `step` (one full training iteration: forward, backward, optimizer update).

    Args:
        step: callable running one training iteration on its own data.
        samples_per_step: samples one call processes (the batch size), for throughput.
        model, optimizer: the nn.Module and optimizer, for weights/gradients/optimizer-state
            memory (null with a reason when omitted).
        inputs: returns the input tensors the step uses (counted as dynamic memory).
        name, throughput_unit: the workload's name and its throughput's unit in the report.
        units_per_step: further throughput units and how many of each one step processes,
            e.g. {"tokens/s": 3200.0}.
        device: where `step` runs ("auto", "cpu", "cuda", "cuda:N"); tbd only synchronises it.
        warmup: fixed warm-up iterations; None detects the end of warm-up.
        iterations, trace_iterations: timing- and trace-window lengths, in iterations.
        max_seconds: bound on warm-up plus timing, in seconds.
        out: run directory to write (profile.json, iterations.json, trace.pt.trace.json.gz); None keeps
            nothing on disk. A folder that is not empty is refused unless `force` and all it holds
            is what a previous tbd run wrote there (its marker lists it), which is then removed.
        progress: show progress bars on stderr.
        force: replace a previous run in `out`.
    Returns:
        The Profile; `status` is "partial" if the loop was interrupted (KeyboardInterrupt is
        re-raised after the partial profile is written) or the step raised (the exception is
        re-raised after the partial profile is written).
    Raises:
        UsageError: an argument out of range (checked before anything runs), or `out` taken: not
            empty (without `force`), holding files tbd did not write, or in use by another run (named).
    """
    _check_arguments(step, samples_per_step, warmup, iterations, trace_iterations, max_seconds)
    # PyTorch and its hook are imported on the first call, not with `import tbd`: reading profiles
    # (tbd.load_profile) needs no framework.
    from tbd.profilers.pytorch.hook import HOOK

    spec = RunSpec(model=name, framework="pytorch", batch=samples_per_step, device=device, warmup=warmup,
                   iterations=iterations, trace_iterations=trace_iterations, max_seconds=max_seconds)
    claim = None
    if out is not None:
        run_dir = Path(out)
        claim = prepare_run_dir(run_dir, force)  # locked until the profile is written; a second caller is refused
    else:
        run_dir = Path(tempfile.mkdtemp(prefix="tbd-api-"))
    try:
        dev = HOOK.device(device)
        rundir.atomic_write_json(run_dir / rundir.SPEC,
                                 {**spec.to_dict(), "device": dev.name, "device_requested": device})
        rundir.atomic_write_json(run_dir / rundir.ENVIRONMENT, HOOK.environment(spec, dev))
        workload = Workload(name=name, step=step, samples_per_step=samples_per_step,
                            throughput_unit=throughput_unit, units_per_step=dict(units_per_step or {}),
                            model=model, optimizer=optimizer, inputs=inputs)
        state = LoopState()
        sink, ctx = _progress(progress)
        try:
            with ctx:
                HOOK.run_workload(workload, spec, run_dir, dev, state, sink)
        except KeyboardInterrupt:
            _keep_partial(run_dir, state, "interrupted", f"interrupted by the user during {state.stage}")
            raise
        except Exception as exc:
            _keep_partial(run_dir, state, "crash", f"the step raised {type(exc).__name__} during {state.stage}: {exc}")
            raise
        rundir.atomic_write_json(run_dir / rundir.STATUS, {"state": "complete", "stage": state.stage, "message": ""})
        profile = profile_from_run_dir(run_dir)
        if out is not None:
            rundir.atomic_write_json(run_dir / rundir.PROFILE, profile.to_dict())
        return profile
    finally:
        if claim is not None:
            claim.release()  # lists the run's files in its marker, so a later force=True may replace them
        if out is None:
            shutil.rmtree(run_dir, ignore_errors=True)


def _keep_partial(run_dir: Path, state: LoopState, kind: str, why: str) -> None:
    """The iterations so far and a partial profile.json; a run too short for a profile keeps its raw files."""
    rundir.write_iterations(run_dir, state.iteration_log(), state.notes)
    rundir.atomic_write_json(run_dir / rundir.STATUS, {"state": kind, "stage": state.stage, "message": why})
    try:
        profile = profile_from_run_dir(run_dir, status=PARTIAL)
    except TbdError:
        return
    rundir.atomic_write_json(run_dir / rundir.PROFILE, profile.to_dict())


def _check_arguments(step, samples_per_step, warmup, iterations, trace_iterations, max_seconds) -> None:
    """Every argument in range, before anything runs (UsageError names the first that is not)."""
    if not callable(step):
        raise UsageError(f"step must be callable, got {type(step).__name__}")
    # The same ranges as the command line's options (commands/arguments.py), so a value no run can
    # use (max_seconds=1e308, iterations=2**64) is refused here, not by an OverflowError in the loop.
    checks = [("samples_per_step", samples_per_step, False, 0, arguments.BATCH),
              ("max_seconds", max_seconds, False, 0, arguments.SECONDS[1]),
              ("iterations", iterations, True, 1, arguments.ITERATIONS),
              ("trace_iterations", trace_iterations, True, 0, arguments.TRACE_ITERATIONS)]
    if warmup is not None:
        checks.append(("warmup", warmup, True, 0, arguments.ITERATIONS))
    for name, value, integer, low, high in checks:
        kind = int if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value):
            raise UsageError(f"{name} must be a finite {'integer' if integer else 'number'}, got {value!r}")
        if (integer and value < low) or (not integer and value <= low):
            raise UsageError(f"{name} must be {'at least' if integer else 'above'} {low}, got {value!r}")
        if value > high:
            raise UsageError(f"{name} must be at most {high:g}, got {value!r}")


def _progress(enabled: bool):
    if not enabled:
        return (lambda event: None), contextlib.nullcontext()
    bars = StageProgress()
    return bars, bars
