"""The TensorFlow hook: drives a Keras Workload through tbd's stages and records raw data in the run dir.

Runs in the runner child under .venv-tensorflow (tensorflow-cpu 2.21, Keras 3). Same stages as
every hook (profilers/framework_hook.py): warm-up until stable, a timing window (per-core CPU counters, NVML
on a GPU), a trace window under TF's own profiler, then the GEMM ceiling (tf.linalg.matmul).

Synchronisation: on the CPU a tf.function call returns when its ops are done; on a GPU the
kernels run asynchronously, so the synchronize hook is `tf.test.experimental.sync_devices()`
(present in TF 2.21; it waits for every device's queued work).

The trace window runs under `tf.profiler.experimental.start/stop`, each traced iteration inside a
`tf.profiler.experimental.Trace("ProfilerStep", step_num=N, _r=1)`; the XSpace it saves is
rewritten as RUN_DIR/trace.json.gz by profilers/tensorflow/xspace.py, with the operand shapes of
the step's graphs; TF's own .xplane.pb is kept in RUN_DIR/plugins/profile/<run>/ for TensorBoard.

raw/memory.json (schema `rundir.TENSORFLOW_MEMORY_SCHEMA`, read by analysis/memory/tensorflow.py):
exact bytes of trainable variables, of their gradients (dense, same shapes), of the optimizer's
variables and of the input pool, and the feature maps derived from the step's traced graph
(profilers/tensorflow/memory.py: the forward tensors its gradient ops read).
"""

from __future__ import annotations

import contextlib
import glob
import json
import math
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, ContextManager

import numpy as np

from tbd.core import rundir
from tbd.core.records import RunSpec
from tbd.profilers.ceilings import best_seconds_per_call
from tbd.profilers.framework_hook import (
    Device,
    FrameworkHook,
    TraceWindow,
    environment_from_nvml,
    gpu_index,
    missing_parts_reasons,
)
from tbd.profilers.loop import run_trace_window
from tbd.profilers.tensorflow.memory import step_feature_maps
from tbd.profilers.tensorflow.xspace import graph_shapes, xspace_to_chrome


class TensorFlowHook(FrameworkHook):
    """TF's own profiler (XSpace) for the trace window; operand shapes from the step's graphs."""

    framework = "tensorflow"

    @property
    def tf(self) -> Any:
        # Imported when a run starts, not with this module: importing TF takes seconds (`tbd env`).
        import tensorflow

        return tensorflow

    def prepare(self, spec: RunSpec, notes: list[str]) -> Device:
        import keras  # with TF, when a run starts

        tf = self.tf
        if spec.threads:
            tf.config.threading.set_intra_op_parallelism_threads(int(spec.threads))
        tf.random.set_seed(spec.seed)
        keras.utils.set_random_seed(spec.seed)
        return self.device(spec.device)

    def device(self, requested: str) -> Device:
        """The Device for "auto", "cpu", "cuda" or "cuda:N": its handle is a TF device string."""
        gpus = len(self.tf.config.list_physical_devices("GPU"))
        index = gpu_index(requested, gpus, "TensorFlow", "install a CUDA build of tensorflow")
        return Device("cpu", -1, "/CPU:0") if index < 0 else Device(f"cuda:{index}", index, f"/GPU:{index}")

    def environment(self, spec: RunSpec, device: Device) -> dict:
        return environment_from_nvml(versions(), spec, device)

    def device_scope(self, device: Device) -> ContextManager:
        return self.tf.device(device.handle)

    def synchronizer(self, device: Device) -> Callable[[], None]:
        return _synchronizer(self.tf, device.handle)

    def parameter_count(self, model: Any) -> int:
        return int(sum(int(math.prod(v.shape)) for m in _each(model) for v in m.weights))

    def out_of_memory(self, exc: BaseException) -> bool:
        return is_out_of_memory(exc)

    def gemm_ceiling(self, device: Device) -> dict:
        return measured_gemm_ceiling(self.tf, device.handle, n=4096 if device.is_gpu else 2048)

    def trace_window(self, window: TraceWindow) -> None:
        tf, workload, lead_in = self.tf, window.workload, window.lead_in
        snapshots: list[dict] = []

        @contextlib.contextmanager
        def around_step(i: int):
            number = lead_in + i  # numbered as torch.profiler numbers them: lead-in steps first
            with tf.profiler.experimental.Trace("ProfilerStep", step_num=number, _r=1):
                yield
            snapshots.append({"step": number,
                              **memory_snapshot(workload.model, workload.optimizer, workload.inputs)})

        tf.profiler.experimental.start(str(window.scratch))
        try:
            run_trace_window(window.callbacks, window.spec.trace_iterations, window.state, around_step=around_step,
                             after_step=lambda: None, progress=window.progress, lead_in=lead_in)
        finally:
            window.callbacks.synchronize()
            tf.profiler.experimental.stop()
        found = sorted(glob.glob(str(window.scratch / "plugins" / "profile" / "*" / "*.xplane.pb")))
        shapes, shape_note = graph_shapes(workload.step)
        if shape_note:
            window.state.notes.append(shape_note)
        rundir.atomic_write_json(window.run_dir / rundir.MEMORY,
                                 memory_records(window.device, snapshots, workload, feature_maps(workload.step)))
        if not found:
            window.state.notes.append("TF's profiler wrote no .xplane.pb: no trace")
            return
        xspace = Path(found[-1])
        trace = xspace_to_chrome(xspace.read_bytes(), shapes)
        window.write_trace(json.dumps(trace, separators=(",", ":")).encode())
        # TF's own file too, where TensorBoard's profile plugin looks (`tensorboard --logdir RUN_DIR`).
        keep = window.run_dir / rundir.TENSORBOARD_PROFILE / xspace.parent.name / xspace.name
        rundir.atomic_write_bytes(keep, xspace.read_bytes())


