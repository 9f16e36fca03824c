"""What a path holds, told without analysing it: the one way in for every command's TARGET.

`open_target(path)` looks at the path's layout and at a bounded head of its files (gunzipped when
gzip, by content) and says what kind of input it is, and what it is in words; the shell's loader
(tbd.cli.results.load_target) then hands it to the reader of that kind. Nothing here parses more
than a head: a 2 GB trace costs the same megabyte as a 2 kB one. A file that no rule recognises
(empty, binary, corrupt, foreign JSON) is UNKNOWN, never a traceback; `open_target` turns UNKNOWN
and a missing path into one UsageError listing what tbd reads.

Also here, so that every loader shares them: the size cap of each kind of result file and the
guarded reader of one (`read_result`).
"""

from __future__ import annotations

import json
import os
import re
import stat
import zlib
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from tbd.core import rundir
from tbd.core.errors import TbdError, UsageError

#: A sweep directory's result (`tbd sweep` writes it, tbd.cli.sweep_run).
SWEEP_JSON = "sweep.json"


class Kind(str, Enum):
    """What a path holds."""

    RUN_DIR = "run_dir"  # spec.json inside; a run directory's own trace file given directly counts as it
    MULTI_RANK_RUN_DIR = "multi_rank_run_dir"  # a run of several processes (records in ranks/rank-K)
    PROFILE_JSON = "profile_json"  # a tbd profile, any file name (by its schema); or a folder holding only one
    SWEEP_DIR = "sweep_dir"
    SWEEP_JSON = "sweep_json"
    COMPARISON_JSON = "comparison_json"  # `tbd compare --out`
    TTA_JSON = "tta_json"  # `tbd tta --out`
    KINETO_TRACE = "kineto_trace"  # torch.profiler's Chrome trace (.json, .json.gz)
    TRACE_FOLDER = "trace_folder"  # a folder of per-rank Kineto traces
    MXNET_TRACE = "mxnet_trace"  # mx.profiler.dump() output
    TENSORFLOW_TRACE = "tensorflow_trace"  # the trace tbd's TensorFlow hook writes (XSpace as Chrome JSON)
    MLPERF_LOG = "mlperf_log"  # an MLPerf Training result log (`:::MLLOG {...}` lines)
    MLPERF_SUBMISSION = "mlperf_submission"  # results/<system>/<benchmark>/result_*.txt, or a folder of logs
    DAWNBENCH_ENTRY = "dawnbench_entry"  # a DAWNBench entry's JSON or its per-epoch TSV
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Target:
    """A path and what it holds; `where` is what the reader of its kind opens."""

    path: Path  # as given
    kind: Kind
    description: str  # what it is, in words: "a tbd run directory (pytorch)", "a Kineto trace"
    where: Path  # the run directory of a run's own trace file, a folder's profile.json, else `path`
    framework: str | None = None  # a run directory's (its spec.json)
    device: str | None = None  # the device a run directory's spec says it ran on: "cpu", "cuda:0", ...
    has_profile: bool = False  # a run directory holds profile.json (else only its raw records)
    files: tuple[Path, ...] = ()  # a folder's traces or MLPerf logs; a DAWNBench entry's JSON and TSV

    @property
    def kineto_trace(self) -> Path | None:
        """The Kineto trace file the path names: a foreign trace, or a PyTorch run's own trace given directly."""
        if self.kind is Kind.KINETO_TRACE or (self.kind is Kind.RUN_DIR and self.where != self.path
                                              and self.framework == "pytorch"):
            return self.path
        return None


#: The most bytes a result file of each kind may hold: far larger is not one tbd wrote. A profile
#: holds at most a few hundred kernel rows (a few MB); a sweep about 1 kB a point; a comparison a
#: few kB a run.
MAX_RESULT_BYTES = {Kind.PROFILE_JSON: 256 << 20, Kind.SWEEP_JSON: 64 << 20, Kind.COMPARISON_JSON: 64 << 20,
                    Kind.TTA_JSON: 256 << 20}
