"""The raw records `tbd report RUN` re-analyses (spec.json, iterations.json, raw/*.json) are checked
against their declaration (tbd/core/raw_records.py) and read the one guarded way (tbd/core/rundir.py).

Issue 29, before: 383 tracebacks in 3,862 mutated records (`AttributeError: 'list' object has no
attribute 'get'` for a spec.json holding a list, OverflowError for a huge integer in
iterations.json), reports printing NaN (a NaN batch), a hang on a FIFO named iterations.json and
MemoryError on a symlink to /dev/zero. Now each is one line naming the file and the key.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import time
from pathlib import Path

import pytest
from testpaths import FIXTURES

from tbd.cli.main import main
from tbd.cli.run_analysis import profile_from_run_dir
from tbd.core import raw_records, rundir
from tbd.core.errors import ResultFormatError
from tbd.reports.renderers import renderer_for

H100_RUN = FIXTURES / "h100" / "resnet50-b64"  # a real run's raw records (`tbd profile` on an H100)
CPU_RUN = FIXTURES / "runs" / "resnet50-test-cpu-b8-threads2"  # a CPU run's, with raw/memory.json


@contextlib.contextmanager
def _deadline(seconds: int):
    """Fail (instead of hanging CI) when the body runs longer than `seconds`."""
    def expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s: a read blocked")
    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _copy(src: Path, tmp_path: Path) -> Path:
    """The run's raw records without its trace (the trace reader has its own tests) or profile.json."""
    run = tmp_path / "run"
    shutil.copytree(src, run, ignore=shutil.ignore_patterns("*.gz", "profile.json", "workload.log"))
    return run


def _mutate(run: Path, name: str, path: str, value) -> None:
    file = run / name
    data = json.loads(file.read_text())
    keys = [int(k) if k.isdigit() else k for k in path.split(".")] if path else []
    if not keys:
        data = value
    else:
        parent = data
        for key in keys[:-1]:
            parent = parent[key]
        parent[keys[-1]] = value
    file.write_text(json.dumps(data))  # json.dumps writes NaN and Infinity as the tokens Python's json reads


def test_the_real_records_meet_their_declarations():
    for run in (H100_RUN, CPU_RUN):
        for name in raw_records.RECORDS:
            if (run / name).exists():
                assert raw_records.read_record(run, name) == json.loads((run / name).read_text())


