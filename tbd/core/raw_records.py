"""The raw records of a run directory, declared once: what `tbd report RUN` re-analyses is checked first.

spec.json, iterations.json and raw/*.json are written by the runner child (tbd/core/rundir.py names
them) and read back when profile.json is absent or stale. A file edited by hand, truncated by a full
disk or forged reaches the analysis only through `read_record`: the file read the one guarded way
(`rundir.read_json`: a regular file, size-capped, nesting bounded), then every value checked against
the TypedDict below that declares it, by the same rules as profile.json's (tbd/core/field_checks.py):
numbers finite and in range, integers bounded, strings and lists capped; every value of a key not
declared here still meets `field_checks.free_value`. A file that fails is one ResultFormatError
naming the file and the key: "runs/x/spec.json: key 'batch' has type float, expected an integer".

The records stay plain dicts, as the runner wrote them (analysis/ reads them so); a declared key that
is absent reads as absent, except the keys a reader cannot do without (`Required`).
"""

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Required, TypedDict

from tbd.core import field_checks as c
from tbd.core import rundir
from tbd.core.errors import ResultFormatError
from tbd.core.field_checks import Batch, Count, IterationIndex, Keys, Name, Note, Notes, Pct, Range, Size

# --- the records -----------------------------------------------------------------------------

Cores = Annotated[int, Range(1, 1 << 20)]  # CPU cores of one machine
Index = Annotated[int, Range(0, 1 << 16)]  # a device's ordinal, a node's rank
Seconds = Annotated[float, Range(0.0, 1e9)]  # a budget or timeout: 30 years at most
ClockHz = Annotated[float, Range(0.0, 1e11)]  # 100 GHz: no clock comes near
ClockMhz = Annotated[float, Range(0.0, 1e5)]
Int64Id = Annotated[int, Range(-(1 << 63), (1 << 64) - 1)]  # a seed: any 64-bit integer
FlopRate = Annotated[float, Range(0.0, 1e22)]  # FLOP/s: 10,000 times the fastest device's
ByteRate = Annotated[float, Range(0.0, 1e18)]  # bytes/s: likewise
Samples = Annotated[float, Range(0.0, 1 << 50)]


class SpecFile(TypedDict, total=False):
    """spec.json: the RunSpec as the parent wrote it (tbd/core/records.py), plus what it chose."""

    model: Required[Name]
    framework: Name
    batch: Batch | None
    device: Name
    precision: Name
    size: Name
    warmup: IterationIndex | None
    iterations: IterationIndex
    trace_iterations: IterationIndex
    max_seconds: Seconds
    max_warmup_iterations: IterationIndex
    seed: Int64Id
    threads: Cores | None
    memory_limit_bytes: Count | None
    peak_flops: Annotated[float, Range(1.0, 1e22)] | None  # FLOP/s: a peak no device has is no peak
    repeat: Annotated[int, Range(1, 1 << 16)]
    window_seconds: Seconds | None
    nproc_per_node: Annotated[int, Range(1, 1 << 16)]
    nnodes: Annotated[int, Range(1, 1 << 16)]
    node_rank: Index
    rdzv_endpoint: Name | None
    rdzv_timeout_s: Seconds
    rank_timeout_s: Seconds
    data_parallel: Name
    device_requested: Name
    trace: str | None


class IterationsFile(TypedDict, total=False):
    """iterations.json: `rundir.write_iterations` (an IterationLog and the loop's notes)."""

    times_ns: Required[list[Count]]
    warmup: Required[IterationIndex]
    warmup_detected: Required[bool]
    stable: Required[bool | None]
    timing_window: Required[Annotated[list[IterationIndex], Size(2)] | None]
    trace_window: Required[Annotated[list[IterationIndex], Size(2)] | None]
    timing_window_ns: Required[Annotated[int, Range(1)] | None]
    timing_window_samples: Annotated[float, Range(1e-6, 1 << 50)] | None
    warmup_run: IterationIndex | None
    notes: Notes


class CpuFile(TypedDict):
    """raw/cpu.json: `rundir.cpu_sample_to_json`."""

    busy_s: list[Seconds]
    total_s: list[Seconds]
    wall_ns: Annotated[int, Range(1)]
    cores: Cores