_RESULT_NAMES = {Kind.PROFILE_JSON: rundir.PROFILE, Kind.SWEEP_JSON: SWEEP_JSON, Kind.COMPARISON_JSON: "comparison",
                 Kind.TTA_JSON: "time-to-accuracy result"}

READS = ("a tbd run directory or profile.json, a sweep (directory or sweep.json), a comparison (`tbd compare "
         "--out`), a Kineto trace (.json, .json.gz) or a folder of per-rank ones, an MLPerf Training result log "
         "or submission folder, or a DAWNBench entry")

#: How much of a file is read to tell its kind. An MLPerf log's first `:::MLLOG` line comes after
#: the launcher's console output (50 kB into Red Hat's v4.0 logs); a Kineto trace names itself in
#: its first hundred bytes.
HEAD_BYTES = 1 << 20
#: Each file of a folder is told by a smaller head: a folder may hold hundreds.
MEMBER_HEAD_BYTES = 64 << 10
#: A folder walk for MLPerf logs visits at most this many entries, at most this deep
#: (training_results_vX/<submitter>/results/<system>/<benchmark>/result_N.txt is 4 folders down).
MAX_WALK_ENTRIES = 20_000
MAX_WALK_DEPTH = 4
MAX_SNIFFED_FILES = 1024

#: A result log larger than this is not one a run printed (the largest seen, v4.0, is 12 MB).
MAX_MLPERF_LOG_BYTES = 512 << 20

_GZIP_MAGIC = b"\x1f\x8b"
_BOM = "\ufeff"
_TENSORFLOW = re.compile(r'"schema"\s*:\s*"' + re.escape(rundir.TENSORFLOW_TRACE_SCHEMA.split("/")[0]) + "/")
_KINETO = re.compile(r'"(?:schemaVersion|deviceProperties|traceEvents)"\s*:')
# MXNet's dump: operator events of cat "operator" and processes named after device storages
# ("cpu/0", "gpu/0", "cpu pinned/"), which Kineto never writes (profilers/mxnet/trace.py).
# Chrome's other trace form, a bare array of events, which PyTorch 1.8's profiler wrote: its first event's keys.
_EVENT_ARRAY = re.compile(r'^\[\s*\{\s*"(?:ph|cat|name|pid|tid|ts)"\s*:')
_MXNET = re.compile(r'"cat"\s*:\s*"(?:operator|Device Storage)"|"name"\s*:\s*"(?:cpu|gpu)(?: pinned| shared)?/\d*"')
# mlperf_logging writes each event as `:::MLLOG {"namespace": ..., "key": ...}`, maybe after a
# launcher's prefix ("6: "); a document that only mentions the marker has no such line.
_MLLOG = re.compile(rb':::MLLOG \{"[^\n]*"key"\s*:')
# A DAWNBench entry's JSON carries these (README: "JSON Format"); its TSV starts "epoch hours <metric>".
_DAWNBENCH_KEYS = frozenset({"author", "model", "hardware"})
_DAWNBENCH_ANY = frozenset({"authorEmail", "framework", "version", "timestamp", "costPerHour"})
_DAWNBENCH_METRICS = frozenset({"top1Accuracy", "top5Accuracy", "f1Score"})


def open_target(path: str | os.PathLike) -> Target:
    """What `path` holds (module docstring), for a command to read.

    Raises:
        UsageError: nothing is at `path`, or it holds none of what tbd reads (the one line says
            what it is instead, and the hint lists what tbd reads).
    """
    target = sniff(path)
    if target.kind is Kind.UNKNOWN:
        if not os.path.lexists(path):
            raise UsageError(f"{path}: no such file or folder", hint=f"give {READS}")
        raise UsageError(f"{path}: {target.description}: not a tbd profile, sweep or comparison, nor a trace or log "
                         "tbd reads", hint=f"give {READS}")
    return target