# (file, key, value, what the one line says after "<file>: ")
BAD = [
    (rundir.SPEC, "", [1, 2], "the file has type list, expected an object"),
    (rundir.SPEC, "batch", float("nan"), "key 'batch' has type float, expected an integer"),
    (rundir.SPEC, "batch", 10**400, "key 'batch' is an integer of 401 digits, outside [1, 1.67772e+07]"),
    (rundir.SPEC, "batch", -1, "key 'batch' is -1, outside [1, 1.67772e+07]"),
    (rundir.SPEC, "framework", [], "key 'framework' has type list, expected a string"),
    (rundir.SPEC, "peak_flops", 5e-324, "key 'peak_flops' is 4.94066e-324, outside [1, 1e+22]"),
    (rundir.SPEC, "model", "m" * 300_000, "key 'model' holds 300,000 characters, more than 4,096"),
    (rundir.SPEC, "model", None, "key 'model' is null"),
    (rundir.ITERATIONS, "times_ns", -1, "key 'times_ns' has type int, expected a list"),
    (rundir.ITERATIONS, "times_ns.3", 10**30, "key 'times_ns[3]' is an integer of 31 digits, beyond any real value"),
    (rundir.ITERATIONS, "times_ns.3", float("inf"), "key 'times_ns[3]' has type float, expected an integer"),
    (rundir.ITERATIONS, "timing_window", [5], "key 'timing_window' is [5], expected [first, last]"),
    (rundir.ITERATIONS, "timing_window_ns", -1, "key 'timing_window_ns' is -1, outside >= 1"),
    (rundir.ITERATIONS, "warmup", 2**40, "key 'warmup' is 1.09951e+12, outside [0, 2.14748e+09]"),
    (rundir.ITERATIONS, "timing_window_samples", 5e-324, "key 'timing_window_samples' is 4.94066e-324"),
    (rundir.CPU, "cores", float("inf"), "key 'cores' has type float, expected an integer"),
    (rundir.CPU, "busy_s.0", float("nan"), "key 'busy_s[0]' is nan (NaN or infinite)"),
    (rundir.CPU, "wall_ns", 0, "key 'wall_ns' is 0, outside >= 1"),
    (rundir.NVML, "utilization_pct.0", 250.0, "key 'utilization_pct[0]' is 250, outside [0, 100]"),
    (rundir.ENVIRONMENT, "gpu", [], "key 'gpu' has type list, expected an object"),
    (rundir.ENVIRONMENT, "gpu.sm_count", 20_000_000, "key 'gpu.sm_count' is 2e+07, outside [1, 1.04858e+06]"),
    (rundir.ENVIRONMENT, "gpu.compute_capability", [9], "key 'gpu.compute_capability' is [9], expected [major"),
    (rundir.ENVIRONMENT, "gpu.vendor", 3, "key 'gpu.vendor' has type int, expected a string"),
    (rundir.ENVIRONMENT, "versions.threads", float("inf"), "key 'versions.threads' has type float"),
    (rundir.ENVIRONMENT, "cpu.isa", {"a": 1}, "key 'cpu.isa' has type dict, expected a list"),
    (rundir.ENVIRONMENT, "cpu.extra", {"a": [float("nan")]}, "key 'cpu.extra.a[0]' is nan (NaN or infinite)"),
    (rundir.ENVIRONMENT, "cpu.extra", 10**400, "key 'cpu.extra' is an integer of 401 digits"),
    (rundir.STATUS, "", "complete", "the file has type str, expected an object"),
    (rundir.WORKLOAD, "samples_per_step", {}, "key 'samples_per_step' has type dict, expected a number"),
    (rundir.WORKLOAD, "samples_per_step", 0, "key 'samples_per_step' is 0, outside [1e-06"),
    (rundir.GEMM, "flops_per_s", 10**400, "key 'flops_per_s' is an integer of 401 digits, outside [0, 1e+22]"),
    (rundir.MEMORY_CROSS_CHECK, "maps_to.parameter", float("nan"), "key 'maps_to.parameter' has type float"),
    (rundir.QUALITY, "clock_start", 7, "key 'clock_start' has type int, expected an object"),
    (rundir.QUALITY, "repeats.0", {}, "missing key 'repeats[0].first'"),
    (rundir.QUALITY, "repeats.0.cpu.busy_s.0", "x", "key 'repeats[0].cpu.busy_s[0]' has type str"),
    (rundir.QUALITY, "repeats.0.load.others_top", 10**30, "key 'repeats[0].load.others_top' has type int"),
    (rundir.QUALITY, "repeats.1.load.others_cpu_s", None, "key 'repeats[1].load.others_cpu_s' is null"),
]


@pytest.mark.parametrize("name, key, value, message", BAD, ids=[f"{b[0]}:{b[1]}={str(b[2])[:12]}" for b in BAD])
def test_a_bad_raw_record_is_one_line_naming_the_file_and_the_key(tmp_path, name, key, value, message):
    run = _copy(H100_RUN, tmp_path)
    _mutate(run, name, key, value)
    with pytest.raises(ResultFormatError) as err:
        profile_from_run_dir(run)
    line = err.value.one_line()
    assert line.startswith(f"{run / name}: {message}"), line
    assert "\n" not in line and len(line) < 400


def test_tbd_report_says_it_in_one_line_and_exits_2(tmp_path, capsys):
    run = _copy(H100_RUN, tmp_path)
    _mutate(run, rundir.SPEC, "", [1, 2])  # before: AttributeError: 'list' object has no attribute 'get'
    code = main(["report", str(run)])
    out, err = capsys.readouterr()
    assert code == 2 and err.startswith("tbd: error: ") and err.count("\n") == 1, err
    assert f"{run / rundir.SPEC}: the file has type list" in err and "Traceback" not in err


def test_the_records_as_written_still_give_the_profile(tmp_path):
    run = _copy(CPU_RUN, tmp_path)
    profile = profile_from_run_dir(run)
    assert profile.spec["batch"] == 8 and profile.environment["cpu"]["cores_logical"] == 2