class NvmlFile(TypedDict):
    """raw/nvml.json: `rundir.nvml_sample_to_json`."""

    utilization_pct: list[Pct]
    device_index: Index


class CpuEnvironment(TypedDict, total=False):
    model: Name | None
    arch: Name | None
    cores_logical: Cores | None
    cores_physical: Cores | None
    cores_available: Cores | None
    isa: list[Name]
    max_clock_hz: ClockHz | None
    current_clock_hz: ClockHz | None
    clock_source: Note | None
    threads_in_use: Annotated[int, Range(0, 1 << 20)] | None


class GpuEnvironment(TypedDict, total=False):
    name: Name | None
    vendor: Name | None
    index: Index | None
    uuid: Name | None
    compute_capability: Annotated[list[Annotated[int, Range(0, 1000)]], Size(2)] | None
    sm_count: Annotated[int, Range(1, 1 << 20)] | None
    memory_bytes: Count | None
    max_sm_clock_hz: ClockHz | None
    peak_clock_given: bool
    clock_source: Note | None
    driver: Name | None
    cuda: Name | None
    nvml_reason: Note | None


class EnvironmentFile(TypedDict, total=False):
    """raw/environment.json: profilers/host.py."""

    host: Name | None
    os: Name | None
    python: Name | None
    cpu: Annotated[dict[str, Any], Keys(CpuEnvironment)] | None
    gpu: Annotated[dict[str, Any], Keys(GpuEnvironment)] | None
    gpu_reason: Note | None
    versions: dict[str, Name | None]


class StatusFile(TypedDict, total=False):
    """raw/status.json: how far the runner child got."""

    state: Name | None
    stage: Name | None
    message: Note | None


class WorkloadFile(TypedDict, total=False):
    """raw/workload.json: the Workload's description (models/base.py)."""

    name: Name
    samples_per_step: Required[Annotated[float, Range(1e-6, 1 << 40)]]
    throughput_unit: Required[Name]
    units_per_step: dict[str, Annotated[float, Range(0.0, 1 << 50)]] | None
    parameters: Count | None
    description: Note | None


class GemmFile(TypedDict, total=False):
    """raw/gemm.json and quality's gemm_before: the measured GEMM ceiling (profilers/ceilings.py)."""

    flops_per_s: FlopRate | None
    n: Count
    seconds: Seconds
    repeats: Count
    matmuls_per_repeat: Count
    dtype: Name
    device: str | int
    reason: Note | None


class BandwidthFile(TypedDict, total=False):
    """raw/bandwidth.json: the measured copy bandwidth (profilers/ceilings.py)."""

    bytes_per_s: ByteRate | None
    nbytes: Count
    seconds: Seconds
    repeats: Count
    copies_per_repeat: Count
    device: str | int
    method: Name
    reason: Note | None


class CrossCheckFile(TypedDict, total=False):
    """raw/memory_cross_check.json: torch.profiler's own memory categories."""

    source: Name
    device: str | int | None
    peak_bytes: dict[str, Count | None] | None
    at_peak: dict[str, Count | None] | None
    total_peak_bytes: Count | None
    maps_to: dict[str, Name] | None
    reason: Note | None


class Clock(TypedDict, total=False):
    mhz: list[ClockMhz] | None
    min_mhz: ClockMhz | None
    max_mhz: ClockMhz | None
    reason: Note | None


class OtherProcess(TypedDict, total=False):
    pid: Required[Annotated[int, Range(0, 1 << 32)]]
    name: Required[Name]
    cpu_s: Required[Seconds]
    command: Note | None


class Load(TypedDict, total=False):
    wall_s: Seconds | None
    workload_cpu_s: Seconds | None
    workload_pids: list[Annotated[int, Range(0, 1 << 32)]]
    tbd_parent_cpu_s: Seconds | None
    others_cpu_s: Seconds
    others_top: Annotated[list[Annotated[dict[str, Any], Keys(OtherProcess)]], Size(1000)] | None
    processes_read: Count | None
    loadavg_before: list[Annotated[float, Range(0.0, 1e7)]] | None
    loadavg_after: list[Annotated[float, Range(0.0, 1e7)]] | None
    clock_before: Annotated[dict[str, Any], Keys(Clock)] | None
    clock_after: Annotated[dict[str, Any], Keys(Clock)] | None


