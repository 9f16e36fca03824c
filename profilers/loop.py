"""The framework-neutral iteration loop: warm-up until stable, timing window, trace window.

A framework hook (profilers/<fw>.py) supplies the step, a device synchronisation, a range marker
(NVTX) and a tracer context; this module decides how many iterations run in each stage and
records every iteration's wall time. Everything gathered lives in a `LoopState`, so a Ctrl-C or a
crash mid-stage leaves the iterations measured so far for a partial profile.

Clock: an injected integer-ns clock (time.perf_counter_ns by default), so tests are deterministic.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager

import numpy as np

from tbd.analysis.stability import StabilityRule, detect_timed
from tbd.core.records import IterationLog, RunSpec

ProgressFn = Callable[[dict], None]

#: Above this noise (sigma of log time: ~ the relative spread of one iteration) where the stable
#: phase was found, the run says the machine is noisy. In the warm-up corpus (docs/warmup.md) it
#: measured 0.003-0.20 for every MXNet and TensorFlow run, loaded or not, and for quiet PyTorch
#: runs (A3C's worker processes the highest), 0.60-1.14 for PyTorch beside a spin loop.
NOISY_SIGMA = 0.25


def _no_progress(event: dict) -> None:
    return None


@dataclass
class LoopCallbacks:
    """What a framework hook gives the loop."""

    step: Callable[[], Any]
    synchronize: Callable[[], None] = lambda: None
    mark: Callable[[str], ContextManager] = lambda name: contextlib.nullcontext()
    clock: Callable[[], int] = time.perf_counter_ns
    samples_counter: Callable[[], float] | None = None  # cumulative samples of all workers
    # An engine that queues work and returns at once (MXNet's): the timing window synchronises after
    # every iteration too, so its progress and per-iteration times count iterations done, not queued.
    sync_each_iteration: bool = False
    # Several ranks (torch.distributed): each value's maximum over every rank. Set, every decision
    # that ends a stage (warm-up over, budget spent) is taken by all ranks together, so they run the
    # same iterations: a rank that stopped alone would leave the others waiting in DDP's all-reduce.
    agree: Callable[[list[float]], list[float]] | None = None


@dataclass
class LoopState:
    """Iterations measured so far and where each stage began and ended (inclusive indices)."""

    times_ns: list[int] = field(default_factory=list)
    stage: str = "warmup"
    warmup: int | None = None
    warmup_run: int | None = None  # warm-up iterations run (the detector decides after `warmup`)
    warmup_detected: bool = True
    stable: bool | None = False  # None: a given warm-up, not checked
    timing_window: tuple[int, int] | None = None
    timing_window_ns: int | None = None
    timing_window_samples: float | None = None
    trace_window: tuple[int, int] | None = None
    notes: list[str] = field(default_factory=list)
    # A stop signal came inside the trace window (the runner child's handler sets it): the window ends
    # after the iteration under way, the tracer's trace of the iterations done is kept, then the run stops.
    stop_requested: bool = False

    def iteration_log(self) -> IterationLog:
        """The record of what ran; a loop cut short still gives a consistent log."""
        warmup = self.warmup if self.warmup is not None else len(self.times_ns)
        return IterationLog(
            times_ns=np.asarray(self.times_ns, dtype=np.int64),
            warmup=warmup,
            warmup_detected=self.warmup_detected,
            stable=self.stable,
            warmup_run=self.warmup_run if self.warmup is not None else len(self.times_ns),
            timing_window=self.timing_window,
            trace_window=self.trace_window,
            timing_window_ns=self.timing_window_ns,
            timing_window_samples=self.timing_window_samples,
        )


def _timed_step(callbacks: LoopCallbacks, index: int, sync: bool) -> int:
    with callbacks.mark(f"tbd.iteration {index}"):
        t0 = callbacks.clock()
        callbacks.step()
        if sync:
            callbacks.synchronize()
        return callbacks.clock() - t0


def run_warmup(callbacks: LoopCallbacks, spec: RunSpec, state: LoopState, deadline_ns: int,
               rule: StabilityRule = StabilityRule(), progress: ProgressFn = _no_progress) -> None:
    """Run iterations until the stable phase starts (or `spec.warmup` iterations when given).

    Each warm-up iteration synchronises the device so its time is the device's, not the launch
    queue's. Stops at the budget (`max_warmup_iterations`, the deadline) with `stable=False`. A
    given warm-up is not checked: `stable` stays None ("not checked") rather than claiming it; it
    too stops at the deadline (`--warmup 100000 --max-seconds 5` runs about 5 s), with `stable=False`
    and a note saying how many of the iterations asked for ran.
    `warmup` is the first stable iteration, `warmup_run` the iterations run (the detector decides
    after two windows beyond the start it finds, so the progress bar counts more than `warmup`).
    """
    state.stage = "warmup"
    if spec.warmup is not None:
        state.warmup_detected = False
        with callbacks.mark("tbd.warmup"):
            for i in range(spec.warmup):
                state.times_ns.append(_timed_step(callbacks, len(state.times_ns), sync=True))
                progress({"stage": "warmup", "done": i + 1, "total": spec.warmup})
                over = callbacks.clock() >= deadline_ns
                if callbacks.agree is not None:  # every rank stops warm-up at the same iteration
                    over = bool(callbacks.agree([float(over)])[0])
                if over and i + 1 < spec.warmup:
                    state.warmup = state.warmup_run = i + 1
                    state.stable = False
                    state.notes.append(
                        f"time budget reached: warm-up cut to {i + 1} of the {spec.warmup} iterations asked for "
                        f"(--max-seconds {spec.max_seconds:g} bounds warm-up plus timing windows); the windows "
                        "may still be warming up: results are flagged as not stable")
                    return
        state.warmup, state.warmup_run, state.stable = spec.warmup, spec.warmup, None
        return
    with callbacks.mark("tbd.warmup"):
        while True:
            state.times_ns.append(_timed_step(callbacks, len(state.times_ns), sync=True))
            found = detect_timed(state.times_ns, 1e-9, rule)
            progress({"stage": "warmup", "done": len(state.times_ns), "total": None,
                      "last_s": state.times_ns[-1] / 1e9})
            out_of_budget = len(state.times_ns) >= spec.max_warmup_iterations or callbacks.clock() >= deadline_ns
            start = found.start if found is not None else None
            if callbacks.agree is not None:
                # Warm-up ends when every rank is stable: the slowest decides, and the stable phase
                # starts where the last rank's does.
                unstable, out_of_budget, latest = callbacks.agree([float(found is None), float(out_of_budget),
                                                               float(start or 0)])
                out_of_budget = bool(out_of_budget)
                start = int(latest) if not unstable else None
            if start is not None:
                # Iterations after the start are already stable; they count as warm-up runs all
                # the same, since the windows below start fresh after a device synchronisation.
                state.warmup, state.warmup_run, state.stable = start, len(state.times_ns), True
                if found is not None and found.noise > NOISY_SIGMA:
                    state.notes.append(
                        f"iteration times vary by a factor ~{np.exp(found.noise):.1f} from one iteration to the "
                        "next where the stable phase was found (robust spread): another load on the machine? "
                        "The stable phase is stable only around that noise, and where it starts is that uncertain")
                return
            if out_of_budget:
                state.warmup = state.warmup_run = len(state.times_ns)
                state.stable, state.warmup_detected = False, False  # ran out: no end was detected
                state.notes.append(
                    f"stable phase not reached within {len(state.times_ns)} warm-up iterations (no two "
                    "consecutive windows agreed within their own noise: still "
                    "drifting or changing level); results are flagged as not stable")
                return


def run_timing_window(callbacks: LoopCallbacks, iterations: int, state: LoopState, deadline_ns: int,
                      progress: ProgressFn = _no_progress) -> None:
    """Run the timing window: no per-iteration synchronisation, synchronised at both ends.

    Stops early (at least one iteration) when the deadline passes, and says so in the notes.
    """
    state.stage = "timing"
    first = len(state.times_ns)
    callbacks.synchronize()
    with callbacks.mark("tbd.timing_window"):
        counted_start = callbacks.samples_counter() if callbacks.samples_counter else None
        t_start = callbacks.clock()
        done = 0
        last = t_start
        # The bar starts with the window, not after its first iteration: its time then spans the window.
        progress({"stage": "timing", "done": 0, "total": iterations})
        try:
            while done < iterations:
                with callbacks.mark(f"tbd.iteration {first + done}"):
                    callbacks.step()
                    if callbacks.sync_each_iteration:
                        callbacks.synchronize()
                now = callbacks.clock()
                state.times_ns.append(now - last)
                last = now
                done += 1
                state.timing_window = (first, first + done - 1)
                progress({"stage": "timing", "done": done, "total": iterations})
                # Several ranks: the window was sized for every rank alike (windows.window_plan); one
                # rank cutting it alone would leave the others waiting in the all-reduce.
                if now >= deadline_ns and done < iterations and callbacks.agree is None:
                    state.notes.append(f"time budget reached: timing window cut to {done} of {iterations} iterations")
                    break
        except BaseException:
            # Cut short (Ctrl-C, a crash): the completed iterations still make a window. Its end
            # waits for the device, so on an asynchronous GPU it also holds part of the
            # interrupted iteration: the throughput is then a lower bound, and says so.
            if done:
                callbacks.synchronize()
                t_end = callbacks.clock()
                state.times_ns[-1] += t_end - last
                state.timing_window_ns = t_end - t_start
                progress({"stage": "timing", "done": done, "total": iterations, "window_s": (t_end - t_start) / 1e9})
                if counted_start is not None:
                    state.timing_window_samples = callbacks.samples_counter() - counted_start
                state.notes.append(f"timing window cut to {done} of {iterations} iterations by an interrupt: "
                                   "throughput over those (a lower bound: the window's end waited for the device)")
            raise
        callbacks.synchronize()
        t_end = callbacks.clock()
        if counted_start is not None:
            state.timing_window_samples = callbacks.samples_counter() - counted_start
    # The last iteration's time includes the final synchronisation: the device finishing its queue.
    state.times_ns[-1] += t_end - last
    state.timing_window_ns = t_end - t_start
    # The window as iterations.json records it (iterations and wall time), for the bar's count and time.
    progress({"stage": "timing", "done": done, "total": iterations, "window_s": (t_end - t_start) / 1e9})


def run_trace_window(callbacks: LoopCallbacks, iterations: int, state: LoopState,
                     around_step: Callable[[int], ContextManager], after_step: Callable[[], None],
                     progress: ProgressFn = _no_progress, lead_in: int = 0) -> None:
    """Run the trace window under the tracer the caller has opened.

    `around_step(i)` wraps each recorded iteration (memory bookkeeping); `after_step()` advances
    the tracer (e.g. torch.profiler's step(), which closes the `ProfilerStep#N` span). `lead_in`
    iterations run first under the tracer without being recorded: a tracer's first step carries
    its start-up cost (torch.profiler's schedule calls it "warmup").

    A stop asked for meanwhile (`state.stop_requested`, a Ctrl-C) ends the window after the
    iteration under way, before the tracer is advanced: stopping the tracer then closes the last
    complete iteration's step, and no empty or half step enters the trace. The caller stops the run
    once the trace is saved.
    """
    state.stage = "trace"
    callbacks.synchronize()
    for _ in range(lead_in):
        if _stop_agreed(callbacks, state):
            state.notes.append(f"trace window not run: interrupted before its first of {iterations} iterations")
            return
        state.times_ns.append(_timed_step(callbacks, len(state.times_ns), sync=True))
        after_step()
    first = len(state.times_ns)
    progress({"stage": "trace", "done": 0, "total": iterations})
    with callbacks.mark("tbd.trace_window"):
        for i in range(iterations):
            if i == 0 and _stop_agreed(callbacks, state):
                state.notes.append(f"trace window not run: interrupted before its first of {iterations} iterations")
                return
            with around_step(i):
                state.times_ns.append(_timed_step(callbacks, first + i, sync=True))
            state.trace_window = (first, first + i)
            if i + 1 < iterations and _stop_agreed(callbacks, state):
                state.notes.append(f"trace window cut to {i + 1} of {iterations} iterations by an interrupt: "
                                   "the trace holds those, each complete")
                progress({"stage": "trace", "done": i + 1, "total": iterations})
                return
            after_step()
            progress({"stage": "trace", "done": i + 1, "total": iterations})


def _stop_agreed(callbacks: LoopCallbacks, state: LoopState) -> bool:
    """A stop was asked for (on any rank, with several: all ranks then leave the window together)."""
    if callbacks.agree is None:
        return state.stop_requested
    return bool(callbacks.agree([float(state.stop_requested)])[0])
