"""One DAWNBench entry read as written: the submission JSON and, for training, its per-epoch TSV.

The format is the README of github.com/stanford-futuredata/dawn-bench-entries: a JSON of fields
(author, model, hardware, framework, version, timestamp, costPerHour for training; latency in ms
and cost in USD per item with the quality reached for inference) and, for training, a TSV named
like the JSON with one row per epoch, `epoch<TAB>hours<TAB>top1Accuracy[<TAB>top5Accuracy]`
(SQuAD: `f1Score`), in `<task>/<phase>/` folders (CIFAR10, ImageNet, SQuAD; train, inference).

The entries actually submitted bend that format; each bend below is read, and the file that shows
it named:

- a UTF-8 byte-order mark before the header (CIFAR10/train/KRes34_1GTX1080Ti_pytorch.tsv);
- CRLF line ends (the same file; ImageNet/train/google_resnet50_tpu_tensorflow17.tsv, and JSONs
  such as CIFAR10/train/BAIDU-USA-GAIT_BaiduNet9_1GV100_pytorch.json);
- columns in another order: `hours` first (ImageNet/train/dawn_resnet152_b_4M60_ec2_tensorflow.tsv),
  `f1Score` before `hours` (SQuAD/train/dawn_drqa_1p100-ec2.tsv): columns are found by header name,
  case-insensitively, never by position;
- spaces after the tab and trailing spaces (SQuAD/train/dawn_drqa_1k80-ec2.tsv): each cell is stripped;
- blank lines, at the end (ImageNet/train/Intel_Resnet50_ec2_Xeon_8124M_intelcaffe.tsv,
  ImageNet/train/fastai_resnet50_p3_4_machine_pytorch.tsv) and no final newline
  (SQuAD/train/dawn_drqa_1p100-ec2.tsv): blank lines carry nothing and are passed over;
- fractional epochs, 1.001 ... 181.2 (CIFAR10/train/dawn_resnet164_b_1k80-gc_tensorflow.tsv), epochs
  from 0 (CIFAR10/train/fastai_pytorch.tsv), an epoch written twice
  (ImageNet/train/google_resnet50_tpu_tensorflow111_fastai.tsv: 18 and 41 twice) and hours 0 on the
  first row (ImageNet/train/huaweicloud_resnet50_modelarts_16_machine_tensorflow18.tsv): all kept, in
  file order, because DAWNBench reads "the first entry" of the file;
- `costPerHour` or `cost` null (CIFAR10/train/dawn_resnet164_b_1p100-dawn_pytorch.json,
  CIFAR10/inference/laurentmazare_resnet9_1p100_pytorch.json) or absent
  (CIFAR10/train/KRes34_1GTX1080Ti_pytorch.json): None;
- an inference F1 in percent where the README says a fraction
  (SQuAD/inference/dawn_fastfusionnet-1080ti.json: f1Score 82.52): kept as given; the scale is the
  scorer's business (analysis/dawnbench_scoring.py);
- the README's own CIFAR10 inference example names the accuracy `accuracy`, its field list
  `top1Accuracy` (every real CIFAR10 inference JSON uses top1Accuracy): both are read.

And bends no real entry shows but a hand-made one easily would, read the same way: a tab-less line
split on runs of spaces (the README's own example TSVs are space-aligned), trailing tabs, numbers
given as JSON strings ("3.06"), a UTF-16 file. Everything that is skipped or interpreted leaves one
sentence in `notes`; what cannot be read at all is a one-line TraceFormatError naming the file.
This module reads, it does not score: no analysis import (docs/architecture.md, trace readers).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from dataclasses import dataclass
from typing import Any

from tbd.core.errors import TraceFormatError
from tbd.profilers.traces.files import file_kind

#: An entry is a few kB of text (the longest real TSV, 400 epochs, is 12 kB): anything bigger is not one.
MAX_ENTRY_BYTES = 4 << 20
#: Per-line notes kept for one file; the rest are counted in one closing note.
MAX_LINE_NOTES = 20
#: The largest hours a TSV row may say (a century of training) and the largest USD, ms or quality a JSON
#: field may: beyond them a figure is no measurement, and products (hours x 3600, x costPerHour) overflow.
MAX_HOURS = 1e6
#: The longest author, model, hardware ... text kept (a label is made of them).
MAX_TEXT = 200
MAX_FIELD = 1e12
TASKS = ("CIFAR10", "ImageNet", "SQuAD")
EPOCH, HOURS = "epoch", "hours"
#: The README's metric columns; a header cell matching one case-insensitively takes this spelling.
METRIC_COLUMNS = ("top1Accuracy", "top5Accuracy", "f1Score")
#: JSON fields that state an entry's quality (inference), kept in `reported` under these spellings.
ACCURACY_FIELDS = ("top1Accuracy", "top5Accuracy", "accuracy", "f1Score", "EM", "exactMatch")
_TEXT_FIELDS = ("author", "model", "hardware", "framework", "version", "timestamp")
_PHASE_FOLDERS = {"train": "train", "training": "train", "inference": "inference", "infer": "inference"}
# A decimal number as people write one: no "nan", "inf", "1_000" or non-ASCII digits, which float() takes.
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_README_HEADER = "epoch<TAB>hours<TAB>top1Accuracy, as the DAWNBench README shows"


@dataclass(frozen=True, slots=True)
class DawnbenchRow:
    """One TSV line: the state of training at the end of an epoch."""

    epoch: float
    hours: float  # wall-clock hours since training began, as the TSV says
    metrics: dict[str, float]  # column name -> value as written, e.g. {"top1Accuracy": 94.12}


@dataclass(frozen=True, slots=True)
class DawnbenchEntry:
    """One DAWNBench submission as its files say it; None wherever a file does not say.

    task: "CIFAR10", "ImageNet" or "SQuAD" from the folders (.../CIFAR10/train/x.json), else from the
        metric names when they point at one task (a note says so), else None.
    phase: "train" or "inference" from the folder, else "train" for a TSV, "inference" for a JSON
        with latency or cost and no TSV.
    cost_per_hour: USD per hour (JSON costPerHour); latency_ms: ms per item and cost_per_item: USD
        per item (JSON latency and cost, inference).
    reported: the JSON's quality fields as given (ACCURACY_FIELDS present), in whatever scale.
    rows: the TSV's numeric rows in file order; notes: one sentence per thing skipped or interpreted.
    """

    json_path: str | None
    tsv_path: str | None
    task: str | None
    phase: str
    author: str | None
    model: str | None
    hardware: str | None
    framework: str | None
    version: str | None
    timestamp: str | None
    cost_per_hour: float | None
    latency_ms: float | None
    cost_per_item: float | None
    reported: dict[str, float]
    rows: tuple[DawnbenchRow, ...]
    notes: tuple[str, ...]


def read_entry(path: str | os.PathLike) -> DawnbenchEntry:
    """The entry at `path`, its JSON or its TSV; the partner file (same name, other suffix) is read when it exists.

    Raises:
        TraceFormatError: one line naming the file: not a .json/.tsv, unreadable or not a regular
            file, over MAX_ENTRY_BYTES, not JSON or not a JSON object, a TSV whose header has no
            epoch and hours columns or that has no numeric row, a training entry without its TSV,
            an inference entry with neither latency nor cost.
    """
    json_path, tsv_path = _pair(os.fspath(path))
    notes: list[str] = []
    fields = _read_json(json_path, notes) if json_path else {}
    rows = _read_tsv(tsv_path, notes) if tsv_path else ()
    if json_path is None:
        notes.append(f"no JSON beside {tsv_path}: author, hardware and costPerHour unknown")

    text = {name: _text(fields, name, notes) for name in _TEXT_FIELDS}
    cost_per_hour = _number(fields, "costPerHour", notes)
    latency = _number(fields, "latency", notes, positive=True)
    cost = _number(fields, "cost", notes)
    reported = {name: value for name in ACCURACY_FIELDS
                if (value := _number(fields, name, notes)) is not None}

    anchor = json_path or tsv_path or ""
    task, folder_phase = _place(anchor)
    phase = folder_phase
    if phase is None:
        phase = "inference" if tsv_path is None and (latency is not None or cost is not None) else "train"
    if tsv_path is None and phase == "train":
        missing = os.path.basename(os.path.splitext(anchor)[0] + ".tsv")
        hint = "put the per-epoch TSV, named like the JSON, next to it"
        if folder_phase == "train":
            raise TraceFormatError(f"{anchor}: a training entry without its TSV ({missing})", hint=hint)
        raise TraceFormatError(f"{anchor}: no TSV beside it ({missing}) and no latency or cost in it: neither "
                               "a training nor an inference entry", hint=hint)
    if phase == "inference" and tsv_path is None and latency is None and cost is None:
        raise TraceFormatError(f"{anchor}: an inference entry with neither latency nor cost")

    names = [name for row in rows for name in row.metrics] or list(reported)
    by_columns = _task_from(names)
    if task is None and by_columns is not None:
        task = by_columns
        notes.append(f"task {task} inferred from the metric names ({', '.join(dict.fromkeys(names))}), "
                     "not from a folder")
    elif task is not None and by_columns is not None and by_columns != task:
        notes.append(f"the folder says {task} but the metric names ({', '.join(dict.fromkeys(names))}) are "
                     f"{by_columns}'s; the folder is kept")
    return DawnbenchEntry(
        json_path=json_path, tsv_path=tsv_path, task=task, phase=phase, **text,
        cost_per_hour=cost_per_hour, latency_ms=latency, cost_per_item=cost, reported=reported,
        rows=rows, notes=tuple(notes))


# --- files ---------------------------------------------------------------------------------------------


def _pair(name: str) -> tuple[str | None, str | None]:
    """(JSON path, TSV path) for the given file and its partner, the partner only where it exists."""
    stem, suffix = os.path.splitext(name)
    kind = suffix.lower()
    if kind not in (".json", ".tsv"):
        raise TraceFormatError(f"{name}: not a DAWNBench entry (a .json or .tsv file)")
    other = ".tsv" if kind == ".json" else ".json"
    partner = next((stem + s for s in (other, other.upper()) if os.path.exists(stem + s)), None)
    return (name, partner) if kind == ".json" else (partner, name)


def _read_capped(name: str) -> bytes:
    """A regular file's bytes, at most MAX_ENTRY_BYTES; never opens a FIFO or device.

    The steps of profilers/traces/files.py (stat through symlinks, open non-blocking, check again on
    the descriptor), with the entry's cap: read_trace_bytes is built for traces, with a 32 GiB cap
    and gzip inflation, and an entry is a few kB of text.
    """
    try:
        info = os.stat(name)
        if not stat.S_ISREG(info.st_mode):
            raise TraceFormatError(f"{name}: {file_kind(info.st_mode)}, not a DAWNBench file")
        _check_size(name, info.st_size)
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # swapped between the stat and the open
                raise TraceFormatError(f"{name}: not a regular file, not a DAWNBench file")
            data = handle.read(MAX_ENTRY_BYTES + 1)
    except OSError as exc:
        raise TraceFormatError(f"{name}: cannot read ({exc.strerror or exc})") from None
    _check_size(name, len(data))
    return data


def _check_size(name: str, size: int) -> None:
    if size > MAX_ENTRY_BYTES:
        raise TraceFormatError(f"{name}: more than {MAX_ENTRY_BYTES:,} bytes, too large for a DAWNBench entry")


def _decode(raw: bytes, name: str, notes: list[str]) -> str:
    """Text from UTF-8 with or without a byte-order mark (KRes34_1GTX1080Ti_pytorch.tsv has one), or UTF-16."""
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        notes.append(f"{name} is UTF-16 text; read as such")
        return raw.decode("utf-16", errors="replace").lstrip("\ufeff")
    try:
        return raw.decode("utf-8-sig").lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        notes.append(f"{name} is not valid UTF-8 (byte {exc.start}); undecodable bytes replaced")
        return raw.decode("utf-8-sig", errors="replace").lstrip("\ufeff")


# --- JSON ----------------------------------------------------------------------------------------------


def _read_json(name: str, notes: list[str]) -> dict[str, Any]:
    text = _decode(_read_capped(name), name, notes)
    repeated: list[str] = []

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out and key not in repeated:
                repeated.append(key)
            out[key] = value
        return out

    try:
        data = json.loads(text, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{name}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise TraceFormatError(f"{name}: not a DAWNBench JSON (nested too deeply to read)") from None
    if not isinstance(data, dict):
        raise TraceFormatError(f"{name}: the JSON is {_json_kind(data)}, not an object of DAWNBench fields")
    notes += [f"JSON key {key!r} appears more than once; its last value is used" for key in repeated]
    return data


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return "null" if value is None else f"a {type(value).__name__}"


def _field(fields: dict[str, Any], name: str, notes: list[str]) -> Any:
    """The field spelt as the README spells it, else the one key that matches it case-insensitively."""
    if name in fields:
        return fields[name]
    others = [key for key in fields if isinstance(key, str) and key.lower() == name.lower()]
    if len(others) == 1:
        notes.append(f"JSON key {others[0]!r} read as {name}")
        return fields[others[0]]
    if others:
        notes.append(f"JSON keys {', '.join(map(repr, others))} all spell {name}; none is used")
    return None


def _text(fields: dict[str, Any], name: str, notes: list[str]) -> str | None:
    value = _field(fields, name, notes)
    if isinstance(value, str):
        value = value.strip()
        if len(value) > MAX_TEXT:
            notes.append(f"JSON {name} is {len(value):,} characters; the first {MAX_TEXT} kept")
            value = value[:MAX_TEXT]
        return value or None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        notes.append(f"JSON {name} is the number {value!r}; kept as the text {str(value)!r}")
        return str(value)
    if value is not None:
        notes.append(f"JSON {name} is {_json_kind(value)}, not text; ignored")
    return None


def _number(fields: dict[str, Any], name: str, notes: list[str], positive: bool = False) -> float | None:
    """A finite, non-negative number (positive for latency); a numeric string is read with a note, else None."""
    value = _field(fields, name, notes)
    if value is None:  # absent, or null as in dawn_resnet164_b_1p100-dawn_pytorch.json's costPerHour
        return None
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        number = float(value.strip())
        notes.append(f"JSON {name} is the string {value!r}; read as {number!r}")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
    else:
        shown = repr(value)[:40] if isinstance(value, str) else _json_kind(value)
        notes.append(f"JSON {name} is {shown}, not a number; ignored")
        return None
    if math.isnan(number):  # said in words, never as "nan"
        notes.append(f"JSON {name} is not a finite number; ignored")
        return None
    if number > MAX_FIELD:  # 1e999 reads as inf: said in words, never as "inf"
        notes.append(f"JSON {name} is larger than {MAX_FIELD:g}, not a measured figure; ignored")
        return None
    if number < 0 or (positive and number == 0):
        notes.append(f"JSON {name} is {number!r}, not a {'positive' if positive else 'non-negative'} "
                     "finite number; ignored")
        return None
    return number


# --- TSV -----------------------------------------------------------------------------------------------


def _cells(line: str) -> list[str]:
    """A line's cells: split on tabs where it has any (an empty cell between tabs is a missing value,
    never closed up), else on runs of spaces (the README's space-aligned examples); trailing empties dropped."""
    line = line.rstrip()
    if "\t" not in line:
        return line.split()
    cells = [cell.strip() for cell in line.split("\t")]
    while cells and not cells[-1]:
        cells.pop()
    return cells


def _header(line: str, name: str) -> tuple[str, ...]:
    canonical = {known.lower(): known for known in (EPOCH, HOURS, *METRIC_COLUMNS)}
    columns = tuple(canonical.get(cell.lower(), cell) for cell in _cells(line))
    shown = line.strip()[:80]
    if "" in columns:
        raise TraceFormatError(f"{name}: the TSV header {shown!r} has an empty column name")
    seen = [c.lower() for c in columns]
    twice = sorted({c for c in columns if seen.count(c.lower()) > 1})
    if twice:
        raise TraceFormatError(f"{name}: the TSV header names {', '.join(twice)} more than once")
    if EPOCH not in columns or HOURS not in columns:
        raise TraceFormatError(f"{name}: the first line {shown!r} is not a header with epoch and hours columns",
                               hint=f"start the TSV with {_README_HEADER}")
    return columns


def _cell_number(cell: str) -> tuple[float | None, str | None]:
    """(value, None) for a finite decimal number, else (None, why it is refused)."""
    if not cell:
        return None, "is empty"
    if _NUMBER.fullmatch(cell):
        value = float(cell)
        return (value, None) if math.isfinite(value) else (None, f"is {cell!r}, too large to be a number")
    if cell.lower().lstrip("+-") in ("nan", "inf", "infinity"):
        return None, "is not a finite number"
    return None, f"is {cell[:24]!r}, not a number"


def _read_tsv(name: str, notes: list[str]) -> tuple[DawnbenchRow, ...]:
    lines = _decode(_read_capped(name), name, notes).splitlines()  # \n, \r\n (KRes34_...tsv) and \r alike
    start = next((i for i, line in enumerate(lines) if line.strip()), None)
    if start is None:
        raise TraceFormatError(f"{name}: an empty TSV", hint=f"start the TSV with {_README_HEADER}")
    columns = _header(lines[start], name)
    rows: list[DawnbenchRow] = []
    said: list[str] = []  # this file's per-line notes, capped at MAX_LINE_NOTES
    back_hours = back_epochs = 0
    for number, line in enumerate(lines[start + 1:], start=start + 2):
        if not line.strip():
            continue  # blank lines, mostly at the end (Intel_Resnet50_ec2_Xeon_8124M_intelcaffe.tsv)
        cells = _cells(line)
        if len(cells) > len(columns):
            said.append(f"line {number} skipped: {len(cells)} values under {len(columns)} column names")
            continue
        values = dict(zip(columns, cells))
        kept = _row(values, columns, number, said)
        if kept is None:
            continue
        if rows and kept.hours < rows[-1].hours:
            back_hours += 1
            if back_hours == 1:
                said.append(f"line {number}: hours go back from {rows[-1].hours!r} to {kept.hours!r}; "
                            "rows stay in file order")
        if rows and kept.epoch <= rows[-1].epoch:  # google_resnet50_tpu_tensorflow111_fastai.tsv repeats 18 and 41
            back_epochs += 1
            if back_epochs == 1:
                said.append(f"line {number}: epoch {kept.epoch:g} does not follow epoch {rows[-1].epoch:g}; "
                            "rows stay in file order")
        rows.append(kept)
    for count, what in ((back_hours, "hours go back"), (back_epochs, "the epoch does not increase")):
        if count > 1:
            said.append(f"{what} on {count} lines in all")
    if not rows:
        first = f" ({said[0]})" if said else ""
        raise TraceFormatError(f"{name}: no numeric rows under the header{first}")
    notes += said[:MAX_LINE_NOTES]
    if len(said) > MAX_LINE_NOTES:
        notes.append(f"{len(said) - MAX_LINE_NOTES} more notes on {os.path.basename(name)} not shown")
    return tuple(rows)


def _row(values: dict[str, str], columns: tuple[str, ...], number: int, said: list[str]) -> DawnbenchRow | None:
    """The row of one line, or None (with a note) when its epoch or hours is not a finite non-negative number."""
    found: dict[str, float] = {}
    for key in (EPOCH, HOURS):
        value, why = _cell_number(values.get(key, ""))
        if why is None and value is not None and value < 0:
            why = f"is {value!r}, negative"
        if why is None and value is not None and value > (MAX_HOURS if key == HOURS else MAX_FIELD):
            why = f"is {value:g}, over {MAX_HOURS if key == HOURS else MAX_FIELD:g}"
        if why is not None or value is None:
            said.append(f"line {number} skipped: {key} {why}")
            return None
        found[key] = value
    metrics: dict[str, float] = {}
    for column in columns:
        if column in (EPOCH, HOURS):
            continue
        value, why = _cell_number(values.get(column, ""))
        if why is None and value is not None and value < 0:
            why = f"is {value!r}, negative"
        if why is None and value is not None and value > MAX_FIELD:
            why = f"is {value:g}, over {MAX_FIELD:g}"
        if why is not None or value is None:
            said.append(f"line {number}: {column} {why}; left out of that row")
            continue
        metrics[column] = value
    return DawnbenchRow(epoch=found[EPOCH], hours=found[HOURS], metrics=metrics)


# --- where the entry belongs ---------------------------------------------------------------------------


def _place(path: str) -> tuple[str | None, str | None]:
    """(task, phase) from the README's layout <task>/<phase>/<file>; a task folder alone gives the task."""
    folders = os.path.normpath(os.path.abspath(path)).split(os.sep)[:-1]
    tasks = {task.lower(): task for task in TASKS}
    phase = _PHASE_FOLDERS.get(folders[-1].lower()) if folders else None
    above = folders[-2] if phase and len(folders) >= 2 else (folders[-1] if folders else "")
    return tasks.get(above.lower()), phase


def _task_from(names: list[str]) -> str | None:
    """The one task whose README metric these are: f1Score SQuAD, top5Accuracy ImageNet, top1Accuracy
    alone CIFAR10 (ImageNet's TSV has both); None where they point at none or at two."""
    lower = {name.lower() for name in names}
    found = set()
    if "f1score" in lower:
        found.add("SQuAD")
    if "top5accuracy" in lower:
        found.add("ImageNet")
    elif "top1accuracy" in lower:
        found.add("CIFAR10")
    return found.pop() if len(found) == 1 else None
