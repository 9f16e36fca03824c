"""Read raw records (a run directory, a trace another tool recorded, a folder of per-rank traces) and build the Profile.

The parent's side of the data flow, in one direction: read every raw file of the run directory
(tbd.core.rundir), turn the trace into records with the reader of the framework that wrote it (the FLOP
formula passed in), then hand everything to analysis/, which computes every number. I/O lives
here; nothing here computes a metric.
"""

from __future__ import annotations

import functools
import math
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from tbd.analysis import quality
from tbd.analysis.assemble import NullReasons, ProfileInputs, WorkloadInfo, assemble_profile, iteration_log_from_steps
from tbd.analysis.cluster import CommTimes, RankInput, cluster_summary, comm_times
from tbd.analysis.counters import range_counters
from tbd.analysis.data_movement import does_arithmetic
from tbd.analysis.flops.ops import op_flops, precision_of
from tbd.analysis.memory import mxnet as memory_mxnet
from tbd.analysis.memory import pytorch as memory
from tbd.analysis.memory import tensorflow as memory_tensorflow
from tbd.analysis.op_bytes.ops import op_bytes
from tbd.analysis.peaks import USER, PeakFlops, PeakModel, device_bandwidth, device_peak_model
from tbd.analysis.precision import kernel_precisions
from tbd.cli import cluster_analysis
from tbd.core import raw_records, rundir, targets
from tbd.core.errors import ResultFormatError, TbdError, UsageError
from tbd.core.profile_cluster import Cluster
from tbd.core.profile_result import COMPLETE, PARTIAL, Memory, Profile, Value
from tbd.core.records import TraceRecords
from tbd.profilers import cupti_counters
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
                                kernel_precisions=kernel_precisions, recorded_by_tbd=recorded_by_tbd, bytes_of=op_bytes,
                                does_arithmetic=does_arithmetic)


def _read_mxnet(path: Path, run_dir: Path) -> TraceRecords:
    # MXNet's dump has no operand shapes: the hook logged them beside it.
    shapes = raw_records.read_record(run_dir, rundir.MXNET_SHAPES)
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
    """Every raw record of `run_dir`, each read guarded and checked against its declaration
    (tbd/core/raw_records.py); ResultFormatError naming the file and the key on the first bad one."""
    def read(name: str) -> Any:
        return raw_records.read_record(run_dir, name)

    cpu, nvml = read(rundir.CPU), read(rundir.NVML)
    return _RawRun(
        spec=raw_records.read_record(run_dir, rundir.SPEC, required=True),
        environment=read(rundir.ENVIRONMENT) or {},
        status=read(rundir.STATUS) or {},
        iterations=read(rundir.ITERATIONS),
        workload=read(rundir.WORKLOAD),
        cpu=rundir.cpu_sample_from_json(cpu, str(run_dir / rundir.CPU)) if cpu else None,
        nvml=rundir.nvml_sample_from_json(nvml, str(run_dir / rundir.NVML)) if nvml else None,
        memory=read(rundir.MEMORY),
        memory_cross_check=read(rundir.MEMORY_CROSS_CHECK),
        gemm=read(rundir.GEMM),
        bandwidth=read(rundir.BANDWIDTH),
        quality=read(rundir.QUALITY))


def _checked_quality(records: Any, run_dir: Path) -> dict | None:
    """raw/quality.json if it is a quality record of this version (its fields checked on reading), else
    ResultFormatError naming it."""
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


def _with_given_device(raw: _RawRun, run_dir: Path, peak_flops: float | None,
                      sm_clock_mhz: float | None) -> _RawRun:
    """The run's records with the user's device figures in place of the recorded ones.

    `peak_flops` becomes the spec's FP32 peak, exactly as `tbd profile --peak-flops` records it, so
    the peak model labels it as the user's (analysis.peaks.USER). `sm_clock_mhz` becomes the GPU's
    max SM clock, marked as given, as `tbd analyze TRACE --sm-clock-mhz` does: the SM model at that
    clock replaces the GPU table's peaks.

    Raises:
        UsageError: an option is not a finite positive number, or `sm_clock_mhz` is given for a run
            whose environment records no GPU (a CPU run has no SM clock to set).
    """
    _check_options(peak_flops, sm_clock_mhz)
    spec, environment = raw.spec, raw.environment
    if peak_flops:
        spec = {**spec, "peak_flops": peak_flops}
    if sm_clock_mhz:
        gpu = environment.get("gpu")
        if not isinstance(gpu, dict):
            raise UsageError(f"--sm-clock-mhz does not apply to {run_dir}: the run recorded no GPU (it ran on the CPU)",
                             hint="pass --peak-flops for the CPU's peak")
        environment = {**environment, "gpu": {**gpu, "max_sm_clock_hz": sm_clock_mhz * 1e6, "peak_clock_given": True}}
    return replace(raw, spec=spec, environment=environment)