def test_a_run_missing_its_optional_records_still_works(tmp_path):
    # A run stopped early: only spec.json and the records of the stages it reached.
    run = _copy(H100_RUN, tmp_path)
    for name in (rundir.CPU, rundir.NVML, rundir.GEMM, rundir.QUALITY, rundir.MEMORY_CROSS_CHECK, rundir.WORKLOAD,
                 rundir.STATUS, rundir.ITERATIONS):
        (run / name).unlink()
    profile = profile_from_run_dir(run)
    assert profile.status == "partial" and profile.iterations is None


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def _urandom(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/urandom")


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize("name", [rundir.ITERATIONS, rundir.STATUS, rundir.SPEC, rundir.CPU])
@pytest.mark.parametrize("make, kind", [(_fifo, "a FIFO"), (_zero, "a character device"),
                                        (_urandom, "a character device"), (_folder, "a folder")])
def test_a_file_that_is_no_regular_file_is_refused_at_once(tmp_path, name, make, kind):
    # Before: a FIFO hung `tbd report RUN` (killed at 20 s); /dev/zero raised MemoryError.
    run = _copy(H100_RUN, tmp_path)
    make(run / name)
    start = time.monotonic()
    with _deadline(20), pytest.raises(ResultFormatError) as err:
        profile_from_run_dir(run)
    assert time.monotonic() - start < 5
    assert err.value.one_line().startswith(f"{run / name}: not a regular file ({kind})")


def test_a_record_larger_than_its_cap_is_refused_before_reading(tmp_path, monkeypatch):
    run = _copy(H100_RUN, tmp_path)
    monkeypatch.setattr(rundir, "DEFAULT_RECORD_BYTES", 1000)
    with pytest.raises(ResultFormatError, match=r"raw/environment.json: 1,216 bytes is far too large for a "
                                                r"environment \(at most 1,000\)"):
        profile_from_run_dir(run)


@pytest.mark.parametrize("text, message", [
    ("[" * 100 + "]" * 100, "not a runner status (JSON nested too deeply)"),
    ("[" * 100_000 + "]" * 100_000, "not a runner status (JSON nested too deeply)"),
    ('{"state": "\\ud800"}', "not valid JSON text (a lone UTF-16 surrogate escape)"),
    ('{"state": "complete"', "not valid JSON (runner status)"),
    ("\x00\xff\xfe", "not valid JSON (runner status)"),
])
def test_a_record_that_is_not_json_is_refused(tmp_path, text, message):
    run = _copy(H100_RUN, tmp_path)
    (run / rundir.STATUS).write_bytes(text.encode("utf-8", "surrogatepass"))
    with pytest.raises(ResultFormatError, match=re.escape(f"{run / rundir.STATUS}: {message}")):
        profile_from_run_dir(run)


def test_a_bom_and_crlf_are_still_json(tmp_path):
    run = _copy(H100_RUN, tmp_path)
    (run / rundir.STATUS).write_bytes(b'\xef\xbb\xbf{"state": "complete",\r\n "stage": "gemm", "message": ""}\r\n')
    assert profile_from_run_dir(run).status == "complete"


HOSTILE = [10**400, 2**70, float("nan"), float("inf"), -1, -1e300, 1e308, 5e-324, 0, "x", [], {}, None, True,
           "\x1b[31m$\\undefinedcmd"]


def _leaves(obj, path=()):
    yield path
    items = obj.items() if isinstance(obj, dict) else enumerate(obj[:2]) if isinstance(obj, list) else ()
    for key, value in items:
        yield from _leaves(value, (*path, key))


def test_seeded_mutations_of_every_record_give_a_profile_or_one_line(tmp_path):
    """A seeded sample of the adversary's pass (every key of every raw record, each hostile value): the
    analysis gives a profile whose text and JSON hold no NaN or infinity, or a ResultFormatError naming
    the file; never another exception. (The whole pass, 8,925 cases over both fixtures, gave 0.)"""
    rng = random.Random(29)
    cases = [(name, path, value) for name in sorted(raw_records.RECORDS) if (H100_RUN / name).exists()
             for path in _leaves(json.loads((H100_RUN / name).read_text())) for value in HOSTILE]
    base = _copy(H100_RUN, tmp_path)
    built = refused = 0
    for i, (name, path, value) in enumerate(rng.sample(cases, 120)):
        run = tmp_path / f"r{i}"
        shutil.copytree(base, run)
        _mutate(run, name, ".".join(map(str, path)), value)
        try:
            profile = profile_from_run_dir(run)
        except ResultFormatError as exc:
            assert exc.one_line().startswith(str(run / name)) and "\n" not in exc.one_line(), (name, path, value)
            refused += 1
            continue
        json.dumps(profile.to_dict(), allow_nan=False)  # raises on NaN or infinity
        words = renderer_for(profile).render("text").lower().replace("%", " ").split()
        assert not {"nan", "inf", "-inf"} & set(words), (name, path, value)
        built += 1
    assert built >= 10 and refused >= 50, (built, refused)  # both outcomes sampled
