"""The terminal never crashes: any stream encoding, a closed stdout or stderr, a result of any size (issue 29).

Every command is run as a user runs it (a subprocess of `python -m tbd.cli`) under the encodings that
broke it: PYTHONIOENCODING=ascii and latin-1, and a C locale with and without Python's UTF-8 coercion.
Each must exit 0 with no traceback, write only bytes its stream's encoding holds, and print the same
numbers as under UTF-8 (the layout is rich's either way; only symbols become ASCII).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.text import Text

from tbd.core.profile_result import Profile
from tbd.reports.console import MAX_LISTED, console_text, new_console, plain_table
from tbd.reports.printable import (
    ASCII_TWIN_ERRORS,
    MAX_PRINTED_CHARS,
    ascii_twin,
    encodable_text,
    printable,
    register_ascii_twins,
)
from tbd.reports.terminal import render_profile

TESTS = Path(__file__).resolve().parents[1]
ROOT, FIXTURES = TESTS.parent, TESTS / "fixtures"
RUN_A = FIXTURES / "runs" / "resnet50-test-cpu-b8-threads1"
RUN_B = FIXTURES / "runs" / "resnet50-test-cpu-b8-threads2"
TRACE = FIXTURES / "kineto_cpu_small.json.gz"

COMMANDS = {
    "analyze": ["analyze", str(TRACE)],
    "report": ["report", str(RUN_A / "profile.json")],
    "compare": ["compare", str(RUN_A), str(RUN_B)],
    "gpus": ["gpus"],
    "suite": ["suite"],
}
#: name -> (extra environment, the encoding its stdout then has, the commands it runs)
ENCODINGS = {
    "ascii": ({"PYTHONIOENCODING": "ascii"}, "ascii", [*COMMANDS, "env"]),
    "latin-1": ({"PYTHONIOENCODING": "latin-1"}, "latin-1", ["analyze", "report", "compare", "gpus"]),
    # A C locale as Python leaves it without coercion: an ASCII stream (minimal containers, cron).
    "C, no coercion": ({"LANG": "C", "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}, "ascii",
                       ["analyze", "report"]),
    # A C locale as Python 3.7+ coerces it: UTF-8 (PEP 538/540).
    "C": ({"LANG": "C", "LC_ALL": "C"}, "utf-8", ["report"]),
}
_SPLIT = "=====tbd-test-command {}====="
#: One interpreter runs several commands as `tbd` runs one (console_main: prepare_streams, then main),
#: so the matrix costs a process per encoding, not per command; the exit codes go to stderr's last line.
_CHILD = f"""
import json, sys
from tbd.cli.main import main
from tbd.reports.printable import prepare_streams
prepare_streams()
codes = {{}}
for name, args in json.loads(sys.argv[1]).items():
    sys.stdout.write("{_SPLIT}".format(name) + "\\n"); sys.stdout.flush()
    codes[name] = main(args)
    sys.stdout.flush()
sys.stderr.write("\\n" + json.dumps(codes) + "\\n")
"""


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "LANG", "LC_ALL", "LC_CTYPE",
                                                           "PYTHONUTF8", "PYTHONCOERCECLOCALE", "NO_COLOR")}
    return {**env, "OMP_NUM_THREADS": "1", "COLUMNS": "120", **extra}


def _tbd(args: list[str], extra: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tbd.cli", *args], cwd=ROOT, env=_env(extra), capture_output=True,
                          timeout=timeout)


def _run_commands(names: list[str], extra: dict[str, str], codec: str) -> tuple[dict[str, str], dict[str, int], str]:
    """Each command's stdout (decoded strictly in `codec`), exit code, and the whole stderr."""
    every = {**COMMANDS, "env": ["env"]}
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps({n: every[n] for n in names})], cwd=ROOT,
                          env=_env(extra), capture_output=True, timeout=300)
    stderr = done.stderr.decode(codec, errors="replace")
    assert done.returncode == 0, stderr
    codes = json.loads(stderr.strip().splitlines()[-1])
    text = done.stdout.decode(codec)  # raises if a byte lies outside the stream's encoding
    pieces = re.split(r"=====tbd-test-command (\w+)=====\n", text)[1:]
    return dict(zip(pieces[::2], pieces[1::2])), codes, stderr


