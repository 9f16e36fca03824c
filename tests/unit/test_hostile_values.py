"""Analysis, readers' helpers and renderers on values no honest trace holds: nulls with reasons, never raises.

Hand-built inputs, one finding each (issue 12, "Hardened inputs"); the comment says what happened
before.
"""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pytest

from tbd.analysis.assemble import ABOVE_PEAK_OVERALL, NEVER_BUSY, NO_WINDOW, flop_util, gpu_busy
from tbd.analysis.flops.ops import op_flops, precision_of
from tbd.analysis.memory.pytorch import allocator_totals_problem, memory_breakdown
from tbd.analysis.peaks import PeakFlops, PeakModel
from tbd.core.records import KernelTable, MemoryEvents, OpShapes, OpTable, StepSpan, TraceRecords
from tbd.profilers.traces.events import int_value, step_number, us_to_ns
from tbd.profilers.traces.names import MAX_NAME_CHARS, clean_name, quoted
from tbd.profilers.traces.times import us_text_to_ns
from tbd.reports.numbers import fmt_pct_cell, fmt_seconds_cell
from tbd.reports.printable import printable
from tbd.reports.terminal import fmt_bytes, fmt_flops

PEAKS = PeakModel({"fp32": PeakFlops(1e12, None, "test")})


def _kernels(durs, flops):
    n = len(durs)
    obj = lambda xs: np.array(xs, dtype=object)  # noqa: E731
    return KernelTable(obj([f"k{i}" for i in range(n)]), np.arange(n, dtype=np.int64) * 10,
                       np.array(durs, dtype=np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64), obj([""] * n),
                       np.array(flops, dtype=float), obj(["analytic"] * n), obj(["fp32"] * n), np.zeros(n, np.int64))


def _trace(kernels, window=(0, 100)):
    empty = OpTable(np.array([], object), np.array([], np.int64), np.array([], np.int64), np.array([], np.int64))
    return TraceRecords("t", "cuda", kernels, kernels.start_ns, kernels.start_ns + kernels.dur_ns,
                        (StepSpan(1, window[0], window[1], window[1]),), window[0], window[1], empty, None)


def test_flop_util_of_a_device_never_busy_is_null_with_the_reason():
    # Before: ValueError "device was never busy in the window" (zero-length kernels: clamped negative durations).
    fu, _ = flop_util(_trace(_kernels([0, 0], [1e6, 2e6])), PEAKS)
    assert fu.value is None and fu.reason == NEVER_BUSY


def test_gpu_busy_of_a_window_without_length_is_null_with_the_reason():
    # Before: ValueError "trace window has no length".
    assert gpu_busy(_trace(_kernels([0], [1.0]), window=(5, 5)), "cpu").reason == NO_WINDOW


def test_overall_flop_util_above_100_is_null_with_the_figure_in_the_reason():
    # 1e12 FLOPs in 10 ns at 1e12 FLOP/s: 1e10 %.
    fu, _ = flop_util(_trace(_kernels([10], [1e12])), PEAKS)
    assert fu.value is None and fu.reason == f"{ABOVE_PEAK_OVERALL} (1e+10 % counted)"


@pytest.mark.parametrize("dims", [[[-33, 100], [100, 100]], [[33, -100], [-100, 100]]])
def test_negative_dims_give_nan_flops(dims):
    assert math.isnan(op_flops(OpShapes("aten::mm", tuple(map(tuple, dims)), ("float", "float"), ())))


def test_flops_beyond_float_give_nan():
    # Before: OverflowError from float() of a 400-digit integer count.
    big = (10**200, 10**200)
    assert math.isnan(op_flops(OpShapes("aten::mm", (big, big), ("float", "float"), ())))


@pytest.mark.parametrize("text", ["(" * 300, "[" * 5000, "9" * 5000, "x" * 10_000])
def test_hostile_concrete_inputs_give_nan_not_an_exception(text):
    op = OpShapes("aten::convolution", ((1, 3, 8, 8), (4, 3, 3, 3), (), (), (), (), (), (), ()),
                  ("float",) * 3, ("", "", "", text, "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"))
    assert math.isnan(op_flops(op))


def test_types_that_are_not_strings_tell_no_precision():
    # Before: TypeError (unhashable type: 'list') looking a type up in the dtype table.
    assert precision_of((["float"], {"a": 1}, 3), ((1,), (2,), ())) == ""


