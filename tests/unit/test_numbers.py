"""Numbers in reports (reports/numbers.py): the same significant digits everywhere, values proved.

The tables give each value and the text it must print; the property tests read the text back
and check that it is the value, rounded to the promised number of significant digits, and that
"nan", "inf" and a negative zero never reach a report.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tbd.core.errors import UsageError
from tbd.reports.numbers import (
    NA,
    fmt_bandwidth,
    fmt_byte_amount,
    fmt_count,
    fmt_duration,
    fmt_intensity,
    fmt_pct,
    fmt_rate,
    fmt_sig,
)

NAN, INF = float("nan"), float("inf")
ALL = (fmt_sig, fmt_pct, fmt_rate, fmt_byte_amount, fmt_bandwidth, fmt_duration, fmt_count, fmt_intensity)


@pytest.mark.parametrize("value, text", [
    (0.0394, "0.0394"),
    (3e-05, "0.0000300"),
    (12.345, "12.3"),
    (1.0, "1.00"),  # trailing zeros say how precise the figure is
    (2, "2.00"),
    (99.96, "100"),  # rounding carries into the next decade: 3 digits, not "100.0"
    (0.09996, "0.100"),
    (999.5, "1,000"),  # half to even on the binary value: 999.5 is exact, rounds up to 1000
    (12345.6, "12,346"),  # the integer part is never rounded away
    (-0.0394, "-0.0394"),
    (0, "0"),
    (-0.0, "0"),
    (1e-7, "1.00e-07"),  # out of the positional range: stray values stay readable
    (1.5e15, "1.50e+15"),
    (np.float32(0.25), "0.250"),
])
def test_fmt_sig(value, text):
    assert fmt_sig(value) == text


def test_fmt_sig_other_digits():
    assert fmt_sig(0.0394, 2) == "0.039"
    assert fmt_sig(3.14159, 5) == "3.1416"
    assert fmt_sig(123.0, 1) == "123"
    with pytest.raises(UsageError):
        fmt_sig(1.0, 0)


@pytest.mark.parametrize("value, text", [
    (12.345, "12.3 %"),
    (0.0394, "0.0394 %"),
    (0.01, "0.0100 %"),
    (0.0099, "<0.01 %"),
    (3e-05, "<0.01 %"),
    (-3e-05, ">-0.01 %"),
    (0.0, "0 %"),
    (-0.0, "0 %"),
    (99.96, "100 %"),
    (100, "100 %"),
    (12345.0, "12,345 %"),  # an above-peak utilization keeps every integer digit
])
def test_fmt_pct(value, text):
    assert fmt_pct(value) == text


def test_fmt_pct_bare_for_a_percent_column():
    assert fmt_pct(12.345, suffix="") == "12.3"
    assert fmt_pct(0.0, suffix="") == "0"
    assert fmt_pct(1e-9, suffix="") == "<0.01"


@pytest.mark.parametrize("value, text", [
    (12.3e12, "12.3 TFLOP/s"),
    (9.5e11, "950 GFLOP/s"),
    (999.96e9, "1.00 TFLOP/s"),  # the prefix follows the rounded value
    (999.4e9, "999 GFLOP/s"),
    (1.979e15, "1.98 PFLOP/s"),
    (5e18, "5,000 PFLOP/s"),  # no prefix beyond P
    (1500, "1.50 kFLOP/s"),
    (999, "999 FLOP/s"),  # an integer below the first prefix is exact
    (0.5, "0.500 FLOP/s"),
    (0, "0 FLOP/s"),
    (-2.5e9, "-2.50 GFLOP/s"),
])
def test_fmt_rate(value, text):
    assert fmt_rate(value) == text


def test_fmt_rate_other_units():
    assert fmt_rate(3.2e9, unit="images/s") == "3.20 Gimages/s"
    assert fmt_rate(1.234e6, unit="FLOP") == "1.23 MFLOP"


# Bytes are binary everywhere (issue 28): bandwidths too, in GiB/s and TiB/s.
@pytest.mark.parametrize("value, text", [
    (1.55e12, "1.41 TiB/s"),  # 1.55e12 / 2**40 = 1.4097
    (900e9, "838 GiB/s"),  # a V100's datasheet "900 GB/s": 9e11 / 2**30 = 838.19
    (3.35e12, "3.05 TiB/s"),  # an H100 SXM's HBM3, "3.35 TB/s" as NVIDIA prints it: 3.0468 TiB/s
    (2039e9, "1.85 TiB/s"),  # 2.039e12 / 2**40 = 1.8545
    (0, "0 B/s"),
])
def test_fmt_bandwidth(value, text):
    assert fmt_bandwidth(value) == text


@pytest.mark.parametrize("value, text", [
    (512, "512 B"),
    (np.int64(999), "999 B"),
    (1000, "1000 B"),  # an exact count below 1 KiB stays exact
    (1024, "1.00 KiB"),
    (1023.9 * 1024, "1.00 MiB"),  # 1,023.9 KiB rounds to 1,024 KiB: the next prefix
    (80 * 10**9, "74.5 GiB"),  # 8e10 / 2**30 = 74.506
    (1.55e12, "1.41 TiB"),
    (2**40, "1.00 TiB"),
])
def test_fmt_byte_amount(value, text):
    assert fmt_byte_amount(value) == text


@pytest.mark.parametrize("value, text", [
    (0.00123, "1.23 ms"),
    (4.56e-05, "45.6 µs"),
    (2, "2.00 s"),
    (2.0, "2.00 s"),
    (0.00099996, "1.00 ms"),  # 999.96 µs rounds to 1000 µs: written in the next unit
    (8.5e-07, "850 ns"),
    (5e-10, "0.500 ns"),
    (1234.5, "1,234 s"),  # half to even
    (0, "0 s"),
    (-0.00123, "-1.23 ms"),
])
def test_fmt_duration(value, text):
    assert fmt_duration(value) == text


@pytest.mark.parametrize("value, text", [
    (0, "0"),
    (999, "999"),
    (1234567, "1,234,567"),
    (-1234, "-1,234"),
    (2**62, "4,611,686,018,427,387,904"),  # exact, not through a float
    (np.int64(2**62), "4,611,686,018,427,387,904"),
    (1234.6, "1,235"),
    (-0.4, "0"),
])
def test_fmt_count(value, text):
    assert fmt_count(value) == text


def test_fmt_intensity():
    assert fmt_intensity(12.345) == "12.3 FLOP/B"
    assert fmt_intensity(0.5) == "0.500 FLOP/B"
    assert fmt_intensity(156.0) == "156 FLOP/B"
    assert fmt_intensity(None) == NA


@pytest.mark.parametrize("fmt", ALL)
@pytest.mark.parametrize("value", [None, NAN, INF, -INF, np.float64("nan"), "12"], ids=repr)
def test_missing_or_unprintable_values_are_na(fmt, value):
    assert fmt(value) == NA


def test_an_integer_beyond_float_range():
    assert fmt_count(10**30) == "1,000,000,000,000,000,000,000,000,000,000"
    assert fmt_rate(10**400) == NA  # no float holds it; no rate is that large


# --- properties: the text is the value -----------------------------------------------------------

_NUMBER = re.compile(r"-?[\d,]+(?:\.\d+)?(?:e[-+]\d+)?")
_PREFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_DURATION = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}


def _read(text: str) -> float:
    return float(text.replace(",", ""))


def _significant_digits(text: str) -> int:
    mantissa = text.lstrip("-").split("e")[0].replace(",", "").replace(".", "").lstrip("0")
    return len(mantissa)


def _no_bad_words(text: str) -> None:
    assert "nan" not in text.lower() and "inf" not in text.lower()
    for token in _NUMBER.findall(text):
        assert not (token.startswith("-") and not re.search(r"[1-9]", token.split("e")[0])), text


finite = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False, width=64)  # read back without overflow
anything = st.one_of(st.floats(width=64), st.integers(-10**20, 10**20), st.none())


@settings(max_examples=500, deadline=None)
@given(value=finite, digits=st.integers(1, 6))
def test_fmt_sig_reads_back_as_the_value(value, digits):
    text = fmt_sig(value, digits)
    _no_bad_words(text)
    if value == 0:
        assert text == "0"
        return
    back = _read(text)
    assert math.isclose(back, value, rel_tol=0.5 * 10 ** (1 - digits) * 1.0001)
    if abs(back) < 10**digits or "e" in text:
        assert _significant_digits(text) == digits, text  # exactly `digits`, trailing zeros included
    else:
        assert "." not in text and _significant_digits(text) >= digits  # whole integer part


@settings(max_examples=300, deadline=None)
@given(value=finite)
def test_fmt_pct_reads_back(value):
    text = fmt_pct(value)
    _no_bad_words(text)
    assert text.endswith(" %")
    body = text[:-2]
    if value == 0:
        assert body == "0"
    elif abs(value) < 0.01:
        assert body in ("<0.01", ">-0.01")
    else:
        assert math.isclose(_read(body), value, rel_tol=5e-3 * 1.0001)


@settings(max_examples=300, deadline=None)
@given(value=st.floats(min_value=-1e20, max_value=1e20, allow_nan=False, width=64))
def test_fmt_rate_prefix_keeps_the_mantissa_under_1000_and_reads_back(value):
    text = fmt_rate(value)
    _no_bad_words(text)
    number, unit = text.split(" ")
    prefix = unit[: -len("FLOP/s")]
    if value == 0:
        assert text == "0 FLOP/s"
        return
    mantissa = _read(number)
    if prefix and prefix != "P":
        assert 1 <= abs(mantissa) < 1000, text
    assert math.isclose(mantissa * _PREFIX[prefix], value, rel_tol=5e-3 * 1.0001)


@settings(max_examples=300, deadline=None)
@given(seconds=st.floats(min_value=-1e5, max_value=1e5, allow_nan=False, width=64))
def test_fmt_duration_reads_back(seconds):
    text = fmt_duration(seconds)
    _no_bad_words(text)
    number, unit = text.split(" ")
    if seconds == 0:
        assert text == "0 s"
        return
    value = _read(number) * _DURATION[unit]
    assert math.isclose(value, seconds, rel_tol=5e-3 * 1.0001)
    if unit != "ns" and abs(seconds) < 1000:
        assert 1 <= abs(_read(number)) < 1000, text


@settings(max_examples=300, deadline=None)
@given(value=anything)
def test_nothing_prints_nan_inf_or_minus_zero(value):
    for fmt in ALL:
        _no_bad_words(fmt(value))
