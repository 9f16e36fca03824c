"""The MXNet hook: drives a Gluon Workload through tbd's stages and records raw data in the run dir.

Runs in the runner child under .venv-mxnet (MXNet 1.9.1 needs numpy < 1.24). Same stages as
profilers/pytorch/hook.py: warm-up until stable, a timing window (per-core CPU counters, NVML on a
GPU), then a trace window under MXNet's own profiler. MXNet is asynchronous: the engine queues
operators, so the synchronize hook is `mx.nd.waitall()` and every window ends with it.

What is written, besides the shared records (spec, environment, workload, iterations, cpu, nvml,
gemm): RUN_DIR/trace.json.gz (rundir.CHROME_TRACE; the profiler's dump, each traced iteration marked by a
"ProfilerStep#N" Task in the "tbd" domain), raw/mxnet_shapes.json (operand shapes of every
Convolution / FullyConnected call per traced iteration, logged by Gluon forward hooks, because
the dump records none) and raw/memory.json (exact bytes of parameters, gradients, optimizer
state and the input pool, and the feature maps derived from the hybridized graphs,
profilers/mxnet/memory.py; schema `rundir.MXNET_MEMORY_SCHEMA`, read by analysis/memory/mxnet.py).

Operator bulking is switched off (MXNET_EXEC_BULK_EXEC_TRAIN=0 and the cached graph's
MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_FWD/BWD=0, for the whole run so timed and traced iterations
run alike): with it on, autograd's backward operators (and all operators of a hybridized block)
show in the dump as "ImperativeBulk" events and cannot be named or given FLOPs. Shapes of a
hybridized block's operators come from its cached graph's shape inference. NVTX ranges are not emitted: MXNet
has its own profiler and no NVTX annotation in 1.9.
"""

from __future__ import annotations

import contextlib
import os
import sys
from importlib import metadata
from typing import Any, Callable

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
from tbd.profilers.mxnet.memory import GraphCalls
from tbd.profilers.mxnet.shapes import ShapeLog, flat_arrays

# Imperative autograd reads the first, hybridized blocks' cached graphs the other two.
_BULK_ENVS = ("MXNET_EXEC_BULK_EXEC_TRAIN", "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_FWD",
              "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_BWD")


class MXNetHook(FrameworkHook):
    """MXNet's own profiler for the trace window, plus the operand shapes and array sizes it lacks."""

    framework = "mxnet"

    @property
    def mx(self) -> Any:
        # Imported in prepare(), after the environment variables MXNet reads when it loads are set.
        import mxnet

        return mxnet

    def prepare(self, spec: RunSpec, notes: list[str]) -> Device:
        bulk_note = _disable_backward_bulking()
        if bulk_note:
            notes.append(bulk_note)
        if spec.threads:
            # MXNet's CPU operators use OpenMP; the thread count is read when the library loads. Without
            # it MXNet picks its own (one thread on a 2-core VM here: half the machine).
            os.environ["OMP_NUM_THREADS"] = str(spec.threads)
        mx = self.mx
        mx.random.seed(spec.seed)
        np.random.seed(spec.seed)
        return self.device(spec.device)

    def device(self, requested: str) -> Device:
        """The Device for "auto", "cpu", "cuda" or "cuda:N": its handle is an mx.Context."""
        mx = self.mx
        index = gpu_index(requested, mx.context.num_gpus(), "MXNet", "install a CUDA build of mxnet (mxnet-cu1xx)")
        return Device("cpu", -1, mx.cpu()) if index < 0 else Device(f"cuda:{index}", index, mx.gpu(index))

    def environment(self, spec: RunSpec, device: Device) -> dict:
        return environment_from_nvml(versions(), spec, device)

    # Its engine takes a whole iteration's operators at once and returns (20 iterations "ran" in 0.4 s,
    # then 243 s of waiting at the window's end): each timing iteration is waited for.
    queues_work = True

    def synchronizer(self, device: Device) -> Callable[[], None]:
        # MXNet's engine is asynchronous on the CPU too: waitall() is the synchronisation.
        return self.mx.nd.waitall

    def parameter_count(self, model: Any) -> int:
        return int(sum(int(p.data().size) for p in model.collect_params().values()))

    def out_of_memory(self, exc: BaseException) -> bool:
        return is_out_of_memory(exc)

    def gemm_ceiling(self, device: Device) -> dict:
        return measured_gemm_ceiling(self.mx, device.handle, n=4096 if device.is_gpu else 2048)

    def trace_window(self, window: TraceWindow) -> None:
        mx, workload, lead_in = self.mx, window.workload, window.lead_in
        dump = window.scratch / "mxnet_profile.json"
        domain = mx.profiler.Domain("tbd")
        shapes = ShapeLog([workload.model, *workload.aux_modules], workload.inputs, workload.optimizer)
        calls = GraphCalls([workload.model, *workload.aux_modules], workload.inputs)  # for the feature maps
        snapshots: list[dict] = []

        @contextlib.contextmanager
        def around_step(i: int):
            number = lead_in + i  # numbered as torch.profiler numbers them: lead-in steps first
            task = mx.profiler.Task(domain, f"ProfilerStep#{number}")
            task.start()
            with shapes.step(number), calls.step(number):
                yield
            task.stop()
            snapshots.append({"step": number,
                              **memory_snapshot(workload.model, workload.optimizer, workload.inputs)})

        # Operators (imperative and symbolic) and storage counters; C-API call events are left out:
        # they are most of the dump's size and tbd reads none of them.
        mx.profiler.set_config(profile_symbolic=True, profile_imperative=True, profile_memory=True,
                               profile_api=False, aggregate_stats=False, continuous_dump=False, filename=str(dump))
        mx.profiler.set_state("run")
        try:
            run_trace_window(window.callbacks, window.spec.trace_iterations, window.state, around_step=around_step,
                             after_step=lambda: None, progress=window.progress, lead_in=lead_in)
        finally:
            mx.nd.waitall()
            mx.profiler.set_state("stop")
            shapes.close()
            calls.close()
        mx.profiler.dump()
        # After profiling stops, so binding the graphs (no allocation, but engine work) is not in the dump.
        feature_maps_reason = add_feature_maps(snapshots, calls, mx, window.device.handle)
        rundir.atomic_write_json(window.run_dir / rundir.MXNET_SHAPES,
                                 {"schema": rundir.MXNET_SHAPES_SCHEMA, "steps": shapes.steps})
        rundir.atomic_write_json(window.run_dir / rundir.MEMORY,
                                 memory_records(window.device, snapshots, workload, feature_maps_reason))
        if dump.exists():
            window.write_trace(dump.read_bytes())


