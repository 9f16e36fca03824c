"""TensorFlow trace reader: the hook's Chrome trace (converted from TF's XSpace) becomes `TraceRecords`.

No tensorflow import. Input: RUN_DIR/trace.json.gz as profilers/tensorflow/hook.py writes it (schema
"tbd.tensorflow_trace/1"): "X" events with exact integer picoseconds in args `ts_ps`/`dur_ps`;
cat "tf_op" = a TF op execution (args `tf_op` = graph node, `tf_type` = the executed kernel's op
type, e.g. "_MklNativeFusedConv2D" after grappler/oneDNN rewrites), cat "step" = "ProfilerStep#N",
cat "traceme" = TF runtime annotations (not rows); "tfOpShapes" = the hook's log of the step
graph's operand shapes by node name.

Rows: one per tf_op event in the window, covering its SELF time (op events on one thread do not
nest in TF 2.21 CPU traces; if they do the parent keeps its own time). Busy = the outermost op
intervals per thread. Times: ps -> ns by floor division (TF records ns multiples on the CPU; a
note says when not). FLOPs: TF op types map onto ATen ops through
`profilers.tensorflow.ops.TF_TO_ATEN`, whose FLOPs the caller's `flops_of` counts (the shared
formula table, `analysis.flops.ops.op_flops`), with shapes from "tfOpShapes"; a fused op (grappler
names it after its last node, e.g. a BiasAdd or Relu) takes the shapes of the node of its base
type up its first inputs. An op inside a while/cond body executes as "<loop>/body/_<id>/<node>",
where <node> is its name in the body's function graph (the hook logs those graphs too): the
lookup tries each such tail. Op types in `TF_ZERO_FLOPS` move data and get a known 0 without
shapes; an op whose logged shapes have an unknown dimension (a None in the tf.function's
signature) keeps NaN: give the step static shapes.
"""

from __future__ import annotations

import math

import numpy as np

from tbd.core import rundir
from tbd.core.errors import TraceFormatError
from tbd.core.records import ANALYTIC, KernelTable, OpTable, StepSpan, TraceRecords
from tbd.profilers.tensorflow.ops import TF_TO_ATEN, TF_ZERO_FLOPS, aten_type, base_type, shape_node
from tbd.profilers.traces.events import (
    DUR_MAX_NS,
    TIME_MAX_NS,
    TIME_MIN_NS,
    nesting,
    read_json_trace,
    step_number,
    step_numbers,
    step_window,
    trace_events,
)
from tbd.profilers.traces.names import clean_name, quoted

_HINT = "record with `tbd profile --framework tensorflow` (profilers/tensorflow/hook.py writes this trace)"


def read_trace_file(path) -> dict:
    """Load the trace file (.json or .json.gz) as a dict with exact decimal times (`traces.events.read_json_trace`)."""
    return read_json_trace(path, "a trace", _HINT)


def trace_records(trace: dict, source: str, *, flops_of, precision_of) -> TraceRecords:
    """Build the records of one loaded TF trace (pure: no I/O).

    Args:
        trace: what `read_trace_file` returned for RUN_DIR/trace.json.gz.
        source: the trace's name, for notes and errors.
        flops_of: callable(OpShapes) -> FLOPs | None | NaN, e.g. `analysis.flops.ops.op_flops`.
        precision_of: callable(input types) -> "fp32", ..., e.g. `analysis.flops.ops.precision_of`.
    Returns:
        TraceRecords with integer-ns times, device_kind "cpu" (TF op events are host executions).
    Raises:
        TraceFormatError: not this schema, malformed events, unpaired steps, no op events.
    """
    events = trace_events(trace, source, "a trace", _HINT, objects=True)
    if trace.get("schema") != rundir.TENSORFLOW_TRACE_SCHEMA:
        raise TraceFormatError(f"{source}: not a tbd TensorFlow trace (schema {quoted(trace.get('schema'))})", hint=_HINT)
    shapes = trace.get("tfOpShapes")
    if shapes is not None and not isinstance(shapes, dict):
        raise TraceFormatError(f"{source}: tfOpShapes is not an object")
    notes: list[str] = []
    ops, steps, inexact = _events(events, source)
    if inexact:
        notes.append(f"{inexact} event times were not whole ns: floored to ns")
    if not len(ops["name"]):
        raise TraceFormatError(f"{source}: no TensorFlow op events", hint=_HINT)
    lo, hi, window_notes = step_window(steps, ops["start"], ops["end"])
    notes += window_notes
    step_no = step_numbers(ops["start"], steps)
    flops, precision, covered, mapped = _row_flops(ops, shapes, flops_of, precision_of, source)
    if shapes is None:
        notes.append("no tfOpShapes in the trace (the step was not a tf.function): FLOPs unknown")
    else:
        notes.append(f"TF's profiler records no operand shapes: FLOPs come from the step graph's shapes "
                     f"({covered} of {mapped} op events of types with a formula matched); other ops' FLOPs are unknown")
    keep = (ops["start"] >= lo) & (ops["start"] <= hi)
    order = np.flatnonzero(keep)[np.argsort(ops["start"][keep], kind="stable")]
    table = KernelTable(ops["name"], ops["start"], ops["self"], np.full(len(step_no), -1, dtype=np.int64),
                        ops["tid"], ops["type"].copy(), flops,
                        np.where(np.isfinite(flops), ANALYTIC, "").astype(object), precision, step_no)
    roots = keep & (ops["depth"] == 0)
    op_table = OpTable(ops["type"][keep], ops["start"][keep], ops["end"][keep], ops["tid"][keep])
    notes.append("TF op executions on the host; no allocator events are read (feature maps unknown)")
    return TraceRecords(source, "cpu", table.select(order), ops["start"][roots], ops["end"][roots], steps, lo, hi,
                        op_table, None, tuple(notes))


