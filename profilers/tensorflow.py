"""The TensorFlow hook: drives a Keras Workload through tbd's stages and records raw data in the run dir.

Runs in the runner child under .venv-tensorflow (tensorflow-cpu 2.21, Keras 3). Same stages as
profilers/mxnet.py: warm-up until stable, a timing window (per-core CPU counters, NVML on a GPU),
a trace window under TF's own profiler, then the GEMM ceiling (tf.linalg.matmul).

Synchronisation: on the CPU a tf.function call returns when its ops are done; on a GPU the
kernels run asynchronously, so the synchronize hook is `tf.test.experimental.sync_devices()`
(present in TF 2.21; it waits for every device's queued work).

The trace window runs under `tf.profiler.experimental.start/stop`, each traced iteration inside a
`tf.profiler.experimental.Trace("ProfilerStep", step_num=N, _r=1)`. TF saves an XSpace protobuf
(<logdir>/plugins/profile/<run>/<host>.xplane.pb); it is parsed here with TF's own message class
(tensorflow.tsl.profiler.protobuf.xplane_pb2) and rewritten as RUN_DIR/trace.json.gz (schema
`TRACE_SCHEMA`, profilers/tensorflow_trace.py reads it): every XPlane event with a duration as a
Chrome "X" event whose args keep the exact integer picoseconds (`ts_ps`, `dur_ps`, absolute:
line timestamp_ns x 1000 + offset_ps), TF op events ("node:OpType" names) with `tf_op` and
`tf_type`, ProfilerStep spans as "ProfilerStep#N". TF 2.21 records no operand shapes for CPU ops,
so the hook logs them from the step's tf.function graphs (Workload.step or step.train_step):
top-level key "tfOpShapes" maps a graph node name to its type, input shapes, output shapes and
attributes (strides, padding, data_format, transpose_a/b, adj_x/y).

raw/memory.json (schema `MEMORY_SCHEMA`, read by analysis/memory_tensorflow.py): exact bytes of
trainable variables, of their gradients (dense, same shapes), of the optimizer's variables and of
the input pool.
"""

from __future__ import annotations

import contextlib
import glob
import gzip
import json
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tbd.profilers.windows import run_stages

from tbd import rundir
from tbd.records import RunSpec
from tbd.sampling import LoopHooks, LoopState, ProgressFn, run_trace_window

MEMORY_SCHEMA = "tbd.tensorflow_memory_records/1"
TRACE_SCHEMA = "tbd.tensorflow_trace/1"
# Graph ops whose operand shapes the FLOP formulas need (profilers/tensorflow_trace.py TF_TO_ATEN).
# Op types whose operand shapes the reader maps onto FLOP formulas (profilers/tensorflow_trace.TF_TO_ATEN;
# a test keeps the two in step), and the attributes those formulas read.
_SHAPED_OPS = {"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Conv2D", "Conv2DBackpropInput",
               "Conv2DBackpropFilter", "BiasAdd", "BiasAddGrad", "Relu", "ReluGrad", "AddV2", "Add", "Mul", "Sub",
               "RealDiv", "DivNoNan", "Maximum", "Minimum", "Neg", "Sqrt", "Rsqrt", "Exp", "Log", "Tanh", "Sigmoid",
               "TanhGrad", "SigmoidGrad", "Square", "SquaredDifference", "AddN", "AssignAddVariableOp",
               "AssignSubVariableOp", "Sum", "Mean", "Softmax", "LogSoftmax", "SparseSoftmaxCrossEntropyWithLogits",
               "FusedBatchNormV3", "FusedBatchNormGradV3", "MaxPool", "MaxPoolGrad", "AvgPool", "AvgPoolGrad",
               "Pow", "Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual", "LogicalAnd",
               "LogicalOr", "LogicalNot"}
_ATTRS = ("strides", "padding", "data_format", "dilations", "explicit_paddings", "transpose_a", "transpose_b",
          "adj_x", "adj_y", "ksize", "is_training")


def versions() -> dict:
    """TensorFlow, Keras and numpy versions from package metadata (imports none)."""
    from importlib import metadata

    out = {}
    for dists, key in ((("tensorflow", "tensorflow-cpu", "tensorflow-gpu"), "tensorflow"), (("keras",), "keras"),
                       (("numpy",), "numpy")):
        out[key] = None
        for dist in dists:
            try:
                out[key] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return out


def is_out_of_memory(exc: BaseException) -> bool:
    """True for MemoryError and tf.errors.ResourceExhaustedError (checked by class name: no TF import)."""
    if isinstance(exc, MemoryError):
        return True
    return any(c.__name__ == "ResourceExhaustedError" for c in type(exc).__mro__)