#: The runner child's hook for `--framework mxnet`.
HOOK = MXNetHook()


def add_feature_maps(snapshots: list[dict], calls: GraphCalls, mx: Any, ctx: Any) -> str:
    """Each snapshot's feature_maps_bytes (analytic: profilers/mxnet/memory.py); returns what the figure is
    or why it is null, for records["reasons"]["feature_maps"]."""
    try:
        per_step, reason = calls.feature_maps(mx, ctx)
    except Exception as exc:  # noqa: BLE001 - an analytic extra must not cost the run its measurements
        per_step, reason = {}, f"deriving the feature maps from the graphs failed: {type(exc).__name__}: {exc}"
    for snap in snapshots:
        snap["feature_maps_bytes"] = per_step.get(snap["step"])
    return reason


def memory_records(device: Device, snapshots: list[dict], workload: Any, feature_maps_reason: str | None = None) -> dict:
    """raw/memory.json: per traced step, the exact bytes memory_snapshot counts, the analytic feature maps
    (feature_maps_bytes, with what they cover in reasons["feature_maps"]), and why a part is null."""
    reasons = missing_parts_reasons(workload, "Gluon Block", "gluon.Trainer")
    if feature_maps_reason:
        reasons["feature_maps"] = feature_maps_reason
    static = _static_alloc_blocks(workload.model)
    if static:
        reasons["at_peak"] = (f"{static} hybridized block(s) use static_alloc: their feature maps and workspace "
                              "live in buffers allocated at the first iteration, before tracing, which MXNet's "
                              "storage counter does not see, so allocator_peak leaves them out")
    return {"schema": rundir.MXNET_MEMORY_SCHEMA, "device_index": device.index, "iterations": snapshots,
            "reasons": reasons}


