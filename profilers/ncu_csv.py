"""An Nsight Compute raw-page CSV export read into launches, each with its counters in base units.

What `ncu --csv --page raw` prints (ncu 2023 and later; the layout of `ncu --import R.ncu-rep --csv
--page raw` is the same):

- the profiler's own lines (`==PROF== Connected to process ...`, `==WARNING== ...`) and, when the
  CSV went to stdout, the program's own output, before and between the rows: every line that
  starts with "==" is ncu's and is kept as a message; anything else before the header is skipped;
- one header row: the launch's identity ("ID", "Process ID", "Process Name", "Host Name",
  "Kernel Name", "Context", "Stream", "Block Size", "Grid Size", "Device", "CC"), then one column
  per metric, named by its PerfWorks name (every metric name holds "__": "dram__bytes_read.sum");
- one units row: empty under the identity columns, the unit of each metric column. `--csv` implies
  `--print-units base` ("byte", "nsecond", "inst", "" for a count); `--print-units auto` scales
  each column ("Kbyte", "Mbyte", "msecond", "usecond"). Units are SI (factors of 1000, Nsight
  Compute CLI, "Metrics and Units"), and every value is scaled here to its base unit: bytes,
  seconds, counts (a rate "Gbyte/second" to byte/second);
- one row per profiled launch, every field quoted; numbers carry thousands separators ("1,234,567").

"Kernel Name" is the name as ncu prints it (`--print-kernel-base`, default demangled), which is
not the name a PyTorch trace holds for the same kernel: ncu's demangler writes "(int)128",
"unsigned int *", "[lambda(int) (instance 1)]" and "(int, T3)" where Kineto's writes "128",
"unsigned int*", "{lambda(int)#1}" and the full parameter types, and ncu also simplifies names
unless `--rename-kernels off` (analysis.ncu says how a launch is selected instead).

Refused with a one-line `TraceFormatError` and the export command as hint: anything that is not such
a CSV (no header, no "Kernel Name" column, a details-page export, an .ncu-rep report, a FIFO or a
directory, a file over the size limit), a row of the wrong width, and a value that is not a number
in a column tbd computes work from (FLOPs, tensor-pipe work, DRAM bytes): "n/a" (ncu could not
collect the metric on this GPU) names the metric. Other columns may hold words: ncu 2025 prints
every launch's device and launch attributes beside the metrics asked for
("device__attribute_display_name" "NVIDIA H200", "launch__func_cache_config" "CachePreferNone",
"device__attribute_confidential_computing_mode" "No-CC", seen on an H200); they are kept as text in
`attributes`. An empty cell is a metric not collected for that launch: absent from its metrics, so
the work it feeds is None, not 0.
"""

from __future__ import annotations

import csv
import math
import os
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from tbd.analysis.counters import MeasuredLaunch, MeasuredWork, is_work_metric, measured_launch, measured_work
from tbd.core.errors import TraceFormatError
from tbd.profilers.traces.files import LIMIT_VARIABLE, read_trace_bytes
from tbd.profilers.traces.names import clean_name, quoted

EXPORT_HINT = ("export with: ncu --csv --page raw --print-units base --metrics <metrics> --log-file counters.csv "
               "<program>, or ncu --import report.ncu-rep --csv --page raw --print-units base > counters.csv")
_IDENTITY = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
             "Grid Size", "Device", "CC")