def resolve_device(tf: Any, requested: str) -> tuple[str, str]:
    """(TF device string, tbd device name): "auto" is /GPU:0 when TF sees a GPU, else /CPU:0."""
    from tbd.errors import UsageError

    gpus = len(tf.config.list_physical_devices("GPU"))
    if requested == "auto":
        return ("/GPU:0", "cuda:0") if gpus > 0 else ("/CPU:0", "cpu")
    if requested == "cpu":
        return "/CPU:0", "cpu"
    if requested == "cuda" or requested.startswith("cuda:"):
        index_text = requested.partition(":")[2] or "0"
        if not index_text.isdigit():
            raise UsageError(f"unknown device '{requested}'", hint="use auto, cpu, cuda or cuda:N")
        index = int(index_text)
        if index >= gpus:
            raise UsageError(f"device '{requested}' requested but TensorFlow sees {gpus} GPU(s)",
                             hint="use --device cpu, or install a CUDA build of tensorflow")
        return f"/GPU:{index}", f"cuda:{index}"
    raise UsageError(f"unknown device '{requested}'", hint="use auto, cpu, cuda or cuda:N")


def run(spec: RunSpec, run_dir: Path, state: LoopState, progress: ProgressFn) -> None:
    """Build the workload and run every stage, writing raw records; `state` keeps what ran."""
    import keras
    import tensorflow as tf
    from tbd.profilers import host

    from tbd.registry import load_builder

    if spec.threads:
        tf.config.threading.set_intra_op_parallelism_threads(int(spec.threads))
    tf.random.set_seed(spec.seed)
    keras.utils.set_random_seed(spec.seed)
    tf_device, device = resolve_device(tf, spec.device)
    rundir.atomic_write_json(run_dir / rundir.SPEC, {**spec.to_dict(), "device": device,
                                                     "device_requested": spec.device})
    env = host.environment(versions())
    if spec.threads:
        cpu = env["cpu"]
        cpu["threads_in_use"] = min(int(spec.threads), cpu["cores_available"] or cpu["cores_logical"])
    if device == "cpu":
        env["gpu_reason"] = "the run used device cpu"
    else:
        from tbd.profilers.nvml import gpu_facts_from_nvml  # TF has no device-properties API either

        env["gpu"], env["gpu_reason"] = gpu_facts_from_nvml(int(device.split(":")[1])), None
    rundir.atomic_write_json(run_dir / rundir.ENVIRONMENT, env)
    progress({"stage": "build", "done": 0, "total": 1})
    with tf.device(tf_device):
        workload = load_builder(spec.model, "tensorflow")(batch=spec.batch, device=tf_device, size=spec.size,
                                                          seed=spec.seed)
    progress({"stage": "build", "done": 1, "total": 1})
    try:
        with tf.device(tf_device):
            _run_stages(tf, workload, spec, run_dir, tf_device, state, progress)
    finally:
        if workload.close is not None:
            workload.close()


def _synchronizer(tf: Any, tf_device: str):
    if tf_device.startswith("/CPU"):
        return lambda: None  # CPU ops are done when the call returns
    sync = getattr(getattr(tf.test, "experimental", None), "sync_devices", None)
    if sync is None:
        from tensorflow.python.eager import context

        return context.context().sync_executors
    return sync


def _run_stages(tf: Any, workload: Any, spec: RunSpec, run_dir: Path, tf_device: str, state: LoopState,
                progress: ProgressFn) -> None:
    is_gpu = tf_device.startswith("/GPU")
    hooks = LoopHooks(step=workload.step, synchronize=_synchronizer(tf, tf_device),
                      samples_counter=workload.samples_counter)
    nvml = None
    if is_gpu:
        from tbd.profilers.nvml import NvmlSampler

        nvml = NvmlSampler(int(tf_device.split(":")[1]))
    params = None if workload.model is None else int(sum(int(math.prod(v.shape)) for m in _each(workload.model)
                                                         for v in m.weights))
    run_stages(hooks, workload, spec, state, run_dir, progress, parameters=params, nvml=nvml,
               trace_window=lambda: _trace_window(tf, workload, spec, run_dir, tf_device, hooks, state, progress),
               gemm_ceiling=lambda: measured_gemm_ceiling(tf, tf_device, n=4096 if is_gpu else 2048))