def _memory(total, nbytes):
    n = len(total)
    return MemoryEvents(np.arange(n, dtype=np.int64), np.arange(n, dtype=np.uint64), np.array(nbytes, np.int64),
                        np.array(total, np.int64), np.zeros(n, np.int64))


def test_allocator_totals_must_be_consistent():
    assert allocator_totals_problem(_memory([4096, 5120, 1024], [4096, 1024, -4096])) is None
    assert "goes negative (-1000000000000 B)" in allocator_totals_problem(_memory([4096, -10**12], [4096, 1024]))
    assert "exceeds the allocator's total" in allocator_totals_problem(_memory([4096, 100], [4096, 1024]))


@pytest.mark.parametrize("text, ns", [(b"1e999999999", None), (b"1" * 5000, None), (b"NaN", None), (b"1e21", None),
                                      (b"1010.400", 1010400), (b"-5", -5000)])
def test_time_texts_out_of_reach_are_not_times(text, ns):
    # Before: decimal.Overflow on 1e999999999; int() of 1e999990 took minutes; ValueError on 5,000 digits.
    out, ok = us_text_to_ns([text])
    assert (int(out[0]) if ok[0] else None) == ns


def test_decimal_times_and_integers_are_bounded():
    with pytest.raises(ValueError):
        us_to_ns(Decimal("1E+999999999"))
    assert us_to_ns(Decimal("1.5")) == 1500
    assert int_value(Decimal("1E+999999999")) is None and int_value(2**64) is None and int_value(True) is None
    assert int_value(Decimal("12")) == 12 and int_value(3.0) == 3


def test_step_numbers_beyond_int64_are_not_steps():
    # Before: ValueError (int() of 5,000 digits) or OverflowError in the int64 column.
    assert step_number("ProfilerStep#12") == 12
    assert step_number("ProfilerStep#" + "9" * 19) is None
    assert step_number("ProfilerStep#" + "9" * 5000) is None


def test_names_are_capped_with_head_and_tail_and_made_encodable():
    name = "head" + "x" * 100_000 + "tail"
    capped = clean_name(name)
    assert len(capped) == MAX_NAME_CHARS and capped.startswith("head") and capped.endswith("tail") and "…" in capped
    assert clean_name("a\ud800b") == "a\ufffdb"
    assert clean_name("plain") == "plain"
    assert quoted("x" * 1000).endswith("…'") and len(quoted("x" * 1000)) < 70


@pytest.mark.parametrize("raw, shown", [("\x1b[31mred", "\\x1b[31mred"), ("a\x00b\x07", "a\\x00b\\x07"),
                                        ("\u202eevil", "\\u202eevil"), ("tab\there", "tab\\x09here"),
                                        ("a\ud800", "a\\ud800"), ("nbsp\xa0ok é", "nbsp\xa0ok é"),
                                        ("void f<float>(T [with T = float])", "void f<float>(T [with T = float])")])
def test_printable_escapes_what_acts_on_a_terminal(raw, shown):
    assert printable(raw) == shown


def test_formatters_never_print_nan_inf_or_a_forty_digit_percentage():
    assert fmt_pct_cell(float("nan")) == fmt_pct_cell(float("inf")) == "n/a"
    assert fmt_pct_cell(3.1e39) == "3.1e+39" and fmt_pct_cell(12345.0) == "1.2e+04" and fmt_pct_cell(99.94) == "99.9"
    assert fmt_seconds_cell(float("inf")) == fmt_flops(float("nan")) == fmt_bytes(float("inf")) == "n/a"


def test_workspace_above_the_allocator_peak_leaves_unattributed_null_with_the_reason():
    # Totals that do not add up (60 B live by the allocator, 100 B of transient blocks live):
    # before, "unattributed -40 B" was printed as a figure.
    events = MemoryEvents(np.array([10, 20, 30, 40], np.int64), np.array([1, 2, 1, 2], np.uint64),
                          np.array([50, 50, -50, -50], np.int64), np.array([50, 60, 10, 0], np.int64),
                          np.full(4, -1, np.int64))
    ops = OpTable(np.array(["aten::op"], object), np.array([0], np.int64), np.array([100], np.int64),
                  np.array([1], np.int64))
    trace = TraceRecords("t", "cpu", KernelTable.empty(), np.array([0], np.int64), np.array([100], np.int64), (),
                         0, 100, ops, events)
    memory = memory_breakdown(None, trace, None)
    assert memory.allocator_peak == 60 and memory.workspace == 100
    assert memory.at_peak["unattributed"] is None
    assert memory.reasons["unattributed"].startswith("categories exceed the allocator peak by 40 B")
