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

FLOPs: MXNet operators map onto the shared ATen formula table (`analysis.flops`) through
`MXNET_TO_ATEN` below (Convolution, FullyConnected, and RNN as aten::_cudnn_rnn); shapes come from the hook's per-step call log (raw/mxnet_shapes.json,
`shapes=`), since the dump has none. In each step the k-th forward event named X is the k-th
logged call of X, and the k-th "_backward_X" event the k-th call counted from the end (autograd
runs the graph in reverse). Rows without a logged call have NaN FLOPs.
"""

from __future__ import annotations

import math
import re
from typing import Callable

import numpy as np

from analysis.flops_args import OpShapes
from tbd.errors import TraceFormatError
from tbd.records import ANALYTIC, KernelTable, MemoryEvents, OpTable, StepSpan, TraceRecords

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_DEVICE = re.compile(r"^(cpu|gpu)/(\d+)$")
_HINT = "record with mx.profiler.set_config(profile_all=True, aggregate_stats=False) and mx.profiler.dump()"
SHAPES_SCHEMA = "tbd.mxnet_shapes/1"

# numpy dtype name -> the type string analysis.flops.precision_of reads (Kineto's spelling).
_TYPES = {"float32": "float", "float16": "c10::Half", "float64": "double", "bfloat16": "c10::BFloat16"}


def _conv(call: dict) -> list[OpShapes]:
    # aten::convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    t = _TYPES.get(call.get("dtype", ""), "")
    return [OpShapes("aten::convolution", (call["input"], call["weight"], [], [], [], [], [], [], []),
                     (t, t), ("", "", "", str(call["stride"]), str(call["pad"]), str(call["dilate"]),
                              "False", "", str(call["groups"])))]


def _conv_backward(call: dict) -> list[OpShapes]:
    # aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    # transposed, output_padding, groups, output_mask): grad_input only when the input needs it.
    t = _TYPES.get(call.get("dtype", ""), "")
    mask = [bool(call["input_grad"]), True, bool(call.get("bias", False))]
    return [OpShapes("aten::convolution_backward", (call["output"], call["input"], call["weight"]),
                     (t, t, t), ("", "", "", "", str(call["stride"]), str(call["pad"]), str(call["dilate"]),
                                 "False", "", str(call["groups"]), str(mask)))]


def _fc_dims(call: dict) -> tuple[int, int, int]:
    """(m, k, n) of FullyConnected: data flattened to [m, k], weight [n, k]."""
    n, k = call["weight"]
    return math.prod(call["input"]) // k, k, n


def _fc(call: dict) -> list[OpShapes]:
    # y = x W^T: aten::mm([m, k], [k, n]); the bias add is not counted, as for addmm.
    t = _TYPES.get(call.get("dtype", ""), "")
    m, k, n = _fc_dims(call)
    return [OpShapes("aten::mm", ([m, k], [k, n]), (t, t), ())]


def _fc_backward(call: dict) -> list[OpShapes]:
    # grad_weight = dy^T x: mm([n, m], [m, k]); grad_input = dy W: mm([m, n], [n, k]) when needed.
    t = _TYPES.get(call.get("dtype", ""), "")
    m, k, n = _fc_dims(call)
    calls = [OpShapes("aten::mm", ([n, m], [m, k]), (t, t), ())]
    if call["input_grad"]:
        calls.append(OpShapes("aten::mm", ([m, n], [n, k]), (t, t), ()))
    return calls


# MXNet's RNN modes -> cuDNN's cudnnRNNMode_t numbers, as aten::_cudnn_rnn takes them (flops_rnn).
_RNN_MODES = {"rnn_relu": 0, "rnn_tanh": 1, "lstm": 2, "gru": 3}
_RNN_GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


def _rnn_weights(call: dict) -> list[list[int]]:
    """cuDNN's per layer and direction weights (w_ih, w_hh, b_ih, b_hh[, w_hr]) for the call's sizes.

    MXNet's RNN always has both bias vectors (src/operator/rnn-inl.h GetRnnParamSize), as cuDNN.
    """
    gates, hidden, proj = _RNN_GATES[call["mode"]], int(call["state_size"]), int(call.get("projection_size") or 0)
    dirs = 2 if call["bidirectional"] else 1
    out = []
    width = int(call["input_size"])
    for _ in range(int(call["num_layers"])):
        for _ in range(dirs):
            out += [[gates * hidden, width], [gates * hidden, proj or hidden], [gates * hidden], [gates * hidden]]
            out += [[proj, hidden]] if proj else []
        width = (proj or hidden) * dirs
    return out


def _rnn_args(call: dict, backward: bool) -> OpShapes:
    # aten::_cudnn_rnn(input, weight[], weight_stride0, weight_buf, hx, cx, mode, hidden_size,
    # proj_size, num_layers, batch_first, dropout, train, bidirectional, batch_sizes, dropout_state);
    # the backward puts output, grad_output, grad_hy, grad_cy after cx and output_mask at 21.
    t = _TYPES.get(call.get("dtype", ""), "")
    mode, hidden = call["mode"], int(call["state_size"])
    proj = int(call.get("projection_size") or 0)
    seq, batch, layers = int(call["seq_len"]), int(call["batch"]), int(call["num_layers"])
    if mode not in _RNN_MODES:
        raise ValueError(f"RNN mode {mode!r}")
    groups = layers * (2 if call["bidirectional"] else 1)
    x, state = [seq, batch, int(call["input_size"])], [groups, batch, proj or hidden]
    cell = [groups, batch, hidden] if mode == "lstm" else []
    dims = [x, _rnn_weights(call), [], [], state, cell]
    types = [t, "TensorList", "Scalar", "", t, t if cell else ""]
    scalars = ["", "", "", "", "", ""]
    if backward:
        y = [seq, batch, (proj or hidden) * (2 if call["bidirectional"] else 1)]
        dims += [y, y, state, cell]
        types += [t, t, t, t if cell else ""]
        scalars += ["", "", "", ""]
    dims += [[]] * 10
    types += ["Scalar"] * 8 + ["ScalarList", ""]
    scalars += [str(_RNN_MODES[mode]), str(hidden), str(proj), str(layers), "False", "0.0", "True",
                str(bool(call["bidirectional"])), "[]", ""]
    if backward:
        # output_mask (input, hx, cx, weight): cuDNN's backward-data pass runs whatever the mask.
        mask = [bool(call.get("input_grad", True)), True, mode == "lstm", bool(call["weight_grad"])]
        dims += [[], []]
        types += ["", "ScalarList"]
        scalars += ["", str(mask)]
    name = "aten::_cudnn_rnn_backward" if backward else "aten::_cudnn_rnn"
    return OpShapes(name, tuple(dims), tuple(types), tuple(scalars))


def _rnn(call: dict) -> list[OpShapes]:
    # MXNet's fused RNN operator (every layer and direction, the whole sequence) is cuDNN's RNN.
    return [_rnn_args(call, False)]


def _rnn_backward(call: dict) -> list[OpShapes]:
    return [_rnn_args(call, True)]


#: MXNet operator -> (the logged call it reads, adapter to the ATen calls computing the same thing).
MXNET_TO_ATEN: dict[str, tuple[str, Callable[[dict], list[OpShapes]]]] = {
    "Convolution": ("Convolution", _conv),
    "_backward_Convolution": ("Convolution", _conv_backward),
    "FullyConnected": ("FullyConnected", _fc),
    "_backward_FullyConnected": ("FullyConnected", _fc_backward),
    "RNN": ("RNN", _rnn),
    "_backward_RNN": ("RNN", _rnn_backward),
}


def trace_records(trace: dict, source: str, flops_of=None, precision_of=None,
                  shapes: dict | None = None) -> TraceRecords:
    """Build the records of one loaded MXNet profiler dump (pure: no I/O).

    Args:
        trace: what `profilers.kineto.read_trace_file` returned for the dump.
        source: the trace's name, for notes and errors.
        flops_of: callable(OpShapes) -> FLOPs | None | NaN; default `analysis.flops.op_flops`.
        precision_of: callable(input types) -> "fp32", ...; default `analysis.flops.precision_of`.
        shapes: the hook's call log (raw/mxnet_shapes.json), or None: then every FLOP is NaN.
    Returns:
        TraceRecords with integer-ns times; device_kind "cuda" if operators ran on a GPU, else "cpu".
    Raises:
        TraceFormatError: not a trace, malformed events, unpaired operator events, no operators.
    """
    if flops_of is None or precision_of is None:
        from analysis import flops as _flops

        flops_of = flops_of or _flops.op_flops
        precision_of = precision_of or _flops.precision_of
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise TraceFormatError(f'{source}: not an MXNet profiler dump (no "traceEvents" list of objects)', hint=_HINT)
    devices = {e.get("pid"): str((e.get("args") or {}).get("name", "")) for e in events
               if e.get("ph") == "M" and e.get("name") == "process_name"}
    ops = _operators(events, devices, source)
    if not len(ops["name"]):
        raise TraceFormatError(f"{source}: no MXNet operator events", hint=_HINT)
    steps = _steps(events, source)
    notes: list[str] = []
    if steps:
        lo, hi = steps[0].start_ns, max(s.end_ns for s in steps)
    else:
        lo, hi = int(ops["start"].min()), int(ops["end"].max())
        notes.append("no ProfilerStep spans: the whole trace is the window")
    step_no = _step_numbers(ops["start"], steps)
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


def _ns(value, source: str, what: str) -> int:
    """MXNet's integer-microsecond times -> integer ns (exact); malformed -> TraceFormatError."""
    from profilers.kineto_events import _ns as kineto_ns

    try:
        return kineto_ns(value)
    except TypeError:
        raise TraceFormatError(f"{source}: malformed {what} event time {value!r}") from None


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
        if ev.get("cat") != "operator" or ph not in ("B", "E"):
            continue
        key = (ev.get("pid"), ev.get("tid"), str(ev.get("name")))
        t = _ns(ev.get("ts"), source, "operator")
        if ph == "B":
            open_at.setdefault(key, []).append(t)
            continue
        if not open_at.get(key):
            raise TraceFormatError(f"{source}: operator end {ev.get('name')!r} at {ev.get('ts')} has no matching begin",
                                   hint="the dump may be truncated; record again")
        start = open_at[key].pop()
        if t < start:
            raise TraceFormatError(f"{source}: operator {key[2]!r} ends before it begins")
        dev = _device_of(devices.get(ev.get("pid"), ""))
        rows.append((key[2], start, t, -1 if dev is None else dev, tids.setdefault(key[:2], len(tids))))
    open_ops = sum(len(v) for v in open_at.values())
    if open_ops:
        raise TraceFormatError(f"{source}: {open_ops} operator begin events have no end",
                               hint="the dump may be truncated; record again")
    rows.sort(key=lambda r: (r[4], r[1], -r[2]))  # per thread, by start; a parent before its child
    depth = [0] * len(rows)
    self_ns = [r[2] - r[1] for r in rows]
    stack: list[int] = []
    for i, (_, start, end, _, tid) in enumerate(rows):
        while stack and (rows[stack[-1]][4] != tid or rows[stack[-1]][2] <= start):
            stack.pop()
        if stack:
            depth[i] = len(stack)
            self_ns[stack[-1]] -= end - start
        stack.append(i)
    cols = {"name": np.array([r[0] for r in rows], dtype=object),
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
        m = _STEP.match(name)
        if m is None or ev.get("ph") not in ("b", "e", "B", "E"):
            continue
        t = _ns(ev.get("ts"), source, "ProfilerStep")
        if ev["ph"] in ("b", "B"):
            begin[name] = t
        elif name in begin:
            start = begin.pop(name)
            spans.append(StepSpan(int(m.group(1)), start, t, t))
        else:
            raise TraceFormatError(f"{source}: {name} ends without a begin")
    if begin:
        raise TraceFormatError(f"{source}: {', '.join(sorted(begin))} never end", hint="the dump may be truncated")
    return tuple(sorted(spans, key=lambda s: s.start_ns))


def _step_numbers(start_ns: np.ndarray, steps: tuple[StepSpan, ...]) -> np.ndarray:
    """ProfilerStep number holding each start time, -1 outside every step."""
    out = np.full(len(start_ns), -1, dtype=np.int64)
    for s in steps:
        out[(start_ns >= s.start_ns) & (start_ns <= s.end_ns)] = s.number
    return out


def _row_flops(ops: dict, step_no: np.ndarray, shapes: dict | None, flops_of, precision_of,
           source: str) -> tuple[np.ndarray, np.ndarray, int]:
    """FLOPs and precision per operator row from the hook's call log; count of rows it covered."""
    n = len(ops["name"])
    flops = np.full(n, np.nan)
    precision = np.array([""] * n, dtype=object)
    if shapes is None:
        return flops, precision, 0
    if (not isinstance(shapes, dict) or shapes.get("schema") != SHAPES_SCHEMA
            or not isinstance(shapes.get("steps"), dict)):
        raise TraceFormatError(f"{source}: MXNet shape log is not of schema {SHAPES_SCHEMA!r}")
    covered = 0
    for number in np.unique(step_no[step_no >= 0]).tolist():
        calls = shapes["steps"].get(str(number))
        if not isinstance(calls, list):
            continue
        by_op: dict[str, list] = {}
        for c in calls:
            by_op.setdefault(str(c.get("op")), []).append(c)
        seen: dict[str, int] = {}
        for i in np.flatnonzero(step_no == number).tolist():
            name = str(ops["name"][i])
            if name not in MXNET_TO_ATEN:
                continue
            logged, adapter = MXNET_TO_ATEN[name]
            k = seen.get(name, 0)
            seen[name] = k + 1
            log = by_op.get(logged, [])
            if k >= len(log):
                continue
            call = log[k] if not name.startswith("_backward_") else log[len(log) - 1 - k]
            try:
                aten = adapter(call)
            except (KeyError, TypeError, ValueError) as exc:
                raise TraceFormatError(f"{source}: malformed {logged} call in the shape log ({exc})") from None
            values = [flops_of(a) for a in aten]
            flops[i] = math.nan if any(v is None for v in values) else float(sum(values))
            precision[i] = precision_of(aten[0].input_types)
            covered += 1
    return flops, precision, covered


def _flop_notes(shapes: dict | None, covered: int, names: np.ndarray) -> list[str]:
    if shapes is None:
        return ["MXNet's profiler records no operand shapes and no shape log was given: FLOPs unknown"]
    mapped = int(sum(1 for x in names if x in MXNET_TO_ATEN))
    return [f"MXNet's profiler records no operand shapes: FLOPs come from the hook's log of "
            f"{', '.join(sorted({v[0] for v in MXNET_TO_ATEN.values()}))} calls ({covered} of {mapped} such "
            "operator events matched); other operators' FLOPs are unknown"]


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
        try:
            value = int((ev.get("args") or {})[name])
        except (KeyError, TypeError, ValueError):
            raise TraceFormatError(f"{source}: malformed Device Storage counter {name!r}") from None
        ts.append(_ns(ev.get("ts"), source, "Device Storage"))
        total.append(value)
        dev.append(d)
    notes = [f"storage counters of {', '.join(sorted(skipped))} are not read"] if skipped else []
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
