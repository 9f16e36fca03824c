"""Progress of a run's stages, fed by the runner's progress events.

In a terminal: rich progress bars, one per stage. Anywhere else (a pipe, a CI log, a file): one
plain line per stage as it ends, with the time since the run started, so a log shows where the
time went, and a line every `HEARTBEAT_S` seconds while a stage (or the child's start) goes on, so
a piped run is never silent for long. Either way the plan (how many iterations each window will
run, why that differs from --iterations when it does, and how long that should take) is printed as
soon as the warm-up has found the iteration time, and the budget before that.

The timing windows' count and time are the ones iterations.json records: the runner's loop sends an
event when a window starts and one when it ends with its measured wall time (`window_s`), and the
bar (or the stage's line) shows those rather than the time between the first and last events.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, SpinnerColumn, Task, TextColumn
from rich.text import Text

from tbd.reports.numbers import fmt_duration, fmt_elapsed

#: Without a terminal, a line at least this often (seconds) while a stage runs: a piped run was
#: silent for 24 s of warm-up with one line per stage.
HEARTBEAT_S = 5.0
#: The stages whose events count iterations.
_ITERATION_STAGES = ("warmup", "timing", "trace")

STAGE_LABELS = {
    "build": "building the workload",
    "warmup": "warming up (until stable)",
    "gemm_before": "measuring the GEMM ceiling (before the windows)",
    "timing": "timing windows",
    "trace": "trace window",
    "gemm": "measuring the GEMM ceiling (after) and the memory bandwidth",
}


def plan_text(event: dict) -> str | None:
    """The words for a "plan" event: the budget before warm-up, the expected duration after it."""
    if event.get("expected_s") is not None:
        repeat = int(event.get("repeat") or 1)
        timing = int(event.get("timing_iterations") or 0)
        windows = f"{repeat} x {timing}" if repeat > 1 else f"{timing}"
        why = "".join(f"; {note}" for note in event.get("notes") or ())
        return (f"plan: {windows} timing iterations and {event.get('trace_iterations', 0)} traced, at "
                f"{event['iteration_s']:.3g} s per iteration: about {fmt_elapsed(event['expected_s'])} more{why}")
    if event.get("budget_s") is not None:
        repeat, iterations, window_s = int(event.get("repeat") or 1), event.get("iterations"), event.get("window_s")
        each = f"{iterations} iterations" if iterations is not None else "iterations"
        if window_s:
            each = f"{'at most ' if iterations is not None else ''}{each}, about {window_s:g} s"
        return (f"plan: warm-up until stable (at most {event.get('warmup_max_iterations')} iterations), then "
                f"{repeat} timing window{'s' if repeat > 1 else ''} of {each} each and a "
                f"trace window; at most {fmt_elapsed(float(event['budget_s']))} for warm-up and timing")
    return None


class _StageTime(ProgressColumn):
    """A bar's time: the measured window's wall time once the runner sent it, else the time since the bar began."""

    def render(self, task: Task) -> Text:
        took = task.fields.get("took_s")
        if took is not None:
            return Text(fmt_duration(took), style="progress.elapsed")
        return Text(fmt_elapsed(task.finished_time if task.finished else (task.elapsed or 0.0)),
                    style="progress.elapsed")


class StageProgress:
    """A context manager whose instances are callables taking runner progress events.

    heartbeat_s: without a terminal, a line at least this often while a stage goes on (None: never).
    A thread calls `tick()` once a second; with an injected `clock`, the caller calls `tick()` itself
    (the thread runs only on the real clock, so a test's clock decides every line).
    """

    def __init__(self, console: Console | None = None, enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic, heartbeat_s: float | None = HEARTBEAT_S):
        self._console = console or Console(stderr=True)
        self._enabled = enabled
        self._bars = enabled and self._console.is_terminal
        self._clock = clock
        self._t0 = clock()
        self._said = self._t0  # when the last line was printed (piped)
        self._heartbeat_s = heartbeat_s
        self._stage: str | None = None
        self._stage_t0 = self._t0
        self._last: dict[str, dict] = {}
        self._windows_s: dict[int, float] = {}  # timing repeat -> its measured wall time
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # rich draws the bar in ASCII on a stream that is not UTF-8; the spinner must be told (its default
        # is braille dots, which an ASCII terminal would get as backslash escapes).
        spinner = "dots" if self._console.encoding.lower().startswith("utf") else "line"
        self._progress = Progress(SpinnerColumn(spinner), TextColumn("{task.description}"), BarColumn(),
                                  MofNCompleteColumn(), TextColumn("{task.fields[info]}"), _StageTime(),
                                  console=self._console, transient=False, disable=not self._bars)
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> "StageProgress":
        self._progress.__enter__()
        if self._enabled and not self._bars and self._heartbeat_s and self._clock is time.monotonic:
            self._thread = threading.Thread(target=self._beat, name="tbd-progress-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        with self._lock:
            if not self._bars and self._stage is not None and exc[0] is None:
                self._line_for_end(self._stage)
            self._progress.__exit__(*exc)

    def _beat(self) -> None:
        while not self._stop.wait(1.0):
            self.tick()

    def say(self, text: str) -> None:
        """A line of its own, above the bars in a terminal, with the elapsed time elsewhere."""
        if not self._enabled:
            return
        with self._lock:
            self._said = self._clock()
            if self._bars:
                self._progress.console.print(f"tbd: {text}", highlight=False, markup=False)
            else:
                self._console.print(f"tbd: [{fmt_elapsed(self._said - self._t0):>8}] {text}", highlight=False,
                                    markup=False, soft_wrap=True)

    def tick(self) -> None:
        """Without a terminal: a line saying what still runs when none was printed for `heartbeat_s`."""
        if not self._enabled or self._bars or not self._heartbeat_s:
            return
        with self._lock:
            now = self._clock()
            if now - self._said < self._heartbeat_s:
                return
            if self._stage is None:
                self.say(f"waiting for the workload process ({fmt_elapsed(now - self._t0)} so far)")
                return
            event = self._last.get(self._stage, {})
            done, total = event.get("done"), event.get("total")
            so_far = ""
            if self._stage in _ITERATION_STAGES and done is not None:
                so_far = f"{done}{f' of {total}' if total is not None else ''} iterations, "
            last = f"last {fmt_duration(event['last_s'])}, " if event.get("last_s") is not None else ""
            self.say(f"{STAGE_LABELS.get(self._stage, self._stage)}: {so_far}{last}"
                     f"{fmt_elapsed(now - self._stage_t0)} so far")

    def __call__(self, event: dict) -> None:
        with self._lock:
            self._event(event)

    def _event(self, event: dict) -> None:
        stage = str(event.get("stage", ""))
        if stage == "plan":
            last = self._last.get(self._stage or "", {})
            if not self._bars and self._stage is not None and last.get("done") == last.get("total") is not None:
                self._line_for_end(self._stage)  # that stage is over: its line comes before the plan's
                self._stage = None
            text = plan_text(event)
            if text:
                self.say(text)
            return
        if stage != self._stage:
            if self._stage is not None and not self._bars:
                self._line_for_end(self._stage)
            self._stage, self._stage_t0 = stage, self._clock()
        if stage == "timing" and event.get("window_s") is not None:
            self._windows_s[int(event.get("repeat") or 1)] = float(event["window_s"])
        self._last[stage] = event
        if self._bars:
            self._bar(stage, event)

    def _measured_s(self, stage: str) -> float | None:
        """The timing windows' measured wall time so far (summed over repeats), None before any ended."""
        return sum(self._windows_s.values()) if stage == "timing" and self._windows_s else None

    def _line_for_end(self, stage: str) -> None:
        event = self._last.get(stage, {})
        took = fmt_elapsed(self._clock() - self._stage_t0)
        label = STAGE_LABELS.get(stage, stage)
        done, total = event.get("done"), event.get("total")
        count = (f": {done} iteration{'' if done == 1 else 's'}" if stage in _ITERATION_STAGES
                 and done is not None else "")
        if stage == "timing" and event.get("repeats", 1) > 1:
            count = f": {len(self._windows_s) or event.get('repeat')} windows, {done} of {total} iterations"
        elif stage in _ITERATION_STAGES and total is not None and done is not None and done < total:
            count = f": {done} of {total} iterations"
        measured = self._measured_s(stage)
        if measured is not None:
            count += f" in {fmt_duration(measured)} (measured)"
        self.say(f"{label}{count} ({took})")

    def _bar(self, stage: str, event: dict) -> None:
        total = event.get("total")
        if stage not in self._tasks:
            # A new stage means the earlier ones are over: settle their bars (warm-up has no total).
            for task in self._progress.tasks:
                if not task.finished:
                    short = task.total is not None and task.completed < task.total
                    ended = next((s for s, t in self._tasks.items() if t == task.id), "")
                    self._progress.update(task.id, total=task.total if short else task.completed,
                                          info=f"stopped at {task.completed:g}" if short else "done",
                                          took_s=self._measured_s(ended))
            self._tasks[stage] = self._progress.add_task(STAGE_LABELS.get(stage, stage), total=total, info="",
                                                         took_s=None)
        task = self._tasks[stage]
        info = f"last {event['last_s'] * 1e3:.1f} ms" if "last_s" in event else ""
        if event.get("repeats", 1) > 1:
            info = f"window {event['repeat']} of {event['repeats']}"
        over = total is not None and event.get("done") == total
        self._progress.update(task, completed=event.get("done", 0), total=total, info=info,
                              took_s=self._measured_s(stage) if over else None)
        if total is not None and event.get("done") == total:
            self._progress.update(task, info="done")
