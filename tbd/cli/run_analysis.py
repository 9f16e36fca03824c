"""Read raw records (a run directory, or a trace another tool recorded) and build the Profile.

The parent's side of the data flow, in one direction: read every raw file of the run directory
(tbd.core.rundir), turn the trace into records with the reader of the framework that wrote it (the FLOP
formula passed in), then hand everything to analysis/, which computes every number. I/O lives
here; nothing here computes a metric.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tbd.analysis import quality
from tbd.analysis.assemble import WorkloadInfo, assemble_profile, iteration_log_from_steps
from tbd.analysis.cluster import CommTimes, comm_times
from tbd.analysis.flops.ops import op_flops, precision_of
from tbd.analysis.memory import mxnet as memory_mxnet
from tbd.analysis.memory import pytorch as memory
from tbd.analysis.memory import tensorflow as memory_tensorflow
from tbd.analysis.op_bytes.ops import op_bytes
from tbd.analysis.peaks import USER, PeakFlops, PeakModel, device_bandwidth, device_peak_model
from tbd.analysis.precision import kernel_precisions
from tbd.cli import cluster_analysis as collect_cluster
from tbd.core import rundir
from tbd.core.errors import ResultFormatError, TbdError, UsageError
from tbd.core.profile import COMPLETE, PARTIAL, Memory, Profile
from tbd.core.records import TraceRecords
from tbd.profilers.kineto import reader as kineto
from tbd.profilers.kineto.comm import comm_intervals
from tbd.profilers.mxnet import trace as mxnet_trace
from tbd.profilers.tensorflow import trace as tensorflow_trace
from tbd.profilers.traces.names import clean_name

#: How the trace is read (its path, the run directory) and memory split, per framework.
_TraceReader = Callable[[Path, Path], TraceRecords]
_MemoryBreakdown = Callable[[dict | None, TraceRecords | None, dict | None], Memory]


def _read_kineto(path: Path, run_dir: Path) -> TraceRecords:
    return kineto_records(kineto.read_trace_file(path), str(path), recorded_by_tbd=True)


def kineto_records(trace: kineto.KinetoTrace, source: str, recorded_by_tbd: bool = False) -> TraceRecords:
    return kineto.trace_records(trace, source=source, flops_of=op_flops, precision_of=precision_of,
                                kernel_precisions=kernel_precisions, recorded_by_tbd=recorded_by_tbd, bytes_of=op_bytes)


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
    bandwidth: dict | None
    quality: dict | None


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
        gemm=rundir.read_optional(run_dir, rundir.GEMM, "GEMM ceiling"),
        bandwidth=rundir.read_optional(run_dir, rundir.BANDWIDTH, "memory bandwidth"),
        quality=rundir.read_optional(run_dir, rundir.QUALITY, "measurement-quality records"))


def _checked_quality(records: Any, run_dir: Path) -> dict | None:
    """raw/quality.json if it has the shape analysis/quality.py reads, else ResultFormatError naming it."""
    if records is None:
        return None
    where = run_dir / rundir.QUALITY
    if not isinstance(records, dict) or records.get("schema") != rundir.QUALITY_SCHEMA:
        raise ResultFormatError(f"{where}: not a tbd measurement-quality record (schema {rundir.QUALITY_SCHEMA})")
    repeats = records.get("repeats", [])
    ok = isinstance(repeats, list) and all(
        isinstance(r, dict) and isinstance(r.get("first"), int) and isinstance(r.get("last"), int)
        and isinstance(r.get("wall_ns"), int) and r["wall_ns"] >= 0 and isinstance(r.get("load", {}), dict)
        and isinstance(r.get("cpu", {}), dict) for r in repeats)
    if not ok:
        raise ResultFormatError(f"{where}: malformed timing repeats")
    return records


def _framework(name: str) -> _Framework:
    if name not in _FRAMEWORKS:
        raise ResultFormatError(f"run spec names an unknown framework {name!r}",
                                hint=f"tbd reads runs of {', '.join(_FRAMEWORKS)}")
    return _FRAMEWORKS[name]


def profile_from_run_dir(run_dir: str | os.PathLike, *, status: str | None = None,
                         extra_notes: list[str] | None = None) -> Profile:
    """Build the Profile from what the runner wrote; a missing later stage makes it partial.

    A multi-process run's folder (records in ranks/rank-K) gives its cluster profile.
    """
    run_dir = Path(run_dir)
    if collect_cluster.is_cluster_run(run_dir):
        return cluster_profile_from_run_dir(run_dir, status=status, extra_notes=extra_notes)
    raw = _read_run_dir(run_dir)
    framework = _framework(raw.spec.get("framework", "pytorch"))
    trace_path = rundir.find_trace(run_dir)
    trace = framework.read_trace(trace_path, run_dir) if trace_path is not None else None
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
        peaks=device_peak_model(raw.environment, device_kind, quality.best_ceiling(raw.gemm, raw.quality),
                                raw.spec.get("peak_flops")), status=final,
        bandwidth=device_bandwidth(raw.environment, device_kind, raw.bandwidth), notes=notes,
        reasons={"nvml": nvml_reason}, quality_records=_checked_quality(raw.quality, run_dir), gemm=raw.gemm,
        provenance={"run_dir": str(run_dir), "trace": trace_path.name if trace else None,
                    "flop_counting": "analytic formulas over recorded op shapes (analysis/flops/ops.py)"})


def cluster_profile_from_run_dir(run_dir: str | os.PathLike, *, status: str | None = None,
                                 extra_notes: list[str] | None = None, write_ranks: bool = False) -> Profile:
    """A multi-process run's profile (collect_cluster.py), each rank's folder read as a run directory."""
    return collect_cluster.cluster_profile(Path(run_dir), read_rank=profile_from_run_dir,
                                           comm_of=comm_times_from_trace, load=load_profile, status=status,
                                           extra_notes=extra_notes, write_ranks=write_ranks)


def profile_from_trace(path: str | os.PathLike, *, peak_flops: float | None = None,
                       sm_clock_mhz: float | None = None, samples_per_step: float | None = None) -> Profile:
    """Analyse a PyTorch/Kineto trace that tbd did not record.

    The trace says nothing about the device's clock, the batch or the host's CPU counters: those
    figures are null with a reason unless given (`peak_flops`, `sm_clock_mhz`, `samples_per_step`).

    Raises:
        UsageError: an option given is not a finite positive number.
        TraceFormatError: the trace cannot be read (profilers.kineto.reader says which).
    """
    check_options(peak_flops, sm_clock_mhz, samples_per_step)
    return profile_of_kineto(kineto.read_trace_file(path), Path(path), peak_flops=peak_flops,
                              sm_clock_mhz=sm_clock_mhz, samples_per_step=samples_per_step)


def profile_of_kineto(raw: kineto.KinetoTrace, path: Path, *, peak_flops: float | None = None,
                       sm_clock_mhz: float | None = None, samples_per_step: float | None = None,
                       trace: TraceRecords | None = None) -> Profile:
    trace = trace or kineto_records(raw, str(path))
    environment: dict[str, Any] = {"host": raw.metadata.get("host_name"), "cpu": None, "gpu": None, "versions": {}}
    props = _device_properties(raw.metadata)
    notes = []
    if trace.device_kind == "cuda" and props:
        environment["gpu"] = props
        if sm_clock_mhz:
            props["max_sm_clock_hz"], props["peak_clock_given"] = sm_clock_mhz * 1e6, True
    elif sm_clock_mhz:
        notes.append("--sm-clock-mhz ignored: the trace records no GPU properties (deviceProperties) to apply "
                     "it to; pass --peak-flops")
    if trace.device_kind == "cuda":
        peaks = device_peak_model(environment, "cuda", None, peak_flops)
        if not props and not peak_flops:
            peaks = PeakModel({p: PeakFlops(None, "the trace records no GPU properties (deviceProperties): pass "
                                                  "--peak-flops", "") for p in ("fp32",)})
    elif peak_flops:
        peaks = PeakModel({"fp32": PeakFlops(peak_flops, None, "given with --peak-flops")}, source=USER)
    else:
        peaks = PeakModel({"fp32": PeakFlops(None, "a trace does not describe the CPU: pass --peak-flops", "")})
    if trace.memory is None and raw.memory_problem:
        notes.append(f"memory n/a: {raw.memory_problem}")
    workload = WorkloadInfo(samples_per_step, "samples/s") if samples_per_step else None
    log = iteration_log_from_steps(trace.steps)
    no_samples = ("a trace alone does not say how many samples an iteration holds: pass --samples-per-step"
                  if log else "the trace has no ProfilerStep spans to count iterations by")
    return assemble_profile(
        spec={"model": Path(path).name, "framework": "pytorch", "batch": None, "device": trace.device_kind,
              "precision": "as traced", "trace": str(path)},
        environment=environment, log=log, workload=workload, cpu=None, nvml=None, trace=trace,
        memory=memory.memory_breakdown(None, trace, None), peaks=peaks, status=COMPLETE, notes=notes,
        bandwidth=device_bandwidth(environment, trace.device_kind, None),
        reasons={"cpu": "a trace does not carry per-core CPU counters",
                 "nvml": "NVML is sampled live by `tbd profile`; a trace does not carry it",
                 "gpu": "the trace holds no GPU kernels (a CPU-only trace)", "throughput": no_samples},
        provenance={"trace": str(path), "flop_counting": "analytic formulas over recorded op shapes"})


def comm_times_from_trace(path: str | os.PathLike) -> tuple[CommTimes | None, str | None]:
    """One rank's communication and compute time from its Kineto trace (.json or .json.gz, any era
    the reader supports; tbd's own, in a run directory, too): (CommTimes, None), or (None, why) when
    the trace cannot be read (the reader's one-line error) or its window has no length.
    """
    path = Path(path)
    try:
        raw = kineto.read_trace_file(path)
        return comm_of_records(raw, kineto_records(raw, str(path), recorded_by_tbd=run_dir_of_trace(path) is not None))
    except TbdError as exc:
        return None, f"trace unreadable: {exc.one_line()}"


def comm_of_records(raw: kineto.KinetoTrace, records: TraceRecords) -> tuple[CommTimes | None, str | None]:
    c = comm_intervals(raw, records)
    if c.window_end_ns <= c.window_start_ns:
        return None, "the trace window has no length (every event at one instant)"
    return comm_times(c.comm_start_ns, c.comm_end_ns, c.compute_start_ns, c.compute_end_ns,
                      window_start_ns=c.window_start_ns, window_end_ns=c.window_end_ns, steps=c.steps,
                      backend_kind=c.backend_kind, wait_start_ns=c.wait_start_ns, wait_end_ns=c.wait_end_ns), None


def run_dir_of_trace(path: Path) -> Path | None:
    """The tbd run directory `path` is the trace of (its spec.json beside it), else None."""
    if path.is_dir():
        return path if (path / rundir.SPEC).is_file() else None
    if path.name in rundir.TRACE_NAMES and (path.parent / rundir.SPEC).is_file():
        return path.parent
    return None


def _device_properties(raw: dict[str, Any]) -> dict[str, Any] | None:
    """The first GPU's properties as Kineto records them (no clock: Kineto does not write it).

    A field of the wrong type or out of range (a corrupt trace) is left out, as if not recorded.
    """
    props = raw.get("deviceProperties")
    if not isinstance(props, list) or not props or not isinstance(props[0], dict):
        return None
    p = props[0]
    name = p.get("name") if isinstance(p.get("name"), str) else None
    major, minor = small_int(p.get("computeMajor"), 100), small_int(p.get("computeMinor", 0), 100)
    if major is None and name is None:
        return None
    name = None if name is None else clean_name(name[:200])
    cc = [major, minor] if major is not None and minor is not None else None
    # ROCm traces say "AMD ..." in the name and a CUDA-style capability (an MI250 reports 9.0) or
    # a warp of 64 lanes; the GPU table never looks those up as NVIDIA parts.
    amd = name is not None and "amd" in name.lower() or p.get("warpSize") == 64
    return {"name": name, "vendor": "amd" if amd else "nvidia", "index": small_int(p.get("id", 0), 1 << 16) or 0,
            "compute_capability": cc, "sm_count": small_int(p.get("numSms"), 1 << 20),
            "memory_bytes": small_int(p.get("totalGlobalMem"), 1 << 60), "max_sm_clock_hz": None}


def small_int(value: Any, limit: int) -> int | None:
    """`value` when it is an int in [0, limit), else None (bools and strings are not counts)."""
    return value if type(value) is int and 0 <= value < limit else None


def check_options(peak_flops: float | None, sm_clock_mhz: float | None, samples_per_step: float | None) -> None:
    """Each option given is a finite positive number (argparse's float() accepts "nan" and "-inf")."""
    for flag, value in (("--peak-flops", peak_flops), ("--sm-clock-mhz", sm_clock_mhz),
                        ("--samples-per-step", samples_per_step)):
        if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise UsageError(f"{flag} must be a positive number, got {value!r}")


#: profile.json holds at most a few hundred kernel rows: a few MB. Anything far larger is not one.
MAX_PROFILE_BYTES = 256 << 20


def load_profile(path: str | os.PathLike) -> Profile:
    """Load profile.json (or RUN_DIR/profile.json), validated.

    Raises:
        ResultFormatError: no such file, not a regular file (a directory named profile.json, a
            FIFO), larger than MAX_PROFILE_BYTES, not JSON, or not a valid profile (the key named).
    """
    path = Path(path)
    if path.is_dir():
        path = path / rundir.PROFILE
    hint = "give a run directory written by `tbd profile` or its profile.json"
    return Profile.from_dict(rundir.read_result_json(path, rundir.PROFILE, MAX_PROFILE_BYTES, hint))


def is_profile_json(path: Path) -> bool:
    """Whether `path` is a regular file that starts like a tbd profile.json (whatever its name)."""
    return rundir.result_kind(path) == "tbd.profile"


def profile_of_target(target: str | os.PathLike, **options: Any) -> Profile:
    """The Profile of a run directory, a profile.json (any name: `tbd analyze --json` writes one
    anywhere), a tbd run's own trace file, or a Kineto trace another tool recorded.

    `options` go to `profile_from_trace` for a foreign trace (peak_flops, sm_clock_mhz, samples_per_step).

    Raises:
        UsageError: `target` does not exist, or is a folder that is not a run directory.
        ResultFormatError, TraceFormatError: what it holds cannot be read.
    """
    path = Path(target)
    if not path.exists():
        raise UsageError(f"{target}: no such file or folder",
                         hint="give a tbd run directory, a profile.json or a Kineto trace (.json, .json.gz)")
    if path.is_dir():
        if not (path / rundir.PROFILE).exists() and not (path / rundir.SPEC).is_file():
            raise UsageError(f"{target}: a folder that is not a tbd run directory",
                             hint="give a run directory (it holds profile.json), or one trace of a folder of traces")
        return load_profile(path)
    if path.name == rundir.PROFILE or is_profile_json(path):
        return load_profile(path)
    run_dir = run_dir_of_trace(path)
    return load_profile(run_dir) if run_dir is not None else profile_from_trace(path, **options)
