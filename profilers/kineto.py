"""PyTorch profiler (Kineto) Chrome-trace reader: a trace file becomes `TraceRecords`.

Times. Kineto writes "ts"/"dur" in microseconds, as fractional decimals since ~2023
(e.g. 4546152992285.686) and as integers before. A float64 cannot hold such a value to the
nanosecond, and rounding each kernel's ends to microseconds opens false gaps between back-to-back
kernels (under-counting busy time), so numbers are parsed as `decimal.Decimal` and turned into
exact integer nanoseconds. Times stay on the trace's own "ts" origin (`baseTimeNanoseconds` is not
applied); only differences matter downstream.

Steps and window. Host spans named `ProfilerStep#N` (cat "user_annotation" in recent torch,
"cpu_op" in older) are the iterations. A step ends at max(host end, end of the last kernel whose
launching runtime call lies inside the host span). The window runs from the first step's start
to the latest step end; without step spans the whole trace (first to last timed event) is the
window and a note says so. Rows, ops and busy intervals are those that start inside the window.

GPU (the trace has "kernel" events). One row per kernel. Its launching op is found through the
runtime/driver call with the same `correlation` (cudaLaunchKernel, cudaLaunchKernelExC,
cuLaunchKernel, ...): the innermost "cpu_op" on that call's thread enclosing the call's start.
FLOP attribution: walk up from the launching op to the OUTERMOST enclosing op that has a formula
(`flops_of(shapes) is not None`); that op's FLOPs are split among ALL kernels launched beneath it
in proportion to their durations, and those rows carry its name as `op`, source "analytic" and
its precision (`precision_of(input types)`, "tf32" instead of "fp32" when the kernel name says
tf32). Kernels with no formula op get NaN FLOPs, `op` = launching op name ("" if none), source
"" and precision "". A formula op whose shapes are missing (`flops_of` returns NaN) leaves its
rows at NaN FLOPs with source "". The step of a kernel is the step containing its launching call.
Busy intervals are the kernel intervals; memcpy/memset ("gpu_memcpy", "gpu_memset") are not
kernels and are only counted in a note.

CPU (no kernel events). Every "cpu_op" is a row covering its SELF time (duration minus its direct
children's, per thread's op tree built by time nesting), stream = thread id, device -1. The
outermost op with a formula has its FLOPs split among itself and all its descendants in
proportion to their self times. Busy intervals are the roots of each thread's op tree. Markers
(ProfilerStep, other user annotations) and the profiler's "[memory]" instant events are not ops.

Memory. "[memory]" instant events become `MemoryEvents` in time order, all of them (not only the
window's), because pairing an allocation with its free needs the allocations made before it.

Layout: event classification lives in `profilers.kineto_events`, number parsing and the guards
every reader shares in `profilers.trace_events`, the op tree, self times and FLOP splitting in
`profilers.kineto_tree`; this module reads the file and assembles the records. The caller passes
the FLOP formulas in (`flops_of`, `precision_of`): readers turn a trace into records and count
nothing themselves.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from decimal import Decimal

import numpy as np

from tbd.errors import TraceFormatError
from tbd.profilers.kineto_events import KinetoEvents, classify_events
from tbd.profilers.kineto_tree import OpTree, enclosing_op, formula_roots, op_tree, self_times, split_flops
from tbd.profilers.trace_events import NO_STEPS_NOTE, column, step_number, trace_events, us_to_ns
from tbd.records import ANALYTIC, KernelTable, MemoryEvents, OpTable, StepSpan, TraceRecords

_TRACE_HINT = "export it with torch.profiler's export_chrome_trace (or on_trace_ready=tensorboard_trace_handler)"


def read_trace_file(path: str | os.PathLike) -> dict:
    """Load a Kineto trace (.json or .json.gz, gzip detected by content) with exact decimal numbers.

    Args:
        path: the trace file.
    Returns:
        The trace object; non-integer numbers are `decimal.Decimal` (exact), integers stay `int`.
    Raises:
        TraceFormatError: unreadable, truncated or garbage gzip, corrupt JSON, or no "traceEvents" list.
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as handle:
            raw = handle.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise TraceFormatError(f"{name}: truncated or corrupt gzip ({exc})", hint="re-export the trace") from None
    except OSError as exc:
        raise TraceFormatError(f"{name}: cannot read ({exc.strerror or exc})") from None
    try:
        trace = json.loads(raw, parse_float=Decimal)
    except UnicodeDecodeError:
        raise TraceFormatError(f"{name}: not a text JSON file", hint=_TRACE_HINT) from None
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{name}: corrupt JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                               hint="the file may be truncated; re-export the trace") from None
    trace_events(trace, name, "a Kineto trace", _TRACE_HINT)
    return trace


