"""TensorFlow's profiler output made readable without TensorFlow: XSpace -> Chrome trace, graph shapes.

TF saves an XSpace protobuf (<logdir>/plugins/profile/<run>/<host>.xplane.pb); `xspace_to_chrome`
parses it with TF's own message class (tensorflow.tsl.profiler.protobuf.xplane_pb2) and rewrites it
as a Chrome-trace dict (schema `rundir.TENSORFLOW_TRACE_SCHEMA`, read by
profilers/tensorflow/trace.py): every XPlane event with a duration as a Chrome "X" event whose args
keep the exact integer picoseconds (`ts_ps`, `dur_ps`, absolute: line timestamp_ns x 1000 +
offset_ps), TF op events ("node:OpType" names) with `tf_op` and `tf_type`, ProfilerStep spans as
"ProfilerStep#N". TF 2.21 records no operand shapes for CPU ops, so `graph_shapes` reads them from
the step's tf.function graphs (Workload.step or step.train_step): top-level key "tfOpShapes" maps
a graph node name to its type, input shapes, output shapes and attributes (strides, padding,
data_format, transpose_a/b, adj_x/y).

Runs in the runner child under .venv-tensorflow; TensorFlow itself is imported only inside
`xspace_to_chrome` (its protobuf classes), so this module imports anywhere.
"""

from __future__ import annotations

from typing import Any

from tbd.core import rundir

# Op types whose operand shapes the reader maps onto FLOP formulas (profilers/tensorflow_ops.TF_TO_ATEN;
# a test keeps the two in step), and the attributes those formulas read.
SHAPED_OPS = {"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Conv2D", "Conv2DBackpropInput",
               "Conv2DBackpropFilter", "BiasAdd", "BiasAddGrad", "Relu", "ReluGrad", "AddV2", "Add", "Mul", "Sub",
               "RealDiv", "DivNoNan", "Maximum", "Minimum", "Neg", "Sqrt", "Rsqrt", "Exp", "Log", "Tanh", "Sigmoid",
               "TanhGrad", "SigmoidGrad", "Square", "SquaredDifference", "AddN", "AssignAddVariableOp",
               "AssignSubVariableOp", "Sum", "Mean", "Softmax", "LogSoftmax", "SparseSoftmaxCrossEntropyWithLogits",
               "FusedBatchNormV3", "FusedBatchNormGradV3", "MaxPool", "MaxPoolGrad", "AvgPool", "AvgPoolGrad",
               "Pow", "Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual", "LogicalAnd",
               "LogicalOr", "LogicalNot"}
SHAPE_ATTRS = ("strides", "padding", "data_format", "dilations", "explicit_paddings", "transpose_a", "transpose_b",
          "adj_x", "adj_y", "ksize", "is_training")


def _stat_value(stat: Any, names: dict) -> Any:
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(stat, kind)
    if kind == "ref_value":
        return names.get(value, str(value))
    if kind == "bytes_value":
        return None  # serialized protos (e.g. memory snapshots): not JSON
    return value


def xspace_to_chrome(xspace_bytes: bytes, shapes: dict | None = None) -> dict:
    """XSpace protobuf bytes -> Chrome-trace dict with exact integer ps times (module docstring)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2  # lazy: importing TF takes seconds

    space = xplane_pb2.XSpace()
    space.ParseFromString(xspace_bytes)
    events: list[dict] = []
    for pid, plane in enumerate(space.planes):
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        if not plane.lines:
            continue
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": plane.name}})
        for tid, line in enumerate(plane.lines):
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": line.display_name or line.name}})
            base_ps = int(line.timestamp_ns) * 1000
            for ev in line.events:
                if ev.duration_ps <= 0:
                    continue  # instants (threadpool bookkeeping): no time to attribute
                md = plane.event_metadata[ev.metadata_id]
                args: dict = {}
                for s in list(md.stats) + list(ev.stats):
                    v = _stat_value(s, names)
                    if v is not None:
                        args[names.get(s.metadata_id, str(s.metadata_id))] = v
                ts_ps, dur_ps = base_ps + int(ev.offset_ps), int(ev.duration_ps)
                name = md.name
                cat = "traceme"
                if md.name == "ProfilerStep" and "step_num" in args:
                    name, cat = f"ProfilerStep#{int(args['step_num'])}", "step"
                elif md.display_name and ":" in md.name:
                    # TF op events: "<graph node>:<OpType>", display name = the op type.
                    cat = "tf_op"
                    args["tf_op"], args["tf_type"] = md.name.rsplit(":", 1)
                args.update(ts_ps=ts_ps, dur_ps=dur_ps)
                events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
                               "ts": ts_ps / 1e6, "dur": dur_ps / 1e6, "args": args})
    return {"schema": rundir.TENSORFLOW_TRACE_SCHEMA, "displayTimeUnit": "ns", "traceEvents": events,
            "tfOpShapes": shapes}


def graph_shapes(step: Any) -> tuple[dict | None, str | None]:
    """{graph node: {type, inputs, outputs, ...}} of the step's tf.function graph(s), or (None, why).

    The tf.function is Workload.step itself or `step.train_step` (models/tensorflow/*.py wrap a
    tf.function taking the batch in a no-argument step()); every concrete function it traced is read.
    """
    fn = step if hasattr(step, "get_concrete_function") else getattr(step, "train_step", None)
    if fn is None or not hasattr(fn, "get_concrete_function"):
        return None, ("Workload.step is not a tf.function and has no .train_step tf.function: no graph to "
                      "read operand shapes from, TF op FLOPs are unknown")
    try:
        lister = getattr(fn, "_list_all_concrete_functions", None)  # private in 2.21, guarded
        concrete = list(lister()) if lister is not None else []
        if not concrete:
            concrete = [fn.get_concrete_function()]
    except Exception as exc:  # noqa: BLE001 - a tf.function with arguments has no argument-free concrete function
        return None, f"could not get the step's concrete functions ({exc}): TF op FLOPs are unknown"
    # The step's graphs and, recursively, the function graphs they call (while/cond bodies and
    # their gradients: a Keras LSTM's cell runs inside a while loop's body function).
    graphs, seen, stack = [], set(), [c.graph for c in concrete]
    while stack:
        g = stack.pop()
        if id(g) in seen:
            continue
        seen.add(id(g))
        graphs.append(g)
        stack += [f.graph for f in getattr(g, "_functions", {}).values() if getattr(f, "graph", None) is not None]
    out: dict = {}
    for g in graphs:
        for op in g.get_operations():
            if op.type not in SHAPED_OPS:
                continue
            attrs = {}
            for a in SHAPE_ATTRS:
                try:
                    v = op.get_attr(a)
                except (ValueError, Exception):  # noqa: BLE001 - op has no such attribute
                    continue
                attrs[a] = v.decode() if isinstance(v, bytes) else (list(v) if isinstance(v, (list, tuple)) else v)
            shape = lambda t: None if t.shape.rank is None else [d if d is not None else -1 for d in t.shape.as_list()]
            out[op.name] = {"type": op.type, "inputs": [shape(t) for t in op.inputs],
                            "input_ops": [t.op.name for t in op.inputs],
                            "outputs": [shape(t) for t in op.outputs],
                            # An op with no output (AssignAddVariableOp) computes in its value's type.
                            "dtype": (op.outputs[0] if op.outputs else op.inputs[-1]).dtype.name, "attrs": attrs}
    return out, None
