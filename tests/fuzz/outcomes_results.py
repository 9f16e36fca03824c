"""Judge a mutate_results.Case: lay out its folder, run its command, and say "ok", "error" or "bad".

The contract is tests/fuzz/outcomes.py's (text_problem, error_problem reused), plus:
- no negative percentage printed ("-3.1 %"; a comparison's deltas excepted), no NaN/Infinity
  token in --json output;
- CSV: no cell that a spreadsheet runs as a formula (starts with = + - @, tab or CR and is no number);
- HTML: no script element, no on* attribute, no javascript: URL, no tag the clean page lacks;
- figures: exit 0 leaves at least one file, or a note;
- terminal (subprocess): exit 0 or one clean error line, no traceback, the output encodable;
- options: an edge value that no device, run or generator has (mutate_results.MUST_REFUSE) is
  refused with one line; for commands that would start a run, their parser alone is judged.
Each case runs under an address-space cap (a symlink to /dev/zero must not eat the machine).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from html.parser import HTMLParser
from pathlib import Path

from mutate_results import MUST_REFUSE
from outcomes import BAD, ERROR, OK, Outcome, _error_line, _where, error_problem, text_problem

from tbd.cli import main as cli
from tbd.core.comparison import Comparison
from tbd.core.errors import TbdError
from tbd.core.sweep_result import Sweep, SweepPoint

_NEGATIVE_PERCENT = re.compile(r"(?<![\w.+-])-\d+(?:\.\d+)?\s?%")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
ADDRESS_SPACE_HEADROOM = 3 << 30
CASE_TIMEOUT = 60.0
ROOT = Path(__file__).resolve().parent.parent.parent
_clean_pages: dict = {}


def made_seeds(workdir: Path) -> dict[str, dict[str, bytes]]:
    """The documents tbd makes itself: a profile by `tbd analyze` of a committed trace, a saved
    comparison of the two committed CPU runs, a sweep (one point ok, one OOM)."""
    fixtures = ROOT / "tests" / "fixtures"
    out = workdir / "seeds"
    out.mkdir(parents=True, exist_ok=True)
    for argv in (["analyze", str(fixtures / "kineto_cuda_synthetic.json"), "--sm-clock-mhz", "1410",
                  "--json", str(out / "analyzed.json"), "--force"],
                 ["compare", str(fixtures / "runs" / "resnet50-test-cpu-b8-threads1"),
                  str(fixtures / "runs" / "resnet50-test-cpu-b8-threads2"), "--out", str(out / "cmp.json"), "--force"]):
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = cli.main(argv)
        if code != 0:
            raise RuntimeError(f"seed `tbd {' '.join(argv)}` failed ({code}): {err.getvalue()[-500:]}")
    point = SweepPoint(8, "ok", None, "b8", 1397.0, "images/s", 0.0057, None, 3.7, 50.0, True,
                       {"weights": 523848, "allocator_peak": 2624320})
    oom = SweepPoint(16, "oom", "batch 16 ran out of memory on cpu", None, None, None, None, None, None, None, None)
    sweep = Sweep("resnet50", "pytorch", "cpu", "AMD EPYC", "test", "max", [point, oom], 8, 16)
    assert Comparison.from_dict(json.loads((out / "cmp.json").read_text()))
    return {"profile_analyzed": {"profile.json": (out / "analyzed.json").read_bytes()},
            "comparison": {"cmp.json": (out / "cmp.json").read_bytes()},
            "sweep": {"sweep.json": json.dumps(sweep.to_dict()).encode()}}


class _Hang(Exception):  # the name bench/fuzz_corpus.py counts as "hang"
    pass


def _alarm(signum, frame):
    raise _Hang(f"the case ran past {CASE_TIMEOUT} s")


def run_case(case, workdir: Path) -> Outcome:
    """Lay `case` out under `workdir`, run it and judge it. Without a timer already running (the
    bench sets its own), a case that blocks (a FIFO read) is stopped after CASE_TIMEOUT seconds."""
    own_timer = signal.getitimer(signal.ITIMER_REAL)[0] == 0
    if own_timer:
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, CASE_TIMEOUT)
    try:
        return _run_case(case, workdir)
    finally:
        if own_timer:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def _run_case(case, workdir: Path) -> Outcome:
    folder = workdir / f"{case.kind}-{case.index}"
    _lay_out(folder, case.files)
    argv = [a.replace("{dir}", str(folder)).replace("{out}", str(workdir / f"out-{case.index}")) for a in case.argv]
    start = time.perf_counter()
    limit = resource.getrlimit(resource.RLIMIT_AS)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (_address_space() + ADDRESS_SPACE_HEADROOM, limit[1]))
        if case.mode == "subprocess":
            kind, detail = _through_subprocess(argv, dict(case.env))
        elif case.mode == "parse":
            kind, detail = _through_parser(argv, case.extra["value"])
        else:
            kind, detail = _through_cli(case, argv)
    except Exception as exc:  # noqa: BLE001 - the point: anything escaping is a finding
        kind, detail = BAD, "".join(traceback.format_exception_only(type(exc), exc)).strip()[-600:] + \
            " at " + _where(exc)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, limit)
        shutil.rmtree(folder, ignore_errors=True)
        for p in workdir.glob(f"out-{case.index}*"):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    return Outcome(kind, detail, time.perf_counter() - start)


def _address_space() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 8 << 30


def _lay_out(folder: Path, files) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, data in files:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if data == "@delete":
            continue
        if data == "@fifo":
            os.mkfifo(path)
        elif data == "@dir":
            path.mkdir()
        elif isinstance(data, str) and data.startswith("@link:"):
            path.symlink_to(data[len("@link:"):])
        else:
            path.write_bytes(data)


def _through_cli(case, argv: list[str]) -> tuple[str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cli.main(argv)
    err, out = stderr.getvalue(), stdout.getvalue()
    if case.kind == "options" and case.extra["value"] in MUST_REFUSE and code == 0:
        return BAD, f"accepted {case.extra['option']} {case.extra['value']} (exit 0)"
    if code != 0:
        return _error_line(err, code)
    if "Traceback" in err or "Warning" in err:
        return BAD, f"exit 0 with stderr {err[-300:]!r}"
    return _judge_output(case, argv, out)


def _judge_output(case, argv: list[str], out: str) -> tuple[str, str]:
    if "--json" in argv:
        at = argv.index("--json") + 1
        saved = Path(argv[at]) if at < len(argv) and not argv[at].startswith("-") else None  # analyze --json OUT
        try:
            json.loads(saved.read_text(encoding="utf-8") if saved else out, parse_constant=_no_constant)
        except (ValueError, OSError) as exc:
            return BAD, f"--json output is not strict JSON: {str(exc)[:200]}"
        if not saved:
            return OK, ""
    if "--csv" in argv:
        return _verdict(_csv_text_problem(out), csv_problem(out))
    if "--html" in argv:
        page = Path(argv[argv.index("--html") + 1])
        if not page.is_file():
            return BAD, "exit 0 without the --html page"
        return _verdict(html_problem(page.read_text(encoding="utf-8", errors="replace"), case))
    if "--figures" in argv:
        folder = Path(argv[argv.index("--figures") + 1])
        if not (folder.is_dir() and any(folder.iterdir())) and "figure" not in out:
            return BAD, "exit 0 without figures and without a note"
    negative = None if argv[0] == "compare" or "cmp.json" in " ".join(argv) else negative_percent(out)
    return _verdict(text_problem(out), negative)


def _no_constant(token):
    raise ValueError(f"{token} token")


def negative_percent(text: str) -> str | None:
    found = _NEGATIVE_PERCENT.search(text)
    return f"negative percentage printed: ...{text[max(0, found.start() - 60):found.end() + 10]!r}" if found else None


def _csv_text_problem(text: str) -> str | None:
    """text_problem for CSV: a tab or a bidi mark inside a cell is data; other controls (ESC, NUL) are not."""
    return text_problem(text.replace("\t", " ").translate(_CSV_DATA))


_CSV_DATA = {ord(ch): " " for ch in "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff"}


def csv_problem(text: str) -> str | None:
    for row in csv.reader(io.StringIO(text)):
        for cell in row:
            if cell.startswith(_FORMULA_START) and not _is_number(cell):
                return f"CSV cell is a formula: {cell[:80]!r}"
    return None


def _is_number(cell: str) -> bool:
    try:
        return math.isfinite(float(cell))
    except ValueError:
        return False


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.problems: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        if tag == "script" and not any(k == "type" and v == "application/json" for k, v in attrs):
            self.problems.append("a script element")
        for key, value in attrs:
            if key.startswith("on"):
                self.problems.append(f"an {key}= handler on <{tag}>")
            if key in ("href", "src", "action", "formaction") and (value or "").strip().lower().startswith(
                    "javascript:"):
                self.problems.append(f"a javascript: URL in <{tag} {key}>")


def _tags(page: str) -> _Tags:
    parser = _Tags()
    parser.feed(page)
    parser.close()
    return parser


def html_problem(page: str, case) -> str | None:
    found = _tags(page)
    if found.problems:
        return "injected element in the page: " + "; ".join(sorted(set(found.problems)))[:300]
    if case.kind == "names":
        clean = _clean_tags(case)
        extra = found.tags - clean if clean is not None else set()
        if extra:
            return f"page has tags the clean page lacks: {sorted(extra)}"
    return None


def _clean_tags(case) -> set | None:
    key = (case.fixture, case.argv)
    if key not in _clean_pages:
        with tempfile.TemporaryDirectory(prefix="tbd-fuzz-clean-") as tmp:
            folder = Path(tmp)
            _lay_out(folder / "d", case.extra["clean"])
            argv = [a.replace("{dir}", str(folder / "d")).replace("{out}", str(folder / "o")) for a in case.argv]
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                code = cli.main(argv)
            page = Path(argv[argv.index("--html") + 1])
            _clean_pages[key] = _tags(page.read_text()).tags if code == 0 and page.is_file() else None
    return _clean_pages[key]


def _through_parser(argv: list[str], value: str) -> tuple[str, str]:
    try:
        cli.build_parser(argv[0]).parse_args(argv)
    except TbdError as exc:
        problem = error_problem(f"tbd: error: {exc.one_line()}")
        return (BAD, problem) if problem else (ERROR, exc.one_line())
    except SystemExit as exc:
        return BAD, f"parser exited {exc.code} instead of raising a TbdError"
    if value in MUST_REFUSE:
        return BAD, f"parser accepted {argv[-1] if '=' in argv[-1] else ' '.join(argv[-2:])}"
    return OK, ""


def _through_subprocess(argv: list[str], env: dict) -> tuple[str, str]:
    closed = env.pop("@stdout", None) == "closed"
    full = {**os.environ, **env, "OMP_NUM_THREADS": "1"}
    for name in ("PYTHONIOENCODING", "PYTHONUTF8", "LANG", "LC_ALL", "LC_CTYPE"):
        if name not in env:
            full.pop(name, None)
    command = [sys.executable, "-c", "from tbd.cli.main import console_main; console_main()", *argv]
    proc = subprocess.run(command, env=full, capture_output=not closed, timeout=120, cwd=ROOT,
                          stdout=None if not closed else subprocess.DEVNULL,
                          preexec_fn=(lambda: os.close(1)) if closed else None)
    err = (proc.stderr or b"").decode("utf-8", "replace")
    if proc.returncode != 0:
        return _error_line(err, proc.returncode)
    if "Traceback" in err or "Error" in err:
        return BAD, f"exit 0 with stderr {err[-300:]!r}"
    out = proc.stdout or b""
    c_locale = env.get("LC_ALL") == "C" and env.get("PYTHONUTF8") == "0"  # else UTF-8 mode (PEP 540)
    encoding = env.get("PYTHONIOENCODING", "ascii" if c_locale else "utf-8")
    try:
        text = out.decode(encoding)
    except UnicodeDecodeError as exc:
        return BAD, f"stdout is not {encoding}: {exc}"
    if "--html" in argv and not Path(argv[argv.index("--html") + 1]).is_file():
        return BAD, "exit 0 without the --html page"
    return _verdict(None if "--json" in argv or "--csv" in argv else text_problem(text))


def _verdict(*problems: str | None) -> tuple[str, str]:
    problem = next((p for p in problems if p), None)
    return (BAD, problem) if problem else (OK, "")