class Repeat(TypedDict, total=False):
    first: Required[IterationIndex]
    last: Required[IterationIndex]
    wall_ns: Required[Count]
    samples: Samples | None
    cpu: Annotated[dict[str, Any], Keys(CpuFile)] | None
    load: Annotated[dict[str, Any], Keys(Load)] | None


class QualityFile(TypedDict, total=False):
    """raw/quality.json: the measurement-quality records (profilers/stages.py; analysis/quality.py)."""

    schema: Required[Name]
    clock_start: Annotated[dict[str, Any], Keys(Clock)] | None
    clock_end: Annotated[dict[str, Any], Keys(Clock)] | None
    gemm_before: Annotated[dict[str, Any], Keys(GemmFile)] | None
    repeats: list[Annotated[dict[str, Any], Keys(Repeat)]]


Block = Annotated[list[Count], Size(2)]  # [address, bytes] of one allocation


class MemoryIteration(TypedDict, total=False):
    """One traced iteration of raw/memory.json: byte counts and the blocks of each category."""

    step: Annotated[int, Range(-(1 << 31), 1 << 31)]
    feature_map_peak_bytes: Count | None
    feature_maps_bytes: Count | None
    gradient_bytes: Count | None
    optimizer_state_bytes: Count | None
    input_bytes: Count | None
    workspace_bytes: Count | None


class MemoryFile(TypedDict, total=False):
    """raw/memory.json: the framework's allocator records (analysis/memory/ reads them; each framework's
    layout beyond these keys meets `field_checks.free_value`)."""

    schema: Required[Name]
    device_index: Annotated[int, Range(-1, 1 << 16)] | None
    weights_bytes: Count | None
    cuda_max_allocated: Count | None
    iterations: list[Annotated[dict[str, Any], Keys(MemoryIteration)]]
    reasons: dict[str, Note | None]


class PytorchMemoryIteration(MemoryIteration, total=False):
    saved: list[Block]
    gradients: list[Block]
    optimizer_state: list[Block]
    inputs: list[Block]


class PytorchMemoryFile(MemoryFile, total=False):
    """raw/memory.json of a PyTorch run (profilers/pytorch/memory.py)."""

    weights: list[Block]
    window_start: dict[str, list[Block]]
    iterations: list[Annotated[dict[str, Any], Keys(PytorchMemoryIteration)]]


class ShapesFile(TypedDict, total=False):
    """raw/mxnet_shapes.json: operand shapes MXNet's profiler does not record."""

    schema: Name


#: What each raw record of a run directory is, by its name in rundir: (its declaration, in words).
RECORDS: dict[str, tuple[type, str]] = {
    rundir.SPEC: (SpecFile, "run spec"),
    rundir.ITERATIONS: (IterationsFile, "iteration log"),
    rundir.CPU: (CpuFile, "CPU counters"),
    rundir.NVML: (NvmlFile, "NVML samples"),
    rundir.ENVIRONMENT: (EnvironmentFile, "environment"),
    rundir.STATUS: (StatusFile, "runner status"),
    rundir.WORKLOAD: (WorkloadFile, "workload"),
    rundir.MEMORY: (MemoryFile, "memory records"),
    rundir.MEMORY_CROSS_CHECK: (CrossCheckFile, "memory cross-check"),
    rundir.GEMM: (GemmFile, "GEMM ceiling"),
    rundir.BANDWIDTH: (BandwidthFile, "memory bandwidth"),
    rundir.QUALITY: (QualityFile, "measurement-quality records"),
    rundir.MXNET_SHAPES: (ShapesFile, "MXNet operand shapes"),
}

_LOADERS = {name: c.loader(Annotated[dict[str, Any], Keys(cls)]) for name, (cls, _) in RECORDS.items()}
_PYTORCH_MEMORY = c.loader(Annotated[dict[str, Any], Keys(PytorchMemoryFile)])