def _framework(name: str) -> _Framework:
    if name not in _FRAMEWORKS:
        raise ResultFormatError(f"run spec names an unknown framework {name!r}",
                                hint=f"tbd reads runs of {', '.join(_FRAMEWORKS)}")
    return _FRAMEWORKS[name]


def profile_from_run_dir(run_dir: str | os.PathLike, *, status: str | None = None,
                         extra_notes: list[str] | None = None, peak_flops: float | None = None,
                         sm_clock_mhz: float | None = None, memory_bandwidth: float | None = None) -> Profile:
    """Build the Profile from what the runner wrote; a missing later stage makes it partial.

    A multi-process run's folder (records in ranks/rank-K) gives its cluster profile.
    `peak_flops` and `sm_clock_mhz` (`tbd analyze RUN_DIR --peak-flops/--sm-clock-mhz`) replace
    what the run recorded, as `_with_given_device` says; `memory_bandwidth` (bytes/s,
    `--memory-bandwidth`) replaces the GPU table's or the measured one, labelled as the user's.
    """
    run_dir = Path(run_dir)
    if cluster_analysis.is_cluster_run(run_dir):
        return cluster_profile_from_run_dir(run_dir, status=status, extra_notes=extra_notes, peak_flops=peak_flops,
                                            sm_clock_mhz=sm_clock_mhz, memory_bandwidth=memory_bandwidth)
    _check_options(memory_bandwidth=memory_bandwidth)
    raw = _with_given_device(_read_run_dir(run_dir), run_dir, peak_flops, sm_clock_mhz)
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
    return assemble_profile(ProfileInputs(
        spec=raw.spec, environment=raw.environment, log=log, workload=workload, cpu=raw.cpu, nvml=raw.nvml,
        trace=trace, memory=framework.memory(raw.memory, trace, raw.memory_cross_check),
        peaks=device_peak_model(raw.environment, device_kind, quality.best_ceiling(raw.gemm, raw.quality),
                                raw.spec.get("peak_flops")), status=final,
        bandwidth=device_bandwidth(raw.environment, device_kind, raw.bandwidth, memory_bandwidth), notes=notes,
        null_reasons=NullReasons(gpu_busy_nvml=nvml_reason), quality_records=_checked_quality(raw.quality, run_dir),
        gemm=raw.gemm, provenance={"run_dir": str(run_dir), "trace": trace_path.name if trace else None,
                                   "flop_counting": "analytic formulas over recorded op shapes (analysis/flops/ops.py)"}))


def cluster_profile_from_run_dir(run_dir: str | os.PathLike, *, status: str | None = None,
                                 extra_notes: list[str] | None = None, write_ranks: bool = False,
                                 peak_flops: float | None = None, sm_clock_mhz: float | None = None,
                                 memory_bandwidth: float | None = None) -> Profile:
    """A multi-process run's profile (cluster_analysis.py), each rank's folder read as a run directory
    (with `peak_flops`, `sm_clock_mhz` and `memory_bandwidth`, as `profile_from_run_dir`)."""
    read_rank = functools.partial(profile_from_run_dir, peak_flops=peak_flops, sm_clock_mhz=sm_clock_mhz,
                                  memory_bandwidth=memory_bandwidth)
    return cluster_analysis.cluster_profile(Path(run_dir), read_rank=read_rank,
                                           comm_of=comm_times_from_trace, load=load_profile, status=status,
                                           extra_notes=extra_notes, write_ranks=write_ranks)


