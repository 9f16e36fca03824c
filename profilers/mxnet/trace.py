"""MXNet profiler dump reader: `mx.profiler.dump()` output becomes `TraceRecords` (no mxnet import).

What MXNet 1.9's profiler writes (checked on real dumps, profile_all=True, aggregate_stats=False):
- Operator events: "B"/"E" pairs, cat "operator", pid = the device's process (named by a
  "process_name" metadata event: "cpu/0", "gpu/0", ...), tid = the engine worker thread. Names are
  MXNet operator names (Convolution, FullyConnected, _backward_Convolution, ...). NO operand
  shapes or arguments are recorded. The same operators are written again as async "b"/"e" pairs
  in an "operator" domain process; those duplicates are ignored.
- Times: integer microseconds ("displayTimeUnit": "ms" notwithstanding), so durations are exact
  only to the microsecond; they become integer ns (x 1000).
- Memory: "C" counter events cat "Device Storage", name "Memory: cpu/0" (one series per device
  storage), value = bytes currently allocated through MXNet's storage since profiling started.
  No addresses and no operator tags: they become `MemoryEvents` with addr 0 and bytes = the
  counter's change, total_allocated = the counter.
- Iterations: the hook marks each traced iteration with an `mx.profiler.Task` named
  "ProfilerStep#N" in the "tbd" domain, written as an async "b"/"e" pair.

Rows (CPU and GPU alike): one per operator event, covering its SELF time (operator events on one
thread rarely nest; when they do the parent keeps only its own time). On a GPU the rows are
MXNet's operator times, not CUDA kernels (the profiler does not record kernels); device = the
event's device. Busy intervals = the outermost operator intervals of each thread. Window: first
step start to last step end (else the whole trace, with a note); rows start inside it.

FLOPs: MXNet operators map onto ATen ops through `profilers.mxnet.ops.MXNET_TO_ATEN`
(Convolution, FullyConnected, RNN as aten::_cudnn_rnn, ...), whose FLOPs the caller's `flops_of`
counts (the shared formula table, `analysis.flops.ops.op_flops`); shapes come from the hook's per-step
call log (raw/mxnet_shapes.json, `shapes=`), since the dump has none. In each step the k-th
forward event named X is the k-th logged call of X, and the k-th "_backward_X" event the k-th call
counted from the end (autograd runs the graph in reverse). Rows without a logged call have NaN
FLOPs.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

import numpy as np

from tbd.core import rundir
from tbd.core.errors import TraceFormatError
from tbd.core.records import ANALYTIC, KernelTable, MemoryEvents, OpTable, StepSpan, TraceRecords
from tbd.profilers.mxnet.layer_ops import aten_type
from tbd.profilers.mxnet.ops import MXNET_TO_ATEN, MXNET_ZERO_FLOPS, PAIR_BY_COUNT, UPDATE_OPS, update_atens
from tbd.profilers.traces.events import (
    event_ns,
    int_value,
    nesting,
    read_json_trace,
    step_number,
    step_numbers,
    step_window,
    trace_events,
)
from tbd.profilers.traces.names import clean_name, quoted

#: Engine events that wait for an array to be ready for a host read (asnumpy, wait_to_read): the
#: worker waits, it does no operator work, so they are neither rows nor busy time.
ENGINE_WAITS = frozenset({"WaitForVar", "WaitForAll"})
_DEVICE = re.compile(r"^(cpu|gpu)/(\d{1,9})$")
#: What a malformed call record of the shape log can raise inside an adapter.
_ADAPTER_ERRORS = (KeyError, TypeError, ValueError, IndexError, SyntaxError, AttributeError, ArithmeticError,
                   RecursionError)
_HINT = "record with mx.profiler.set_config(profile_all=True, aggregate_stats=False) and mx.profiler.dump()"


def read_trace_file(path) -> dict:
    """Load the trace file (.json or .json.gz) as a dict with exact decimal times (`traces.events.read_json_trace`)."""
    return read_json_trace(path, "an MXNet profiler dump", _HINT)


def trace_records(trace: dict, source: str, *, flops_of, precision_of, shapes: dict | None = None) -> TraceRecords:
    """Build the records of one loaded MXNet profiler dump (pure: no I/O).

    Args:
        trace: what `read_trace_file` returned for the dump.
        source: the trace's name, for notes and errors.
        flops_of: callable(OpShapes) -> FLOPs | None | NaN, e.g. `analysis.flops.ops.op_flops`.
        precision_of: callable(input types) -> "fp32", ..., e.g. `analysis.flops.ops.precision_of`.
        shapes: the hook's call log (raw/mxnet_shapes.json), or None: then every FLOP is NaN.
    Returns:
        TraceRecords with integer-ns times; device_kind "cuda" if operators ran on a GPU, else "cpu".
    Raises:
        TraceFormatError: not a trace, malformed events, unpaired operator events, no operators.
    """
    events = trace_events(trace, source, "an MXNet profiler dump", _HINT, objects=True)
    devices = {_key(e.get("pid")): str(e["args"].get("name", "")) for e in events
               if e.get("ph") == "M" and e.get("name") == "process_name" and isinstance(e.get("args"), dict)}
    ops = _operators(events, devices, source)
    if not len(ops["name"]):
        raise TraceFormatError(f"{source}: no MXNet operator events", hint=_HINT)
    steps = _steps(events, source)
    lo, hi, notes = step_window(steps, ops["start"], ops["end"])
    step_no = step_numbers(ops["start"], steps)
    flops, precision, covered = _row_flops(ops, step_no, shapes, flops_of, precision_of, source)
    notes += _flop_notes(shapes, covered, ops["name"][step_no >= 0])
    keep = (ops["start"] >= lo) & (ops["start"] <= hi)
    order = np.flatnonzero(keep)[np.argsort(ops["start"][keep], kind="stable")]
    table = KernelTable(ops["name"], ops["start"], ops["self"], ops["device"], ops["tid"], ops["name"].copy(),
                        flops, np.where(np.isfinite(flops), ANALYTIC, "").astype(object), precision, step_no)
    rows = table.select(order)
    roots = keep & (ops["depth"] == 0)
    kind = "cuda" if bool((ops["device"][keep] >= 0).any()) else "cpu"
    if kind == "cuda":
        notes.append("MXNet operator times, not CUDA kernels: MXNet's profiler records no kernels")
    op_table = OpTable(ops["name"][keep], ops["start"][keep], ops["end"][keep], ops["tid"][keep])
    memory, mem_notes = _memory(events, source)
    return TraceRecords(source, kind, rows, ops["start"][roots], ops["end"][roots], steps, lo, hi, op_table,
                        memory, tuple(notes + mem_notes))


def _key(value):
    """A pid or tid usable as a dict key: a list or object (a corrupt dump) by its text."""
    return value if isinstance(value, (str, int, float, Decimal, type(None))) else repr(value)


def _device_of(name: str) -> int | None:
    """-1 for "cpu/N", N for "gpu/N", None for other storages (cpu pinned, cpu shared)."""
    m = _DEVICE.match(name)
    if m is None:
        return None
    return -1 if m.group(1) == "cpu" else int(m.group(2))


def _operators(events: list, devices: dict, source: str) -> dict[str, np.ndarray]:
    """Operator B/E pairs -> columns name, start, end, self (ns), depth, device, tid (small ints).

    MXNet writes each operator's "B" and "E" back to back, so a nested operator shows as an
    overlapping pair, not as B B E E: pairs are matched first, nesting is found by time per thread.
    """
    open_at: dict = {}
    tids: dict = {}
    rows: list[tuple] = []
    for ev in events:
        ph = ev.get("ph")
        if ev.get("cat") != "operator" or ph not in ("B", "E") or str(ev.get("name")) in ENGINE_WAITS:
            continue
        key = (_key(ev.get("pid")), _key(ev.get("tid")), str(ev.get("name")))
        t = event_ns(ev.get("ts"), source, "operator")
        if ph == "B":
            open_at.setdefault(key, []).append(t)
            continue
        if not open_at.get(key):
            raise TraceFormatError(f"{source}: operator end {quoted(key[2])} at {quoted(ev.get('ts'))} has no matching "
                                   "begin", hint="the dump may be truncated; record again")
        start = open_at[key].pop()
        if t < start:
            raise TraceFormatError(f"{source}: operator {quoted(key[2])} ends before it begins")
        dev = _device_of(devices.get(key[0], ""))
        rows.append((key[2], start, t, -1 if dev is None else dev, tids.setdefault(key[:2], len(tids))))
    open_ops = sum(len(v) for v in open_at.values())
    if open_ops:
        raise TraceFormatError(f"{source}: {open_ops} operator begin events have no end",
                               hint="the dump may be truncated; record again")
    rows.sort(key=lambda r: (r[4], r[1], -r[2]))  # per thread, by start; a parent before its child
    depth, self_ns = nesting([r[1] for r in rows], [r[2] for r in rows], [r[4] for r in rows])
    clean = {n: clean_name(n) for n in {r[0] for r in rows}}  # once per distinct name
    cols = {"name": np.array([clean[r[0]] for r in rows], dtype=object),
            "start": np.array([r[1] for r in rows], dtype=np.int64),
            "end": np.array([r[2] for r in rows], dtype=np.int64),
            "self": np.array(self_ns, dtype=np.int64), "depth": np.array(depth, dtype=np.int64),
            "device": np.array([r[3] for r in rows], dtype=np.int64),
            "tid": np.array([r[4] for r in rows], dtype=np.int64)}
    order = np.argsort(cols["start"], kind="stable")
    return {k: v[order] for k, v in cols.items()}


def _steps(events: list, source: str) -> tuple[StepSpan, ...]:
    """ProfilerStep#N async spans ("b"/"e" pairs by name), sorted by start."""
    begin: dict[str, int] = {}
    spans = []
    for ev in events:
        name = str(ev.get("name", ""))
        number = step_number(name)
        if number is None or ev.get("ph") not in ("b", "e", "B", "E"):
            continue
        t = event_ns(ev.get("ts"), source, "ProfilerStep")
        if ev["ph"] in ("b", "B"):
            begin[name] = t
        elif name in begin:
            start = begin.pop(name)
            spans.append(StepSpan(number, start, t, t))
        else:
            raise TraceFormatError(f"{source}: {quoted(name)} ends without a begin")
    if begin:
        raise TraceFormatError(f"{source}: {', '.join(quoted(b) for b in sorted(begin)[:5])} never end",
                               hint="the dump may be truncated")
    return tuple(sorted(spans, key=lambda s: s.start_ns))


