"""The stage sequence every framework hook runs, and the timing window with its light collectors.

Warm-up -> timing window -> trace window -> GEMM ceiling, with the iteration log rewritten after
each stage. The framework hook supplies what differs: its LoopCallbacks, its trace window and its
ceiling measurement. Per-core CPU counters (and NVML on a GPU) run exactly around
`tbd.profilers.loop.run_timing_window`; what they gathered is written even when the window is cut
short (Ctrl-C, a crash), together with the iteration log, so a partial profile keeps it.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tbd.core import rundir
from tbd.core.errors import ResultFormatError
from tbd.core.records import RunSpec
from tbd.profilers.ceilings import REUSED
from tbd.profilers.cpu import CpuWindow
from tbd.profilers.loop import LoopCallbacks, LoopState, ProgressFn, run_timing_window, run_warmup
from tbd.profilers.machine_load import LoadWindow, clock_mhz, workload_processes


def write_iterations(run_dir: Path, state: LoopState) -> None:
    """The per-iteration log as gathered so far (RUN_DIR/iterations.json), with the loop's notes."""
    rundir.write_iterations(run_dir, state.iteration_log(), state.notes)


def timing_window(callbacks: LoopCallbacks, spec: RunSpec, state: LoopState, deadline_ns: int, run_dir: Path,
                  progress: ProgressFn, nvml: Any = None, iterations: int | None = None,
                  quality: dict | None = None) -> None:
    """Run the timing window `spec.repeat` times between CPU-counter (and NVML) readings.

    Each repeat is a window of its own (synchronised at both ends, its own per-core counters and
    census of the machine's other processes, kept in `quality["repeats"]`), so the analysis can
    give the throughput's median and spread; raw/cpu.json spans all of them. The log's timing
    window is the repeats together: first iteration of the first to the last of the last, wall
    time and samples summed (the short gaps between repeats are left out).
    """
    iterations = spec.iterations if iterations is None else iterations
    repeats = max(1, spec.repeat)
    records = quality.setdefault("repeats", []) if quality is not None else []
    cpu = CpuWindow()
    callbacks.synchronize()
    cpu.start()
    if nvml is not None:
        nvml.start()
    first, wall_ns, samples = len(state.times_ns), 0, 0.0
    try:
        for r in range(repeats):
            before_repeat = len(state.times_ns)
            state.timing_window = state.timing_window_ns = state.timing_window_samples = None
            one, load = CpuWindow(), LoadWindow(**workload_processes())
            one.start()
            load.start()
            try:
                run_timing_window(callbacks, iterations, state, deadline_ns,
                                  progress=lambda e, r=r: progress({**e, "done": r * iterations + e["done"],
                                                                    "total": repeats * iterations,
                                                                    "repeat": r + 1, "repeats": repeats}))
            finally:
                if state.timing_window_ns is not None:
                    records.append({"first": before_repeat, "last": state.timing_window[1],
                                    "wall_ns": state.timing_window_ns, "samples": state.timing_window_samples,
                                    "cpu": rundir.cpu_sample_to_json(one.stop()), "load": load.stop()})
                    wall_ns += state.timing_window_ns
                    samples = None if samples is None or state.timing_window_samples is None \
                        else samples + state.timing_window_samples
                if records:
                    last = records[-1]["last"]
                    state.timing_window, state.timing_window_ns = (first, last), wall_ns
                    state.timing_window_samples = samples
            if r + 1 < repeats and _agreed(callbacks, callbacks.clock() >= deadline_ns):
                state.notes.append(f"time budget reached: timing window run {r + 1} of {repeats} times")
                break
    finally:
        cpu_sample = cpu.stop()
        nvml_sample = nvml.stop() if nvml is not None else None
        rundir.atomic_write_json(run_dir / rundir.CPU, rundir.cpu_sample_to_json(cpu_sample))
        if nvml_sample is not None:
            rundir.atomic_write_json(run_dir / rundir.NVML, rundir.nvml_sample_to_json(nvml_sample))
        elif nvml is not None:
            state.notes.append(f"NVML: {nvml.reason}")
        if quality is not None:
            rundir.atomic_write_json(run_dir / rundir.QUALITY, quality)
        write_iterations(run_dir, state)


def workload_record(workload: Any, parameters: int | None) -> dict:
    """What the parent needs of the workload to turn iterations into throughput (raw/workload.json)."""
    return {"name": workload.name, "samples_per_step": workload.samples_per_step,
            "throughput_unit": workload.throughput_unit, "units_per_step": dict(workload.units_per_step),
            "parameters": parameters, "description": workload.description}


