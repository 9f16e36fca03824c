"""Progress of a run's stages, fed by the runner's progress events.

In a terminal: rich progress bars, one per stage. Anywhere else (a pipe, a CI log, a file): one
plain line per stage as it ends, with the time since the run started, so a log shows where the
time went and a piped run is never silent for minutes. Either way the plan (how many iterations
each window will run, and how long that should take) is printed as soon as the warm-up has found
the iteration time, and the budget before that.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from tbd.reports.numbers import fmt_elapsed

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
        return (f"plan: {windows} timing iterations and {event.get('trace_iterations', 0)} traced, at "
                f"{event['iteration_s']:.3g} s per iteration: about {fmt_elapsed(event['expected_s'])} more")
    if event.get("budget_s") is not None:
        return (f"plan: warm-up until stable (at most {event.get('warmup_max_iterations')} iterations), then "
                f"{event.get('repeat') or 1} timing window(s) of about {event.get('window_s') or '-'} s each and a "
                f"trace window; at most {fmt_elapsed(float(event['budget_s']))} for warm-up and timing")
    return None


class StageProgress:
    """A context manager whose instances are callables taking runner progress events."""

    def __init__(self, console: Console | None = None, enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic):
        self._console = console or Console(stderr=True)
        self._enabled = enabled
        self._bars = enabled and self._console.is_terminal
        self._clock = clock
        self._t0 = clock()
        self._stage: str | None = None
        self._stage_t0 = self._t0
        self._last: dict[str, dict] = {}
        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                  MofNCompleteColumn(), TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                                  console=self._console, transient=False, disable=not self._bars)
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> "StageProgress":
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self._bars and self._stage is not None and exc[0] is None:
            self._line_for_end(self._stage)
        self._progress.__exit__(*exc)

    def say(self, text: str) -> None:
        """A line of its own, above the bars in a terminal, with the elapsed time elsewhere."""
        if not self._enabled:
            return
        if self._bars:
            self._progress.console.print(f"tbd: {text}", highlight=False, markup=False)
        else:
            self._console.print(f"tbd: [{fmt_elapsed(self._clock() - self._t0):>8}] {text}", highlight=False,
                                markup=False, soft_wrap=True)

    def __call__(self, event: dict) -> None:
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
        self._last[stage] = event
        if self._bars:
            self._bar(stage, event)

    def _line_for_end(self, stage: str) -> None:
        event = self._last.get(stage, {})
        took = fmt_elapsed(self._clock() - self._stage_t0)
        label = STAGE_LABELS.get(stage, stage)
        done, total = event.get("done"), event.get("total")
        count = (f": {done} iteration{'' if done == 1 else 's'}" if stage in ("warmup", "timing", "trace")
                 and done is not None else "")
        if stage == "timing" and event.get("repeats", 1) > 1:
            count = f": {event.get('repeat')} windows, {done} of {total} iterations"
        self.say(f"{label}{count} ({took})")

    def _bar(self, stage: str, event: dict) -> None:
        total = event.get("total")
        if stage not in self._tasks:
            # A new stage means the earlier ones are over: settle their bars (warm-up has no total).
            for task in self._progress.tasks:
                if not task.finished:
                    self._progress.update(task.id, total=task.completed, info="done")
            self._tasks[stage] = self._progress.add_task(STAGE_LABELS.get(stage, stage), total=total, info="")
        task = self._tasks[stage]
        info = f"last {event['last_s'] * 1e3:.1f} ms" if "last_s" in event else ""
        if event.get("repeats", 1) > 1:
            info = f"window {event['repeat']} of {event['repeats']}"
        self._progress.update(task, completed=event.get("done", 0), total=total, info=info)
        if total is not None and event.get("done") == total:
            self._progress.update(task, info="done")
