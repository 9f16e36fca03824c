"""The run directory: its layout, atomic writes, and validated reads of the raw records.

Every file is written to a temporary name in the same directory and renamed into place, so a
crash, an OOM kill or Ctrl-C never leaves a half-written file behind.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from tbd.core.errors import ResultFormatError
from tbd.core.records import CpuSample, IterationLog, NvmlSample, RunSpec

SPEC = "spec.json"
PROFILE = "profile.json"
ITERATIONS = "iterations.json"  # the per-iteration log
# The trace window, in Chrome trace format (Perfetto and chrome://tracing open it as it is). A
# PyTorch run's is Kineto's export, named as TensorBoard's PyTorch profiler plugin looks for it
# (`<worker>[.<span>].pt.trace.json[.gz]`, torch_tb_profiler/consts.py), so `tensorboard --logdir
# runs/` lists each run directory as a run. MXNet's and TensorFlow's are not Kineto traces (that
# plugin would fail on them): they keep the plain name. PyTorch runs before 2026-11 used it too.
TRACE = "trace.pt.trace.json.gz"
CHROME_TRACE = "trace.json.gz"
TRACE_NAMES = (TRACE, CHROME_TRACE)
# A TensorFlow run also keeps TF's own XSpace where TensorBoard's profile plugin looks for it:
# RUN_DIR/plugins/profile/<run>/<host>.xplane.pb (`tensorboard --logdir RUN_DIR`).
TENSORBOARD_PROFILE = "plugins/profile"
LOG = "workload.log"  # the child's stderr
RAW = "raw"
CPU = "raw/cpu.json"
NVML = "raw/nvml.json"
ENVIRONMENT = "raw/environment.json"
WORKLOAD = "raw/workload.json"
MEMORY = "raw/memory.json"
MEMORY_CROSS_CHECK = "raw/memory_cross_check.json"
GEMM = "raw/gemm.json"
BANDWIDTH = "raw/bandwidth.json"  # measured memory copy bandwidth (CPU runs)
# The measurement-quality records: each timing repeat's counters and census of the machine's other
# processes, the GEMM ceiling measured before the windows, the clock (profilers/stages.py).
QUALITY = "raw/quality.json"
STATUS = "raw/status.json"
MXNET_SHAPES = "raw/mxnet_shapes.json"  # operand shapes MXNet's profiler does not record

# The schema string each raw record carries: written by a hook (profilers/), checked by the code
# that reads it (profilers/ readers, analysis/). One copy here, so the two never drift apart.
PYTORCH_MEMORY_SCHEMA = "tbd.memory_records/1"  # raw/memory.json of a PyTorch run
MXNET_MEMORY_SCHEMA = "tbd.mxnet_memory_records/1"  # raw/memory.json of an MXNet run
TENSORFLOW_MEMORY_SCHEMA = "tbd.tensorflow_memory_records/1"  # raw/memory.json of a TensorFlow run
MXNET_SHAPES_SCHEMA = "tbd.mxnet_shapes/1"  # raw/mxnet_shapes.json
QUALITY_SCHEMA = "tbd.quality_records/1"  # raw/quality.json
TENSORFLOW_TRACE_SCHEMA = "tbd.tensorflow_trace/1"  # CHROME_TRACE of a TensorFlow run (XSpace as Chrome JSON)


def trace_name(framework: str) -> str:
    """The trace file's name in a run directory of `framework`."""
    return TRACE if framework == "pytorch" else CHROME_TRACE


def find_trace(run_dir: str | os.PathLike) -> Path | None:
    """The run directory's trace file (either name, newest first), None when it has none."""
    for name in TRACE_NAMES:
        path = Path(run_dir) / name
        if path.exists():
            return path
    return None


def default_run_dir(spec: RunSpec, root: str | os.PathLike = "runs", device: str | None = None) -> Path:
    """runs/<model>-<framework>-<device>-b<batch>[-n<processes>]-<YYYYmmdd-HHMMSS>: sortable, self-describing.

    `device`: the one the run will use when the caller can tell (tbd.cli.frameworks.planned_device:
    "auto" on a machine without a GPU is "cpu"), else the spec's; a folder named "-auto-" is
    renamed after the device that ran (`named_after_device`).
    """
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    batch = "default" if spec.batch is None else str(spec.batch)
    device = (device or spec.device).replace(":", "")
    ranks = f"-n{spec.world_size}" if spec.world_size > 1 else ""  # several processes (--nproc-per-node)
    return Path(root) / f"{spec.model}-{spec.framework}-{device}-b{batch}{ranks}-{stamp}"


def new_run_dir(spec: RunSpec, root: str | os.PathLike = "runs", device: str | None = None) -> Path:
    """A new, empty run directory named as `default_run_dir`, created now so no other run can take
    it: a name already taken (two runs started in the same second) gets -2, -3, ... appended."""
    return unique_dir(default_run_dir(spec, root, device))