#: Picosecond bounds of a time and a duration: trace_events' ns bounds, x 1000.
_PS_BOUNDS = {"ts_ps": (TIME_MIN_NS * 1000, TIME_MAX_NS * 1000 - 1), "dur_ps": (0, DUR_MAX_NS * 1000 - 1)}
#: What a malformed node of tfOpShapes can raise while its shapes are read.
_NODE_ERRORS = (KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError, RecursionError)


def _int(args: dict, key: str, source: str, name) -> int:
    v = args.get(key)
    low, high = _PS_BOUNDS[key]
    if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
        raise TraceFormatError(f"{source}: event {quoted(name)} has no integer {key} in range ({quoted(v)})",
                               hint=_HINT)
    return v


def _events(events: list, source: str) -> tuple[dict, tuple[StepSpan, ...], int]:
    rows, spans, inexact, tids = [], [], 0, {}
    for ev in events:
        cat = ev.get("cat")
        if ev.get("ph") != "X" or cat not in ("tf_op", "step"):
            continue
        args = ev.get("args")
        if not isinstance(args, dict):
            raise TraceFormatError(f"{source}: event {quoted(ev.get('name'))} has no args", hint=_HINT)
        ts, dur = _int(args, "ts_ps", source, ev.get("name")), _int(args, "dur_ps", source, ev.get("name"))
        inexact += int(ts % 1000 != 0 or dur % 1000 != 0)
        start, end = ts // 1000, (ts + dur) // 1000
        if cat == "step":
            number = step_number(str(ev.get("name")))
            if number is None:
                raise TraceFormatError(f"{source}: step event {quoted(ev.get('name'))} is not ProfilerStep#N")
            spans.append(StepSpan(number, start, end, end))
            continue
        if not isinstance(args.get("tf_type"), str) or not isinstance(args.get("tf_op"), str):
            raise TraceFormatError(f"{source}: op event {quoted(ev.get('name'))} lacks tf_op/tf_type", hint=_HINT)
        tid = tids.setdefault((repr(ev.get("pid")), repr(ev.get("tid"))), len(tids))
        rows.append((args["tf_op"], args["tf_type"], start, end, tid))
    rows.sort(key=lambda r: (r[4], r[2], -r[3]))  # per thread, by start; a parent before its child
    depth, self_ns = nesting([r[2] for r in rows], [r[3] for r in rows], [r[4] for r in rows])
    clean = {n: clean_name(n) for r in rows for n in r[:2]}  # once per distinct name
    cols = {"name": np.array([clean[r[0]] for r in rows], dtype=object),
            "type": np.array([clean[r[1]] for r in rows], dtype=object),
            "start": np.array([r[2] for r in rows], dtype=np.int64),
            "end": np.array([r[3] for r in rows], dtype=np.int64),
            "self": np.array(self_ns, dtype=np.int64), "depth": np.array(depth, dtype=np.int64),
            "tid": np.array([r[4] for r in rows], dtype=np.int64)}
    order = np.argsort(cols["start"], kind="stable")
    return {k: v[order] for k, v in cols.items()}, tuple(sorted(spans, key=lambda s: s.start_ns)), inexact


def _static(node: dict) -> bool:
    """True when every logged input/output shape is fully known (the graph's static shapes)."""
    shapes = list(node.get("inputs") or []) + list(node.get("outputs") or [])
    return all(isinstance(x, list) and all(isinstance(d, int) and d >= 0 for d in x) for x in shapes)


def _row_flops(ops: dict, shapes: dict | None, flops_of, precision_of, source: str):
    n = len(ops["name"])
    flops, precision = np.full(n, np.nan), np.array([""] * n, dtype=object)
    covered = mapped = 0
    for i in range(n):
        kind = base_type(str(ops["type"][i]))
        if kind in TF_ZERO_FLOPS:
            flops[i] = 0.0
            continue
        if kind not in TF_TO_ATEN:
            continue
        mapped += 1
        try:
            aten = _node_atens(str(ops["name"][i]), kind, shapes or {})
        except _NODE_ERRORS as exc:
            raise TraceFormatError(f"{source}: malformed shape record for {quoted(ops['name'][i])} "
                                   f"({quoted(str(exc), 100)})") from None
        if not aten:
            continue
        values = [flops_of(a) for a in aten]
        total = math.nan if any(v is None for v in values) else float(sum(values))
        flops[i] = total if math.isfinite(total) and total >= 0 else math.nan
        precision[i] = precision_of(aten[0].input_types)
        covered += 1
    return flops, precision, covered, mapped


def _node_atens(name: str, kind: str, shapes: dict) -> list | None:
    """The ATen calls of one executed op from its graph node's shapes; None when not known."""
    node = shape_node(name, kind, shapes)
    if not isinstance(node, dict) or not _static(node):
        return None  # no node, or a dimension unknown at trace time (-1 or unknown rank): FLOPs stay NaN
    return TF_TO_ATEN[kind](node, aten_type(str(node.get("dtype", ""))))