#: ncu's own console lines kept as messages, at most this many (a long run warns per launch).
MAX_MESSAGES = 20
# A number as ncu prints it: optional sign, digits with or without thousands separators, decimals, exponent.
_NUMBER = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][+-]?\d+)?|[+-]?\.\d+(?:[eE][+-]?\d+)?")
_DIM3 = re.compile(r"\(?\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)?")
_PREFIXES = {"p": 1e-12, "n": 1e-9, "u": 1e-6, "m": 1e-3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BASE_UNITS = frozenset({"", "%", "byte", "bit", "second", "cycle", "inst", "warp", "thread", "sector", "request",
                         "block", "register", "op", "ops", "operation", "flop", "hz", "Hz", "sm", "SM", "bank",
                         "wavefront", "msgs"})


@dataclass(frozen=True, slots=True)
class NcuLaunch:
    """One profiled kernel launch of an ncu raw-page export.

    Attributes:
        id: ncu's result ID ("ID"), in profiling order.
        kernel_name: "Kernel Name" as ncu printed it (bounded by `traces.names.clean_name`).
        process_id, context, stream, device: as printed, None where the column is absent.
        block, grid: "Block Size" / "Grid Size" as (x, y, z), None where absent.
        cc: compute capability as printed ("8.0"), None where absent.
        metrics: metric name -> value in base units (bytes, seconds, counts); metrics with an empty
            cell are absent.
        attributes: metric name -> text, for the columns whose value is a word (never a work metric).
    """

    id: int
    kernel_name: str
    process_id: int | None
    context: int | None
    stream: int | None
    block: tuple[int, int, int] | None
    grid: tuple[int, int, int] | None
    device: int | None
    cc: str | None
    metrics: Mapping[str, float]
    attributes: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class NcuReport:
    """An ncu raw-page CSV: its launches in file order, the base unit of each metric, ncu's own messages.

    `units` maps a metric to the unit its values are in after scaling ("byte", "second", "" for a
    count, "byte/second"); a unit tbd cannot scale is kept as printed, its values unscaled.
    """

    source: str
    launches: tuple[NcuLaunch, ...]
    units: Mapping[str, str]
    messages: tuple[str, ...]


def read_ncu_csv(path: str | os.PathLike) -> NcuReport:
    """Read an `ncu --csv --page raw` export (module docstring) through `traces.files.read_trace_bytes`.

    Raises:
        TraceFormatError: not such an export, or unreadable; one line, with the export command as hint.
    """
    name = os.fspath(path)
    try:
        data = read_trace_bytes(name)
    except TraceFormatError as exc:
        size_limit = exc.hint is not None and LIMIT_VARIABLE in exc.hint
        raise TraceFormatError(str(exc).replace("not a trace file", "not an ncu CSV export"),
                               hint=exc.hint if size_limit else EXPORT_HINT) from None
    return parse_ncu_csv(data, name)


def parse_ncu_csv(data: bytes | str, source: str) -> NcuReport:
    """Parse the text of an ncu raw-page CSV export; `source` names it in errors."""
    lines = _text(data, source).replace("\r\n", "\n").split("\n")
    messages: list[str] = []
    at = _header_line(lines, source, messages)
    header = _fields(lines[at])
    _check_header(header, source)
    columns = {name: i for i, name in enumerate(header)}
    metric_columns = [(i, name) for i, name in enumerate(header) if "__" in name]
    units_at = _next_row(lines, at + 1, messages)
    units_row = _fields(lines[units_at]) if units_at is not None else None
    if units_row is None or len(units_row) != len(header) or units_row[columns["ID"]] != "":
        raise TraceFormatError(f"{source}: no units row after the header (line {at + 2})", hint=EXPORT_HINT)
    scales = {name: _scale(units_row[i], name, source) for i, name in metric_columns}
    launches = []
    i = units_at + 1
    while (i := _next_row(lines, i, messages)) is not None:
        row = _fields(lines[i])
        i += 1
        if row == header or row == units_row:  # a table printed again (another process): same columns
            continue
        launches.append(_launch(row, header, columns, metric_columns, scales, source, i))
    return NcuReport(source=source, launches=tuple(launches),
                     units=MappingProxyType({name: base for name, (_, base) in scales.items()}),
                     messages=tuple(messages))


def launch_work(launch: NcuLaunch) -> MeasuredWork:
    """The FLOPs, tensor-pipe work and DRAM bytes a launch's counters measure (`analysis.counters.measured_work`)."""
    return measured_work(launch.metrics)


def measured_launches(path: str | os.PathLike) -> list[MeasuredLaunch]:
    """Each launch of an ncu export as `analysis.counters` merges it: name and measured work.

    Raises:
        TraceFormatError: as `read_ncu_csv`.
    """
    return [measured_launch(launch.kernel_name, launch_work(launch)) for launch in read_ncu_csv(path).launches]


def unit_scale(unit: str) -> tuple[float, str] | None:
    """(factor to base unit, base unit) of an ncu unit ("Mbyte" -> (1e6, "byte"), "Gbyte/second" ->
    (1e9, "byte/second")), or None for a unit not known here."""
    parts = unit.split("/")
    if len(parts) > 2:
        return None
    factor, bases = 1.0, []
    for k, part in enumerate(parts):
        if part in _BASE_UNITS:
            scale, base = 1.0, part
        elif len(part) > 1 and part[0] in _PREFIXES and part[1:] in _BASE_UNITS - {""}:
            scale, base = _PREFIXES[part[0]], part[1:]
        else:
            return None
        factor = factor * scale if k == 0 else factor / scale
        bases.append(base)
    return factor, "/".join(bases)


def _text(data: bytes | str, source: str) -> str:
    if isinstance(data, str):
        return data
    if b"\0" in data[:1 << 16]:
        raise TraceFormatError(f"{source}: binary data, not a CSV (an .ncu-rep report?)", hint=EXPORT_HINT)
    return data.decode("utf-8-sig", errors="replace")


def _fields(line: str) -> list[str]:
    try:
        return next(csv.reader((line,)), [])
    except csv.Error:  # a field past csv's size limit (128 KiB): no real ncu value is that long
        return [line]


def _header_line(lines: list[str], source: str, messages: list[str]) -> int:
    if not any(line.strip() for line in lines):
        raise TraceFormatError(f"{source}: empty file, not an ncu CSV export", hint=EXPORT_HINT)
    for i, line in enumerate(lines):
        if line.startswith("=="):
            _message(messages, line)
        elif line.startswith('"ID"') or line.startswith("ID,"):
            return i
    raise TraceFormatError(f'{source}: no ncu raw-page header ("ID", ..., "Kernel Name", ...)', hint=EXPORT_HINT)


def _check_header(header: list[str], source: str) -> None:
    if "Metric Name" in header and "Metric Value" in header:
        raise TraceFormatError(f"{source}: an ncu details-page export (one row per metric), not the raw page",
                               hint=EXPORT_HINT)
    if "Kernel Name" not in header:
        raise TraceFormatError(f'{source}: the header has no "Kernel Name" column', hint=EXPORT_HINT)
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise TraceFormatError(f"{source}: column {quoted(name)} appears twice in the header", hint=EXPORT_HINT)
        seen.add(name)


def _next_row(lines: list[str], i: int, messages: list[str]) -> int | None:
    """Index of the next data line from i on: ncu's "==" lines become messages, blank lines are skipped."""
    while i < len(lines):
        line = lines[i]
        if line.startswith("=="):
            _message(messages, line)
        elif line.strip():
            return i
        i += 1
    return None


def _message(messages: list[str], line: str) -> None:
    if len(messages) < MAX_MESSAGES:
        messages.append(clean_name(line.strip()))


def _scale(unit: str, metric: str, source: str) -> tuple[float, str]:
    scale = unit_scale(unit)
    if scale is not None:
        return scale
    if is_work_metric(metric):  # never compute FLOPs or bytes from a value in an unknown unit
        raise TraceFormatError(f"{source}: unit {quoted(unit)} of {metric} is not one tbd can scale",
                               hint=EXPORT_HINT)
    return 1.0, unit


def _launch(row: list[str], header: list[str], columns: dict[str, int], metric_columns: list[tuple[int, str]],
            scales: dict[str, tuple[float, str]], source: str, line_no: int) -> NcuLaunch:
    where = f"{source} line {line_no}"
    if len(row) != len(header):
        raise TraceFormatError(f"{where}: {len(row)} fields, the header has {len(header)}",
                               hint="keep the program's own output out of the CSV: ncu --log-file FILE")
    launch_id = _int(row[columns["ID"]], "ID", where)
    if launch_id is None:
        raise TraceFormatError(f"{where}: empty ID", hint=EXPORT_HINT)
    name = clean_name(row[columns["Kernel Name"]])
    where = f"{where} (ID {launch_id}, kernel {quoted(name, 40)})"
    metrics, attributes = {}, {}
    for i, metric in metric_columns:
        text = row[i].strip()
        if not text:
            continue
        if not is_work_metric(metric) and not _NUMBER.fullmatch(text):
            attributes[metric] = clean_name(text)
            continue
        factor, _ = scales[metric]
        metrics[metric] = _number(text, metric, where) * factor

    def cell(column: str) -> str | None:
        return row[columns[column]] if column in columns else None

    return NcuLaunch(id=launch_id, kernel_name=name,
                     process_id=_int(cell("Process ID"), "Process ID", where),
                     context=_int(cell("Context"), "Context", where),
                     stream=_int(cell("Stream"), "Stream", where),
                     block=_dim3(cell("Block Size"), "Block Size", where),
                     grid=_dim3(cell("Grid Size"), "Grid Size", where),
                     device=_int(cell("Device"), "Device", where),
                     cc=cell("CC") or None,
                     metrics=MappingProxyType(metrics), attributes=MappingProxyType(attributes))


def _number(text: str, metric: str, where: str) -> float:
    if _NUMBER.fullmatch(text):
        value = float(text.replace(",", ""))
        if math.isfinite(value):
            return value
    hint = (f"ncu could not collect {metric} on this GPU: drop it from --metrics and export again"
            if text.lower() == "n/a" else EXPORT_HINT)
    raise TraceFormatError(f"{where}: {metric} is {quoted(text, 30)}, not a number", hint=hint)


def _int(text: str | None, column: str, where: str) -> int | None:
    if text is None or not text.strip():
        return None
    digits = text.strip().replace(",", "")
    if not digits.isdigit() or len(digits) > 19:
        raise TraceFormatError(f"{where}: {column} is {quoted(text, 30)}, not an integer", hint=EXPORT_HINT)
    return int(digits)


def _dim3(text: str | None, column: str, where: str) -> tuple[int, int, int] | None:
    if text is None or not text.strip():
        return None
    match = _DIM3.fullmatch(text.strip())
    if not match or any(len(g) > 10 for g in match.groups()):
        raise TraceFormatError(f"{where}: {column} is {quoted(text, 30)}, not (x, y, z)", hint=EXPORT_HINT)
    x, y, z = (int(g) for g in match.groups())
    return x, y, z