#: The runner child's hook for `--framework tensorflow`.
HOOK = TensorFlowHook()


def feature_maps(step: Any) -> dict:
    """step_feature_maps(step), or null with the reason when reading the graph failed."""
    try:
        return step_feature_maps(step)
    except Exception as exc:  # noqa: BLE001 - an analytic extra must not cost the run its measurements
        return {"bytes": None, "by_op": {}, "tensors": 0, "graphs": 0, "second_order": False,
                "reason": f"reading the kept tensors from the step's graph failed: {type(exc).__name__}: {exc}"}


def memory_records(device: Device, snapshots: list[dict], workload: Any, maps: dict | None = None) -> dict:
    """raw/memory.json: per traced step, the exact bytes memory_snapshot counts, the analytic feature maps
    (`maps`: step_feature_maps' result, the same graph for every step; its breakdown under "feature_maps"),
    and why a part is null."""
    reasons = {"gradients": ("counted as the trainable variables' shapes and dtypes (dense gradients): the "
                             "step's tape is inside the workload's tf.function, its tensors are not reachable")}
    reasons.update(missing_parts_reasons(workload, "keras.Model", "keras optimizer"))
    out = {"schema": rundir.TENSORFLOW_MEMORY_SCHEMA, "device_index": device.index, "iterations": snapshots,
           "reasons": reasons}
    if maps is not None:
        for snap in snapshots:
            snap["feature_maps_bytes"] = maps["bytes"]
        reasons["feature_maps"] = maps["reason"] or (
            f"analytic: {maps['tensors']} forward tensors the step's gradient ops read in its traced graph "
            f"(largest of {maps['graphs']} traced graph(s)), sized by their static shapes; views and shape-only "
            "reads counted once or not at all; grappler's run-time fusions may keep less")
        if maps["bytes"] is not None and maps.get("second_order"):
            reasons["feature_maps"] += ("; the step differentiates a gradient (a tape inside a tape): the inner "
                                        "gradient's own tensors the outer backward reads are not counted")
        out["feature_maps"] = {k: maps[k] for k in ("by_op", "tensors", "graphs")}
    return out


def versions() -> dict:
    """TensorFlow, Keras and numpy versions from package metadata (imports none)."""
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


def _synchronizer(tf: Any, tf_device: str):
    if tf_device.startswith("/CPU"):
        return lambda: None  # CPU ops are done when the call returns
    sync = getattr(getattr(tf.test, "experimental", None), "sync_devices", None)
    if sync is None:
        from tensorflow.python.eager import context  # TF is imported by now; older releases only

        return context.context().sync_executors
    return sync


def _nbytes(t: Any) -> int:
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


def measured_gemm_ceiling(tf: Any, tf_device: str, n: int = 2048, repeats: int = 5) -> dict:
    """Best achieved FLOP/s of an n x n float32 tf.linalg.matmul on the device (2 n^3 FLOPs, as profilers/ceilings.py)."""
    if n <= 0 or repeats <= 0:
        raise ValueError(f"n and repeats must be positive, got n={n}, repeats={repeats}")
    sync = _synchronizer(tf, tf_device)
    with tf.device(tf_device):
        a = tf.random.uniform((n, n), dtype=tf.float32, seed=0)
        b = tf.random.uniform((n, n), dtype=tf.float32, seed=1)

        def matmul():
            return tf.linalg.matmul(a, b)

        best, inner = best_seconds_per_call(matmul, sync, repeats)
    return {"flops_per_s": 2.0 * n**3 / best, "n": n, "seconds": best, "repeats": repeats,
            "matmuls_per_repeat": inner, "dtype": "float32", "path": "tf.linalg.matmul",
            "device": "cpu" if tf_device.startswith("/CPU") else f"cuda:{tf_device.split(':')[1]}"}