# --- reading ---------------------------------------------------------------------------------

@contextlib.contextmanager
def _naming(path: Path) -> Iterator[None]:
    """Errors of the checks name the file: "runs/x/spec.json: key 'batch' is ..."."""
    try:
        yield
    except ResultFormatError as exc:
        text = str(exc).replace("profile key '", "key '", 1).replace("profile is missing '", "missing key '", 1)
        text = text.replace("key '' ", "the file ", 1).replace("profile key", "key", 1)
        raise ResultFormatError(f"{path}: {text}", exc.hint or "the run's raw records are damaged: run it again "
                                                             "(`tbd profile`) or restore them") from None


def check_record(name: str, data: Any, path: Path) -> dict:
    """`data` (the JSON of the raw record `name`, one of RECORDS) as is when it meets its declaration;
    ResultFormatError naming `path` and the key otherwise."""
    with _naming(path):
        if data.__class__ is not dict:
            raise ResultFormatError(f"profile key '' has type {type(data).__name__}, expected an object")
        _LOADERS[name](data)
        _ACROSS.get(name, lambda d: None)(data)
    return data


def read_record(run_dir: str | Path, name: str, required: bool = False) -> dict | None:
    """The raw record `name` (rundir.SPEC, rundir.CPU, ...) of `run_dir`, read guarded and checked;
    None when the file is absent and not `required` (a run stopped before the stage that writes it).

    Raises:
        ResultFormatError: one line naming the file (and the key): absent though required, not a
            regular file, too large, not JSON, or a value its declaration refuses.
    """
    path = Path(run_dir) / name
    if not required and not path.exists():
        return None
    return check_record(name, rundir.read_json(path, RECORDS[name][1]), path)


# --- rules across keys -----------------------------------------------------------------------

def _iterations(data: dict) -> None:
    for key in ("timing_window", "trace_window"):
        window = data.get(key)
        if window is not None and (len(window) != 2 or window[0] > window[1]):
            raise ResultFormatError(f"profile key '{key}' is {window}, expected [first, last] iteration indices")


def _cpu(data: dict) -> None:
    if len(data["busy_s"]) != len(data["total_s"]):
        raise ResultFormatError(f"profile key 'busy_s' has {len(data['busy_s'])} cores, 'total_s' "
                                f"{len(data['total_s'])}: one value per core each")


def _environment(data: dict) -> None:
    gpu = data.get("gpu") or {}
    cc = gpu.get("compute_capability")
    if cc is not None and len(cc) != 2:
        raise ResultFormatError(f"profile key 'gpu.compute_capability' is {cc}, expected [major, minor]")


def _quality(data: dict) -> None:
    for i, rec in enumerate(data.get("repeats") or []):
        if rec["first"] > rec["last"]:
            raise ResultFormatError(f"profile key 'repeats[{i}]' runs from iteration {rec['first']} to {rec['last']}")
        cpu = rec.get("cpu")
        if cpu:
            for key in ("busy_s", "total_s"):
                if key not in cpu:
                    raise ResultFormatError(f"profile is missing 'repeats[{i}].cpu.{key}'")
            _cpu(cpu)


def _memory(data: dict) -> None:
    if data["schema"] == rundir.PYTORCH_MEMORY_SCHEMA:
        _PYTORCH_MEMORY(data)
    for i, block in enumerate(_blocks(data)):
        if len(block) != 2:
            raise ResultFormatError(f"profile key 'memory block {i}' is {block}, expected [address, bytes]")


def _blocks(data: dict) -> Iterator[list]:
    if data["schema"] != rundir.PYTORCH_MEMORY_SCHEMA:
        return
    yield from data.get("weights") or []
    for blocks in (data.get("window_start") or {}).values():
        yield from blocks
    for it in data.get("iterations") or []:
        for key in ("saved", "gradients", "optimizer_state", "inputs"):
            yield from it.get(key) or []


_ACROSS = {rundir.ITERATIONS: _iterations, rundir.CPU: _cpu, rundir.ENVIRONMENT: _environment,
           rundir.QUALITY: _quality, rundir.MEMORY: _memory}