def run_stages(callbacks: LoopCallbacks, workload: Any, spec: RunSpec, state: LoopState, run_dir: Path,
               progress: ProgressFn, *, parameters: int | None, nvml: Any,
               trace_window: Callable[[int], None], gemm_ceiling: Callable[[], dict],
               memory_bandwidth: Callable[[], dict | None] = lambda: None,
               out_of_memory: Callable[[BaseException], bool] = lambda exc: isinstance(exc, MemoryError)) -> None:
    """Warm-up, GEMM ceiling, timing window(s), trace window, GEMM ceiling again; raw records after each.

    The GEMM ceiling is measured on both sides of the windows and both are kept (raw/quality.json
    has the first, raw/gemm.json the second): on a shared machine the two differ by the other
    jobs' share, and the analysis says how far the FLOP utilization can be trusted. A sweep's later
    points (RUN_DIR/raw/ceilings_reused.json, profilers/ceilings.py's REUSED) measure it before the
    windows only and take the first point's copy bandwidth, written as raw/bandwidth.json with its
    provenance.

    Args:
        parameters: the model's parameter count as its framework counts it (None without a model).
        nvml: an NvmlSampler on a GPU, else None.
        trace_window: runs the framework's trace window of the given number of iterations.
        gemm_ceiling: measures the framework's matrix-multiply ceiling (profilers/ceilings.py's keys).
        memory_bandwidth: measures the device's copy bandwidth (profilers/ceilings.py), None when
            the analysis takes it from elsewhere (a GPU's datasheet).
        out_of_memory: tells the framework's out-of-memory errors. One in the GEMM or bandwidth
            measurement, after the workload's windows are done, leaves that figure unmeasured (a
            note says why) instead of failing the run: the batch fitted; the measurement's own
            buffers (2048x2048 matrices, 2 x 128 MiB copies) did not fit beside it, which under
            --memory-limit-gib would otherwise make `tbd sweep --batch max` stop short.
    """
    deadline_ns = callbacks.clock() + _budget_ns(spec.max_seconds)
    rundir.atomic_write_json(run_dir / rundir.WORKLOAD, workload_record(workload, parameters))
    progress({"stage": "plan", "warmup_max_iterations": spec.warmup if spec.warmup is not None
              else spec.max_warmup_iterations, "budget_s": spec.max_seconds, "window_s": spec.window_seconds,
              "repeat": spec.repeat, "iterations": spec.iterations})
    run_warmup(callbacks, spec, state, deadline_ns, progress=progress)
    write_iterations(run_dir, state)
    quality: dict[str, Any] = {"schema": rundir.QUALITY_SCHEMA, "clock_start": clock_mhz()}
    # Measured here too in a sweep's later points: it leaves the allocator as `tbd profile` runs the windows.
    progress({"stage": "gemm_before", "done": 0, "total": 1})
    t0 = callbacks.clock()
    quality["gemm_before"] = _unless_out_of_memory(gemm_ceiling, out_of_memory, "GEMM ceiling before the windows",
                                                   state.notes)
    gemm_s = (callbacks.clock() - t0) / 1e9
    progress({"stage": "gemm_before", "done": 1, "total": 1})
    lent = _lent_ceilings(run_dir, state.notes)
    plan = window_plan(spec, state, gemm_s, agree=callbacks.agree, measure_after=lent is None)
    state.notes.extend(plan.notes)
    progress({"stage": "plan", "expected_s": plan.expected_s, "timing_iterations": plan.timing_iterations,
              "trace_iterations": plan.trace_iterations, "repeat": spec.repeat, "iteration_s": plan.iteration_s,
              "notes": plan.notes})
    timing_window(callbacks, spec, state, deadline_ns, run_dir, progress, nvml=nvml, iterations=plan.timing_iterations,
                  quality=quality)
    if plan.trace_iterations > 0:
        trace_window(plan.trace_iterations)
        write_iterations(run_dir, state)
        if state.stop_requested:  # a Ctrl-C in the trace window: its trace is saved, now the run stops
            raise KeyboardInterrupt
    state.stage = "gemm"
    notes_before = len(state.notes)
    if lent is None:
        progress({"stage": "gemm", "done": 0, "total": 1})
        ceiling = _unless_out_of_memory(gemm_ceiling, out_of_memory, "GEMM ceiling", state.notes)
        if ceiling is not None:
            rundir.atomic_write_json(run_dir / rundir.GEMM, ceiling)
    quality["clock_end"] = clock_mhz()
    rundir.atomic_write_json(run_dir / rundir.QUALITY, quality)
    if lent is not None and lent.get("bandwidth"):
        bandwidth = {**lent["bandwidth"], "provenance": lent["provenance"]}
    else:  # a GPU's (None: its datasheet's), or the first point measured none
        bandwidth = _unless_out_of_memory(memory_bandwidth, out_of_memory, "memory bandwidth", state.notes)
    if bandwidth is not None:
        rundir.atomic_write_json(run_dir / rundir.BANDWIDTH, bandwidth)
    if len(state.notes) > notes_before:
        write_iterations(run_dir, state)  # the notes saying why a measurement is missing
    if lent is None:
        progress({"stage": "gemm", "done": 1, "total": 1})


#: The profiler's cost on a traced iteration, for the duration estimate only: measured 0.95-1.56x on
#: full-size CPU runs here (analysis/stability.py, TRACE_OUTLIER_FACTOR); the upper end is used.
_TRACE_COST_FACTOR = 1.6


