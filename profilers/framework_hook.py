"""The hook skeleton every framework shares: device choice, set-up, stages and trace-window plumbing.

A framework hook (profilers/pytorch/hook.py, mxnet.py, tensorflow.py) is a `FrameworkHook` subclass
that supplies only what differs: importing and seeding the framework, its device handle, how to
synchronise it, how to count parameters, its tracer, its memory snapshot and its GEMM ceiling.
Everything else runs here once, in the same order for every framework:

    prepare (seeds, threads, device) -> spec.json with the device used, environment.json
    -> build the Workload -> warm-up, timing window, trace window, GEMM ceiling (windows.run_stages)
    -> the Workload's close(), however the stages end.

The runner child hands the hook a `load_build` callable (the registry's builder, imported only
after `prepare`: MXNet must see its environment variables before it is imported), so nothing in
profilers/ imports the CLI side of tbd.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator

from tbd.core import rundir
from tbd.core.errors import UsageError
from tbd.core.records import RunSpec
from tbd.models.base import Workload
from tbd.profilers import host
from tbd.profilers.ceilings import host_copy_bandwidth
from tbd.profilers.loop import LoopCallbacks, LoopState, ProgressFn, run_trace_window
from tbd.profilers.nvml import NvmlSampler, gpu_facts_from_nvml
from tbd.profilers.stages import run_stages

#: build(batch, device, size, seed) -> Workload, as every models/<framework>/<model>.py provides.
BuildFn = Callable[..., Workload]

_DEVICE_HINT = "use auto, cpu, cuda or cuda:N"


@dataclass(frozen=True)
class Device:
    """The device a run uses: tbd's name for it, its CUDA ordinal and the framework's own handle."""

    name: str  # "cpu" or "cuda:N", as spec.json and the profile name it
    index: int  # CUDA ordinal; -1 for the CPU
    handle: Any  # torch.device, mx.Context or a TF device string

    @property
    def is_gpu(self) -> bool:
        return self.index >= 0


def gpu_index(requested: str, gpus: int, framework: str, cuda_hint: str) -> int:
    """The CUDA ordinal `requested` names, or -1 for the CPU.

    Args:
        requested: "auto" (GPU 0 when the framework sees one, else the CPU), "cpu", "cuda", "cuda:N".
        gpus: how many GPUs the framework sees.
        framework: its name in messages ("PyTorch").
        cuda_hint: how to get a CUDA build of it, for the error when no GPU is seen.
    Raises:
        UsageError: an unknown device, or a GPU the framework does not see.
    """
    if requested == "auto":
        return 0 if gpus > 0 else -1
    if requested == "cpu":
        return -1
    kind, _, index_text = requested.partition(":")
    if kind != "cuda" or not (index_text or "0").isdigit():
        raise UsageError(f"unknown device '{requested}'", hint=_DEVICE_HINT)
    index = int(index_text or "0")
    if index >= gpus:
        seen = "no CUDA device" if gpus == 0 else f"{gpus} GPU(s)"
        raise UsageError(f"device '{requested}' requested but {framework} sees {seen}",
                         hint=f"use --device cpu, or {cuda_hint}")
    return index


@dataclass
class TraceWindow:
    """What a framework's trace window works with: the loop, a scratch folder and the step numbers.

    Steps are numbered as torch.profiler numbers them: `lead_in` unrecorded steps come first (a
    tracer's first step carries its start-up cost), so recorded step i is `lead_in + i`.
    """

    workload: Workload
    spec: RunSpec
    run_dir: Path
    device: Device
    callbacks: LoopCallbacks
    state: LoopState
    progress: ProgressFn
    scratch: Path
    lead_in: int = 1

    def write_trace(self, data: bytes) -> None:
        """RUN_DIR's trace file (rundir.trace_name) from the tracer's uncompressed JSON bytes."""
        rundir.atomic_write_bytes(self.run_dir / rundir.trace_name(self.spec.framework),
                                  gzip.compress(data, compresslevel=6))


#: Set to "1", the trace window runs without the framework's tracer (for ncu, which needs CUPTI).
NO_TRACER_VARIABLE = "TBD_NO_TRACER"


@contextlib.contextmanager
def scratch_dir(run_dir: Path) -> Iterator[Path]:
    """A temporary folder inside the run directory for a tracer's own files, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=".trace-", dir=run_dir))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def missing_parts_reasons(workload: Workload, model_kind: str, optimizer_kind: str) -> dict[str, str]:
    """Why a memory category is null: the workload did not give the object it is counted from."""
    reasons = {}
    for key, what, attr in (("weights", f"no model ({model_kind}) given", "model"),
                            ("gradients", f"no model ({model_kind}) given", "model"),
                            ("optimizer_state", f"no {optimizer_kind} given", "optimizer"),
                            ("inputs", "the workload does not expose its input pool", "inputs")):
        if getattr(workload, attr) is None:
            reasons[key] = what
    return reasons


def environment_from_nvml(versions: dict, spec: RunSpec, device: Device) -> dict:
    """The environment record of a framework with no device-properties API (MXNet, TensorFlow).

    The GPU is described by NVML; a user-set thread count is recorded in cpu["threads_in_use"]
    (threads beyond the cores this process may use add no FLOPs to the CPU peak).
    """
    env = host.environment(versions)
    if spec.threads:
        cpu = env["cpu"]
        cpu["threads_in_use"] = min(int(spec.threads), cpu["cores_available"] or cpu["cores_logical"])
    if device.is_gpu:
        env["gpu"], env["gpu_reason"] = gpu_facts_from_nvml(device.index), None
    else:
        env["gpu_reason"] = "the run used device cpu"
    return env


class FrameworkHook(ABC):
    """Drives a Workload through tbd's stages; subclasses supply what their framework does differently."""

    #: the framework's name in spec.json and messages
    framework: str = ""

    # --- what each framework supplies -------------------------------------------------------

    @abstractmethod
    def prepare(self, spec: RunSpec, notes: list[str]) -> Device:
        """Import and seed the framework, set its threads, and resolve `spec.device`.

        `notes` takes what the profile should say about the set-up (the loop's notes).
        """

    @abstractmethod
    def environment(self, spec: RunSpec, device: Device) -> dict:
        """The run's environment record (profilers/host.py's keys)."""

    #: The framework's engine queues a whole iteration and returns before running it (MXNet): the
    #: timing window then synchronises each iteration, so progress shows iterations done. A CUDA
    #: launch queue holds at most about an iteration, so PyTorch and TensorFlow keep the window's
    #: iterations unsynchronised (the device overlaps one iteration's tail with the next's launches).
    queues_work: bool = False

    @abstractmethod
    def synchronizer(self, device: Device) -> Callable[[], None]:
        """A call that returns once the device has finished the work queued so far."""

    @abstractmethod
    def parameter_count(self, model: Any) -> int:
        """Parameters of the model (or list of models) as the framework counts them."""

    @abstractmethod
    def trace_window(self, window: TraceWindow) -> None:
        """Run `window.spec.trace_iterations` iterations under the framework's tracer; write the
        trace and the memory records."""

    @abstractmethod
    def out_of_memory(self, exc: BaseException) -> bool:
        """Whether `exc` is the framework running out of memory (each hook module's is_out_of_memory)."""
        return isinstance(exc, MemoryError)

    def gemm_ceiling(self, device: Device) -> dict:
        """The measured FP32 matrix-multiply ceiling (profilers/ceilings.py's keys)."""

    def memory_bandwidth(self, device: Device) -> dict | None:
        """The measured memory bandwidth (profilers/ceilings.py's keys): the host's on the CPU; None
        on a GPU, whose datasheet bandwidth the analysis takes from the GPU table."""
        return None if device.is_gpu else host_copy_bandwidth()

    def device_scope(self, device: Device) -> ContextManager:
        """Context the workload is built and run in (TensorFlow: tf.device); none by default."""
        return contextlib.nullcontext()

    def marker(self) -> Callable[[str], ContextManager]:
        """Named ranges around iterations and windows (NVTX for PyTorch); none by default."""
        return lambda name: contextlib.nullcontext()

    def nvml_sampler(self, device: Device) -> NvmlSampler:
        return NvmlSampler(device.index)

    def build_options(self, spec: RunSpec, device: Device, build: BuildFn) -> dict[str, Any]:
        """Extra keyword arguments for the model's build() (PyTorch: `parallel`, several ranks)."""
        return {}

    def agreement(self) -> Callable[[list[float]], list[float]] | None:
        """Several ranks: LoopCallbacks.agree (each value's maximum over the ranks); None for one process."""
        return None

    def wrap_step(self, step: Callable[[], Any]) -> Callable[[], Any]:
        """The step the loop runs (PyTorch, several ranks: the test seam for a failing rank)."""
        return step

    def finish(self, run_root: Path, own_dir: Path) -> None:
        """After a complete run (several ranks: hand the records to rank 0 and leave the groups)."""
        return None

    # --- the skeleton -----------------------------------------------------------------------

    def run(self, spec: RunSpec, run_dir: Path, state: LoopState, progress: ProgressFn,
            load_build: Callable[[], BuildFn]) -> None:
        """The runner child's entry: prepare, describe the machine, build the workload, profile it."""
        device = self.prepare(spec, state.notes)
        # The profile names the device that ran, and keeps what was asked ("auto") beside it.
        rundir.atomic_write_json(run_dir / rundir.SPEC,
                                 {**spec.to_dict(), "device": device.name, "device_requested": spec.device})
        rundir.atomic_write_json(run_dir / rundir.ENVIRONMENT, self.environment(spec, device))
        progress({"stage": "build", "done": 0, "total": 1})
        build = load_build()
        with self.device_scope(device):
            workload = build(batch=spec.batch, device=device.handle, size=spec.size, seed=spec.seed,
                             **self.build_options(spec, device, build))
        progress({"stage": "build", "done": 1, "total": 1})
        self.run_workload(workload, spec, run_dir, device, state, progress)

    def run_workload(self, workload: Workload, spec: RunSpec, run_dir: Path, device: Device,
                     state: LoopState, progress: ProgressFn) -> None:
        """Every stage, raw records after each; the workload's close() runs however they end."""
        try:
            with self.device_scope(device):
                callbacks = LoopCallbacks(step=self.wrap_step(workload.step), synchronize=self.synchronizer(device),
                                  mark=self.marker(), samples_counter=workload.samples_counter,
                                  sync_each_iteration=self.queues_work, agree=self.agreement())
                params = None if workload.model is None else self.parameter_count(workload.model)
                run_stages(callbacks, workload, spec, state, run_dir, progress, parameters=params,
                           nvml=self.nvml_sampler(device) if device.is_gpu else None,
                           trace_window=lambda n: self._trace_window(workload, replace(spec, trace_iterations=n),
                                                                     run_dir, device, callbacks, state, progress),
                           gemm_ceiling=lambda: self.gemm_ceiling(device),
                           memory_bandwidth=lambda: self.memory_bandwidth(device), out_of_memory=self.out_of_memory)
        finally:
            if workload.close is not None:
                workload.close()

    def _trace_window(self, workload: Workload, spec: RunSpec, run_dir: Path, device: Device, callbacks: LoopCallbacks,
                      state: LoopState, progress: ProgressFn) -> None:
        if os.environ.get(NO_TRACER_VARIABLE) == "1":
            # Under Nsight Compute (the command a profile's `ncu` entry gives): ncu holds CUPTI, so the
            # window runs with its NVTX range and lead-in step but without the framework's tracer.
            run_trace_window(callbacks, spec.trace_iterations, state, lambda i: contextlib.nullcontext(), lambda: None,
                             progress, lead_in=TraceWindow.lead_in)
            state.notes.append(f"trace window run without the tracer ({NO_TRACER_VARIABLE}=1): no trace file")
            return
        with scratch_dir(run_dir) as scratch:
            self.trace_window(TraceWindow(workload, spec, run_dir, device, callbacks, state, progress, scratch))
