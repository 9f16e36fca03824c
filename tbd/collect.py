"""Read raw records (a run directory, or a trace another tool recorded) and build the Profile.

This is the parent's side of DESIGN.md's data flow: raw records -> analysis -> Profile. I/O lives
here; every number is computed in analysis/.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tbd import rundir
from tbd.analysis.assemble import PeakModel, WorkloadInfo, assemble_profile
from tbd.analysis.memory import memory_breakdown
from tbd.analysis.peaks import PeakFlops, cpu_peak_flops, gpu_peak_flops
from tbd.errors import ResultFormatError
from tbd.profile import COMPLETE, PARTIAL, Profile
from tbd.profilers.kineto import read_trace_file, trace_records
from tbd.records import TraceRecords

GPU_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


def peak_model(environment: dict[str, Any], device_kind: str, gemm: dict | None) -> PeakModel:
    """Peaks per precision from the hardware model of the device the kernels ran on."""
    ceiling = gemm.get("flops_per_s") if isinstance(gemm, dict) else None
    if device_kind == "cuda":
        gpu = environment.get("gpu") or {}
        cc = gpu.get("compute_capability")
        if not cc:
            reason = "GPU compute capability unknown"
            return PeakModel({p: PeakFlops(None, reason, "") for p in GPU_PRECISIONS}, ceiling)
        return PeakModel({p: gpu_peak_flops(tuple(cc), int(gpu.get("sm_count") or 0), gpu.get("max_sm_clock_hz"), p)
                          for p in GPU_PRECISIONS}, ceiling)
    cpu = environment.get("cpu") or {}
    threads = cpu.get("threads_in_use") or cpu.get("cores_logical") or 0
    return PeakModel({p: cpu_peak_flops(cpu.get("isa") or [], int(threads), cpu.get("max_clock_hz"), p)
                      for p in ("fp32", "fp64")}, ceiling)


def _trace(run_dir: Path, framework: str) -> TraceRecords | None:
    """The trace window's records, read by the reader of the framework that wrote it."""
    path = run_dir / rundir.TRACE
    if not path.exists():
        return None
    if framework == "mxnet":
        from tbd.profilers import mxnet_trace

        shapes = rundir.read_optional(run_dir, rundir.MXNET_SHAPES, "MXNet operand shapes")
        return mxnet_trace.trace_records(read_trace_file(path), source=str(path), shapes=shapes)
    if framework == "tensorflow":
        from tbd.profilers import tensorflow_trace

        return tensorflow_trace.trace_records(read_trace_file(path), source=str(path))
    return trace_records(read_trace_file(path), source=str(path))


def _memory(framework: str, records: dict | None, trace: TraceRecords | None, cross: dict | None):
    if framework == "mxnet":
        from tbd.analysis import memory_mxnet

        return memory_mxnet.memory_breakdown(records, trace)
    if framework == "tensorflow":
        from tbd.analysis import memory_tensorflow

        return memory_tensorflow.memory_breakdown(records, trace)
    return memory_breakdown(records, trace, cross)


def profile_from_run_dir(run_dir: str | os.PathLike, *, status: str | None = None,
                         extra_notes: list[str] | None = None) -> Profile:
    """Build the Profile from what the runner wrote; a missing later stage makes it partial."""
    run_dir = Path(run_dir)
    spec = rundir.read_json(run_dir / rundir.SPEC, "run spec")
    environment = rundir.read_optional(run_dir, rundir.ENVIRONMENT, "environment") or {}
    child = rundir.read_optional(run_dir, rundir.STATUS, "runner status") or {}
    it = rundir.read_optional(run_dir, rundir.ITERATIONS, "iteration log")
    log = rundir.iteration_log_from_json(it, str(run_dir / rundir.ITERATIONS)) if it else None
    notes = list(it.get("notes", [])) if it else []
    wl = rundir.read_optional(run_dir, rundir.WORKLOAD, "workload")
    workload = WorkloadInfo(wl["samples_per_step"], wl["throughput_unit"], wl.get("units_per_step") or {}) \
        if wl else None
    cpu_json = rundir.read_optional(run_dir, rundir.CPU, "CPU counters")
    cpu = rundir.cpu_sample_from_json(cpu_json, str(run_dir / rundir.CPU)) if cpu_json else None
    nvml_json = rundir.read_optional(run_dir, rundir.NVML, "NVML samples")
    nvml = rundir.nvml_sample_from_json(nvml_json, str(run_dir / rundir.NVML)) if nvml_json else None
    framework = spec.get("framework", "pytorch")
    trace = _trace(run_dir, framework)
    memory_records = rundir.read_optional(run_dir, rundir.MEMORY, "memory records")
    cross = rundir.read_optional(run_dir, rundir.MEMORY_CROSS_CHECK, "memory cross-check")
    gemm = rundir.read_optional(run_dir, rundir.GEMM, "GEMM ceiling")
    device_kind = trace.device_kind if trace else ("cuda" if environment.get("gpu") else "cpu")
    final = status or (COMPLETE if child.get("state") == "complete" else PARTIAL)
    if final == PARTIAL and child.get("message"):
        notes.insert(0, f"partial: {child['message']}")
    notes.extend(extra_notes or [])
    nvml_reason = ("no CUDA device: the run used the CPU" if device_kind == "cpu"
                   else "NVML unavailable (see environment.gpu.nvml)")
    return assemble_profile(
        spec=spec, environment=environment, log=log, workload=workload, cpu=cpu, nvml=nvml, trace=trace,
        memory=_memory(framework, memory_records, trace, cross), peaks=peak_model(environment, device_kind, gemm),
        status=final, notes=notes, reasons={"nvml": nvml_reason},
        provenance={"run_dir": str(run_dir), "trace": rundir.TRACE if trace else None,
                    "flop_counting": "analytic formulas over recorded op shapes (analysis/flops.py)"})


