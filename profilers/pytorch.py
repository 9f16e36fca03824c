"""The PyTorch hook: drives a Workload through tbd's stages and records raw data in the run dir.

Stages (DESIGN.md, "How data flows"): warm-up until stable (iteration times only), a timing window
(throughput, per-core CPU counters, NVML), then a separate trace window under torch.profiler
(ops/kernels with shapes, allocator events, saved-for-backward tensors). Throughput never comes
from traced iterations: the tracer slows them down.

Used by the runner child (python -m tbd.runner) for suite models and in-process by the public API
for a user's own step function; both write the same raw records.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tbd.models.base import Workload
from tbd.profilers.windows import run_stages

from tbd import rundir
from tbd.records import RunSpec
from tbd.sampling import LoopHooks, LoopState, ProgressFn, run_trace_window


def resolve_device(torch: Any, requested: str) -> Any:
    """"auto" means CUDA when a device is visible, else the CPU."""
    from tbd.errors import UsageError

    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(requested)
    except RuntimeError:
        raise UsageError(f"unknown device '{requested}'", hint="use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"device '{requested}' requested but PyTorch sees no CUDA device",
                         hint="use --device cpu, or install a CUDA build of torch")
    if device.type not in ("cpu", "cuda"):
        raise UsageError(f"device type '{device.type}' is not supported", hint="use cpu or cuda")
    return device


def _nvtx_marker():
    """NVTX ranges in the "tbd" domain, so nsys/ncu can be scoped to tbd's windows."""
    try:
        import nvtx
    except ImportError:  # nvtx is a dependency; without it, ranges are simply absent
        return lambda name: contextlib.nullcontext()
    return lambda name: nvtx.annotate(name, domain="tbd")


def run_workload(torch: Any, workload: Workload, spec: RunSpec, run_dir: Path, device: Any,
                 state: LoopState, progress: ProgressFn) -> None:
    """Run every stage and write the raw records; `state` keeps what was gathered if interrupted.

    The workload's `close()` (worker processes of A3C, ...) runs however the stages end.
    """
    try:
        _run_stages(torch, workload, spec, run_dir, device, state, progress)
    finally:
        if workload.close is not None:
            workload.close()


def _run_stages(torch: Any, workload: Workload, spec: RunSpec, run_dir: Path, device: Any,
                state: LoopState, progress: ProgressFn) -> None:
    from tbd.profilers.gemm import measured_gemm_ceiling

    is_cuda = device.type == "cuda"
    synchronize = (lambda: torch.cuda.synchronize(device)) if is_cuda else (lambda: None)
    hooks = LoopHooks(step=workload.step, synchronize=synchronize, mark=_nvtx_marker(),
                      samples_counter=workload.samples_counter)
    params = None if workload.model is None else sum(p.numel() for p in workload.model.parameters())
    run_stages(hooks, workload, spec, state, run_dir, progress, parameters=params,
               nvml=_nvml_sampler(torch, device) if is_cuda else None,
               trace_window=lambda: _trace_window(torch, workload, spec, run_dir, device, hooks, state, progress),
               # A larger matrix on a GPU: n=2048 is too small to fill an H100's SMs for long.
               gemm_ceiling=lambda: measured_gemm_ceiling(torch, device, n=4096 if is_cuda else 2048))


def _nvml_sampler(torch: Any, device: Any):
    from tbd.profilers.nvml import NvmlSampler

    index = device.index if device.index is not None else torch.cuda.current_device()
    # NVML and CUDA may number devices differently; the UUID names the same card in both.
    uuid = str(getattr(torch.cuda.get_device_properties(index), "uuid", "") or "") or None
    return NvmlSampler(index, uuid=uuid)