def _row_flops(ops: dict, step_no: np.ndarray, shapes: dict | None, flops_of, precision_of,
               source: str) -> tuple[np.ndarray, np.ndarray, int]:
    """FLOPs and precision per operator row from the hook's call log; count of rows it covered.

    Data-movement operators get a known 0 without the log. A mapped operator's k-th event in a
    step takes the k-th logged call of its operator (backward events: the k-th from the end); for
    operators in `PAIR_BY_COUNT` only when the step has exactly as many events as logged calls
    (an operator also run outside the logged graphs would shift the pairing). Optimizer
    operators pair with the trainer's parameters, in order, `aggregate` per multi_* call.
    """
    n = len(ops["name"])
    flops = np.full(n, np.nan)
    precision = np.array([""] * n, dtype=object)
    names = ops["name"]
    flops[np.array([str(x) in MXNET_ZERO_FLOPS for x in names], dtype=bool)] = 0.0
    if shapes is None:
        return flops, precision, 0
    if (not isinstance(shapes, dict) or shapes.get("schema") != rundir.MXNET_SHAPES_SCHEMA
            or not isinstance(shapes.get("steps"), dict)):
        raise TraceFormatError(f"{source}: MXNet shape log is not of schema {rundir.MXNET_SHAPES_SCHEMA!r}")
    covered = 0
    for number in np.unique(step_no[step_no >= 0]).tolist():
        calls = shapes["steps"].get(str(number))
        if not isinstance(calls, list):
            continue
        for i, aten in _step_atens(names, np.flatnonzero(step_no == number).tolist(), calls, source):
            values = [flops_of(a) for a in aten]
            total = math.nan if any(v is None for v in values) else float(sum(values))
            flops[i] = total if math.isfinite(total) and total >= 0 else math.nan
            precision[i] = precision_of(aten[0].input_types)
            covered += 1
    return flops, precision, covered


