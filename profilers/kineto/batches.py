"""Kineto events, batch by batch, into columns: the typed structs msgspec decodes each event into,
and the `ColumnBuilder` that sorts a batch by kind and appends its columns.

The structs hold only the fields the reader uses; everything else in an event is skipped by the
decoder. Per-event work in the builder is C-level where it can be (attrgetter maps, dict lookups
through map); Python runs once per distinct name, thread or signature. What is sorted where:
`profilers.kineto.decode`'s docstring.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import islice
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from tbd.core.errors import TraceFormatError
from tbd.profilers.kineto.columns import (
    AnnotationColumns,
    KernelColumns,
    KinetoTrace,
    LaunchColumns,
    MemoryColumns,
    OpColumns,
    Signature,
    SpanColumns,
    StepColumns,
)
from tbd.profilers.kineto.completion import uses_sequence
from tbd.profilers.kineto.values import INT64, UINT64, as_int, dim3_column, percent_column
from tbd.profilers.traces.events import DUR_MAX_NS, TIME_MAX_NS, TIME_MIN_NS, step_number
from tbd.profilers.traces.names import clean_name, quoted
from tbd.profilers.traces.times import fast_us_text_to_ns, us_text_to_ns

TRACE_HINT = "export it with torch.profiler's export_chrome_trace (or on_trace_ready=tensorboard_trace_handler)"

_EMPTY = msgspec.Raw()


class EventArgs(msgspec.Struct, gc=False, frozen=True):
    # Loose types where writers differ (ROCm writes "stream": "0x0", legacy traces "tid": "stream 7"):
    # one odd value must not stop the decoding of a whole trace; `as_int` reads them.
    correlation: int | str | None = None
    device: int | str | None = None
    stream: int | str | None = None
    # Empty when absent, so the three join into a signature key without a check per call.
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=_EMPTY)
    input_dims_18: msgspec.Raw = msgspec.field(name="Input dims", default=_EMPTY)  # PyTorch 1.8's spelling
    input_type: msgspec.Raw = msgspec.field(name="Input type", default=_EMPTY)
    concrete: msgspec.Raw = msgspec.field(name="Concrete Inputs", default=_EMPTY)
    addr: int | str | None = msgspec.field(name="Addr", default=None)
    nbytes: int | float | str | None = msgspec.field(name="Bytes", default=None)
    total_allocated: int | float | str | None = msgspec.field(name="Total Allocated", default=None)
    device_id: int | str | None = msgspec.field(name="Device Id", default=None)
    # A kernel's launch configuration as CUPTI reports it (PyTorch 1.8 on; ROCm traces lack it).
    # Any type: writers differ (Triton's launch events write "grid" as text), and an odd value only
    # leaves the field unknown (`kineto.values`).
    grid: Any = None
    block: Any = None
    registers: Any = msgspec.field(name="registers per thread", default=None)
    shared_memory: Any = msgspec.field(name="shared memory", default=None)
    occupancy: Any = msgspec.field(name="est. achieved occupancy %", default=None)
    # Python frames of the op (torch.profiler(with_stack=True) in PyTorch 1.8-1.10: one string).
    call_stack: str | None = msgspec.field(name="Call stack", default=None)
    # The autograd sequence number an op records (PyTorch 1.9 on): a forward op and the backward
    # node made for it share it (profilers.kineto.completion). Any type: read by `as_int`.
    sequence: Any = msgspec.field(name="Sequence number", default=None)


NO_ARGS = EventArgs()


class Event(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: str | int | float | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: msgspec.Raw = None
    dur: msgspec.Raw = None
    s: str | None = None
    args: EventArgs | None = NO_ARGS  # a shared empty one when absent: no None check per event


# Kinds of "X" events, by cat: today's names, and PyTorch 1.8-1.9's ("Operator", "Runtime", "Kernel",
# "Memcpy", "Memset"; ROCm builds write today's CUDA names for HIP activity too).
_OP, _ANNOTATION, _LAUNCH, _KERNEL, _COPY, _PYTHON, _OTHER = range(7)
_KINDS = {"cpu_op": _OP, "user_annotation": _ANNOTATION, "cuda_runtime": _LAUNCH, "cuda_driver": _LAUNCH,
          "kernel": _KERNEL, "gpu_memcpy": _COPY, "gpu_memset": _COPY, "python_function": _PYTHON,
          "Operator": _OP, "Runtime": _LAUNCH, "Kernel": _KERNEL, "Memcpy": _COPY, "Memset": _COPY}


EVENTS_DECODER = msgspec.json.Decoder(list[Event])

_NAME, _PID, _TID, _TS, _DUR, _ARGS = map(attrgetter, ("name", "pid", "tid", "ts", "dur", "args"))
_DEVICE, _STREAM, _CORRELATION, _CAT = map(attrgetter, ("device", "stream", "correlation", "cat"))
_GRID, _BLOCK, _REGISTERS, _SHARED_MEMORY, _OCCUPANCY = map(
    attrgetter, ("grid", "block", "registers", "shared_memory", "occupancy"))
_CALL_STACK = attrgetter("call_stack")
_ADDR, _NBYTES, _TOTAL_ALLOCATED, _DEVICE_ID = map(attrgetter, ("addr", "nbytes", "total_allocated", "device_id"))
_INT = {int}
_SHAPES = attrgetter("input_dims", "input_dims_18", "input_type", "concrete")


class ColumnBuilder:
    """Columns grown batch by batch (lists of numpy chunks), concatenated once at the end.

    Per-event work is C-level where it can be (attrgetter maps, dict lookups through map); Python
    runs once per distinct name, thread or signature.
    """

    def __init__(self, source: str):
        self.source = source
        # Tables that number a new key as they meet it (`_numbering`): key -> code.
        self.name_codes: dict = _numbering()
        self.step_of_name: list[int | None] = []  # name code -> N of "ProfilerStep#N", else None
        self.step_table = np.zeros(0, dtype=np.int64)  # the same, -1 for None, as an array
        self.shape_codes: dict = _numbering()  # the three shape arguments' JSON text, joined -> code
        self.signature_codes: dict = _numbering()  # (name code << 32 | shape code) -> signature code
        self.pid_codes: dict = _numbering()
        self.tid_codes: dict = _numbering()
        self.thread_keys = _ThreadKeys(self.pid_codes, self.tid_codes)
        self.tid_table = np.zeros(0, dtype=np.int64)  # tid code -> the tid as an int (`_tid_values`)
        self.sync_table = np.zeros(0, dtype=bool)  # name code -> a synchronisation call's name (`_sync_spans`)
        self.stack_codes: dict = _numbering(None)  # "Call stack" text -> code; 0: none
        self.uses_sequence: list[bool] = []  # name code -> its ops' sequence numbers are read
        self.sequence_table = np.zeros(0, dtype=bool)  # the same as an array
        self.parts: dict[str, list] = {}
        self.copies = 0
        self.categories: set = set()
        self.memory_problem: str | None = None
        self.timed_start: int | None = None
        self.negative_durations = 0  # "dur" < 0, counted as 0 ns
        self.timed_end: int | None = None

    def _put(self, column: str, values) -> None:
        self.parts.setdefault(column, []).append(values)

    def add(self, events: list[Event]) -> None:
        self.categories.update(map(_CAT, events))  # a set: C-level, no counting
        buckets = self._buckets(events)
        ops, annotations, launches, kernels, copies, python, other, memory = buckets
        self.copies += len(copies)
        op_names = self._names(ops)
        step = self._step_numbers(op_names) >= 0
        steps = [ops[i] for i in np.flatnonzero(step).tolist()]
        marked = self._names(annotations)
        marked_step = (self._step_numbers(marked) >= 0).tolist()
        steps += [ev for ev, s in zip(annotations, marked_step) if s]
        marks = [(ev, code) for ev, code, s in zip(annotations, marked.tolist(), marked_step) if not s]
        if step.any():
            ops, op_names = [ev for ev, s in zip(ops, step.tolist()) if not s], op_names[~step]
        spans = [self._ops(ops, op_names), self._steps(steps), self._launches(launches), self._kernels(kernels),
                 self._memory(memory), self._python(python), self._annotations(marks),
                 self._copy_spans(copies), self._lenient_spans(other)]
        starts = [s for s, _ in spans if s.size]
        if starts:
            lo = min(int(s.min()) for s in starts)
            hi = max(int(e.max()) for s, e in spans if e.size)
            self.timed_start = lo if self.timed_start is None else min(self.timed_start, lo)
            self.timed_end = hi if self.timed_end is None else max(self.timed_end, hi)

    @staticmethod
    def _buckets(events: list[Event]) -> list[list[Event]]:
        """The events sorted by kind: _OP.._OTHER, then "[memory]" instants (module docstring)."""
        kinds = _KINDS
        buckets: list[list[Event]] = [[] for _ in range(_OTHER + 2)]
        for ev in events:
            ph = ev.ph
            if ph == "X":
                kind = kinds.get(ev.cat, _OTHER)
                if kind != _OTHER or ev.cat != "Trace":
                    buckets[kind].append(ev)
            elif ph == "i" and ev.s != "g" and ev.cat != "Trace":
                buckets[_OTHER + 1 if ev.name == "[memory]" else _OTHER].append(ev)
        return buckets

    # -- codes --------------------------------------------------------------------------------

    @staticmethod
    def _codes(table: dict, keys) -> np.ndarray:
        """One int32 code per key, new distinct keys numbered in order of first appearance: one C-level
        lookup per key (`table` is a `_numbering`)."""
        return np.fromiter(map(table.__getitem__, keys), dtype=np.int32, count=len(keys))

    def _names(self, events: list[Event]) -> np.ndarray:
        codes = self._codes(self.name_codes, list(map(_NAME, events)))
        if len(self.name_codes) > len(self.step_of_name):  # new names: Python once per distinct name
            for name in islice(self.name_codes, len(self.step_of_name), None):
                self.step_of_name.append(step_number(name) if isinstance(name, str) else None)
            self.step_table = np.array([-1 if n is None else n for n in self.step_of_name], dtype=np.int64)
        return codes

    def _step_numbers(self, name_codes: np.ndarray) -> np.ndarray:
        """N of each "ProfilerStep#N" name, -1 for every other name (codes from `_names`)."""
        return self.step_table[name_codes] if name_codes.size else np.zeros(0, dtype=np.int64)

    def _threads(self, events: list[Event]) -> np.ndarray:
        """One int64 key per (pid, tid) pair: the pair's codes side by side (pids and tids may be strings)."""
        pairs = zip(map(_PID, events), map(_TID, events))
        return np.fromiter(map(self.thread_keys.__getitem__, pairs), dtype=np.int64, count=len(events))

    def _tid_values(self) -> np.ndarray:
        """The tid of each tid code as `_ints` reads one (-1 if unreadable): Python once per distinct tid."""
        if len(self.tid_codes) > len(self.tid_table):
            self.tid_table = self._ints(list(self.tid_codes))
        return self.tid_table

    # -- per kind: each puts its columns and returns its events' (start, end) ns -------------

    def _times(self, events: list[Event], field: str, what: str) -> np.ndarray:
        """The events' "ts" or "dur" as int ns; a negative duration counts as 0 (and is counted)."""
        texts = list(map(_TS if field == "ts" else _DUR, events))
        try:
            ns, ok = _in_range(*us_text_to_ns(texts), field)
        except TypeError:  # a None (no such field) among the texts: cheaper found so than by a look at each
            raise TraceFormatError(f"{self.source}: malformed {what} event (no {field!r})", hint=TRACE_HINT) from None
        if not ok.all():
            bad = bytes(texts[int(np.flatnonzero(~ok)[0])])
            raise TraceFormatError(f"{self.source}: malformed or out-of-range {what} event {field} {quoted(bad, 40)}",
                                   hint=TRACE_HINT)
        return self._clamped(ns) if field == "dur" else ns

    def _spans(self, events: list[Event], what: str) -> tuple[np.ndarray, np.ndarray]:
        """(start, dur) of `_times` for "ts" and "dur" at once: one conversion of both columns' texts in
        the common case (every text in one fast form and in range), else one `_times` call per field."""
        texts = list(map(_TS, events))
        texts += map(_DUR, events)
        ns = fast_us_text_to_ns(texts) if None not in texts else None
        if ns is not None:
            n = len(events)
            start, dur = ns[:n], ns[n:]
            if _in_range(start, _TRUE, "ts")[1].all() and _in_range(dur, _TRUE, "dur")[1].all():
                return start, self._clamped(dur)
        return self._times(events, "ts", what), self._times(events, "dur", what)

    def _clamped(self, dur: np.ndarray) -> np.ndarray:
        negative = int(np.count_nonzero(dur < 0))
        if negative:
            self.negative_durations += negative
            dur = np.maximum(dur, 0)
        return dur

    def _copy_spans(self, copies: list[Event]) -> tuple[np.ndarray, np.ndarray]:
        """memcpy/memset spans, read as leniently as the timed extent: kept as columns (GPU idle time on copies)."""
        start, end = self._lenient_spans(copies)
        if start.size:
            self._put("copy.start", start)
            self._put("copy.end", end)
        return start, end

    def _sync_spans(self, launches: list[Event]) -> None:
        """The runtime's synchronisation calls among `launches` (a name ending "Synchronize": cudaStreamSynchronize,
        cudaDeviceSynchronize, cudaEventSynchronize, hip...), kept as spans: the host blocked until the GPU drained."""
        names = self._codes(self.name_codes, list(map(_NAME, launches)))
        if len(self.name_codes) > len(self.sync_table):  # Python once per distinct name
            self.sync_table = np.array([isinstance(n, str) and n.endswith("Synchronize") for n in self.name_codes])
        if names.size and self.sync_table[names].any():
            syncs = [launches[i] for i in np.flatnonzero(self.sync_table[names]).tolist()]
            start, end = self._lenient_spans(syncs)
            self._put("sync.start", start)
            self._put("sync.end", end)

    def _lenient_spans(self, events: list[Event]) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of events read only for the timed extent; unreadable times are skipped."""
        events = [ev for ev in events if ev.ts is not None]
        start, end, ok = _lenient_times(events)
        return start[ok], end[ok]

    def _annotations(self, marks: list[tuple[Event, int]]) -> tuple[np.ndarray, np.ndarray]:
        """User annotations other than steps (with their name codes), read as leniently as the
        timed extent reads them: kept as columns (Gloo's collectives are annotations), and their extent."""
        marks = [m for m in marks if m[0].ts is not None]
        if not marks:
            return _NO_SPAN
        events = [ev for ev, _ in marks]
        start, end, ok = _lenient_times(events)
        keep = np.flatnonzero(ok)
        kept = [events[i] for i in keep.tolist()]
        self._put("annotation.name", np.array([marks[i][1] for i in keep.tolist()], dtype=np.int32))
        self._put("annotation.start", start[keep])
        self._put("annotation.dur", end[keep] - start[keep])
        self._put("annotation.thread", self._threads(kept) if kept else np.zeros(0, dtype=np.int64))
        return start[ok], end[ok]

    def _ops(self, ops: list[Event], names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not ops:
            return _NO_SPAN
        start, dur = self._spans(ops, "cpu_op")
        self._put("op.name", names)
        self._put("op.start", start)
        self._put("op.dur", dur)
        thread = self._threads(ops)
        self._put("op.thread", thread)
        self._put("op.tid", self._tid_values()[thread & 0xFFFFFFFF])  # the tid code is the key's low half
        args = list(map(_ARGS, ops))
        if None in args:  # "args": null
            args = [NO_ARGS if a is None else a for a in args]
        self._put("op.signature", self._signatures(args, names))
        self._put("op.sequence", self._sequences(args, names))
        self._put("op.stack", self._codes(self.stack_codes, list(map(_CALL_STACK, args))))
        return start, start + dur

    def _sequences(self, args: list[EventArgs], names: np.ndarray) -> np.ndarray:
        """Autograd sequence numbers (-1 none), read only for the ops whose name uses them
        (`kineto.completion.uses_sequence`): a per-op read of every op would cost a tenth of the decoding."""
        if len(self.name_codes) > len(self.uses_sequence):
            for name in islice(self.name_codes, len(self.uses_sequence), None):
                self.uses_sequence.append(isinstance(name, str) and uses_sequence(name))
            self.sequence_table = np.array(self.uses_sequence, dtype=bool)
        out = np.full(len(args), -1, dtype=np.int64)
        wanted = np.flatnonzero(self.sequence_table[names]) if len(names) else names
        if len(wanted):
            out[wanted] = self._ints([args[i].sequence for i in wanted.tolist()])
        return out

    def _signatures(self, args: list[EventArgs], names: np.ndarray) -> np.ndarray:
        """Signature code per op: its name code with the code of its three shape arguments' text."""
        shapes = self._codes(self.shape_codes, list(map(b"\0".join, map(_SHAPES, args)))).astype(np.int64)
        keys, inverse = np.unique((names.astype(np.int64) << 32) | shapes, return_inverse=True)
        return self._codes(self.signature_codes, keys.tolist())[inverse.reshape(-1)]

    def _python(self, frames: list[Event]) -> tuple[np.ndarray, np.ndarray]:
        """python_function frames (with_stack=True), read leniently: a frame without readable times is skipped."""
        frames = [ev for ev in frames if ev.ts is not None and ev.dur is not None]
        if not frames:
            return _NO_SPAN
        start, ok = _in_range(*us_text_to_ns(list(map(_TS, frames))), "ts")
        dur, dur_ok = _in_range(*us_text_to_ns(list(map(_DUR, frames))), "dur")
        keep = np.flatnonzero(ok & dur_ok)
        frames = [frames[i] for i in keep.tolist()]
        start, dur = start[keep], np.maximum(dur[keep], 0)
        self._put("py.name", self._names(frames))
        self._put("py.start", start)
        self._put("py.dur", dur)
        self._put("py.thread", self._threads(frames))
        return start, start + dur

    def _steps(self, steps: list[Event]) -> tuple[np.ndarray, np.ndarray]:
        if not steps:
            return _NO_SPAN
        start, dur = self._spans(steps, "ProfilerStep")
        self._put("step.number", self._step_numbers(self._names(steps)))
        self._put("step.start", start)
        self._put("step.dur", dur)
        return start, start + dur

    def _launches(self, launches: list[Event]) -> tuple[np.ndarray, np.ndarray]:
        self._sync_spans(launches)
        events = [ev for ev in launches if ev.ts is not None] if None in map(_TS, launches) else launches
        start, end, ok = _lenient_times(events, all_x=True)
        args = list(map(_ARGS, launches))
        if None not in args and events is launches and ok.all():  # the common case: every time read once
            correlation = list(map(_CORRELATION, args))
            if None not in correlation:
                if launches:
                    self._put("launch.correlation", self._ints(correlation))
                    self._put("launch.start", start)
                    self._put("launch.thread", self._threads(launches))
                return start, end
        extent = start[ok], end[ok]
        correlation = [None if a is None else a.correlation for a in args]
        if None in correlation:
            launches = [ev for ev, c in zip(launches, correlation) if c is not None]
            correlation = [c for c in correlation if c is not None]
        if launches:
            self._put("launch.correlation", self._ints(correlation))
            self._put("launch.start", self._times(launches, "ts", "runtime"))
            self._put("launch.thread", self._threads(launches))
        return extent

    def _kernels(self, kernels: list[Event]) -> tuple[np.ndarray, np.ndarray]:
        if not kernels:
            return _NO_SPAN
        args = list(map(_ARGS, kernels))
        if None in args:
            args = [NO_ARGS if a is None else a for a in args]
        start, dur = self._spans(kernels, "kernel")
        self._put("kernel.name", self._names(kernels))
        self._put("kernel.start", start)
        self._put("kernel.dur", dur)
        # Older traces lack args.device/stream; Kineto's GPU rows use pid = device, tid = stream
        # ("stream 7" in PyTorch 1.8). Unknown: -1 (busy time does not depend on them).
        self._put("kernel.device", self._ints(list(map(_DEVICE, args)), kernels, _PID))
        self._put("kernel.stream", self._ints(list(map(_STREAM, args)), kernels, _TID))
        self._put("kernel.correlation", self._ints(list(map(_CORRELATION, args))))
        self._put("kernel.grid", dim3_column(list(map(_GRID, args))))
        self._put("kernel.block", dim3_column(list(map(_BLOCK, args))))
        self._put("kernel.registers", self._ints(list(map(_REGISTERS, args))))
        self._put("kernel.shared_memory", self._ints(list(map(_SHARED_MEMORY, args))))
        self._put("kernel.occupancy", percent_column(list(map(_OCCUPANCY, args))))
        return start, start + dur

    @staticmethod
    def _ints(values: list, events: list[Event] | None = None, fallback=None) -> np.ndarray:
        """int64 column of `values` read by `as_int`; a None takes the event's `fallback` field; -1 if unreadable."""
        n = len(values)
        if set(map(type, values)) <= _INT:  # C-level: no Python per value
            try:
                return np.array(values, dtype=np.int64).reshape(n)
            except OverflowError:  # an id beyond int64: read one by one below
                pass
        if fallback is not None:
            values = [fallback(ev) if v is None else v for v, ev in zip(values, events)]
        return np.array([-1 if v is None else v for v in map(as_int, values)], dtype=np.int64).reshape(n)

    def _memory(self, memory: list[Event]) -> tuple[np.ndarray, np.ndarray]:
        if not memory:
            return _NO_SPAN
        ts = self._times(memory, "ts", "[memory]")
        if self.memory_problem:
            return ts, ts
        args = list(map(_ARGS, memory))
        if self._memory_columns(args, ts):
            return ts, ts
        fields = [[as_int(getattr(a, f), bounds) if a is not None else None for a in args]
                  for f, bounds in (("addr", UINT64), ("nbytes", INT64), ("total_allocated", INT64))]
        for f, label in zip(fields, ("Addr", "Bytes", "Total Allocated")):
            if None in f:
                # PyTorch 1.9 wrote "[memory]" events without "Addr": allocations cannot be paired
                # with their frees, so the whole trace's allocator events are unusable.
                self.memory_problem = (f'"[memory]" events without a readable "{label}" (PyTorch 1.9 traces lack '
                                       'it; else not an integer in range)')
                self.parts = {k: v for k, v in self.parts.items() if not k.startswith("memory.")}
                return ts, ts
        self._put("memory.ts", ts)
        self._put("memory.addr", np.array(fields[0], dtype=np.uint64))
        self._put("memory.bytes", np.array(fields[1], dtype=np.int64))
        self._put("memory.total", np.array(fields[2], dtype=np.int64))
        # No "Device Id": the CPU (-1). An unreadable one: -2, a device no analysis picks.
        device = [-1 if a is None or a.device_id is None else as_int(a.device_id) for a in args]
        self._put("memory.device", np.array([-2 if d is None else d for d in device], dtype=np.int64))
        return ts, ts

    def _memory_columns(self, args: list[EventArgs | None], ts: np.ndarray) -> bool:
        """The common case of `_memory`, without Python per event: every field an int in range and
        every "Device Id" an int or absent. False (nothing put) when any is not: `_memory` reads them one by one."""
        if None in args:
            return False
        fields = [list(map(get, args)) for get in (_ADDR, _NBYTES, _TOTAL_ALLOCATED)]
        device = list(map(_DEVICE_ID, args))
        if not all(set(map(type, f)) <= _INT for f in fields) or not set(map(type, device)) <= _INT_OR_NONE:
            return False
        try:
            columns = [np.array(fields[0], dtype=np.uint64), np.array(fields[1], dtype=np.int64),
                       np.array(fields[2], dtype=np.int64)]
            device = np.array([-1 if d is None else d for d in device] if None in device else device, dtype=np.int64)
        except OverflowError:  # out of range: unusable (or -2 for a device), as `_memory` decides
            return False
        self._put("memory.ts", ts)
        for name, column in zip(("addr", "bytes", "total"), columns):
            self._put(f"memory.{name}", column)
        self._put("memory.device", device)
        return True

    # -- two builders of one trace ------------------------------------------------------------

    def state(self) -> dict:
        """What `absorb` takes: the columns and every table their codes refer to (picklable: a forked
        child's builder sends it to the parent, profilers.kineto.decode)."""
        return {"names": list(self.name_codes), "shapes": list(self.shape_codes),
                "signatures": list(self.signature_codes), "pids": list(self.pid_codes),
                "tids": list(self.tid_codes), "stacks": list(self.stack_codes),
                "parts": {k: np.concatenate(v) for k, v in self.parts.items()}, "copies": self.copies,
                "categories": self.categories, "memory_problem": self.memory_problem,
                "timed": (self.timed_start, self.timed_end), "negative_durations": self.negative_durations}

    def absorb(self, state: dict) -> None:
        """Append the columns of the events that follow this builder's in the file, read by another
        builder (its `state()`): its codes are renumbered into this builder's tables (new keys in
        its order), so that the result is one builder's of the whole (`build` numbers them alike)."""
        name = self._codes(self.name_codes, state["names"])
        shape = self._codes(self.shape_codes, state["shapes"])
        keys = np.array(state["signatures"], dtype=np.int64).reshape(-1)
        signature = self._codes(self.signature_codes,
                                ((name[keys >> 32].astype(np.int64) << 32) | shape[keys & _LOW]).tolist())
        pid, tid = self._codes(self.pid_codes, state["pids"]), self._codes(self.tid_codes, state["tids"])
        stack = self._codes(self.stack_codes, state["stacks"])
        if state["memory_problem"] and not self.memory_problem:  # as one builder would: no memory columns at all
            self.memory_problem = state["memory_problem"]
            self.parts = {k: v for k, v in self.parts.items() if not k.startswith("memory.")}
        for column, values in state["parts"].items():
            if column.startswith("memory.") and self.memory_problem:
                continue
            if column in _NAME_COLUMNS:
                values = name[values]
            elif column in _THREAD_COLUMNS:
                values = (pid[values >> 32].astype(np.int64) << 32) | tid[values & _LOW]
            elif column == "op.signature":
                values = signature[values]
            elif column == "op.stack":
                values = stack[values]
            self._put(column, values)
        self.copies += state["copies"]
        self.categories |= state["categories"]
        self.negative_durations += state["negative_durations"]
        start, end = state["timed"]
        if start is not None:
            self.timed_start = start if self.timed_start is None else min(self.timed_start, start)
        if end is not None:
            self.timed_end = end if self.timed_end is None else max(self.timed_end, end)

    def _renumbered(self) -> None:
        """Names, signatures, pids and tids numbered in sorted order of what they stand for, the columns
        with them: the codes then do not depend on how the events were batched or split between
        processes (first appearance in a batch would), and every reading of one trace gives the same
        columns. Shape and stack codes already follow the ops' file order."""
        names = list(self.name_codes)
        name = _rank(names)
        signature_keys = np.array(list(self.signature_codes), dtype=np.int64).reshape(-1)
        renamed = (name[signature_keys >> 32] << 32) | (signature_keys & _LOW)
        signature = np.empty(len(renamed), dtype=np.int64)
        signature[np.argsort(renamed)] = np.arange(len(renamed))
        pid, tid = _rank(list(self.pid_codes)), _rank(list(self.tid_codes))
        for column, parts in self.parts.items():
            if column in _NAME_COLUMNS:
                self.parts[column] = [name[np.concatenate(parts)]]
            elif column in _THREAD_COLUMNS:
                values = np.concatenate(parts)
                self.parts[column] = [(pid[values >> 32] << 32) | tid[values & _LOW]]
            elif column == "op.signature":
                self.parts[column] = [signature[np.concatenate(parts)]]
        self.name_codes = dict(zip(sorted(names, key=_sort_key), range(len(names))))
        self.signature_codes = dict(zip(np.sort(renamed).tolist(), range(len(renamed))))
        self.pid_codes = self.tid_codes = None  # spent: the thread keys now hold the ranks

    # -- the whole trace --------------------------------------------------------------------

    def _column(self, name: str, dtype) -> np.ndarray:
        parts = self.parts.get(name)
        return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)

    def _dim3_column(self, name: str) -> np.ndarray:
        parts = self.parts.get(name)
        return np.concatenate(parts) if parts else np.zeros((0, 3), dtype=np.int64)

    def build(self, metadata: dict, notes: tuple[str, ...] = ()) -> KinetoTrace:
        self._renumbered()
        c = self._column
        names = np.empty(len(self.name_codes), dtype=object)
        names[:] = [clean_name("" if n is None else str(n)) for n in self.name_codes]  # once per distinct name
        signatures = tuple(_signature(names[key >> 32], shape) for key, shape in
                           zip(self.signature_codes, map(list(self.shape_codes).__getitem__,
                                                         (k & 0xFFFFFFFF for k in self.signature_codes))))
        return KinetoTrace(
            source=self.source, metadata=metadata, names=names, signatures=signatures,
            ops=OpColumns(c("op.name", np.int32), c("op.start", np.int64), c("op.dur", np.int64),
                          c("op.thread", np.int64), c("op.tid", np.int64), c("op.signature", np.int32),
                          c("op.sequence", np.int64), c("op.stack", np.int32)),
            steps=StepColumns(c("step.number", np.int64), c("step.start", np.int64), c("step.dur", np.int64)),
            launches=LaunchColumns(c("launch.correlation", np.int64), c("launch.start", np.int64),
                                   c("launch.thread", np.int64)),
            kernels=KernelColumns(c("kernel.name", np.int32), c("kernel.start", np.int64), c("kernel.dur", np.int64),
                                  c("kernel.device", np.int64), c("kernel.stream", np.int64),
                                  c("kernel.correlation", np.int64), self._dim3_column("kernel.grid"),
                                  self._dim3_column("kernel.block"), c("kernel.registers", np.int64),
                                  c("kernel.shared_memory", np.int64), c("kernel.occupancy", np.float64)),
            python=OpColumns(c("py.name", np.int32), c("py.start", np.int64), c("py.dur", np.int64),
                             c("py.thread", np.int64), np.zeros(len(c("py.start", np.int64)), dtype=np.int64),
                             np.zeros(len(c("py.start", np.int64)), dtype=np.int32)),
            memory=MemoryColumns(c("memory.ts", np.int64), c("memory.addr", np.uint64), c("memory.bytes", np.int64),
                                 c("memory.total", np.int64), c("memory.device", np.int64)),
            copies=self.copies, timed_start_ns=self.timed_start, timed_end_ns=self.timed_end,
            categories=tuple(sorted(str(c) for c in self.categories if c is not None)), memory_problem=self.memory_problem,
            negative_durations=self.negative_durations, decode_notes=notes,
            stack_texts=tuple(clean_name(s) if s else "" for s in self.stack_codes),
            annotations=AnnotationColumns(c("annotation.name", np.int32), c("annotation.start", np.int64),
                                          c("annotation.dur", np.int64), c("annotation.thread", np.int64)),
            copy_spans=SpanColumns(c("copy.start", np.int64), c("copy.end", np.int64)),
            sync_spans=SpanColumns(c("sync.start", np.int64), c("sync.end", np.int64)))


_NO_SPAN = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))


