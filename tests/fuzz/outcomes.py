"""Run one mutated file through tbd and judge what came out: a sane result, one clean error, or a failure.

Kineto traces go through the CLI (`tbd analyze PATH --json OUT` with `--sm-clock-mhz 1410` or
`--peak-flops 1e12`, by turns); MXNet and TensorFlow traces
through their reader's `read_trace_file` + `trace_records`, then the same analysis a run gets
(`analysis.assemble.assemble_profile`). Either way:

- "ok": exit 0 (or records returned); the profile round-trips through `Profile.from_dict`,
  which checks every figure (finite, percentages in range, nothing negative); its JSON encodes as
  UTF-8 without NaN; the rendered report has no control character and no nan/inf figure;
- "error": exit code 2 and exactly one line on stderr ("tbd: error: ..."), printable, at most
  `MAX_ERROR_CHARS`, no traceback (readers: a `TbdError` whose one-line message is such a line);
- "bad": anything else (an exception, a traceback, two lines, an absurd figure, a message that
  is not printable), with what went wrong.

Used by tests/fuzz/test_corpus.py and bench/fuzz_corpus.py (which loads this file by path).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
import traceback
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from tbd.analysis.assemble import ProfileInputs, assemble_profile, iteration_log_from_steps
from tbd.analysis.flops.ops import op_flops, precision_of
from tbd.analysis.memory import mxnet as memory_mxnet
from tbd.analysis.peaks import PeakFlops, PeakModel
from tbd.cli import main as cli
from tbd.cli.run_analysis import load_profile
from tbd.core.errors import TbdError
from tbd.core.profile_result import Profile
from tbd.profilers.mxnet import trace as mxnet_trace
from tbd.profilers.tensorflow import trace as tensorflow_trace
from tbd.reports.terminal import render_profile

MAX_ERROR_CHARS = 2000
OK, ERROR, BAD = "ok", "error", "bad"
#: How Python formats a non-finite float ("nan", "inf", "-inf"): a figure no renderer should print.
#: Case-sensitive, so that a kernel named "NaN" or "Infinity" (a name, shown as is) is no finding.
_NON_FIGURE = re.compile(r"(?<![\w\\])-?(nan|inf)(?![\w])")
_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
#: Characters that act on a terminal instead of showing (reports/printable.py escapes them).
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


@dataclass(frozen=True)
class Outcome:
    kind: str  # OK, ERROR or BAD
    detail: str  # the error line, or what was wrong
    seconds: float


def run_case(case, workdir: Path) -> Outcome:
    """Write `case` (a mutate.Case) under `workdir` and judge what tbd makes of it."""
    path = workdir / f"{case.fixture}-{case.index}{case.suffix}"
    path.write_bytes(case.data)
    start = time.perf_counter()
    try:
        if case.reader == "kineto":
            # Both ways to a peak, so that utilizations are computed: the SM model (GPU traces with
            # deviceProperties) and a given FP32 peak (CPU traces too).
            peak = ["--sm-clock-mhz", "1410"] if case.index % 2 else ["--peak-flops", "1e12"]
            kind, detail = _through_cli(path, workdir / f"{case.fixture}-{case.index}.profile.json", peak)
        else:
            kind, detail = _through_reader(case.reader, path)
    except Exception as exc:  # noqa: BLE001 - the point: anything escaping is a finding
        kind, detail = BAD, "".join(traceback.format_exception_only(type(exc), exc)).strip()[-2000:] + \
            " at " + _where(exc)
    finally:
        path.unlink(missing_ok=True)
    return Outcome(kind, detail, time.perf_counter() - start)


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    return " < ".join(f"{Path(f.filename).name}:{f.lineno}" for f in frames[::-1][:4])


def _through_cli(path: Path, out: Path, options: list[str]) -> tuple[str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cli.main(["analyze", str(path), "--json", str(out), *options])
    err = stderr.getvalue()
    if code != 0:
        return _error_line(err, code)
    if err:
        return BAD, f"exit 0 with stderr {err[:300]!r}"
    try:
        profile = load_profile(out)
    except TbdError as exc:
        return BAD, f"the --json profile does not load again: {exc.one_line()[:300]}"
    finally:
        out.unlink(missing_ok=True)
    return _verdict(text_problem(stdout.getvalue()), profile_problem(profile))


def _error_line(err: str, code: int) -> tuple[str, str]:
    lines = err.splitlines()
    if code != 2 or len(lines) != 1 or "Traceback" in err or not lines[0].startswith("tbd: error: "):
        return BAD, f"exit {code}, stderr {err[-600:]!r}"
    return _judged_message(lines[0])


def error_problem(line: str) -> str | None:
    """Why an error line is not a clean one-liner (a control character, a line break, too long); None if it is."""
    if any(ch == "\n" or unicodedata.category(ch) in _HIDDEN for ch in line) or len(line) > MAX_ERROR_CHARS:
        return f"error line not printable or too long ({len(line)} chars): {line[:300]!r}"
    return None


def _judged_message(line: str) -> tuple[str, str]:
    problem = error_problem(line)
    return (BAD, problem) if problem else (ERROR, line)


def _through_reader(reader: str, path: Path) -> tuple[str, str]:
    try:
        if reader == "tensorflow":
            records = tensorflow_trace.trace_records(tensorflow_trace.read_trace_file(path), source=str(path),
                                                     flops_of=op_flops, precision_of=precision_of)
        else:
            dump = _FIXTURES / "mxnet_cpu_hybrid.json.gz" if reader == "mxnet_shapes" else path
            shapes = _shape_log(path) if reader == "mxnet_shapes" else None
            records = mxnet_trace.trace_records(mxnet_trace.read_trace_file(dump), source=str(path), shapes=shapes,
                                                flops_of=op_flops, precision_of=precision_of)
        profile = assemble_profile(ProfileInputs(
            spec={"model": path.name, "framework": reader, "batch": None, "device": records.device_kind},
            environment={}, log=iteration_log_from_steps(records.steps), workload=None, cpu=None, nvml=None,
            trace=records, memory=memory_mxnet.memory_breakdown(None, records), status="complete",
            peaks=PeakModel({p: PeakFlops(1e11, None, "fuzz") for p in ("fp32", "fp64", "fp16", "bf16", "tf32")})))
    except TbdError as exc:
        return _judged_message(f"tbd: error: {exc.one_line()}")
    return _verdict(profile_problem(profile), text_problem(render_profile(profile, width=120)))


def _shape_log(path: Path):
    """The shape log as a run directory reader hands it over (JSON; unreadable JSON is not this reader's)."""
    try:
        return json.loads(path.read_bytes())
    except (ValueError, RecursionError):
        return None


def profile_problem(profile: Profile) -> str | None:
    """Why `profile` is not sane (it does not round-trip through the checked loader, or its JSON
    is not UTF-8 without NaN); None when it is."""
    try:
        text = json.dumps(profile.to_dict(), allow_nan=False, ensure_ascii=False).encode("utf-8")
        Profile.from_dict(json.loads(text))
    except (ValueError, UnicodeEncodeError, TbdError) as exc:
        return f"profile does not round-trip: {type(exc).__name__}: {str(exc)[:300]}"
    return None


def text_problem(text: str) -> str | None:
    """Why a rendered report is not clean (a control character, a nan/inf figure); None when it is."""
    bad_char = next((ch for ch in text if ch != "\n" and unicodedata.category(ch) in _HIDDEN), None)
    if bad_char is not None:
        return f"report prints control character {bad_char!r}"
    found = _NON_FIGURE.search(text)
    if found:
        return f"report prints {found.group(0)!r}: ...{text[max(0, found.start() - 80):found.end() + 20]!r}"
    return None


def _verdict(*problems: str | None) -> tuple[str, str]:
    problem = next((p for p in problems if p), None)
    return (BAD, problem) if problem else (OK, "")
