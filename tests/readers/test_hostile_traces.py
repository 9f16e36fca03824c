"""Kineto traces with one hostile change each: a clean result with a note or a null with a reason, or one line.

Each test is a finding of the fuzzing pass (issue 12, "Hardened inputs"): the synthetic CUDA
fixture (tests/fixtures/README.md) with one thing broken, read as `tbd analyze` reads it. The
comment on each says what happened before.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
from testpaths import FIXTURES

from tbd.analysis.assemble import ABOVE_PEAK, ABOVE_PEAK_OVERALL, NEVER_BUSY
from tbd.analysis.flops.ops import op_flops, precision_of
from tbd.cli import main as cli
from tbd.cli.run_analysis import load_profile, profile_from_trace
from tbd.core.records import SHAPES_UNREADABLE
from tbd.profilers.kineto.reader import read_trace_file, trace_records
from tbd.profilers.traces.names import MAX_NAME_CHARS
from tbd.reports.terminal import render_profile

CUDA = FIXTURES / "kineto_cuda_synthetic.json"
SGEMM = "volta_sgemm_64x32_sliced1x4_nn"  # kernel 1, launched by aten::addmm in aten::linear


def _trace(field: str, value, change) -> dict:
    """The fixture with `change(event)` applied to every event whose `field` is `value`."""
    trace = json.loads(CUDA.read_text())
    for event in trace["traceEvents"]:
        if event.get(field) == value:
            change(event)
    return trace


def _write(tmp_path: Path, trace: dict | str | bytes, name: str = "trace.json") -> Path:
    path = tmp_path / name
    data = trace if isinstance(trace, (str, bytes)) else json.dumps(trace)
    path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    return path


def _analyze(path: Path, *extra: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["analyze", str(path), "--sm-clock-mhz", "1410", *extra])
    return code, out.getvalue(), err.getvalue()


def _set_args(key: str, value):
    return lambda event: event["args"].__setitem__(key, value)


def test_negative_kernel_durations_count_as_zero_and_flop_util_is_null_with_the_reason(tmp_path):
    # Before: ValueError "device was never busy in the window" escaped as a traceback.
    trace = _trace("cat", "kernel", lambda e: e.__setitem__("dur", -5.0))
    profile = profile_from_trace(_write(tmp_path, trace), sm_clock_mhz=1410)
    flop = profile.metrics.flop_util_pct
    assert flop.value is None and flop.reason == NEVER_BUSY
    assert profile.metrics.gpu_busy_pct.value == 0.0
    assert "9 events have a negative duration (a clock fault or a corrupt trace): each counted as 0 ns" in profile.notes
    assert all(row.time_s == 0 for row in profile.kernels)


def test_negative_op_durations_count_as_zero(tmp_path):
    trace = _trace("name", "aten::linear", lambda e: e.__setitem__("dur", -4.0))
    records = trace_records(read_trace_file(_write(tmp_path, trace)), "t", flops_of=op_flops,
                            precision_of=precision_of)
    linear = records.ops.name == "aten::linear"
    assert (records.ops.end_ns[linear] - records.ops.start_ns[linear]).tolist() == [0]
    assert any("1 events have a negative duration" in n for n in records.notes)


def test_a_lone_surrogate_in_a_name_is_replaced_once_and_noted(tmp_path):
    # Before: Python's json reads "\ud800" as a str that cannot be printed or written as UTF-8
    # (UnicodeEncodeError); msgspec refused the whole trace as corrupt JSON.
    text = CUDA.read_text().replace(SGEMM, "sgemm\\ud800x")
    code, out, err = _analyze(_write(tmp_path, text), "--json", str(tmp_path / "p.json"))
    assert code == 0 and not err
    assert "sgemm\ufffdx" in out and "1 lone UTF-16 surrogate escapes" in out
    assert any(row.name == "sgemm\ufffdx" for row in load_profile(tmp_path / "p.json").kernels)


def test_invalid_utf8_in_a_name_is_read_as_replacement_characters(tmp_path):
    # Before: msgspec's UnicodeDecodeError escaped as a traceback.
    data = CUDA.read_bytes().replace(SGEMM.encode(), b"sgemm\xff\xfe")
    profile = profile_from_trace(_write(tmp_path, data), sm_clock_mhz=1410)
    assert any(row.name == "sgemm\ufffd\ufffd" for row in profile.kernels)
    assert "the trace is not valid UTF-8: undecodable bytes were read as U+FFFD" in profile.notes


@pytest.mark.parametrize("depth", [9, 50, 500])
def test_over_deep_input_dims_are_unreadable_shapes(tmp_path, depth):
    # Before: RecursionError in profilers/kineto/reader.py's _tuples. (Deeper than Python's recursion
    # limit less the caller's stack, ~900 levels, msgspec cannot decode it: the next test.)
    trace = _trace("name", "aten::addmm", _set_args("Input Dims", "DEEP"))
    text = json.dumps(trace).replace('"DEEP"', "[" * depth + "]" * depth)
    records = trace_records(read_trace_file(_write(tmp_path, text)), "t", flops_of=op_flops,
                            precision_of=precision_of)
    sgemm = records.kernels.name == SGEMM
    assert np.isnan(records.kernels.flops[sgemm]).all()
    assert records.kernels.flop_gap[sgemm].tolist() == [SHAPES_UNREADABLE]


def test_nesting_too_deep_to_decode_is_one_line(tmp_path):
    trace = _trace("name", "aten::addmm", _set_args("Input Dims", "DEEP"))
    text = json.dumps(trace).replace('"DEEP"', "[" * 5000 + "]" * 5000)
    code, out, err = _analyze(_write(tmp_path, text))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("tbd: error: ") and "JSON nested too deeply to be a Kineto trace" in err


def test_a_huge_name_is_capped_once_and_the_report_stays_small(tmp_path):
    # Before: a long op name in the "no formula" detail cell was wrapped by rich into ~100k lines
    # (seconds, and GiBs at 50 MB); the name itself was kept whole in every table and file.
    long_name = "aten::copy_" + "x y " * 1_000_000
    trace = _trace("name", "aten::copy_", lambda e: e.__setitem__("name", long_name))
    code, out, err = _analyze(_write(tmp_path, trace), "--json", str(tmp_path / "p.json"))
    assert code == 0 and not err
    assert len(out.splitlines()) < 150  # the whole report, its ranking and recommendations: not ~100k wrapped lines
    names = json.dumps(load_profile(tmp_path / "p.json").metrics.no_flop_formula.causes[0].ops)
    assert "aten::copy_x y" in names and len(names) < MAX_NAME_CHARS + 200


def test_negative_input_dims_leave_flops_unknown(tmp_path):
    trace = _trace("name", "aten::addmm", _set_args("Input Dims", [[100], [-33, 100], [100, 100], [], []]))
    records = trace_records(read_trace_file(_write(tmp_path, trace)), "t", flops_of=op_flops,
                            precision_of=precision_of)
    sgemm = records.kernels.name == SGEMM
    assert np.isnan(records.kernels.flops[sgemm]).all()
    assert records.kernels.flop_gap[sgemm].tolist() == [SHAPES_UNREADABLE]


def test_impossible_input_dims_flag_the_group_and_null_the_overall_figure(tmp_path):
    # Before: "FLOP utilization 400808748686629918431543550065434951680.0 %" printed as a figure.
    huge = [[100], [10**15, 10**15], [10**15, 10**15], [], []]
    trace = _trace("name", "aten::addmm", _set_args("Input Dims", huge))
    code, out, err = _analyze(_write(tmp_path, trace), "--json", str(tmp_path / "p.json"))
    assert code == 0 and not err
    profile = load_profile(tmp_path / "p.json")
    flop = profile.metrics.flop_util_pct
    assert flop.value is None and flop.reason.startswith(ABOVE_PEAK_OVERALL)
    sgemm = next(row for row in profile.kernels if row.name == SGEMM)
    assert sgemm.util_pct > 100 and sgemm.util_note == ABOVE_PEAK
    assert "3.11e+39 ⚠" in out  # compact and flagged, never a 40-digit figure
    assert "400808748686629918431543550065434951680" not in out


@pytest.mark.parametrize("field, value", [("Total Allocated", -10**12), ("Bytes", 10**9)])
def test_inconsistent_allocator_totals_null_the_memory_with_the_reason(tmp_path, field, value):
    # Before: "allocator peak -931.32 GiB" (and an allocation larger than the total after it).
    trace = _trace("name", "[memory]", _set_args(field, value))
    profile = profile_from_trace(_write(tmp_path, trace), sm_clock_mhz=1410)
    memory = profile.metrics.memory_bytes
    assert memory.allocator_peak is None and memory.workspace is None
    assert "allocator events are inconsistent" in memory.reasons["at_peak"]
    assert all(v is None for v in memory.at_peak.values())


@pytest.mark.parametrize("name", ["\x1b[31mRED\x1b[0m", "nul\x00bell\x07", "\u202eevil", "\x1b]0;title\x07"])
def test_control_characters_in_names_are_escaped_on_the_terminal_and_kept_in_json(tmp_path, name):
    # Before: the escape reached the terminal raw (colours, a cleared screen, a retitled window).
    trace = _trace("name", SGEMM, lambda e: e.__setitem__("name", name))
    code, out, err = _analyze(_write(tmp_path, trace), "--json", str(tmp_path / "p.json"))
    assert code == 0 and not err
    assert not any(ch in out for ch in "\x1b\x00\x07\u202e")
    assert name.encode("unicode_escape").decode()[:6] in out or name.replace("\u202e", "\\u202e") in out
    assert any(row.name == name for row in load_profile(tmp_path / "p.json").kernels)


@pytest.mark.parametrize("ts", ["1e999999999", "1" * 5000, "1e300", "-1e300", "NaN"])
def test_absurd_times_are_one_line(tmp_path, ts):
    # Before: 1e999999999 raised decimal.Overflow, and 1e999990 took minutes to become an int.
    kernel = '"tid": 7, "ts": 1010.400, "dur": 3.300'  # the sgemm kernel's times
    text = CUDA.read_text().replace(kernel, f'"tid": 7, "ts": {ts}, "dur": 3.300')
    code, out, err = _analyze(_write(tmp_path, text))
    assert code == 2 and err.count("\n") == 1 and err.startswith("tbd: error: ")


def test_ids_beyond_int64_are_unknown_not_a_crash(tmp_path):
    # Before: OverflowError building the int64 column of a correlation id of 2**64 - 1.
    trace = _trace("cat", "kernel", _set_args("correlation", 2**64 - 1))
    profile = profile_from_trace(_write(tmp_path, trace), sm_clock_mhz=1410)
    assert any("have no launching runtime call" in note for note in profile.notes)


def test_corrupt_device_properties_are_left_out(tmp_path):
    # Before: int("x") on computeMajor raised ValueError.
    trace = json.loads(CUDA.read_text())
    trace["deviceProperties"] = [{"name": 7, "computeMajor": "x", "numSms": -3, "totalGlobalMem": "lots"}]
    profile = profile_from_trace(_write(tmp_path, trace))
    assert profile.environment["gpu"] is None
    assert render_profile(profile)