class _ThreadKeys(dict):
    """(pid, tid) -> the pair's thread key, (pid code << 32) | tid code, made on first lookup."""

    def __init__(self, pid_codes: dict, tid_codes: dict):
        super().__init__()
        self.pid_codes, self.tid_codes = pid_codes, tid_codes

    def __missing__(self, pair: tuple) -> int:
        key = self[pair] = (self.pid_codes[pair[0]] << 32) | self.tid_codes[pair[1]]
        return key


_NAME_COLUMNS = frozenset({"op.name", "kernel.name", "py.name", "annotation.name"})
_THREAD_COLUMNS = frozenset({"op.thread", "launch.thread", "annotation.thread", "py.thread"})
_LOW = 0xFFFFFFFF  # the low half of a two-code key: the second code


def _sort_key(value) -> tuple:
    """An order over what names, pids and tids are written as (text, numbers, null): text after numbers."""
    if value is None:
        return (0, 0, "")
    if isinstance(value, (int, float)):
        return (1, value, "")
    return (2, 0, str(value))


def _rank(keys: list) -> np.ndarray:
    """int64 rank of each key in `_sort_key` order: old code -> new code."""
    order = sorted(range(len(keys)), key=lambda i: _sort_key(keys[i]))
    rank = np.empty(len(keys), dtype=np.int64)
    rank[order] = np.arange(len(keys))
    return rank