def named_after_device(run_dir: Path) -> Path:
    """A default run directory named "-auto-" renamed after the device its spec.json says ran; else as is."""
    marker = "-auto-"
    if marker not in run_dir.name:
        return run_dir
    spec = read_optional(run_dir, SPEC, "run spec")
    device = spec.get("device") if isinstance(spec, dict) else None
    device = device.replace(":", "") if isinstance(device, str) and device.isprintable() and "/" not in device else "auto"
    if device == "auto" or not device:
        return run_dir
    target = run_dir.with_name(run_dir.name.replace(marker, f"-{device}-", 1))
    for n in range(1, 1000):
        path = target if n == 1 else target.with_name(f"{target.name}-{n}")
        try:
            run_dir.rename(path)  # fails if the name is taken by a non-empty folder
            return path
        except OSError:
            if not path.exists():
                return run_dir
    return run_dir


def unique_dir(base: Path) -> Path:
    """`base`, or `base`-2, -3, ... when taken, created now so that no other run or sweep can take it."""
    base.parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        path = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"{base}: 999 folders of that name already started this second")


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename (never half-written)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o644)  # mkstemp makes 0600; results are for sharing
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with _suppress_oserror():
            os.unlink(tmp)
        raise


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """JSON-encode `obj` (NaN forbidden) and write it atomically."""
    atomic_write_bytes(path, (json.dumps(obj, indent=1, allow_nan=False) + "\n").encode())


class _suppress_oserror:
    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc, tb) -> bool:
        return exc_type is not None and issubclass(exc_type, OSError)


#: The most bytes a raw record of a run directory may hold. The largest tbd writes is raw/memory.json
#: (every allocator event of the trace window: tens of MB for a large model); the others hold KBs.
MAX_RECORD_BYTES = {MEMORY: 1 << 30, MXNET_SHAPES: 256 << 20}
DEFAULT_RECORD_BYTES = 64 << 20
#: Nesting no file tbd writes comes near (raw/quality.json is the deepest, at 4).
MAX_JSON_DEPTH = 64


def read_guarded_json(path: str | os.PathLike, what: str, max_bytes: int, hint: str | None = None,
                      missing: str | None = None) -> Any:
    """The JSON a file holds, read the one guarded way every file tbd reads back goes (raw records,
    results); ResultFormatError in one line starting with the path otherwise.

    The file is opened non-blocking and checked on the opened descriptor, so a FIFO never hangs and a
    symlink to /dev/zero (a character device) is never read: only a regular file is, of at most
    `max_bytes`, nested at most MAX_JSON_DEPTH deep, holding no lone UTF-16 surrogate escape (which
    no output could encode later). `missing`: the message when the file is absent (default "not found").
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ResultFormatError(f"{path}: {missing or f'not found ({what})'}", hint=hint) from None
    except OSError as exc:
        raise ResultFormatError(f"{path}: cannot read the {what} ({exc.strerror or exc})", hint=hint) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise ResultFormatError(f"{path}: not a regular file ({_file_kind(info.st_mode)}), so not a {what}",
                                    hint=hint)
        if info.st_size > max_bytes:
            os.close(fd)
            raise ResultFormatError(f"{path}: {info.st_size:,} bytes is far too large for a {what} "
                                    f"(at most {max_bytes:,})", hint=hint)
        with os.fdopen(fd, "rb") as f:
            # The file's own size, not the cap: read(n) allocates n bytes up front, and under a memory cap
            # (--memory-limit-gib) a 64 MiB buffer for a 2 KiB status.json is itself the out-of-memory.
            raw = f.read(info.st_size + 1)
    except OSError as exc:
        raise ResultFormatError(f"{path}: cannot read the {what} ({exc.strerror or exc})", hint=hint) from None
    if len(raw) > max_bytes:  # grew while read
        raise ResultFormatError(f"{path}: far too large for a {what} (at most {max_bytes:,} bytes)", hint=hint)
    try:
        data = json.loads(raw)
        _check_depth(data)
        json.dumps(data, ensure_ascii=False).encode("utf-8")
        return data
    except UnicodeEncodeError:
        raise ResultFormatError(f"{path}: not valid JSON text (a lone UTF-16 surrogate escape)", hint=hint) from None
    except RecursionError:
        raise ResultFormatError(f"{path}: not a {what} (JSON nested too deeply)", hint=hint) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ResultFormatError(f"{path}: not valid JSON ({what}): {str(exc)[:200]}", hint=hint) from None


def _file_kind(mode: int) -> str:
    for test, word in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a file"


def _check_depth(data: Any) -> None:
    """RecursionError when `data` nests containers deeper than MAX_JSON_DEPTH (walked without recursion)."""
    stack = [(data, 1)] if data.__class__ is dict or data.__class__ is list else []
    while stack:
        value, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise RecursionError
        items = value.values() if value.__class__ is dict else value
        stack.extend((v, depth + 1) for v in items if v.__class__ is dict or v.__class__ is list)


def read_json(path: str | os.PathLike, what: str) -> Any:
    """A raw record's JSON (spec.json, iterations.json, raw/*.json), read guarded (`read_guarded_json`,
    its cap from MAX_RECORD_BYTES); ResultFormatError naming the file and `what` it should be otherwise."""
    path = Path(path)
    cap = next((n for name, n in MAX_RECORD_BYTES.items() if path.as_posix().endswith(name)), DEFAULT_RECORD_BYTES)
    return read_guarded_json(path, what, cap)


#: The first bytes of a result file as tbd writes it (`atomic_write_json`, its schema key first).
_SCHEMA_HEAD = re.compile(rb'^\s*\{\s*"schema"\s*:\s*"(tbd\.[a-z_]+)/')


def result_kind(path: str | os.PathLike) -> str | None:
    """"tbd.profile", "tbd.sweep", "tbd.compare": the schema a regular file starts with, else None."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as f:
            match = _SCHEMA_HEAD.match(f.read(64))
    except OSError:
        return None
    return match.group(1).decode() if match else None