def trace_records(trace: dict, source: str, *, flops_of, precision_of) -> TraceRecords:
    """Build the records of one loaded Kineto trace (pure: no I/O).

    Args:
        trace: what `read_trace_file` returned (or an equivalent dict; float times are accepted
            but lose sub-microsecond exactness at large magnitudes).
        source: the trace's name, for notes and errors.
        flops_of: callable(OpShapes) -> FLOPs, None (no formula) or NaN (formula, shapes missing),
            e.g. `analysis.flops.op_flops`.
        precision_of: callable(input types tuple) -> "fp32", "fp16", ..., e.g.
            `analysis.flops.precision_of`.
    Returns:
        TraceRecords with integer-ns times; device_kind "cuda" if the trace has kernels, else "cpu".
    Raises:
        TraceFormatError: not a trace, malformed events, or no ops and no kernels.
    """
    events = trace_events(trace, source, "a Kineto trace", _TRACE_HINT)
    raw = classify_events(events, source)
    if not raw.ops and not raw.kernels:
        raise TraceFormatError(f"no ops or kernels in {source}", hint="record with activities CPU (and CUDA)")
    ops = op_tree(raw.ops, source)
    if raw.kernels:
        return _gpu_records(raw, ops, source, flops_of, precision_of)
    return _cpu_records(raw, ops, source, flops_of, precision_of)


# ---------------------------------------------------------------------------------------------
# Steps and window