def sniff(path: str | os.PathLike) -> Target:
    """What `path` holds, UNKNOWN (with what it is in words) when none of the kinds; never raises."""
    path = Path(path)
    try:
        info = os.stat(path)
    except OSError as exc:
        return _unknown(path, "nothing readable here" if os.path.lexists(path) else "no such file or folder",
                        exc.strerror)
    if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
        return _unknown(path, _special(info.st_mode))
    try:
        return _folder(path) if stat.S_ISDIR(info.st_mode) else _file(path, info.st_size)
    except OSError as exc:  # a folder or file the user may not read (EACCES), or gone meanwhile
        return _unknown(path, f"a {'folder' if stat.S_ISDIR(info.st_mode) else 'file'} that cannot be read",
                        exc.strerror or type(exc).__name__)


def read_result(path: str | os.PathLike, kind: Kind, hint: str) -> Any:
    """A result file's JSON (profile, sweep, comparison) with its kind's size cap (`MAX_RESULT_BYTES`).

    Raises:
        ResultFormatError: as rundir.read_result_json: missing, not a regular file, too large, not JSON.
    """
    return rundir.read_result_json(Path(path), _RESULT_NAMES[kind], MAX_RESULT_BYTES[kind], hint)


# --- folders ---------------------------------------------------------------------------------

def _folder(path: Path) -> Target:
    if (path / rundir.SPEC).is_file():
        return _run_dir(path, path)
    if (path / SWEEP_JSON).is_file():
        return Target(path, Kind.SWEEP_DIR, "a tbd sweep", path)
    if (path / rundir.PROFILE).exists():  # no spec.json: a saved profile in a folder of its own
        return Target(path, Kind.PROFILE_JSON, "a folder holding a tbd profile.json", path / rundir.PROFILE)
    traces = _kineto_traces(path)
    if traces:
        n = len(traces)
        return Target(path, Kind.TRACE_FOLDER, f"a folder of {n} per-rank Kineto trace{'s' * (n != 1)}", path,
                      files=tuple(traces))
    logs = _mlperf_logs(path)
    if logs:
        return Target(path, Kind.MLPERF_SUBMISSION,
                      f"an MLPerf Training submission folder ({len(logs)} result log{'s' * (len(logs) != 1)})", path,
                      files=tuple(logs))
    return _unknown(path, "a folder with no trace files (*.json, *.json.gz), tbd run, sweep or result log")


def _run_dir(run_dir: Path, path: Path) -> Target:
    """The run directory `run_dir` (given as `path`: itself, or its trace file)."""
    try:
        spec = rundir.read_result_json(run_dir / rundir.SPEC, "run spec", MEMBER_HEAD_BYTES, "")
    except TbdError:
        spec = None  # a corrupt spec.json is still a run directory: its reader says what is wrong
    spec = spec if isinstance(spec, dict) else {}
    framework = spec.get("framework", "pytorch")
    framework = framework[:40] if isinstance(framework, str) else None
    # The spec, not the ranks/ folder, says how many processes ran: the folder's layout belongs to
    # the profilers' side (profilers/distributed.py), which core does not import.
    ranks = _count(spec.get("nproc_per_node")) * _count(spec.get("nnodes"))
    has_profile = (run_dir / rundir.PROFILE).exists()
    device = spec.get("device")
    device = device[:40] if isinstance(device, str) else None
    what = framework or "framework unknown"
    if ranks > 1:
        kind, words = Kind.MULTI_RANK_RUN_DIR, f"a tbd run directory ({what}, {ranks} ranks)"
    else:
        kind, words = Kind.RUN_DIR, f"a tbd run directory ({what})"
    if path != run_dir:
        words = "the trace of " + words
    return Target(path, kind, words, run_dir, framework=framework, device=device, has_profile=has_profile)


def _count(value: Any) -> int:
    return value if type(value) is int and 0 < value < 1 << 24 else 1


def _kineto_traces(folder: Path) -> list[Path]:
    """The folder's files (.json, .json.gz) whose head is a Kineto trace's, by name."""
    out = []
    for entry in _entries(folder)[:MAX_SNIFFED_FILES]:
        if entry.name.endswith((".json", ".json.gz")) and _is_file(entry):
            if _content_kind(Path(entry.path), MEMBER_HEAD_BYTES)[0] is Kind.KINETO_TRACE:
                out.append(Path(entry.path))
    return out