@dataclass(frozen=True)
class WindowPlan:
    """How many iterations the windows run, sized by count and by time, and how long that should take."""

    timing_iterations: int  # per repeat
    trace_iterations: int
    iteration_s: float | None  # the stable phase's median iteration, from the warm-up
    expected_s: float | None  # windows, the second GEMM ceiling and the bandwidth, from iteration_s
    notes: list[str]


def window_plan(spec: RunSpec, state: LoopState, gemm_s: float,
                agree: Callable[[list[float]], list[float]] | None = None, measure_after: bool = True) -> WindowPlan:
    """The windows' lengths: `--iterations`/`--trace-iterations`, cut so each timing repeat lasts about
    `--window-seconds` (and the trace window as long) at the stable phase's iteration time.

    With several ranks (`agree`), the slowest rank's iteration and GEMM times size every rank's
    windows, so all ranks run the same iterations.
    """
    stable = state.times_ns[state.warmup:] if state.warmup is not None else []
    tail = stable if len(stable) >= 3 else state.times_ns[-5:]
    iteration_s = float(np.median(tail)) / 1e9 if tail else None
    if agree is not None:
        slowest, gemm_s = agree([iteration_s or 0.0, gemm_s])
        iteration_s = slowest or None
    timing, trace, notes = spec.iterations, spec.trace_iterations, []
    if iteration_s and spec.window_seconds:
        # Compared as floats first: a window of 1e308 s (the API takes any finite number) overflows int().
        by_time = max(1, int(spec.window_seconds // iteration_s)) if spec.window_seconds / iteration_s < timing \
            else timing
        if by_time < timing:
            notes.append(f"timing window sized by time: {by_time} iterations per repeat (~{spec.window_seconds:g} s at "
                         f"{iteration_s:.3g} s each) instead of {timing}; --window-seconds or --iterations change it")
            timing = by_time
        traced_s = iteration_s * _TRACE_COST_FACTOR
        by_time = max(1, int(spec.window_seconds // traced_s)) if spec.window_seconds / traced_s < trace else trace
        if 0 < by_time < trace:
            notes.append(f"trace window sized by time: {by_time} iterations instead of {trace}")
            trace = by_time
    expected = None
    if iteration_s:
        lead_in = 1 if trace else 0
        # The GEMM ceiling again after the windows, and the copy bandwidth: about as long as the first
        # (neither in a sweep's later point: `measure_after` false).
        expected = (spec.repeat * timing * iteration_s + (trace + lead_in) * iteration_s * _TRACE_COST_FACTOR
                    + (2 * gemm_s if measure_after else 0.0))
    return WindowPlan(timing, trace, iteration_s, expected, notes)


def _budget_ns(seconds: float) -> int:
    """--max-seconds in ns; a budget beyond int64 ns (292 years: the API takes any finite number) is one
    never reached, as that budget would be."""
    ns = seconds * 1e9
    return int(ns) if ns < 2**62 else 2**62


def _lent_ceilings(run_dir: Path, notes: list[str]) -> dict | None:
    """What the sweep's first point lends this later point (profilers/ceilings.py, REUSED), with a note
    saying what it measured less; None when the run measures everything (not a sweep point, or the first)."""
    path = run_dir / REUSED
    if not path.is_file():
        return None
    try:
        lent = rundir.read_json(path, "what an earlier sweep point lends this one")
    except ResultFormatError:
        return None
    if not isinstance(lent, dict) or not isinstance(lent.get("provenance"), str):
        return None
    if not isinstance(lent.get("bandwidth"), dict):
        lent["bandwidth"] = None
    if lent["bandwidth"]:
        notes.append(f"GEMM ceiling measured before the windows only, and the copy bandwidth {lent['provenance']}, "
                     "reused: a sweep measures them after the windows at its first point only (they depend on the "
                     "device and dtype, not the batch)")
    else:
        notes.append(f"GEMM ceiling measured before the windows only: a sweep measures it after the windows at its "
                     f"first point only (batch {lent.get('batch')})")
    return lent


def _agreed(callbacks: LoopCallbacks, flag: bool) -> bool:
    """`flag` on this rank alone, or (several ranks) on any rank: all ranks then take the same branch."""
    return flag if callbacks.agree is None else bool(callbacks.agree([float(flag)])[0])


def _unless_out_of_memory(measure: Callable[[], dict | None], out_of_memory: Callable[[BaseException], bool],
                          what: str, notes: list[str]) -> dict | None:
    """`measure()`, or None and a note when it runs out of memory (the workload's windows are done by then)."""
    try:
        return measure()
    except Exception as exc:  # noqa: BLE001 - each framework raises its own kind; not OOM is raised again
        if not (out_of_memory(exc) or getattr(exc, "errno", None) == errno.ENOMEM):
            raise
        first = str(exc).splitlines()[0][:240] if str(exc) else type(exc).__name__
        notes.append(f"{what} not measured: out of memory (its buffers did not fit beside the workload: {first}); "
                     "the figures that need it are null")
        return None
