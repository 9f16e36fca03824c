"""Progress bars for the stages of a run (rich), fed by the runner's progress events."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

STAGE_LABELS = {
    "build": "building the workload",
    "warmup": "warming up (until stable)",
    "timing": "timing window",
    "trace": "trace window",
    "gemm": "measuring the GEMM ceiling",
}


class StageProgress:
    """A context manager whose instances are callables taking runner progress events."""

    def __init__(self, console: Console | None = None, enabled: bool = True):
        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                  MofNCompleteColumn(), TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                                  console=console or Console(stderr=True), transient=False,
                                  disable=not enabled)
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> "StageProgress":
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._progress.__exit__(*exc)

    def __call__(self, event: dict) -> None:
        stage = str(event.get("stage", ""))
        total = event.get("total")
        if stage not in self._tasks:
            # A new stage means the earlier ones are over: settle their bars (warm-up has no total).
            for task in self._progress.tasks:
                if not task.finished:
                    self._progress.update(task.id, total=task.completed, info="done")
            self._tasks[stage] = self._progress.add_task(STAGE_LABELS.get(stage, stage), total=total, info="")
        task = self._tasks[stage]
        info = f"last {event['last_s'] * 1e3:.1f} ms" if "last_s" in event else ""
        self._progress.update(task, completed=event.get("done", 0), total=total, info=info)
        if total is not None and event.get("done") == total:
            self._progress.update(task, info="done")
