"""The raw records of time to accuracy: the events of one MLPerf run, as profilers/mlperf/log.py reads them.

They live here, on the floor, because analysis/mlperf_runs.py turns them into figures and analysis
never imports a reader.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Event:
    time_ms: float
    key: str
    value: Any
    metadata: dict[str, Any]


@dataclass(frozen=True)
class RunLog:
    """The events of one run, in file order, and the lines that were not events."""

    path: str
    events: tuple[Event, ...]
    bad_lines: int  # `:::MLLOG` lines whose JSON was not an event (cut off, not an object, no key or time)
    first_bad: str | None = None  # what was wrong with the first of them
    keys: frozenset[str] = field(default_factory=frozenset)

    def first(self, key: str) -> Event | None:
        return next((e for e in self.events if e.key == key), None)

    def last(self, key: str) -> Event | None:
        return next((e for e in reversed(self.events) if e.key == key), None)

    def value(self, key: str) -> Any:
        event = self.first(key)
        return None if event is None else event.value


def number(value: Any) -> float | None:
    """A finite number from an event's value or metadata (JSON numbers, or numeric strings some loggers write)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None
