"""Kineto trace events sorted by kind.

`classify_events` splits a trace's event list into ops, ProfilerStep spans, runtime launch calls,
kernels and "[memory]" instants; `thread_codes` numbers the (pid, tid) threads. Number parsing and
the malformed-event guard every reader shares live in `profilers.trace_events`. The conventions
are those of `profilers.kineto`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tbd.errors import TraceFormatError
from tbd.profilers.trace_events import step_number

_LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver"})
_COPY_CATS = frozenset({"gpu_memcpy", "gpu_memset"})
_MARKER_CATS = frozenset({"cpu_op", "user_annotation"})


@dataclass(frozen=True)
class KinetoEvents:
    """Events of one trace sorted into the categories the reader uses (plain lists of dicts)."""

    events: list
    ops: list
    steps: list
    launches: list
    kernels: list
    copies: int
    memory: list


def classify_events(events: list, source: str) -> KinetoEvents:
    ops, steps, launches, kernels, memory = [], [], [], [], []
    copies = 0
    for ev in events:
        if not isinstance(ev, dict):
            raise TraceFormatError(f"{source}: traceEvents holds a non-object entry {ev!r:.60}")
        ph = ev.get("ph")
        if ph == "X":
            cat = ev.get("cat")
            if cat == "kernel":
                kernels.append(ev)
            elif cat in _MARKER_CATS:
                if step_number(str(ev.get("name", ""))) is not None:
                    steps.append(ev)
                elif cat == "cpu_op":
                    ops.append(ev)
            elif cat in _LAUNCH_CATS:
                launches.append(ev)
            elif cat in _COPY_CATS:
                copies += 1
        elif ph == "i" and ev.get("name") == "[memory]":
            memory.append(ev)
    return KinetoEvents(events, ops, steps, launches, kernels, copies, memory)


def thread_codes(events: list, codes: dict) -> np.ndarray:
    """One small integer per (pid, tid) pair (added to `codes`), so threads compare as numbers."""
    return np.array([codes.setdefault((ev.get("pid"), ev.get("tid")), len(codes)) for ev in events],
                    dtype=np.int64)