def _numbering(*first) -> defaultdict:
    """A dict that gives a key it lacks the next code (0, 1, ...) on lookup: its default is its own
    length, taken before the key goes in. `first` keys get 0, 1, ... up front."""
    table: defaultdict = defaultdict(None, zip(first, range(len(first))))
    table.default_factory = table.__len__
    return table
_INT_OR_NONE = {int, type(None)}
_TRUE = np.True_  # `_in_range`'s ok for values read


def _lenient_times(events: list[Event], all_x: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, ok) ns of events whose "ts" is not None: ok False where "ts" is unreadable; an
    unreadable or negative "dur" (or an event that is not "X") ends where it starts.

    all_x: every event is an "X" event; then, when every "dur" is there too, both columns' texts are
    converted in one call where they can be (`fast_us_text_to_ns`), with the same result."""
    if all_x:
        texts = list(map(_TS, events))
        texts += map(_DUR, events)
        ns = fast_us_text_to_ns(texts) if None not in texts else None
        if ns is not None:
            n = len(events)
            start, ok = _in_range(ns[:n], _TRUE, "ts")
            dur, dur_ok = _in_range(ns[n:], _TRUE, "dur")
            return start, start + np.where(dur_ok, np.maximum(dur, 0), 0), ok
    start, ok = _in_range(*us_text_to_ns(list(map(_TS, events))), "ts")
    end = start.copy()
    with_dur = [i for i, ev in enumerate(events) if ev.dur is not None and ev.ph == "X"]
    if with_dur:
        dur, dur_ok = _in_range(*us_text_to_ns([events[i].dur for i in with_dur]), "dur")
        end[with_dur] += np.where(dur_ok, np.maximum(dur, 0), 0)
    return start, end, ok


def _in_range(ns: np.ndarray, ok: np.ndarray, field: str) -> tuple[np.ndarray, np.ndarray]:
    """`ok` also False where a start lies outside [TIME_MIN_NS, TIME_MAX_NS) or a duration's size
    reaches DUR_MAX_NS (`traces.events`: then no end or window length can leave int64)."""
    if field == "ts":
        return ns, ok & (ns >= TIME_MIN_NS) & (ns < TIME_MAX_NS)
    return ns, ok & (np.abs(ns) < DUR_MAX_NS)


def _signature(name: str, shape_key: bytes) -> Signature:
    """A Signature from its shape key: "Input Dims" (or 1.8's "Input dims"), "Input type", "Concrete Inputs"."""
    dims, dims_18, types, concrete = shape_key.split(b"\0")
    return Signature(name, dims or dims_18, types, concrete)