def read_result_json(path: Path, what: str, max_bytes: int, hint: str) -> Any:
    """A result file's JSON (profile.json, sweep.json, a comparison), read guarded (`read_guarded_json`);
    ResultFormatError in one line starting with the path when it is missing, not a regular file (a
    FIFO, a folder, a device), larger than `max_bytes`, not JSON, nested too deeply, or holding a lone
    UTF-16 surrogate escape."""
    return read_guarded_json(path, what, max_bytes, hint=hint, missing=f"no {what} here")


def read_optional(run_dir: Path, name: str, what: str) -> Any | None:
    """`read_json` of RUN_DIR/name, None when no such file (nor a dangling link) is there: a run
    stopped before the stage that writes it. Anything else there (a FIFO, a folder) is refused."""
    path = Path(run_dir) / name
    return read_json(path, what) if path.exists() else None


# --- record <-> JSON -------------------------------------------------------------------------

def iteration_log_to_json(log: IterationLog) -> dict:
    return {
        "times_ns": [int(t) for t in log.times_ns],
        "warmup": log.warmup,
        "warmup_detected": log.warmup_detected,
        "stable": log.stable,
        "timing_window": list(log.timing_window) if log.timing_window else None,
        "trace_window": list(log.trace_window) if log.trace_window else None,
        "timing_window_ns": log.timing_window_ns,
        "timing_window_samples": log.timing_window_samples,
        "warmup_run": log.warmup_run,
    }


def write_iterations(run_dir: str | os.PathLike, log: IterationLog, notes: list[str]) -> None:
    """The per-iteration log as gathered so far (RUN_DIR/iterations.json), with the loop's notes.

    The one writer of iterations.json: the stages after each one, and the runner child and the API
    when a run stops early.
    """
    atomic_write_json(Path(run_dir) / ITERATIONS, {**iteration_log_to_json(log), "notes": notes})


def iteration_log_from_json(data: Any, where: str) -> IterationLog:
    try:
        return IterationLog(
            times_ns=np.asarray(data["times_ns"], dtype=np.int64),
            warmup=int(data["warmup"]),
            warmup_detected=bool(data["warmup_detected"]),
            stable=None if data["stable"] is None else bool(data["stable"]),  # None: --warmup, not checked
            timing_window=tuple(data["timing_window"]) if data["timing_window"] else None,
            trace_window=tuple(data["trace_window"]) if data["trace_window"] else None,
            timing_window_ns=None if data["timing_window_ns"] is None else int(data["timing_window_ns"]),
            timing_window_samples=(None if data.get("timing_window_samples") is None
                                   else float(data["timing_window_samples"])),
            warmup_run=None if data.get("warmup_run") is None else int(data["warmup_run"]),  # absent: older log
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ResultFormatError(f"{where}: malformed iteration log ({exc})") from None


def cpu_sample_to_json(sample: CpuSample) -> dict:
    return {"busy_s": [float(x) for x in sample.busy_s], "total_s": [float(x) for x in sample.total_s],
            "wall_ns": int(sample.wall_ns), "cores": int(sample.cores)}


def cpu_sample_from_json(data: Any, where: str) -> CpuSample:
    try:
        return CpuSample(busy_s=np.asarray(data["busy_s"], dtype=np.float64),
                         total_s=np.asarray(data["total_s"], dtype=np.float64),
                         wall_ns=int(data["wall_ns"]), cores=int(data["cores"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ResultFormatError(f"{where}: malformed CPU sample ({exc})") from None


def nvml_sample_to_json(sample: NvmlSample) -> dict:
    return {"utilization_pct": [float(x) for x in sample.utilization_pct], "device_index": sample.device_index}


def nvml_sample_from_json(data: Any, where: str) -> NvmlSample:
    try:
        return NvmlSample(utilization_pct=np.asarray(data["utilization_pct"], dtype=np.float64),
                          device_index=int(data["device_index"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ResultFormatError(f"{where}: malformed NVML sample ({exc})") from None