def profile_from_trace(path: str | os.PathLike, *, peak_flops: float | None = None,
                       sm_clock_mhz: float | None = None, samples_per_step: float | None = None,
                       memory_bandwidth: float | None = None) -> Profile:
    """Analyse a PyTorch/Kineto trace that tbd did not record.

    The trace says nothing about the device's clock, the batch or the host's CPU counters: those
    figures are null with a reason unless given (`peak_flops`, `sm_clock_mhz`, `samples_per_step`);
    `memory_bandwidth` (bytes/s) replaces the GPU table's, labelled as the user's.

    Raises:
        UsageError: an option given is not a finite positive number.
        TraceFormatError: the trace cannot be read (profilers.kineto.reader says which).
    """
    _check_options(peak_flops, sm_clock_mhz, samples_per_step, memory_bandwidth)
    raw = kineto.read_trace_file(path)
    profile = profile_of_kineto(raw, Path(path), peak_flops=peak_flops, sm_clock_mhz=sm_clock_mhz,
                                samples_per_step=samples_per_step, memory_bandwidth=memory_bandwidth)
    return with_range_counters(profile, raw, Path(path))


#: Why a CUPTI range-profiler trace has no GPU busy time or FLOP utilization (profilers.cupti_counters).
_NO_KERNEL_TIMES = ("a CUPTI range-profiler trace records no kernel times (Kineto replays each kernel to count "
                    "and writes no kernel events)")


def with_range_counters(profile: Profile, raw: kineto.KinetoTrace, path: Path) -> Profile:
    """`profile` with the trace's CUPTI range-profiler counters (`Profile.counters`), paired with the
    launches and ops behind them (profilers.cupti_counters); unchanged for a trace without ranges.

    A range-profiler trace (no kernel events: `kineto.range_profiled`) has no kernel times, so its GPU
    busy time and FLOP utilization are null, saying why; its measured FLOPs are in `counters`."""
    if kineto.RANGE_PROFILER_CATEGORY not in raw.categories:
        return profile
    counters = cupti_counters.read_cupti_counters(path, required=False)
    if not counters.ranges:
        return profile
    ranges, pairing = cupti_counters.measured_ranges(counters, raw, flops_of=op_flops, precision_of=precision_of)
    measured = range_counters(ranges, "cupti_range", pairing)
    notes = [f"{measured.ranges} CUPTI counter ranges: measured FLOPs per kernel launch and per op in `counters`; "
             f"{measured.paired} paired with kernel launches, {pairing}"]
    if measured.unpaired:
        shown = ", ".join(clean_name(n[:60]) for n in measured.unpaired[:5])
        more = f" and {len(measured.unpaired) - 5} more" if len(measured.unpaired) > 5 else ""
        notes.append(f"{len(measured.unpaired)} counter ranges paired with no kernel launch (their FLOPs count in "
                     f"the totals and per kernel, not per op): {shown}{more}")
    metrics = profile.metrics
    if kineto.range_profiled(raw):
        metrics = replace(metrics, gpu_busy_pct=Value.null(_NO_KERNEL_TIMES),
                          flop_util_pct=replace(metrics.flop_util_pct, value=None,
                                                reason=f"{_NO_KERNEL_TIMES}; its measured FLOPs are below"))
    return replace(profile, metrics=metrics, counters=measured, notes=[*profile.notes, *notes],
                   provenance={**profile.provenance, "counters": "measured: CUPTI range profiler (Kineto)"})


def profile_of_kineto(raw: kineto.KinetoTrace, path: Path, *, peak_flops: float | None = None,
                       sm_clock_mhz: float | None = None, samples_per_step: float | None = None,
                       trace: TraceRecords | None = None, memory_bandwidth: float | None = None) -> Profile:
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
    return assemble_profile(ProfileInputs(
        spec={"model": Path(path).name, "framework": "pytorch", "batch": None, "device": trace.device_kind,
              "precision": "as traced", "trace": str(path)},
        environment=environment, log=log, workload=workload, cpu=None, nvml=None, trace=trace,
        memory=memory.memory_breakdown(None, trace, None), peaks=peaks, status=COMPLETE, notes=notes,
        bandwidth=device_bandwidth(environment, trace.device_kind, None, memory_bandwidth),
        null_reasons=NullReasons(gpu_busy="the trace holds no GPU kernels (a CPU-only trace)",
                                 gpu_busy_nvml="NVML is sampled live by `tbd profile`; a trace does not carry it",
                                 cpu_util="a trace does not carry per-core CPU counters", throughput=no_samples),
        provenance={"trace": str(path), "flop_counting": "analytic formulas over recorded op shapes"}))


