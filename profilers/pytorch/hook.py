"""The PyTorch hook: drives a Workload through tbd's stages and records raw data in the run dir.

Stages (docs/architecture.md, "Data flow"): warm-up until stable (iteration times only), a timing window
(throughput, per-core CPU counters, NVML), then a separate trace window under torch.profiler
(ops/kernels with shapes, allocator events, saved-for-backward tensors). Throughput never comes
from traced iterations: the tracer slows them down.

Used by the runner child (python -m tbd.cli.runner) for suite models and in-process by the public API
for a user's own step function; both write the same raw records.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, ContextManager

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from tbd.core import rundir
from tbd.core.errors import UsageError
from tbd.core.records import RunSpec
from tbd.profilers import host
from tbd.profilers.ceilings import measured_gemm_ceiling
from tbd.profilers.distributed import RankGroup, place_from_env, with_fault
from tbd.profilers.framework_hook import Device, FrameworkHook, TraceWindow, gpu_index
from tbd.profilers.loop import run_trace_window
from tbd.profilers.nvml import NvmlSampler
from tbd.profilers.pytorch.memory import MemoryTracker, torch_memory_cross_check

try:  # nvtx is a dependency; without it, NVTX ranges are simply absent
    import nvtx
except ImportError:  # pragma: no cover - installed with tbd
    nvtx = None


def resolve_device(torch: Any, requested: str) -> Any:
    """The torch.device `requested` names: "auto" is CUDA when a device is visible, else the CPU."""
    index = gpu_index(requested, torch.cuda.device_count() if torch.cuda.is_available() else 0, "PyTorch",
                      "install a CUDA build of torch")
    return torch.device("cpu") if index < 0 else torch.device("cuda", index)


class PyTorchHook(FrameworkHook):
    """torch.profiler for the trace window (ops, kernels, shapes, allocator events, saved tensors)."""

    framework = "pytorch"

    def __init__(self) -> None:
        self.group: RankGroup | None = None  # several ranks under torchrun: the joined process groups

    def device(self, requested: str) -> Device:
        """The Device for "auto", "cpu", "cuda" or "cuda:N" (UsageError otherwise)."""
        dev = resolve_device(torch, requested)
        return Device(str(dev), -1 if dev.type == "cpu" else int(dev.index), dev)

    def prepare(self, spec: RunSpec, notes: list[str]) -> Device:
        place = place_from_env()
        if place is None:
            setup_torch(torch, spec)
            return self.device(spec.device)
        # One GPU per rank: this machine's rank i takes GPU i (as torchrun's LOCAL_RANK means it).
        device = self.device(f"cuda:{place.local_rank}" if spec.device in ("auto", "cuda")
                             and torch.cuda.is_available() else spec.device)
        if spec.threads is None and not device.is_gpu:
            # The machine's cores shared among its ranks (torchrun alone would give each rank one).
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
            spec = replace(spec, threads=max(1, cores // place.local_world_size))
            notes.append(f"each of the {place.local_world_size} ranks on this machine runs {spec.threads} CPU "
                         f"thread(s) ({cores} cores shared)")
        setup_torch(torch, spec)
        if device.is_gpu:
            torch.cuda.set_device(device.handle)
        self.group = RankGroup(torch, place, "nccl" if device.is_gpu else "gloo", spec.rank_timeout_s)
        return device

    def build_options(self, spec: RunSpec, device: Device, build: Any) -> dict[str, Any]:
        if self.group is None:
            return {}
        module = inspect.getmodule(build)
        engines = getattr(module, "DATA_PARALLEL", ("ddp",))
        if "parallel" not in inspect.signature(build).parameters or spec.data_parallel not in engines:
            others = f"; it runs under {', '.join(engines)}" if "parallel" in inspect.signature(build).parameters else ""
            raise UsageError(f"{spec.model} does not run under --data-parallel {spec.data_parallel}{others}",
                             hint="choose another --data-parallel, or run it without --nproc-per-node")
        options = getattr(module, f"{spec.data_parallel.upper()}_OPTIONS", {})
        return {"parallel": self.group.data_parallel(spec.data_parallel, options)}

    def agreement(self) -> Callable[[list[float]], list[float]] | None:
        return None if self.group is None else self.group.agree_max

    def wrap_step(self, step: Callable[[], Any]) -> Callable[[], Any]:
        return step if self.group is None else with_fault(step, self.group.place.rank)

    def finish(self, run_root: Path, own_dir: Path) -> None:
        """After a complete run: rank 0 gathers the other machines' records; the groups are left."""
        if self.group is None:
            return
        if self.group.place.several_machines:
            self.group.send_records_to_rank0(own_dir, run_root)
        self.group.close()

    def environment(self, spec: RunSpec, device: Device) -> dict:
        return host.environment(framework_versions(torch), torch=torch, device=device.handle)

    def synchronizer(self, device: Device) -> Callable[[], None]:
        return (lambda: torch.cuda.synchronize(device.handle)) if device.is_gpu else (lambda: None)

    def marker(self) -> Callable[[str], ContextManager]:
        """NVTX ranges in the "tbd" domain, so nsys/ncu can be scoped to tbd's windows."""
        if nvtx is None:
            return lambda name: contextlib.nullcontext()
        return lambda name: nvtx.annotate(name, domain="tbd")

    def parameter_count(self, model: Any) -> int:
        return sum(p.numel() for p in model.parameters())

    def nvml_sampler(self, device: Device) -> NvmlSampler:
        # NVML and CUDA may number devices differently; the UUID names the same card in both.
        uuid = str(getattr(torch.cuda.get_device_properties(device.index), "uuid", "") or "") or None
        return NvmlSampler(device.index, uuid=uuid)

    def out_of_memory(self, exc: BaseException) -> bool:
        return is_out_of_memory(exc)

    def gemm_ceiling(self, device: Device) -> dict:
        # A larger matrix on a GPU: n=2048 is too small to fill an H100's SMs for long.
        return measured_gemm_ceiling(torch, device.handle, n=4096 if device.is_gpu else 2048)

    def trace_window(self, window: TraceWindow) -> None:
        is_cuda, dev, lead_in = window.device.is_gpu, window.device.handle, window.lead_in
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if is_cuda else [])
        exported = window.scratch / "trace.json"
        workload = window.workload
        tracker = MemoryTracker(workload.model, workload.optimizer, workload.inputs)
        if is_cuda:
            torch.cuda.reset_peak_memory_stats(dev)
        with profile(activities=activities, record_shapes=True, profile_memory=True, with_stack=True,
                     schedule=schedule(wait=0, warmup=lead_in, active=window.spec.trace_iterations, repeat=1),
                     on_trace_ready=lambda prof: prof.export_chrome_trace(str(exported))) as prof:
            run_trace_window(window.callbacks, window.spec.trace_iterations, window.state,
                             # torch.profiler numbers steps from 0; the lead-in steps come first.
                             around_step=lambda i: tracker.iteration(lead_in + i),
                             after_step=prof.step, progress=window.progress, lead_in=lead_in)
        records = tracker.records()
        if is_cuda:
            records["cuda_max_allocated"] = int(torch.cuda.max_memory_allocated(dev))
        rundir.atomic_write_json(window.run_dir / rundir.MEMORY, records)
        rundir.atomic_write_json(window.run_dir / rundir.MEMORY_CROSS_CHECK, torch_memory_cross_check(prof))
        # A window stopped before its first recorded iteration (a Ctrl-C, loop.run_trace_window) traced none.
        if exported.exists() and window.state.trace_window is not None:
            window.write_trace(exported.read_bytes())


#: The runner child's hook for `--framework pytorch`.
HOOK = PyTorchHook()


def versions() -> dict:
    """Versions `tbd env` shows, without building anything."""
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