def _host_steps(raw: KinetoEvents, source: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(number, start_ns, host_end_ns) of the ProfilerStep spans, sorted by start."""
    number = np.array([step_number(str(e["name"])) for e in raw.steps], dtype=np.int64)
    start = np.array(column(raw.steps, source, "ProfilerStep", lambda e: us_to_ns(e["ts"])), dtype=np.int64)
    end = start + np.array(column(raw.steps, source, "ProfilerStep", lambda e: us_to_ns(e["dur"])), dtype=np.int64)
    order = np.argsort(start, kind="stable")
    return number[order], start[order], end[order]


def _step_of(t_ns: np.ndarray, steps: tuple) -> np.ndarray:
    """Index into `steps` of the host span containing each time, -1 outside every span."""
    number, start, end = steps
    i = np.searchsorted(start, t_ns, side="right") - 1
    ok = (i >= 0) & (t_ns < end[np.maximum(i, 0)]) if len(start) else np.zeros(len(t_ns), dtype=bool)
    return np.where(ok, i, -1)


def _window(raw: KinetoEvents, spans: tuple[StepSpan, ...], source: str) -> tuple[int, int, tuple[str, ...]]:
    if spans:
        return spans[0].start_ns, max(s.end_ns for s in spans), ()
    # The profiler's own session span and global instants ("Record Window End") are not activity.
    timed = [ev for ev in raw.events if ev.get("ph") in ("X", "i") and ev.get("cat") != "Trace"
             and ev.get("s") != "g" and "ts" in ev]
    start = column(timed, source, "timed", lambda e: us_to_ns(e["ts"]))
    end = column(timed, source, "timed", lambda e: us_to_ns(e["ts"]) + (us_to_ns(e["dur"]) if "dur" in e else 0))
    return min(start), max(end), (NO_STEPS_NOTE,)


def _spans(steps: tuple, device_end_ns: np.ndarray, device_step: np.ndarray) -> tuple[StepSpan, ...]:
    """StepSpans; a step ends at the later of its host end and its last launched kernel's end."""
    number, start, end = steps
    last = end.copy()
    has = device_step >= 0
    np.maximum.at(last, device_step[has], device_end_ns[has])
    return tuple(StepSpan(int(n), int(s), int(h), int(e)) for n, s, h, e in zip(number, start, end, last))


def _memory(raw: KinetoEvents, source: str) -> MemoryEvents | None:
    if not raw.memory:
        return None
    col = lambda get: column(raw.memory, source, "[memory]", get)  # noqa: E731
    ts = np.array(col(lambda e: us_to_ns(e["ts"])), dtype=np.int64)
    order = np.argsort(ts, kind="stable")
    return MemoryEvents(
        ts_ns=ts[order],
        addr=np.array(col(lambda e: int(e["args"]["Addr"])), dtype=np.uint64)[order],
        bytes=np.array(col(lambda e: int(e["args"]["Bytes"])), dtype=np.int64)[order],
        total_allocated=np.array(col(lambda e: int(e["args"]["Total Allocated"])), dtype=np.int64)[order],
        device=np.array(col(lambda e: int(e["args"].get("Device Id", -1))), dtype=np.int64)[order],
    )


def _in_window(start_ns: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return (start_ns >= lo) & (start_ns <= hi)


def _op_table(ops: OpTree, keep: np.ndarray) -> OpTable:
    return OpTable(name=ops.name[keep], start_ns=ops.start_ns[keep], end_ns=ops.end_ns[keep], tid=ops.tid[keep])


# ---------------------------------------------------------------------------------------------
# GPU and CPU records


def _gpu_records(raw: KinetoEvents, ops: OpTree, source: str, flops_of, precision_of) -> TraceRecords:
    k = raw.kernels
    col = lambda get: column(k, source, "kernel", get)  # noqa: E731
    name = np.array(col(lambda e: str(e["name"])), dtype=object)
    start = np.array(col(lambda e: us_to_ns(e["ts"])), dtype=np.int64)
    dur = np.array(col(lambda e: us_to_ns(e["dur"])), dtype=np.int64)
    # Older traces lack args.device/stream; Kineto's GPU rows use pid = device, tid = stream.
    device = np.array(col(lambda e: int(e["args"].get("device", e.get("pid")))), dtype=np.int64)
    stream = np.array(col(lambda e: int(e["args"].get("stream", e.get("tid")))), dtype=np.int64)
    launch_ts, launch_op = _launches(raw, ops, k, source)
    steps = _host_steps(raw, source)
    step_idx = _step_of(launch_ts, steps)
    step_idx[launch_ts < 0] = -1
    spans = _spans(steps, start + dur, step_idx)
    lo, hi, notes = _window(raw, spans, source)
    root, total = formula_roots(ops, launch_op, flops_of)
    kroot = np.where(launch_op >= 0, root[np.maximum(launch_op, 0)], -1)
    flops = split_flops(total, kroot, dur)
    op_name = np.array([ops.name[r] if r >= 0 else (ops.name[o] if o >= 0 else "")
                        for r, o in zip(kroot.tolist(), launch_op.tolist())], dtype=object)
    source_col = np.where(np.isfinite(flops), ANALYTIC, "").astype(object)
    precision = _kernel_precision(ops, kroot, name, precision_of)
    number = np.array([s.number for s in spans] + [-1], dtype=np.int64)
    table = KernelTable(name, start, dur, device, stream, op_name, flops, source_col, precision, number[step_idx])
    keep = _in_window(start, lo, hi)
    order = np.flatnonzero(keep)[np.argsort(start[keep], kind="stable")]
    rows = table.select(order)
    notes += _gpu_notes(raw, launch_ts, keep)
    return TraceRecords(source, "cuda", rows, rows.start_ns, rows.start_ns + rows.dur_ns, spans, lo, hi,
                        _op_table(ops, _in_window(ops.start_ns, lo, hi)), _memory(raw, source), notes)


def _launches(raw: KinetoEvents, ops: OpTree, kernels: list, source: str) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel: start of its launching runtime call (-1 if none) and its launching op (-1 if none)."""
    call: dict = {}
    for ev in raw.launches:
        corr = (ev.get("args") or {}).get("correlation")
        # The first call wins: a runtime call and the driver call inside it may share an id.
        if corr is not None and corr not in call:
            call[corr] = (ev, ops.codes.get((ev.get("pid"), ev.get("tid")), -1))
    ts = np.full(len(kernels), -1, dtype=np.int64)
    op = np.full(len(kernels), -1, dtype=np.int64)
    for i, ev in enumerate(kernels):
        found = call.get((ev.get("args") or {}).get("correlation"))
        if found is not None:
            ts[i] = column(found[:1], source, "runtime", lambda e: us_to_ns(e["ts"]))[0]
            op[i] = enclosing_op(ops, found[1], int(ts[i]))
    return ts, op


def _kernel_precision(ops: OpTree, kroot: np.ndarray, name: np.ndarray, precision_of) -> np.ndarray:
    by_root = {r: precision_of(tuple((ops.events[r].get("args") or {}).get("Input type", ())))
               for r in np.unique(kroot[kroot >= 0]).tolist()}
    out = []
    for r, n in zip(kroot.tolist(), name):
        p = by_root.get(r, "")
        # cuBLAS/cuDNN run fp32 GEMMs on tensor cores as TF32 when allowed; the kernel name says so.
        out.append("tf32" if p == "fp32" and "tf32" in n.lower() else p)
    return np.array(out, dtype=object)


def _gpu_notes(raw: KinetoEvents, launch_ts: np.ndarray, keep: np.ndarray) -> tuple[str, ...]:
    notes = []
    if raw.copies:
        notes.append(f"{raw.copies} memcpy/memset events not counted as kernels or busy time")
    orphans = int(((launch_ts < 0) & keep).sum())
    if orphans:
        notes.append(f"{orphans} kernels have no launching runtime call in the trace (no op, no step)")
    outside = int((~keep).sum())
    if outside:
        notes.append(f"{outside} kernels start outside the window and are left out")
    return tuple(notes)


def _cpu_records(raw: KinetoEvents, ops: OpTree, source: str, flops_of, precision_of) -> TraceRecords:
    n = len(ops.name)
    child = ops.parent >= 0
    self_ns = self_times(ops)
    steps = _host_steps(raw, source)
    spans = _spans(steps, np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    lo, hi, notes = _window(raw, spans, source)
    root, total = formula_roots(ops, np.arange(n), flops_of)
    flops = split_flops(total, root, self_ns)
    op_name = np.where(root >= 0, ops.name[np.maximum(root, 0)], ops.name).astype(object)
    by_root = {r: precision_of(tuple((ops.events[r].get("args") or {}).get("Input type", ())))
               for r in total}
    precision = np.array([by_root.get(r, "") for r in root.tolist()], dtype=object)
    number = np.array([s.number for s in spans] + [-1], dtype=np.int64)
    table = KernelTable(ops.name, ops.start_ns, self_ns, np.full(n, -1, dtype=np.int64), ops.tid, op_name,
                        flops, np.where(np.isfinite(flops), ANALYTIC, "").astype(object), precision,
                        number[_step_of(ops.start_ns, steps)])
    keep = _in_window(ops.start_ns, lo, hi)
    order = np.flatnonzero(keep)[np.argsort(ops.start_ns[keep], kind="stable")]
    roots = keep & ~child
    return TraceRecords(source, "cpu", table.select(order), ops.start_ns[roots], ops.end_ns[roots], spans, lo, hi,
                        _op_table(ops, keep), _memory(raw, source), notes)