def _mlperf_logs(folder: Path) -> list[Path]:
    """MLPerf Training result logs in `folder` as submissions lay them out (results/<system>/<benchmark>/
    result_*.txt, up to MAX_WALK_DEPTH folders down), or loose in it (any *.txt, *.log); each one's
    head checked for `:::MLLOG` lines. Symlinked folders are not followed (no loops)."""
    candidates, pending, visited = [], [(folder, 0)], 0
    while pending and visited < MAX_WALK_ENTRIES:
        here, depth = pending.pop()
        try:
            entries = _entries(here)
        except OSError:
            continue
        for entry in entries[:MAX_WALK_ENTRIES - visited]:
            visited += 1
            if depth < MAX_WALK_DEPTH and entry.is_dir(follow_symlinks=False):
                pending.append((Path(entry.path), depth + 1))
            elif (entry.name.startswith("result_") and entry.name.endswith(".txt")
                  or depth == 0 and entry.name.endswith((".txt", ".log"))) and _is_file(entry):
                candidates.append(Path(entry.path))
    return sorted(p for p in candidates[:MAX_SNIFFED_FILES]
                  if _content_kind(p, HEAD_BYTES)[0] is Kind.MLPERF_LOG)


def _entries(folder: Path) -> list[os.DirEntry]:
    with os.scandir(folder) as it:
        return sorted(it, key=lambda e: e.name)


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


# --- files -----------------------------------------------------------------------------------

def _file(path: Path, size: int) -> Target:
    if path.name in rundir.TRACE_NAMES and (path.parent / rundir.SPEC).is_file():
        return _run_dir(path.parent, path)
    if path.name == rundir.PROFILE:  # by its name, whatever it holds: its reader says what is wrong
        return Target(path, Kind.PROFILE_JSON, "a tbd profile.json", path)
    if size == 0:
        return _unknown(path, "an empty file")
    kind, words = _content_kind(path, HEAD_BYTES)
    if kind is Kind.UNKNOWN:
        return _unknown(path, words)
    files = _dawnbench_pair(path) if kind is Kind.DAWNBENCH_ENTRY else ()
    return Target(path, kind, words, path, files=files)


_WORDS = {Kind.PROFILE_JSON: "a tbd profile.json", Kind.SWEEP_JSON: "a tbd sweep",
          Kind.COMPARISON_JSON: "a tbd comparison", Kind.TTA_JSON: "a tbd time-to-accuracy result",
          Kind.KINETO_TRACE: "a Kineto trace",
          Kind.MXNET_TRACE: "an MXNet profiler dump", Kind.TENSORFLOW_TRACE: "a TensorFlow trace",
          Kind.MLPERF_LOG: "an MLPerf Training result log", Kind.DAWNBENCH_ENTRY: "a DAWNBench entry"}
_SCHEMAS = {"tbd.profile": Kind.PROFILE_JSON, "tbd.sweep": Kind.SWEEP_JSON, "tbd.compare": Kind.COMPARISON_JSON,
            "tbd.tta": Kind.TTA_JSON}


def _content_kind(path: Path, limit: int) -> tuple[Kind, str]:
    """The kind a regular file's head says, and it in words (for UNKNOWN: what the file is instead)."""
    try:
        head, complete = _head(path, limit)
    except zlib.error:
        return Kind.UNKNOWN, "a corrupt gzip file"
    except OSError as exc:
        return Kind.UNKNOWN, f"a file that cannot be read ({exc.strerror or type(exc).__name__})"
    if b"\0" in head:
        return Kind.UNKNOWN, "a binary file"
    text = head.decode("utf-8", errors="replace").lstrip(_BOM).lstrip()
    if not text:
        return Kind.UNKNOWN, "an empty file"
    if text.startswith("{"):
        kind = _json_kind(path, text, complete)
    else:
        kind = Kind.KINETO_TRACE if _EVENT_ARRAY.match(text) else _text_kind(head, text)
    if kind is None and not complete and path.name.startswith("result_") and path.name.endswith(".txt") \
            and _mllog_further_in(path):
        kind = Kind.MLPERF_LOG
    return (kind, _WORDS[kind]) if kind is not None else (Kind.UNKNOWN, _unknown_words(path, text))