def _step_atens(names: np.ndarray, rows: list[int], calls: list, source: str):
    """(row, its ATen calls) for each of one step's rows (in order) that the step's logged calls cover."""
    by_op: dict[str, list] = {}
    for c in calls:
        if not isinstance(c, dict):
            raise TraceFormatError(f"{source}: MXNet shape log holds a call that is not an object ({quoted(c)})")
        by_op.setdefault(str(c.get("op")), []).append(c)
    events: dict[str, int] = {}
    for i in rows:
        events[str(names[i])] = events.get(str(names[i]), 0) + 1
    updates = _update_groups(by_op.get("_optimizer_update", []), events, source)
    seen: dict[str, int] = {}
    for i in rows:
        name = str(names[i])
        k = seen.get(name, 0)
        seen[name] = k + 1
        if name in updates:
            groups, kind, t = updates[name]
            aten = [a for shape in groups[k] for a in update_atens(kind, shape, t)]
        elif name in MXNET_TO_ATEN:
            aten = _mapped_atens(name, k, events[name], by_op, source)
        else:
            continue
        if aten:
            yield i, aten


def _mapped_atens(name: str, k: int, events: int, by_op: dict[str, list], source: str) -> list | None:
    """The ATen calls of the k-th `name` event of a step (of `events`), or None when unknown."""
    logged, adapter = MXNET_TO_ATEN[name]
    call = _paired_call(name, k, events, by_op.get(logged, []))
    if call is None:
        return None
    inputs = call.get("inputs", [None])
    if name in PAIR_BY_COUNT and (call.get("output") is None or not isinstance(inputs, list) or None in inputs):
        return None  # shape inference left this call's shapes unknown
    try:
        return adapter(call)
    except _ADAPTER_ERRORS as exc:
        raise TraceFormatError(f"{source}: malformed {logged} call in the shape log ({quoted(str(exc), 100)})") from None