def _numbers(text: str) -> list[str]:
    return re.findall(r"\d+(?:[.,]\d+)*", text)


@pytest.fixture(scope="module")
def utf8_out() -> dict[str, str]:
    """Each command's stdout under UTF-8, the reference the other encodings are held to."""
    out, codes, stderr = _run_commands(list(COMMANDS), {"PYTHONIOENCODING": "utf-8"}, "utf-8")
    assert set(codes.values()) == {0}, stderr
    assert "·" in out["report"] and "—" in out["gpus"] and "─" in out["report"]  # the symbols that broke it
    return out


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_every_encoding_exits_0_with_the_same_numbers(utf8_out, encoding):
    extra, codec, names = ENCODINGS[encoding]
    out, codes, stderr = _run_commands(names, extra, codec)
    assert codes == {name: 0 for name in names}, stderr
    assert "Traceback" not in stderr
    for name in names:
        if name == "env":
            continue  # what `tbd env` finds is the machine's, not a fixture's: exit 0 and its bytes are the test
        assert _numbers(out[name]) == _numbers(utf8_out[name]), name
        assert len(out[name].splitlines()) == len(utf8_out[name].splitlines()), name
    if codec == "ascii":
        assert "--" in out["report"]  # "—" and the rules as ASCII, not "?" or an escape
        assert not re.search(r"\\(u|x)[0-9a-f]", "".join(out.values()))


def test_an_error_line_under_ascii_is_one_line_and_escaped(tmp_path):
    missing = tmp_path / "prof\u00efl\u4e2d.json"  # "ï" has an ASCII base letter, "中" does not
    done = _tbd(["report", str(missing)], ENCODINGS["ascii"][0])
    assert done.returncode == 2
    err = done.stderr.decode("ascii")
    assert err.startswith("tbd: error: ") and err.count("\n") == 1
    assert "profil\\u4e2d.json" in err


def _closed(args: list[str], redirect: str) -> subprocess.CompletedProcess:
    line = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "tbd.cli", *args])
    return subprocess.run(["bash", "-c", f"{line} {redirect}"], cwd=ROOT, env=_env({}), capture_output=True,
                          timeout=120)


def test_a_closed_stdout_still_writes_the_json_file_and_exits_0(tmp_path):
    out = tmp_path / "trace.json"
    done = _closed(["analyze", str(TRACE), "--json", str(out)], ">&-")
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert done.stderr == b""
    assert json.loads(out.read_text())["status"] in ("complete", "partial")


def test_closed_stdout_and_stderr_keep_the_commands_own_exit_code():
    assert _closed(["report", "/nonexistent/profile.json"], ">&- 2>&-").returncode == 2


def test_a_reader_that_goes_away_is_not_an_error():
    done = _closed(["report", str(RUN_A / "profile.json")], "| head -1; exit ${PIPESTATUS[0]}")
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert done.stdout.decode().startswith("tbd profile")
    assert done.stderr == b""


# In-process: the ASCII twins, the alignment they keep, the caps.

def test_ascii_twins():
    cases = {"·": "-", "—": "--", "–": "-", "…": "...", "±": "+/-", "µ": "u", "×": "x", "→": "->", "─": "-",
             "━": "-", "│": "|", "┼": "+", "═": "=", "é": "e", "中": "\\u4e2d", "\udcff": "\\udcff", "🙂": "\\U0001f642"}
    assert {ch: ascii_twin(ch) for ch in cases} == cases


def _through(text: str, encoding: str) -> str:
    register_ascii_twins()  # as prepare_streams does, leaving pytest's own streams as they are
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding, errors=ASCII_TWIN_ERRORS, write_through=True)
    stream.write(text)
    return raw.getvalue().decode(encoding)