def _mllog_further_in(path: Path) -> bool:
    """A result_*.txt whose first event lies past the head (NVIDIA's v1.0 unet3d logs print 1.25 MB of
    launcher output first): scanned a megabyte at a time, up to MAX_MLPERF_LOG_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return False
        tail = b""
        for _ in range(MAX_MLPERF_LOG_BYTES >> 20):
            chunk = handle.read(1 << 20)
            if not chunk:
                return False
            if _MLLOG.search(tail + chunk):
                return True
            tail = chunk[-256:]
    return False


def _json_kind(path: Path, text: str, complete: bool) -> Kind | None:
    schema = rundir.result_kind(path)  # tbd writes its results plain, the schema key first
    if schema in _SCHEMAS:
        return _SCHEMAS[schema]
    if _TENSORFLOW.search(text):
        return Kind.TENSORFLOW_TRACE
    if _KINETO.search(text):
        # Any JSON object with a "traceEvents" list is what the Kineto reader opens (profilers/kineto/
        # decode.py); MXNet's dump is one too, told apart by what only MXNet writes.
        return Kind.MXNET_TRACE if _MXNET.search(text) and '"schemaVersion"' not in text else Kind.KINETO_TRACE
    if complete and _is_dawnbench_json(text):
        return Kind.DAWNBENCH_ENTRY
    return None


def _text_kind(head: bytes, text: str) -> Kind | None:
    if _MLLOG.search(head):
        return Kind.MLPERF_LOG
    # Real entries put the columns in any order (hours first, f1Score before hours), any case.
    first = {cell.lower() for cell in text.splitlines()[0].split()} if text.splitlines() else set()
    if {"epoch", "hours"} <= first and {m.lower() for m in _DAWNBENCH_METRICS} & first:
        return Kind.DAWNBENCH_ENTRY
    return None


def _is_dawnbench_json(text: str) -> bool:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and _DAWNBENCH_KEYS <= data.keys() and bool(_DAWNBENCH_ANY & data.keys())


def _dawnbench_pair(path: Path) -> tuple[Path, ...]:
    """An entry's JSON and TSV (named alike, README: "JSON and TSV files are named ..."), those that exist."""
    return tuple(p for p in (path.with_suffix(".json"), path.with_suffix(".tsv")) if p.is_file())


def _unknown_words(path: Path, text: str) -> str:
    if text.startswith("{"):
        schema = rundir.result_kind(path)
        return f"a {schema} file" if schema else "a JSON file"
    return "a JSON file" if text.startswith("[") else "a text file"


def _head(path: Path, limit: int) -> tuple[bytes, bool]:
    """Up to `limit` bytes of a regular file's text, gunzipped when gzip (by content): (head, whole file?).

    Opened non-blocking and checked again on the descriptor, as profilers/traces/files.py opens a
    trace, so a FIFO swapped in never blocks. A gzip stream is inflated a chunk at a time with its
    output bounded; what inflated before a corrupt byte is kept (the reader says what is wrong).

    Raises:
        OSError: unreadable, or not a regular file on the open descriptor.
        zlib.error: gzip whose first bytes are corrupt.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(0, "not a regular file")
        data = handle.read(limit + 1)
    if data[:2] != _GZIP_MAGIC:
        return data[:limit], len(data) <= limit
    inflate, out = zlib.decompressobj(wbits=31), bytearray()
    for start in range(0, len(data), 64 << 10):
        try:
            out += inflate.decompress(data[start:start + (64 << 10)], limit + 1 - len(out))
        except zlib.error:
            if out:
                break
            raise
        if len(out) > limit or inflate.eof:
            break
    if not out and not inflate.eof:
        raise zlib.error("gzip ends before its first block")
    return bytes(out[:limit]), inflate.eof and len(out) <= limit


def _special(mode: int) -> str:
    for test, words in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "not a regular file"


def _unknown(path: Path, words: str, why: str | None = None) -> Target:
    return Target(path, Kind.UNKNOWN, f"{words} ({why})" if why else words, path)