#: Operators whose backward runs as more calls of the operator itself (no "_backward_" event):
#: batch_dot's gradients dA = dC Bᵀ and dB = Aᵀ dC are two batch_dots of the forward's size.
_BACKWARD_AS_SELF = {"batch_dot": 2, "dot": 2}


def _paired_call(name: str, k: int, events: int, log: list) -> dict | None:
    """The logged call the k-th `name` event of a step computes, or None when the pairing is unknown."""
    n = len(log)
    if name in _BACKWARD_AS_SELF and n and events == n * (1 + _BACKWARD_AS_SELF[name]):
        # The n forward calls in order, then the backward's calls: reverse order, `per` for each.
        per = _BACKWARD_AS_SELF[name]
        return log[k] if k < n else log[n - 1 - (k - n) // per]
    if k >= n or (name in PAIR_BY_COUNT and events != n):
        return None
    return log[k] if not name.startswith("_backward_") else log[n - 1 - k]


def _update_groups(records: list, events: dict[str, int], source: str) -> dict[str, tuple[list, str, str]]:
    """Optimizer operator name -> (parameter shapes per event, update kind, type) for one step.

    Only for an operator whose event count is what the trainer's parameters imply; otherwise the
    pairing is unknown and its rows keep NaN.
    """
    if not records:
        return {}
    try:
        params = [list(map(int, p)) for r in records for p in r["params"]]
        aggregate = max(1, int(records[0].get("aggregate") or 1))
        t = aten_type(str(records[0].get("dtype", "")))
    except _ADAPTER_ERRORS:
        raise TraceFormatError(f"{source}: malformed optimizer record in the MXNet shape log") from None
    out = {}
    for name, (kind, multi) in UPDATE_OPS.items():
        if name not in events:
            continue
        groups = ([params[j:j + aggregate] for j in range(0, len(params), aggregate)] if multi
                  else [[p] for p in params])
        if events[name] == len(groups):
            out[name] = (groups, kind, t)
    return out


def _flop_notes(shapes: dict | None, covered: int, names: np.ndarray) -> list[str]:
    if shapes is None:
        return ["MXNet's profiler records no operand shapes and no shape log was given: FLOPs unknown "
                "(data-movement operators are a known 0)"]
    mapped = int(sum(1 for x in names if x in MXNET_TO_ATEN or x in UPDATE_OPS))
    return [f"MXNet's profiler records no operand shapes: FLOPs come from the hook's log of the step's "
            f"graph operators and the trainer's parameters ({covered} of {mapped} events of operators with a "
            "formula matched); other operators' FLOPs are unknown, data-movement operators a known 0"]


def _memory(events: list, source: str) -> tuple[MemoryEvents | None, list[str]]:
    """'Device Storage' counters -> MemoryEvents (addr 0: MXNet records no addresses)."""
    ts, total, dev = [], [], []
    skipped = set()
    for ev in events:
        if ev.get("cat") != "Device Storage" or ev.get("ph") != "C":
            continue
        name = str(ev.get("name", ""))
        storage = name.removeprefix("Memory: ")
        d = _device_of(storage)
        if d is None:
            skipped.add(storage)
            continue
        args = ev.get("args")
        value = int_value(args.get(name)) if isinstance(args, dict) else None
        if value is None:
            raise TraceFormatError(f"{source}: malformed Device Storage counter {quoted(name)}")
        ts.append(event_ns(ev.get("ts"), source, "Device Storage"))
        total.append(value)
        dev.append(d)
    shown = sorted(clean_name(name[:60]) for name in skipped)[:8]
    notes = [f"storage counters of {', '.join(shown)}{', ...' if len(skipped) > 8 else ''} are not read"] \
        if skipped else []
    if not ts:
        return None, notes
    ts_a, total_a, dev_a = (np.array(x, dtype=np.int64) for x in (ts, total, dev))
    order = np.lexsort((ts_a, dev_a))  # by device, then time: deltas are per device
    ts_a, total_a, dev_a = ts_a[order], total_a[order], dev_a[order]
    prev = np.concatenate([[0], total_a[:-1]])
    prev[np.concatenate([[True], dev_a[1:] != dev_a[:-1]])] = 0  # each series starts from 0 bytes
    by_time = np.argsort(ts_a, kind="stable")
    memory = MemoryEvents(ts_ns=ts_a[by_time], addr=np.zeros(len(ts_a), dtype=np.uint64),
                          bytes=(total_a - prev)[by_time], total_allocated=total_a[by_time], device=dev_a[by_time])
    return memory, notes + ["MXNet storage counters carry totals only: no addresses, no operator tags"]
