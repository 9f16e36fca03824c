"""The timing window with its light collectors, shared by every framework hook.

Per-core CPU counters (and NVML on a GPU) run exactly around `tbd.sampling.run_timing_window`;
what they gathered is written even when the window is cut short (Ctrl-C, a crash), together with
the iteration log, so a partial profile keeps it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profilers.cpu import CpuWindow
from tbd import rundir
from tbd.records import RunSpec
from tbd.sampling import LoopHooks, LoopState, ProgressFn, run_timing_window


def write_iterations(run_dir: Path, state: LoopState) -> None:
    """The per-iteration log as gathered so far (RUN_DIR/iterations.json), with the loop's notes."""
    rundir.atomic_write_json(run_dir / rundir.ITERATIONS,
                             {**rundir.iteration_log_to_json(state.iteration_log()), "notes": state.notes})


def timing_window(hooks: LoopHooks, spec: RunSpec, state: LoopState, deadline_ns: int, run_dir: Path,
                  progress: ProgressFn, nvml: Any = None) -> None:
    """Run the timing window between CPU-counter (and NVML, if a sampler is given) readings."""
    cpu = CpuWindow()
    hooks.synchronize()
    cpu.start()
    if nvml is not None:
        nvml.start()
    try:
        run_timing_window(hooks, spec.iterations, state, deadline_ns, progress=progress)
    finally:
        cpu_sample = cpu.stop()
        nvml_sample = nvml.stop() if nvml is not None else None
        rundir.atomic_write_json(run_dir / rundir.CPU, rundir.cpu_sample_to_json(cpu_sample))
        if nvml_sample is not None:
            rundir.atomic_write_json(run_dir / rundir.NVML, rundir.nvml_sample_to_json(nvml_sample))
        elif nvml is not None:
            state.notes.append(f"NVML: {nvml.reason}")
        write_iterations(run_dir, state)