def _trace_window(torch: Any, workload: Workload, spec: RunSpec, run_dir: Path, device: Any,
                  hooks: LoopHooks, state: LoopState, progress: ProgressFn) -> None:
    from tbd.profilers.pytorch_memory import MemoryTracker, torch_memory_cross_check
    from torch.profiler import ProfilerActivity, profile, schedule

    is_cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if is_cuda else [])
    tmp_dir = Path(tempfile.mkdtemp(prefix=".trace-", dir=run_dir))
    exported = tmp_dir / "trace.json"
    tracker = MemoryTracker(workload.model, workload.optimizer, workload.inputs)
    # One lead-in step: the profiler's first step carries its start-up cost and is discarded.
    lead_in = 1

    def export(prof: Any) -> None:
        prof.export_chrome_trace(str(exported))

    if is_cuda:
        torch.cuda.reset_peak_memory_stats(device)
    try:
        with profile(activities=activities, record_shapes=True, profile_memory=True, with_stack=True,
                     schedule=schedule(wait=0, warmup=lead_in, active=spec.trace_iterations, repeat=1),
                     on_trace_ready=export) as prof:
            run_trace_window(
                hooks, spec.trace_iterations, state,
                # torch.profiler numbers steps from 0; the lead-in steps come first.
                around_step=lambda i: tracker.iteration(lead_in + i),
                after_step=prof.step, progress=progress, lead_in=lead_in)
        records = tracker.records()
        if is_cuda:
            records["cuda_max_allocated"] = int(torch.cuda.max_memory_allocated(device))
        rundir.atomic_write_json(run_dir / rundir.MEMORY, records)
        rundir.atomic_write_json(run_dir / rundir.MEMORY_CROSS_CHECK, torch_memory_cross_check(prof))
        if exported.exists():
            with open(exported, "rb") as src:
                rundir.atomic_write_bytes(run_dir / rundir.TRACE, gzip.compress(src.read(), compresslevel=6))
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


def run(spec: RunSpec, run_dir: Path, state: LoopState, progress: ProgressFn) -> None:
    """The runner child's entry: set torch up, describe the machine, build the workload, profile it."""
    import torch
    from tbd.profilers import host

    from tbd.registry import load_builder

    setup_torch(torch, spec)
    device = resolve_device(torch, spec.device)
    # The profile names the device that ran, and keeps what was asked ("auto") beside it.
    rundir.atomic_write_json(run_dir / rundir.SPEC,
                             {**spec.to_dict(), "device": str(device), "device_requested": spec.device})
    rundir.atomic_write_json(run_dir / rundir.ENVIRONMENT,
                             host.environment(framework_versions(torch), torch=torch, device=device))
    progress({"stage": "build", "done": 0, "total": 1})
    workload = load_builder(spec.model, spec.framework)(batch=spec.batch, device=device, size=spec.size,
                                                        seed=spec.seed)
    progress({"stage": "build", "done": 1, "total": 1})
    run_workload(torch, workload, spec, run_dir, device, state, progress)


def versions() -> dict:
    """Versions `tbd env` shows, without building anything."""
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {**framework_versions(torch), "gpu": gpu}


def framework_versions(torch: Any) -> dict:
    """Versions that matter to a reader comparing runs."""
    versions = {"torch": torch.__version__}
    if torch.version.cuda:
        versions["cuda"] = torch.version.cuda
    if torch.backends.cudnn.is_available():
        versions["cudnn"] = str(torch.backends.cudnn.version())
    versions["threads"] = str(torch.get_num_threads())
    return versions


def is_out_of_memory(exc: BaseException) -> bool:
    """True for CUDA OOM and for the CPU allocator failing (both surface as RuntimeError kinds)."""
    if isinstance(exc, MemoryError):
        return True
    name = type(exc).__name__
    text = str(exc)
    return name == "OutOfMemoryError" or "out of memory" in text.lower() or "can't allocate memory" in text


def setup_torch(torch: Any, spec: RunSpec) -> None:
    """Seeds and thread count, before the workload is built."""
    torch.manual_seed(spec.seed)
    if spec.threads:
        torch.set_num_threads(spec.threads)
    os.environ.setdefault("PYTHONHASHSEED", str(spec.seed))