def comm_times_from_trace(path: str | os.PathLike) -> tuple[CommTimes | None, str | None]:
    """One rank's communication and compute time from its Kineto trace (.json or .json.gz, any era
    the reader supports; tbd's own, in a run directory, too): (CommTimes, None), or (None, why) when
    the trace cannot be read (the reader's one-line error) or its window has no length.
    """
    path = Path(path)
    try:
        raw = kineto.read_trace_file(path)
        own = targets.sniff(path).kind in (targets.Kind.RUN_DIR, targets.Kind.MULTI_RANK_RUN_DIR)  # a tbd run's trace
        return comm_of_records(raw, kineto_records(raw, str(path), recorded_by_tbd=own))
    except TbdError as exc:
        return None, f"trace unreadable: {exc.one_line()}"


def comm_of_records(raw: kineto.KinetoTrace, records: TraceRecords) -> tuple[CommTimes | None, str | None]:
    c = comm_intervals(raw, records)
    if c.window_end_ns <= c.window_start_ns:
        return None, "the trace window has no length (every event at one instant)"
    return comm_times(c.comm_start_ns, c.comm_end_ns, c.compute_start_ns, c.compute_end_ns,
                      window_start_ns=c.window_start_ns, window_end_ns=c.window_end_ns, steps=c.steps,
                      backend_kind=c.backend_kind, wait_start_ns=c.wait_start_ns, wait_end_ns=c.wait_end_ns), None


def _device_properties(raw: dict[str, Any]) -> dict[str, Any] | None:
    """The first GPU's properties as Kineto records them (no clock: Kineto does not write it).

    A field of the wrong type or out of range (a corrupt trace) is left out, as if not recorded.
    """
    props = raw.get("deviceProperties")
    if not isinstance(props, list) or not props or not isinstance(props[0], dict):
        return None
    p = props[0]
    name = p.get("name") if isinstance(p.get("name"), str) else None
    major, minor = _small_int(p.get("computeMajor"), 100), _small_int(p.get("computeMinor", 0), 100)
    if major is None and name is None:
        return None
    name = None if name is None else clean_name(name[:200])
    cc = [major, minor] if major is not None and minor is not None else None
    # ROCm traces say "AMD ..." in the name and a CUDA-style capability (an MI250 reports 9.0) or
    # a warp of 64 lanes; the GPU table never looks those up as NVIDIA parts.
    amd = name is not None and "amd" in name.lower() or p.get("warpSize") == 64
    return {"name": name, "vendor": "amd" if amd else "nvidia", "index": _small_int(p.get("id", 0), 1 << 16) or 0,
            "compute_capability": cc, "sm_count": _small_int(p.get("numSms"), 1 << 20),
            "memory_bytes": _small_int(p.get("totalGlobalMem"), 1 << 60), "max_sm_clock_hz": None}


def _small_int(value: Any, limit: int) -> int | None:
    """`value` when it is an int in [0, limit), else None (bools and strings are not counts)."""
    return value if type(value) is int and 0 <= value < limit else None


def _check_options(peak_flops: float | None = None, sm_clock_mhz: float | None = None,
                   samples_per_step: float | None = None, memory_bandwidth: float | None = None) -> None:
    """Each option given is a finite positive number (argparse's float() accepts "nan" and "-inf")."""
    for flag, value in (("--peak-flops", peak_flops), ("--sm-clock-mhz", sm_clock_mhz),
                        ("--samples-per-step", samples_per_step), ("--memory-bandwidth", memory_bandwidth)):
        if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise UsageError(f"{flag} must be a positive number, got {value!r}")


