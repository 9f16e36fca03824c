"""The MXNet hook: drives a Gluon Workload through tbd's stages and records raw data in the run dir.

Runs in the runner child under .venv-mxnet (MXNet 1.9.1 needs numpy < 1.24). Same stages as
profilers/pytorch.py: warm-up until stable, a timing window (per-core CPU counters, NVML on a
GPU), then a trace window under MXNet's own profiler. MXNet is asynchronous: the engine queues
operators, so the synchronize hook is `mx.nd.waitall()` and every window ends with it.

What is written, besides the shared records (spec, environment, workload, iterations, cpu, nvml,
gemm): RUN_DIR/trace.json.gz (the profiler's dump, each traced iteration marked by a
"ProfilerStep#N" Task in the "tbd" domain), raw/mxnet_shapes.json (operand shapes of every
Convolution / FullyConnected call per traced iteration, logged by Gluon forward hooks, because
the dump records none) and raw/memory.json (exact bytes of parameters, gradients, optimizer
state and the input pool; schema `MEMORY_SCHEMA`, read by analysis/memory_mxnet.py).

Operator bulking is switched off (MXNET_EXEC_BULK_EXEC_TRAIN=0 and the cached graph's
MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_FWD/BWD=0, for the whole run so timed and traced iterations
run alike): with it on, autograd's backward operators (and all operators of a hybridized block)
show in the dump as "ImperativeBulk" events and cannot be named or given FLOPs. Shapes of a
hybridized block's operators come from its cached graph's shape inference. NVTX ranges are not emitted: MXNet
has its own profiler and no NVTX annotation in 1.9.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tbd.profilers.mxnet_shapes import ShapeLog, _flat_arrays
from tbd.profilers.windows import run_stages

from tbd import rundir
from tbd.records import RunSpec
from tbd.sampling import LoopHooks, LoopState, ProgressFn, run_trace_window

MEMORY_SCHEMA = "tbd.mxnet_memory_records/1"
SHAPES = rundir.MXNET_SHAPES
# Imperative autograd reads the first, hybridized blocks' cached graphs the other two.
_BULK_ENVS = ("MXNET_EXEC_BULK_EXEC_TRAIN", "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_FWD",
              "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_BWD")


def versions() -> dict:
    """MXNet and numpy versions from package metadata (imports neither)."""
    from importlib import metadata

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


def resolve_device(mx: Any, requested: str) -> tuple[Any, str]:
    """(mx.Context, tbd device name): "auto" is gpu(0) when MXNet sees a GPU, else the CPU."""
    from tbd.errors import UsageError

    gpus = mx.context.num_gpus()
    if requested == "auto":
        return (mx.gpu(0), "cuda:0") if gpus > 0 else (mx.cpu(), "cpu")
    if requested == "cpu":
        return mx.cpu(), "cpu"
    if requested == "cuda" or requested.startswith("cuda:"):
        index_text = requested.partition(":")[2] or "0"
        if not index_text.isdigit():
            raise UsageError(f"unknown device '{requested}'", hint="use auto, cpu, cuda or cuda:N")
        index = int(index_text)
        if index >= gpus:
            raise UsageError(f"device '{requested}' requested but MXNet sees {gpus} GPU(s)",
                             hint="use --device cpu, or install a CUDA build of mxnet (mxnet-cu1xx)")
        return mx.gpu(index), f"cuda:{index}"
    raise UsageError(f"unknown device '{requested}'", hint="use auto, cpu, cuda or cuda:N")


def run(spec: RunSpec, run_dir: Path, state: LoopState, progress: ProgressFn) -> None:
    """Build the workload and run every stage, writing raw records; `state` keeps what ran."""
    bulk_note = _disable_backward_bulking()
    if spec.threads:
        # MXNet's CPU operators use OpenMP; the thread count is read when the library loads. Without
        # it MXNet picks its own (one thread on a 2-core VM here: half the machine).
        os.environ["OMP_NUM_THREADS"] = str(spec.threads)
    import mxnet as mx
    import numpy as np
    from tbd.profilers import host

    from tbd.registry import load_builder

    mx.random.seed(spec.seed)
    np.random.seed(spec.seed)
    ctx, device = resolve_device(mx, spec.device)
    rundir.atomic_write_json(run_dir / rundir.SPEC, {**spec.to_dict(), "device": device,
                                                     "device_requested": spec.device})
    rundir.atomic_write_json(run_dir / rundir.ENVIRONMENT, _environment(host, spec, ctx))
    if bulk_note:
        state.notes.append(bulk_note)
    progress({"stage": "build", "done": 0, "total": 1})
    workload = load_builder(spec.model, "mxnet")(batch=spec.batch, device=ctx, size=spec.size, seed=spec.seed)
    progress({"stage": "build", "done": 1, "total": 1})
    try:
        _run_stages(mx, workload, spec, run_dir, ctx, state, progress)
    finally:
        if workload.close is not None:
            workload.close()


def _disable_backward_bulking() -> str | None:
    """Switch operator bulking off before MXNet reads its settings; a note if that failed."""
    import sys

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


def _environment(host: Any, spec: RunSpec, ctx: Any) -> dict:
    env = host.environment(versions())
    cpu = env["cpu"]
    if spec.threads:
        cpu["threads_in_use"] = min(int(spec.threads), cpu["cores_available"] or cpu["cores_logical"])
    if ctx.device_type == "gpu":
        from tbd.profilers.nvml import gpu_facts_from_nvml

        env["gpu"], env["gpu_reason"] = gpu_facts_from_nvml(ctx.device_id), None
    else:
        env["gpu_reason"] = "the run used device cpu"
    return env


def _nbytes(arr: Any) -> int:
    import numpy as np

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
                                              for a in _flat_arrays(s)])
    if inputs is not None:
        out["input_bytes"] = total(list(inputs()))
    return out


def _run_stages(mx: Any, workload: Any, spec: RunSpec, run_dir: Path, ctx: Any, state: LoopState,
                progress: ProgressFn) -> None:
    is_gpu = ctx.device_type == "gpu"
    # MXNet's engine is asynchronous on the CPU too: waitall() is the synchronisation.
    hooks = LoopHooks(step=workload.step, synchronize=mx.nd.waitall, samples_counter=workload.samples_counter)
    nvml = None
    if is_gpu:
        from tbd.profilers.nvml import NvmlSampler

        nvml = NvmlSampler(ctx.device_id)
    params = None if workload.model is None else int(sum(int(p.data().size)
                                                         for p in workload.model.collect_params().values()))
    run_stages(hooks, workload, spec, state, run_dir, progress, parameters=params, nvml=nvml,
               trace_window=lambda: _trace_window(mx, workload, spec, run_dir, ctx, hooks, state, progress),
               gemm_ceiling=lambda: measured_gemm_ceiling(mx, ctx, n=4096 if is_gpu else 2048))


def _trace_window(mx: Any, workload: Any, spec: RunSpec, run_dir: Path, ctx: Any, hooks: LoopHooks,
                  state: LoopState, progress: ProgressFn) -> None:
    from tbd.profilers.mxnet_trace import SHAPES_SCHEMA

    tmp_dir = Path(tempfile.mkdtemp(prefix=".trace-", dir=run_dir))
    dump = tmp_dir / "mxnet_profile.json"
    # One lead-in step under the profiler, unmarked: its first step carries the start-up cost.
    lead_in = 1
    domain = mx.profiler.Domain("tbd")
    shapes = ShapeLog([workload.model, *workload.aux_modules], workload.inputs, workload.optimizer)
    snapshots: list[dict] = []

    @contextlib.contextmanager
    def around_step(i: int):
        number = lead_in + i  # numbered as torch.profiler numbers them: lead-in steps first
        task = mx.profiler.Task(domain, f"ProfilerStep#{number}")
        task.start()
        with shapes.step(number):
            yield
        task.stop()
        snapshots.append({"step": number, **memory_snapshot(workload.model, workload.optimizer, workload.inputs)})

    # Operators (imperative and symbolic) and storage counters; C-API call events are left out:
    # they are most of the dump's size and tbd reads none of them.
    mx.profiler.set_config(profile_symbolic=True, profile_imperative=True, profile_memory=True, profile_api=False,
                           aggregate_stats=False, continuous_dump=False, filename=str(dump))
    try:
        mx.profiler.set_state("run")
        try:
            run_trace_window(hooks, spec.trace_iterations, state, around_step=around_step,
                             after_step=lambda: None, progress=progress, lead_in=lead_in)
        finally:
            mx.nd.waitall()
            mx.profiler.set_state("stop")
            shapes.close()
        mx.profiler.dump()
        rundir.atomic_write_json(run_dir / SHAPES, {"schema": SHAPES_SCHEMA, "steps": shapes.steps})
        rundir.atomic_write_json(run_dir / rundir.MEMORY, _memory_records(ctx, snapshots, workload))
        if dump.exists():
            rundir.atomic_write_bytes(run_dir / rundir.TRACE, gzip.compress(dump.read_bytes(), compresslevel=6))
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


def _memory_records(ctx: Any, snapshots: list[dict], workload: Any) -> dict:
    reasons = {}
    for key, what, attr in (("weights", "no model (Gluon Block) given", "model"),
                            ("gradients", "no model (Gluon Block) given", "model"),
                            ("optimizer_state", "no gluon.Trainer given", "optimizer"),
                            ("inputs", "the workload does not expose its input pool", "inputs")):
        if getattr(workload, attr) is None:
            reasons[key] = what
    static = _static_alloc_blocks(workload.model)
    if static:
        reasons["at_peak"] = (f"{static} hybridized block(s) use static_alloc: their feature maps and workspace "
                              "live in buffers allocated at the first iteration, before tracing, which MXNet's "
                              "storage counter does not see, so allocator_peak leaves them out")
    return {"schema": MEMORY_SCHEMA, "device_index": ctx.device_id if ctx.device_type == "gpu" else -1,
            "iterations": snapshots, "reasons": reasons}


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
    """Best achieved FLOP/s of an n x n float32 matrix product on `ctx` (2 n^3 FLOPs, as profilers/gemm.py).

    MXNet has two GEMM paths: `mx.nd.dot` (its BLAS, OpenBLAS in the pip wheel) and the
    FullyConnected operator (oneDNN on the CPU). They differ several-fold here (dot reached ~44
    GFLOP/s while FullyConnected ran at ~160), and the ceiling must not sit below what the
    workload's own operators reach, so both are timed and the faster one is the ceiling; "path"
    says which.

    Returns the keys profilers/gemm.py writes: flops_per_s, n, seconds, repeats, matmuls_per_repeat,
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
    from tbd.profilers.gemm import best_seconds_per_call

    timed = {name: best_seconds_per_call(fn, mx.nd.waitall, repeats) for name, fn in paths.items()}
    path = min(timed, key=lambda k: timed[k][0])
    best, inner = timed[path]
    return {"flops_per_s": 2.0 * n**3 / best, "n": n, "seconds": best, "repeats": repeats,
            "matmuls_per_repeat": inner, "dtype": "float32", "path": path,
            "device": "cpu" if ctx.device_type == "cpu" else f"cuda:{ctx.device_id}"}