def _trace_window(tf: Any, workload: Any, spec: RunSpec, run_dir: Path, tf_device: str, hooks: LoopHooks,
                  state: LoopState, progress: ProgressFn) -> None:
    tmp_dir = Path(tempfile.mkdtemp(prefix=".trace-", dir=run_dir))
    lead_in = 1  # the profiler's first step carries its start-up cost: run unmarked
    snapshots: list[dict] = []

    @contextlib.contextmanager
    def around_step(i: int):
        number = lead_in + i
        with tf.profiler.experimental.Trace("ProfilerStep", step_num=number, _r=1):
            yield
        snapshots.append({"step": number, **memory_snapshot(workload.model, workload.optimizer, workload.inputs)})

    try:
        tf.profiler.experimental.start(str(tmp_dir))
        try:
            run_trace_window(hooks, spec.trace_iterations, state, around_step=around_step,
                             after_step=lambda: None, progress=progress, lead_in=lead_in)
        finally:
            hooks.synchronize()
            tf.profiler.experimental.stop()
        found = sorted(glob.glob(str(tmp_dir / "plugins" / "profile" / "*" / "*.xplane.pb")))
        shapes, shape_note = graph_shapes(workload.step)
        if shape_note:
            state.notes.append(shape_note)
        rundir.atomic_write_json(run_dir / rundir.MEMORY, _memory_records(tf_device, snapshots, workload))
        if not found:
            state.notes.append("TF's profiler wrote no .xplane.pb: no trace")
            return
        trace = xspace_to_chrome(Path(found[-1]).read_bytes(), shapes)
        data = json.dumps(trace, separators=(",", ":")).encode()
        rundir.atomic_write_bytes(run_dir / rundir.TRACE, gzip.compress(data, compresslevel=6))
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


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
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

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
    return {"schema": TRACE_SCHEMA, "displayTimeUnit": "ns", "traceEvents": events,
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
            if op.type not in _SHAPED_OPS:
                continue
            attrs = {}
            for a in _ATTRS:
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


def _nbytes(t: Any) -> int:
    import numpy as np

    return int(math.prod(t.shape)) * int(np.dtype(t.dtype.as_numpy_dtype if hasattr(t.dtype, "as_numpy_dtype")
                                                    else t.dtype).itemsize)


def _each(obj: Any) -> list:
    """A model or optimizer, or a list of them (WGAN-GP: generator and critic, one optimizer each)."""
    return list(obj) if isinstance(obj, (list, tuple)) else [obj]


def memory_snapshot(model: Any, optimizer: Any, inputs: Any) -> dict:
    """Exact bytes of trainable variables, their (dense) gradients, optimizer variables, inputs.

    `model` and `optimizer` may each be one object or a list (several networks, several optimizers).
    """
    seen: set = set()

    def total(tensors: list) -> int:
        out = 0
        for t in tensors:
            # By identity: Keras paths can repeat across two models or two optimizers.
            if id(t) not in seen:
                seen.add(id(t))
                out += _nbytes(t)
        return out

    out: dict = {"weights_bytes": None, "non_trainable_bytes": None, "gradients_bytes": None,
                 "optimizer_state_bytes": None, "input_bytes": None}
    if model is not None:
        # A variable two networks share (or a model listed twice) counts once.
        trainable = list({id(v): v for m in _each(model) for v in m.trainable_variables}.values())
        out["weights_bytes"] = total(trainable)
        # Keras's non-trainable *weights* (BatchNorm moving statistics, frozen layers), not all its
        # non-trainable variables: those also hold dropout's seed-generator state.
        out["non_trainable_bytes"] = total([v for m in _each(model) for v in m.non_trainable_weights])
        # Gradients of a dense step have their variables' shapes and dtypes (tape.gradient output).
        out["gradients_bytes"] = sum(_nbytes(v) for v in trainable)
    if optimizer is not None:
        out["optimizer_state_bytes"] = total([v for o in _each(optimizer) for v in o.variables])
    if inputs is not None:
        out["input_bytes"] = total(list(inputs()))
    return out


def _memory_records(tf_device: str, snapshots: list[dict], workload: Any) -> dict:
    reasons = {"gradients": ("counted as the trainable variables' shapes and dtypes (dense gradients): the "
                             "step's tape is inside the workload's tf.function, its tensors are not reachable")}
    for key, what, attr in (("weights", "no model (keras.Model) given", "model"),
                            ("gradients", "no model (keras.Model) given", "model"),
                            ("optimizer_state", "no keras optimizer given", "optimizer"),
                            ("inputs", "the workload does not expose its input pool", "inputs")):
        if getattr(workload, attr) is None:
            reasons[key] = what
    index = -1 if tf_device.startswith("/CPU") else int(tf_device.split(":")[1])
    return {"schema": MEMORY_SCHEMA, "device_index": index,
            "iterations": snapshots, "reasons": reasons}


def measured_gemm_ceiling(tf: Any, tf_device: str, n: int = 2048, repeats: int = 5) -> dict:
    """Best achieved FLOP/s of an n x n float32 tf.linalg.matmul on the device (2 n^3 FLOPs, as profilers/gemm.py)."""
    if n <= 0 or repeats <= 0:
        raise ValueError(f"n and repeats must be positive, got n={n}, repeats={repeats}")
    sync = _synchronizer(tf, tf_device)
    with tf.device(tf_device):
        a = tf.random.uniform((n, n), dtype=tf.float32, seed=0)
        b = tf.random.uniform((n, n), dtype=tf.float32, seed=1)

        def matmul():
            return tf.linalg.matmul(a, b)

        from tbd.profilers.gemm import best_seconds_per_call

        best, inner = best_seconds_per_call(matmul, sync, repeats)
    return {"flops_per_s": 2.0 * n**3 / best, "n": n, "seconds": best, "repeats": repeats,
            "matmuls_per_repeat": inner, "dtype": "float32", "path": "tf.linalg.matmul",
            "device": "cpu" if tf_device.startswith("/CPU") else f"cuda:{tf_device.split(':')[1]}"}
