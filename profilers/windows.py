"""The stage sequence every framework hook runs, and the timing window with its light collectors.

Warm-up -> timing window -> trace window -> GEMM ceiling, with the iteration log rewritten after
each stage. The framework hook supplies what differs: its LoopHooks, its trace window and its
ceiling measurement. Per-core CPU counters (and NVML on a GPU) run exactly around
`tbd.profilers.loop.run_timing_window`; what they gathered is written even when the window is cut
short (Ctrl-C, a crash), together with the iteration log, so a partial profile keeps it.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any, Callable

from tbd import rundir
from tbd.profilers.cpu import CpuWindow
from tbd.profilers.loop import LoopHooks, LoopState, ProgressFn, run_timing_window, run_warmup
from tbd.records import RunSpec


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


def workload_record(workload: Any, parameters: int | None) -> dict:
    """What the parent needs of the workload to turn iterations into throughput (raw/workload.json)."""
    return {"name": workload.name, "samples_per_step": workload.samples_per_step,
            "throughput_unit": workload.throughput_unit, "units_per_step": dict(workload.units_per_step),
            "parameters": parameters, "description": workload.description}


def run_stages(hooks: LoopHooks, workload: Any, spec: RunSpec, state: LoopState, run_dir: Path,
               progress: ProgressFn, *, parameters: int | None, nvml: Any,
               trace_window: Callable[[], None], gemm_ceiling: Callable[[], dict],
               memory_bandwidth: Callable[[], dict | None] = lambda: None,
               out_of_memory: Callable[[BaseException], bool] = lambda exc: isinstance(exc, MemoryError)) -> None:
    """Warm-up, timing window, trace window (when asked for), GEMM ceiling; raw records after each.

    Args:
        parameters: the model's parameter count as its framework counts it (None without a model).
        nvml: an NvmlSampler on a GPU, else None.
        trace_window: runs the framework's trace window.
        gemm_ceiling: measures the framework's matrix-multiply ceiling (profilers/gemm.py's keys).
        memory_bandwidth: measures the device's copy bandwidth (profilers/bandwidth.py), None when
            the analysis takes it from elsewhere (a GPU's datasheet).
        out_of_memory: tells the framework's out-of-memory errors. One in the GEMM or bandwidth
            measurement, after the workload's windows are done, leaves that figure unmeasured (a
            note says why) instead of failing the run: the batch fitted; the measurement's own
            buffers (2048x2048 matrices, 2 x 128 MiB copies) did not fit beside it, which under
            --memory-limit-gib would otherwise make `tbd sweep --batch max` stop short.
    """
    deadline_ns = hooks.clock() + int(spec.max_seconds * 1e9)
    rundir.atomic_write_json(run_dir / rundir.WORKLOAD, workload_record(workload, parameters))
    run_warmup(hooks, spec, state, deadline_ns, progress=progress)
    write_iterations(run_dir, state)
    timing_window(hooks, spec, state, deadline_ns, run_dir, progress, nvml=nvml)
    if spec.trace_iterations > 0:
        trace_window()
        write_iterations(run_dir, state)
    state.stage = "gemm"
    progress({"stage": "gemm", "done": 0, "total": 1})
    notes_before = len(state.notes)
    ceiling = _unless_out_of_memory(gemm_ceiling, out_of_memory, "GEMM ceiling", state.notes)
    if ceiling is not None:
        rundir.atomic_write_json(run_dir / rundir.GEMM, ceiling)
    bandwidth = _unless_out_of_memory(memory_bandwidth, out_of_memory, "memory bandwidth", state.notes)
    if bandwidth is not None:
        rundir.atomic_write_json(run_dir / rundir.BANDWIDTH, bandwidth)
    if len(state.notes) > notes_before:
        write_iterations(run_dir, state)  # the notes saying why a measurement is missing
    progress({"stage": "gemm", "done": 1, "total": 1})


def _unless_out_of_memory(measure: Callable[[], dict | None], out_of_memory: Callable[[BaseException], bool],
                          what: str, notes: list[str]) -> dict | None:
    """`measure()`, or None and a note when it runs out of memory (the workload's windows are done by then)."""
    try:
        return measure()
    except Exception as exc:  # noqa: BLE001 - each framework raises its own kind; not OOM is raised again
        if not (out_of_memory(exc) or getattr(exc, "errno", None) == errno.ENOMEM):
            raise
        first = str(exc).splitlines()[0][:240] if str(exc) else type(exc).__name__
        notes.append(f"{what} not measured: out of memory after the windows (its buffers did not fit beside the "
                     f"workload: {first}); the figures that need it are null")
        return None