def test_a_wider_twin_takes_its_room_from_the_next_gap():
    # "—" (1 column) becomes "--" (2): the gap of two spaces after it gives one back, so "c" stays at column 7.
    assert encodable_text("a — b  c\n", "ascii") == "a -- b c\n"
    # "…" and "±" owe 2 each: the first gap (3 spaces) gives 2, the second (6) gives the other 2.
    assert encodable_text("fwd…   1 ± 2      7", "ascii") == "fwd... 1 +/- 2    7"
    assert encodable_text("x—y", "ascii") == "x--y"  # no gap on the line: the line is one column longer
    assert encodable_text("1 ± 2 µs — ok", "latin-1") == "1 ± 2 µs -- ok"  # latin-1 keeps what it holds


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(), st.sampled_from(["ascii", "latin-1", "cp1252"]))
def test_any_text_becomes_text_the_stream_can_encode(text, encoding):
    register_ascii_twins()
    out = encodable_text(text, encoding)
    out.encode(encoding)  # never raises
    assert out.count("\n") == text.count("\n")  # lines are kept, however their characters change
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding, errors=ASCII_TWIN_ERRORS, newline="")
    stream.write(text)
    stream.flush()
    written = raw.getvalue().decode(encoding)
    if _encodes(text, encoding):
        assert written == text
    else:  # the table codecs (cp1252) name themselves "charmap" to the handler, which then writes ASCII
        assert written == (out if encoding != "cp1252" else text[:_first_bad(text, encoding)] +
                           encodable_text(text[_first_bad(text, encoding):], "ascii"))


def _first_bad(text: str, encoding: str) -> int:
    return next(i for i, ch in enumerate(text) if not _encodes(ch, encoding))


def _encodes(text: str, encoding: str) -> bool:
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return False
    return True


def test_the_twins_keep_a_tables_columns_where_rich_put_them():
    table = plain_table()
    for header in ("Name", "Time", "Last"):
        table.add_column(header, justify="left" if header == "Name" else "right")
    table.add_row("conv · fwd…", "1.2 ± 0.3 µs", "7")
    table.add_row("—", "12.5 ms", "8")
    utf8 = console_text(new_console(60, False), [table])
    assert utf8.splitlines()[2] == "conv · fwd…   1.2 ± 0.3 µs      7"  # rich's layout, the reference
    assert _through(utf8, "ascii").splitlines() == [
        "Name                  Time   Last",
        "---------------------------------",
        "conv - fwd... 1.2 +/- 0.3 us    7",
        "--                 12.5 ms      8",
    ]


def test_printable_caps_a_long_name_and_says_its_length():
    name = "m" * 300_000
    assert printable(name) == "m" * MAX_PRINTED_CHARS + "… [300,000 characters]"
    assert printable("\x1b[2J" * 10, max_chars=8) == "\\x1b[2J\\x1b[2J… [40 characters]"


def _profile() -> Profile:
    return Profile.from_dict(json.loads((RUN_A / "profile.json").read_text()))


def test_a_profile_of_100k_notes_renders_in_seconds_with_the_cap_line():
    profile = dataclasses.replace(_profile(), notes=[f"note {i}: " + "x" * 1000 for i in range(100_000)])
    start = time.perf_counter()
    text = render_profile(profile, width=120)
    took = time.perf_counter() - start
    assert took < 5, took
    assert f"… and {100_000 - MAX_LISTED:,} more notes: every one is in the JSON output (--json)" in text
    assert f"note {MAX_LISTED - 1}:" in text and f"note {MAX_LISTED}:" not in text
    assert len(text) < 100 * 1000  # 30 notes, one line each at most 120 wide, and the report's own sections


def test_tbd_report_of_a_profile_with_many_long_notes(tmp_path):
    data = json.loads((RUN_A / "profile.json").read_text())
    # Within what the loader accepts (it refuses larger results in one line): 200 notes of 3,000 characters.
    data["notes"] = [f"note {i}: " + "y" * 3000 for i in range(200)]
    data["spec"]["model"] = "m" * 3000
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(data))
    start = time.perf_counter()
    done = _tbd(["report", str(path)], {"PYTHONIOENCODING": "utf-8"})
    assert time.perf_counter() - start < 20
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    text = done.stdout.decode()
    assert f"… and {200 - MAX_LISTED:,} more notes" in text
    joined = re.sub(r"\s+", "", text)  # a capped name wraps like any other text
    assert "m…[3,000characters]" in joined and "y…[3,009characters]" in joined
    assert len(text) < 200_000


def test_a_plain_renderer_line_is_data_not_markup():
    assert console_text(new_console(40, False), [Text(printable("[bold]x[/bold] \x1b[2J"))]).strip() == \
        "[bold]x[/bold] \\x1b[2J"