def versions() -> dict:
    """MXNet and numpy versions from package metadata (imports neither)."""
    out = {}
    for dist, key in (("mxnet", "mxnet"), ("numpy", "numpy")):
        try:
            out[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[key] = None
    return out


def is_out_of_memory(exc: BaseException) -> bool:
    """True for MemoryError and MXNet's allocation failures (MXNetError "out of memory" texts)."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc).lower()
    return "out of memory" in text or "cudaerrormemoryallocation" in text or "failed to allocate" in text


def _disable_backward_bulking() -> str | None:
    """Switch operator bulking off before MXNet reads its settings; a note if that failed."""
    user = [f"{k}={os.environ[k]}" for k in _BULK_ENVS if os.environ.get(k, "0") != "0"]
    if user:
        return (f"{', '.join(user)} set by the user: bulked operators show as ImperativeBulk events "
                "without names or FLOPs")
    for k in _BULK_ENVS:
        os.environ[k] = "0"
    if "mxnet" in sys.modules:
        return ("mxnet was imported before the hook switched operator bulking off: operators may show "
                "as ImperativeBulk events without names or FLOPs")
    return None


def _nbytes(arr: Any) -> int:
    return int(arr.size) * int(np.dtype(arr.dtype).itemsize)


def memory_snapshot(model: Any, trainer: Any, inputs: Any) -> dict:
    """Exact bytes of the tensors tbd can name: parameters, their gradients, optimizer state, inputs.

    Each array is counted once (by its handle), as the paper's memory profiler summed them.
    """
    seen: set = set()

    def total(arrays: list) -> int:
        out = 0
        for a in arrays:
            key = getattr(getattr(a, "handle", None), "value", None) or id(a)
            if key not in seen:
                seen.add(key)
                out += _nbytes(a)
        return out

    out: dict = {"weights_bytes": None, "gradients_bytes": None, "optimizer_state_bytes": None, "input_bytes": None}
    if model is not None:
        params = list(model.collect_params().values())
        out["weights_bytes"] = total([a for p in params for a in p.list_data()])
        out["gradients_bytes"] = total([a for p in params if p.grad_req != "null" for a in p.list_grad()])
    trainers = [] if trainer is None else list(trainer) if isinstance(trainer, (list, tuple)) else [trainer]
    if trainers and all(getattr(t, "_updaters", None) is not None for t in trainers):
        out["optimizer_state_bytes"] = total([a for t in trainers for u in t._updaters for s in u.states.values()
                                              for a in flat_arrays(s)])
    if inputs is not None:
        out["input_bytes"] = total(list(inputs()))
    return out


def _static_alloc_blocks(model: Any) -> int:
    """Hybridized blocks (outermost ones) running with static_alloc=True."""
    count, stack = 0, [model] if model is not None else []
    while stack:
        b = stack.pop()
        if getattr(b, "_active", False):
            count += int(bool(dict(getattr(b, "_flags", ()) or ()).get("static_alloc", False)))
            continue
        stack.extend(getattr(b, "_children", {}).values())
    return count


def measured_gemm_ceiling(mx: Any, ctx: Any, n: int = 2048, repeats: int = 5) -> dict:
    """Best achieved FLOP/s of an n x n float32 matrix product on `ctx` (2 n^3 FLOPs, as profilers/ceilings.py).

    MXNet has two GEMM paths: `mx.nd.dot` (its BLAS, OpenBLAS in the pip wheel) and the
    FullyConnected operator (oneDNN on the CPU). They differ several-fold here (dot reached ~44
    GFLOP/s while FullyConnected ran at ~160), and the ceiling must not sit below what the
    workload's own operators reach, so both are timed and the faster one is the ceiling; "path"
    says which.

    Returns the keys profilers/ceilings.py writes: flops_per_s, n, seconds, repeats, matmuls_per_repeat,
    dtype, device, plus path.
    """
    if n <= 0 or repeats <= 0:
        raise ValueError(f"n and repeats must be positive, got n={n}, repeats={repeats}")
    a = mx.nd.random.uniform(shape=(n, n), ctx=ctx, dtype="float32")
    b = mx.nd.random.uniform(shape=(n, n), ctx=ctx, dtype="float32")
    out = mx.nd.empty((n, n), ctx=ctx, dtype="float32")
    paths = {
        "dot": lambda: mx.nd.dot(a, b, out=out),
        # data (n x n) times weight^T (n x n): the same 2 n^3 FLOPs through oneDNN.
        "FullyConnected": lambda: mx.nd.FullyConnected(a, b, no_bias=True, num_hidden=n, out=out),
    }
    timed = {name: best_seconds_per_call(fn, mx.nd.waitall, repeats) for name, fn in paths.items()}
    path = min(timed, key=lambda k: timed[k][0])
    best, inner = timed[path]
    return {"flops_per_s": 2.0 * n**3 / best, "n": n, "seconds": best, "repeats": repeats,
            "matmuls_per_repeat": inner, "dtype": "float32", "path": path,
            "device": "cpu" if ctx.device_type == "cpu" else f"cuda:{ctx.device_id}"}