def profile_from_trace(path: str | os.PathLike, *, peak_flops: float | None = None,
                       sm_clock_mhz: float | None = None, samples_per_step: float | None = None) -> Profile:
    """Analyse a PyTorch/Kineto trace that tbd did not record.

    The trace says nothing about the device's clock, the batch or the host's CPU counters: those
    figures are null with a reason unless given (`peak_flops`, `sm_clock_mhz`, `samples_per_step`).
    """
    raw = read_trace_file(path)
    trace = trace_records(raw, source=str(path))
    environment: dict[str, Any] = {"host": raw.get("host_name"), "cpu": None, "gpu": None, "versions": {}}
    props = _device_properties(raw)
    if trace.device_kind == "cuda" and props:
        environment["gpu"] = props
        if sm_clock_mhz:
            props["max_sm_clock_hz"] = sm_clock_mhz * 1e6
    if peak_flops:
        peaks = PeakModel({"fp32": PeakFlops(peak_flops, None, "given with --peak-flops")})
    elif trace.device_kind == "cuda" and props and props.get("max_sm_clock_hz"):
        peaks = peak_model(environment, "cuda", None)
    else:
        why = ("the trace does not record the SM clock: pass --sm-clock-mhz or --peak-flops"
               if trace.device_kind == "cuda" else "a trace does not describe the CPU: pass --peak-flops")
        peaks = PeakModel({"fp32": PeakFlops(None, why, "")})
    workload = WorkloadInfo(samples_per_step, "samples/s") if samples_per_step else None
    return assemble_profile(
        spec={"model": Path(path).name, "framework": "pytorch", "batch": None, "device": trace.device_kind,
              "precision": "as traced", "trace": str(path)},
        environment=environment, log=None, workload=workload, cpu=None, nvml=None, trace=trace,
        memory=memory_breakdown(None, trace, None), peaks=peaks, status=COMPLETE,
        reasons={"cpu": "a trace does not carry per-core CPU counters",
                 "nvml": "NVML is sampled live by `tbd profile`; a trace does not carry it",
                 "gpu": "the trace holds no GPU kernels (a CPU-only trace)"},
        provenance={"trace": str(path), "flop_counting": "analytic formulas over recorded op shapes"})


def _device_properties(raw: dict[str, Any]) -> dict[str, Any] | None:
    """The first GPU's properties as Kineto records them (no clock: Kineto does not write it)."""
    props = raw.get("deviceProperties")
    if not isinstance(props, list) or not props or not isinstance(props[0], dict):
        return None
    p = props[0]
    if "computeMajor" not in p:
        return None
    return {"name": p.get("name"), "index": p.get("id", 0),
            "compute_capability": [int(p["computeMajor"]), int(p.get("computeMinor", 0))],
            "sm_count": p.get("numSms"), "memory_bytes": p.get("totalGlobalMem"), "max_sm_clock_hz": None}


def load_profile(path: str | os.PathLike) -> Profile:
    """Load profile.json (or RUN_DIR/profile.json), validated."""
    path = Path(path)
    if path.is_dir():
        path = path / rundir.PROFILE
    if not path.exists():
        raise ResultFormatError(f"{path}: no profile.json here",
                                hint="give a run directory written by `tbd profile` or its profile.json")
    return Profile.from_dict(rundir.read_json(path, "tbd profile"))
