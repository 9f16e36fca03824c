"""Read raw records (a run directory, or a trace another tool recorded) and build the Profile.

The parent's side of the data flow, in one direction: read every raw file of the run directory
(tbd.rundir), turn the trace into records with the reader of the framework that wrote it (the FLOP
formula passed in), then hand everything to analysis/, which computes every number. I/O lives
here; nothing here computes a metric.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tbd import rundir
from tbd.analysis import memory, memory_mxnet, memory_tensorflow
from tbd.analysis.assemble import WorkloadInfo, assemble_profile
from tbd.analysis.flops import op_flops, precision_of
from tbd.analysis.peaks import PeakFlops, PeakModel, device_peak_model
from tbd.errors import ResultFormatError
from tbd.profile import COMPLETE, PARTIAL, Memory, Profile
from tbd.profilers import kineto, mxnet_trace, tensorflow_trace
from tbd.records import TraceRecords

#: How the trace is read (its path, the run directory) and memory split, per framework.
_TraceReader = Callable[[Path, Path], TraceRecords]
_MemoryBreakdown = Callable[[dict | None, TraceRecords | None, dict | None], Memory]


def _read_kineto(path: Path, run_dir: Path) -> TraceRecords:
    return _kineto_records(kineto.read_trace_file(path), str(path))


def _kineto_records(trace: kineto.KinetoTrace, source: str) -> TraceRecords:
    return kineto.trace_records(trace, source=source, flops_of=op_flops, precision_of=precision_of)


def _read_mxnet(path: Path, run_dir: Path) -> TraceRecords:
    # MXNet's dump has no operand shapes: the hook logged them beside it.
    shapes = rundir.read_optional(run_dir, rundir.MXNET_SHAPES, "MXNet operand shapes")
    return mxnet_trace.trace_records(mxnet_trace.read_trace_file(path), source=str(path), shapes=shapes,
                                     flops_of=op_flops, precision_of=precision_of)


def _read_tensorflow(path: Path, run_dir: Path) -> TraceRecords:
    return tensorflow_trace.trace_records(tensorflow_trace.read_trace_file(path), source=str(path),
                                          flops_of=op_flops, precision_of=precision_of)


@dataclass(frozen=True)
class _Framework:
    read_trace: _TraceReader
    memory: _MemoryBreakdown


_FRAMEWORKS = {
    "pytorch": _Framework(_read_kineto, memory.memory_breakdown),
    "mxnet": _Framework(_read_mxnet, lambda records, trace, cross: memory_mxnet.memory_breakdown(records, trace)),
    "tensorflow": _Framework(_read_tensorflow,
                             lambda records, trace, cross: memory_tensorflow.memory_breakdown(records, trace)),
}


@dataclass(frozen=True)
class _RawRun:
    """Everything the runner wrote, read and validated; None where a file is absent."""

    spec: dict
    environment: dict
    status: dict
    iterations: dict | None
    workload: dict | None
    cpu: Any
    nvml: Any
    memory: dict | None
    memory_cross_check: dict | None
    gemm: dict | None


def _read_run_dir(run_dir: Path) -> _RawRun:
    it = rundir.read_optional(run_dir, rundir.ITERATIONS, "iteration log")
    cpu = rundir.read_optional(run_dir, rundir.CPU, "CPU counters")
    nvml = rundir.read_optional(run_dir, rundir.NVML, "NVML samples")
    return _RawRun(
        spec=rundir.read_json(run_dir / rundir.SPEC, "run spec"),
        environment=rundir.read_optional(run_dir, rundir.ENVIRONMENT, "environment") or {},
        status=rundir.read_optional(run_dir, rundir.STATUS, "runner status") or {},
        iterations=it,
        workload=rundir.read_optional(run_dir, rundir.WORKLOAD, "workload"),
        cpu=rundir.cpu_sample_from_json(cpu, str(run_dir / rundir.CPU)) if cpu else None,
        nvml=rundir.nvml_sample_from_json(nvml, str(run_dir / rundir.NVML)) if nvml else None,
        memory=rundir.read_optional(run_dir, rundir.MEMORY, "memory records"),
        memory_cross_check=rundir.read_optional(run_dir, rundir.MEMORY_CROSS_CHECK, "memory cross-check"),
        gemm=rundir.read_optional(run_dir, rundir.GEMM, "GEMM ceiling"))


def _framework(name: str) -> _Framework:
    if name not in _FRAMEWORKS:
        raise ResultFormatError(f"run spec names an unknown framework {name!r}",
                                hint=f"tbd reads runs of {', '.join(_FRAMEWORKS)}")
    return _FRAMEWORKS[name]


def profile_from_run_dir(run_dir: str | os.PathLike, *, status: str | None = None,
                         extra_notes: list[str] | None = None) -> Profile:
    """Build the Profile from what the runner wrote; a missing later stage makes it partial."""
    run_dir = Path(run_dir)
    raw = _read_run_dir(run_dir)
    framework = _framework(raw.spec.get("framework", "pytorch"))
    trace_path = run_dir / rundir.TRACE
    trace = framework.read_trace(trace_path, run_dir) if trace_path.exists() else None
    log = rundir.iteration_log_from_json(raw.iterations, str(run_dir / rundir.ITERATIONS)) if raw.iterations else None
    wl = raw.workload
    workload = WorkloadInfo(wl["samples_per_step"], wl["throughput_unit"], wl.get("units_per_step") or {}) \
        if wl else None
    device_kind = trace.device_kind if trace else ("cuda" if raw.environment.get("gpu") else "cpu")
    final = status or (COMPLETE if raw.status.get("state") == "complete" else PARTIAL)
    notes = list(raw.iterations.get("notes", [])) if raw.iterations else []
    if final == PARTIAL and raw.status.get("message"):
        notes.insert(0, f"partial: {raw.status['message']}")
    notes.extend(extra_notes or [])
    nvml_reason = ("no CUDA device: the run used the CPU" if device_kind == "cpu"
                   else "NVML unavailable (see environment.gpu.nvml)")
    return assemble_profile(
        spec=raw.spec, environment=raw.environment, log=log, workload=workload, cpu=raw.cpu, nvml=raw.nvml,
        trace=trace, memory=framework.memory(raw.memory, trace, raw.memory_cross_check),
        peaks=device_peak_model(raw.environment, device_kind, raw.gemm), status=final, notes=notes,
        reasons={"nvml": nvml_reason},
        provenance={"run_dir": str(run_dir), "trace": rundir.TRACE if trace else None,
                    "flop_counting": "analytic formulas over recorded op shapes (analysis/flops.py)"})


def profile_from_trace(path: str | os.PathLike, *, peak_flops: float | None = None,
                       sm_clock_mhz: float | None = None, samples_per_step: float | None = None) -> Profile:
    """Analyse a PyTorch/Kineto trace that tbd did not record.

    The trace says nothing about the device's clock, the batch or the host's CPU counters: those
    figures are null with a reason unless given (`peak_flops`, `sm_clock_mhz`, `samples_per_step`).
    """
    raw = kineto.read_trace_file(path)
    trace = _kineto_records(raw, str(path))
    environment: dict[str, Any] = {"host": raw.metadata.get("host_name"), "cpu": None, "gpu": None, "versions": {}}
    props = _device_properties(raw.metadata)
    if trace.device_kind == "cuda" and props:
        environment["gpu"] = props
        if sm_clock_mhz:
            props["max_sm_clock_hz"] = sm_clock_mhz * 1e6
    if peak_flops:
        peaks = PeakModel({"fp32": PeakFlops(peak_flops, None, "given with --peak-flops")})
    elif trace.device_kind == "cuda" and props and props.get("max_sm_clock_hz"):
        peaks = device_peak_model(environment, "cuda", None)
    else:
        why = ("the trace does not record the SM clock: pass --sm-clock-mhz or --peak-flops"
               if trace.device_kind == "cuda" else "a trace does not describe the CPU: pass --peak-flops")
        peaks = PeakModel({"fp32": PeakFlops(None, why, "")})
    workload = WorkloadInfo(samples_per_step, "samples/s") if samples_per_step else None
    return assemble_profile(
        spec={"model": Path(path).name, "framework": "pytorch", "batch": None, "device": trace.device_kind,
              "precision": "as traced", "trace": str(path)},
        environment=environment, log=None, workload=workload, cpu=None, nvml=None, trace=trace,
        memory=memory.memory_breakdown(None, trace, None), peaks=peaks, status=COMPLETE,
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