def load_profile(path: str | os.PathLike) -> Profile:
    """Load profile.json (or RUN_DIR/profile.json), validated.

    Raises:
        ResultFormatError: no such file, not a regular file (a directory named profile.json, a
            FIFO), larger than its cap (tbd.core.targets.MAX_RESULT_BYTES), not JSON, or not a
            valid profile (the key named).
    """
    path = Path(path)
    if path.is_dir():
        path = path / rundir.PROFILE
    hint = "give a run directory written by `tbd profile` or its profile.json"
    return Profile.from_dict(targets.read_result(path, targets.Kind.PROFILE_JSON, hint))


# A folder of per-rank Kineto traces (`tbd analyze FOLDER`), as torch.profiler's
# tensorboard_trace_handler writes them, one file per rank of one job: each trace analysed on its
# own, then the cluster. The rank is the trace's `distributedInfo.rank`, else the number after
# "rank" in the file name. Each trace is read once: its Profile (the trace path above) and its
# communication time come from the same records.


@dataclass(frozen=True)
class RankProfile:
    """One trace of a folder of per-rank traces, analysed on its own."""

    rank: int | None  # distributedInfo's rank, else the number in the file name; None if neither
    trace: Path
    profile: Profile
    comm: CommTimes | None = None  # its communication and compute time (analysis/cluster.py)
    comm_reason: str | None = None  # why comm is None
    distributed: dict | None = None  # the trace's distributedInfo, as recorded


TRACE_SUFFIXES = (".json", ".json.gz")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


def trace_files(folder: Path) -> list[Path]:
    """The trace files of a folder (JSON, plain or gzipped), not tbd's own result files."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES)
                  and p.name not in (rundir.PROFILE, rundir.SPEC, rundir.ITERATIONS))


def profiles_from_trace_folder(folder: str | os.PathLike, **options: Any) -> list[RankProfile]:
    """Every trace of a folder (one per rank, as torch.profiler writes them) analysed on its own.

    Each one as `profile_from_trace` with `options`, with its communication time; ordered by
    rank. The rank is the trace's `distributedInfo.rank`, else a number after "rank" in the file name.
    """
    _check_options(options.get("peak_flops"), options.get("sm_clock_mhz"), options.get("samples_per_step"),
                   options.get("memory_bandwidth"))
    folder = Path(folder)
    files = trace_files(folder)
    if not files:
        raise UsageError(f"{folder}: no trace files (*.json, *.json.gz) here",
                         hint="give a trace, a folder of per-rank traces, or a tbd run directory")
    out = []
    for path in files:
        raw = kineto.read_trace_file(path)
        records = kineto_records(raw, str(path))
        profile = profile_of_kineto(raw, path, trace=records, **options)
        comm, why = comm_of_records(raw, records)
        dist = raw.metadata.get("distributedInfo")
        dist = dist if isinstance(dist, dict) else None
        rank = dist.get("rank") if dist and _small_int(dist.get("rank"), 1 << 24) is not None else None
        if rank is None:
            found = _RANK_IN_NAME.search(path.name)
            rank = int(found.group(1)) if found else None
        out.append(RankProfile(rank, path, profile, comm, why, dist))
    return sorted(out, key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.trace.name))


def cluster_of_ranks(ranks: list[RankProfile]) -> Cluster:
    """The cluster summary of a folder's ranks (analysis/cluster.py); world size and backend from
    the first distributedInfo that records them, the node count from the hosts when every rank is here."""
    inputs = [RankInput(r.rank, _host(r.profile), str(r.trace), r.profile, r.comm, r.comm_reason) for r in ranks]
    infos = [r.distributed for r in ranks if r.distributed]
    world = next((w for w in (i.get("world_size") for i in infos) if _small_int(w, 1 << 24)), None)
    backend = next((b[:40] for b in (i.get("backend") for i in infos) if isinstance(b, str)), None)
    hosts = {i.host for i in inputs}
    nnodes = len(hosts) if world == len(ranks) and None not in hosts else None
    return cluster_summary(inputs, world_size=world, nnodes=nnodes, backend=backend,
                           scaling_reason="not measured: a folder of traces holds one job size")


def _host(profile: Profile) -> str | None:
    host = profile.environment.get("host")
    return host[:200] if isinstance(host, str) else None
