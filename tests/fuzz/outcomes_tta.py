"""Run one hostile `tbd tta` input (tests/fuzz/mutate_tta.py) through the CLI and judge what came out.

Each case's files are written under a folder of their own, its special members made (a FIFO, a
symlink to /dev/zero or /dev/urandom, a folder of thousands of files, a symlink loop), and
`tbd tta PATH...` runs in-process (`cli.main`), by turns as text, `--json`, `--csv` and, now and
then, `--html PATH`. The contract is tests/fuzz/outcomes.py's:

- "ok": exit 0; stdout has no control character and no nan/inf figure; JSON loads (no NaN token),
  holds no negative number and loads again through `TtaResult.from_dict`; no CSV number is
  negative or non-finite; an HTML page was written; what stderr says is one printable line each;
- "error": exit 2 and exactly one printable line on stderr ("tbd: error: ..."), no traceback;
- "bad": anything else, with what went wrong.

Used by tests/fuzz/test_tta_corpus.py and bench/fuzz_corpus.py (which loads this file by path and
runs each case under a wall-clock alarm: an alarm swallowed by a tool's own `except Exception` is
still seen here, as "_Hang" in what tbd printed).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import shutil
import time
import traceback
from pathlib import Path

from outcomes import BAD, ERROR, OK, Outcome, error_problem, text_problem

from tbd.cli import main as cli
from tbd.core.errors import TbdError
from tbd.core.tta_result import TtaResult

MODES = ("text", "json", "csv", "text", "json", "csv", "text", "json", "csv", "html")


def run_case(case, workdir: Path) -> Outcome:
    """Write `case` (a mutate_tta.Case) under `workdir` and judge what `tbd tta` makes of it."""
    root = workdir / f"{case.kind}-{case.index}"
    start = time.perf_counter()
    try:
        _write(case, root)
        mode = MODES[case.index % len(MODES)]
        kind, detail = _through_cli([str(root / a) for a in case.args], mode, root)
    except Exception as exc:  # noqa: BLE001 - the point: anything escaping is a finding
        kind, detail = BAD, "".join(traceback.format_exception_only(type(exc), exc)).strip()[-2000:] + \
            " at " + _where(exc)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return Outcome(kind, detail, time.perf_counter() - start)


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    return " < ".join(f"{Path(f.filename).name}:{f.lineno}" for f in frames[::-1][:4])


def _write(case, root: Path) -> None:
    root.mkdir(parents=True)
    for rel, data in case.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    for rel, what in case.specials.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_file():
            path.unlink()
        if what == "fifo":
            os.mkfifo(path)
        elif what in ("devzero", "urandom"):
            os.symlink(f"/dev/{'zero' if what == 'devzero' else 'urandom'}", path)
        elif what == "dirloop":
            os.symlink(path.parent, path)
        elif what.startswith("many:"):
            path.mkdir(parents=True, exist_ok=True)
            for i in range(int(what.split(":")[1])):
                (path / (f"result_{i}.txt" if i % 2 else f"f{i}.json")).write_bytes(b"x")


def _through_cli(paths: list[str], mode: str, root: Path) -> tuple[str, str]:
    out = root / "out.html"
    options = {"text": [], "json": ["--json"], "csv": ["--csv"], "html": ["--html", str(out)]}[mode]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cli.main(["tta", *paths, *options])
    text, err = stdout.getvalue(), stderr.getvalue()
    if "_Hang" in text or "_Hang" in err:
        return BAD, "_Hang: the case ran past the alarm (swallowed by a tool)"
    if code != 0:
        lines = err.splitlines()
        if code != 2 or len(lines) != 1 or "Traceback" in err or not lines[0].startswith("tbd: error: "):
            return BAD, f"exit {code}, stderr {err[-600:]!r}"
        problem = error_problem(lines[0])
        return (BAD, problem) if problem else (ERROR, lines[0])
    for line in err.splitlines():
        problem = error_problem(line) or (None if line.startswith("tbd: could not read ") else
                                          f"exit 0 with stderr {line[:300]!r}")
        if problem:
            return BAD, problem
    problem = text_problem(text)
    if problem is None and mode == "json":
        problem = _json_problem(text)
    elif problem is None and mode == "csv":
        problem = _csv_problem(text)
    elif problem is None and mode == "html" and not out.is_file():
        problem = "--html wrote no page"
    return (BAD, problem) if problem else (OK, "")


def _json_problem(text: str) -> str | None:
    def no_constant(token: str):
        raise ValueError(f"JSON holds {token}")
    try:
        data = json.loads(text, parse_constant=no_constant)
    except ValueError as exc:
        return f"--json output does not load: {str(exc)[:200]}"
    negative = _negative(data, "")
    if negative:
        return f"--json holds a negative number at {negative}"
    try:
        TtaResult.from_dict(data)
    except TbdError as exc:
        return f"--json output does not load again: {exc.one_line()[:300]}"
    return None


#: Fields declared signed (tbd/core/tta_result.py's `Delta`): an accuracy as logged, an epoch index.
_SIGNED = frozenset({"value", "index", "epoch"})


def _negative(value, where: str) -> str | None:
    if isinstance(value, dict):
        return next((n for k, v in value.items() if k not in _SIGNED and (n := _negative(v, f"{where}.{k}"))), None)
    if isinstance(value, list):
        return next((n for i, v in enumerate(value) if (n := _negative(v, f"{where}[{i}]"))), None)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        return f"{where} = {value!r}"
    return None


def _csv_problem(text: str) -> str | None:
    for row in csv.reader(io.StringIO(text)):
        for cell in row:
            try:
                number = float(cell)
            except ValueError:
                continue
            if cell.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
                if cell.strip() in ("nan", "inf", "-inf"):  # as Python formats a figure; "NaN" may be a name
                    return f"CSV cell {cell!r}"
                continue
            if not math.isfinite(number) or number < 0:
                return f"CSV cell {cell!r}"
    return None
