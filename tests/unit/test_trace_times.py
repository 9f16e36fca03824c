"""Microsecond texts -> exact integer ns (profilers/traces/times.py), checked against Decimal.

The reference for every case is `Decimal(text) * 1000` rounded half-even, computed here
independently; float64 is shown to be wrong at the magnitudes Kineto writes.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tbd.profilers.traces.times import us_text_to_ns

INT64 = 2**63


def reference_ns(text: bytes) -> int | None:
    value = int((Decimal(text.decode()) * 1000).to_integral_value())
    return value if -INT64 <= value < INT64 else None


def check(texts: list[bytes]) -> None:
    ns, ok = us_text_to_ns(texts)
    expected = [reference_ns(t) for t in texts]
    assert ok.tolist() == [e is not None for e in expected]
    assert [v for v, o in zip(ns.tolist(), ok.tolist()) if o] == [e for e in expected if e is not None]


def test_kineto_fixed_point_on_an_epoch_origin_is_exact_where_float_is_not():
    texts = [b"1712195495505582.988", b"1712195495505582.989", b"4.928"]
    ns, ok = us_text_to_ns(texts)
    assert ok.all() and ns.tolist() == [1712195495505582988, 1712195495505582989, 4928]
    # float64 cannot tell the two apart: both round to the same double, 1 ns of information lost.
    assert float(b"1712195495505582.988") == float(b"1712195495505582.989")


def test_integers_are_microseconds():
    ns, ok = us_text_to_ns([b"0", b"400", b"1621401187223005"])
    assert ok.all() and ns.tolist() == [0, 400_000, 1621401187223005000]


def test_the_16_digit_edge_of_int64():
    # 16 integer digits fit when ns stay below 2**63 (9223372036854775807).
    check([b"8999999999999999.999", b"9223372036854775.807", b"9223372036854775.808", b"9999999999999999"])
    ns, ok = us_text_to_ns([b"9223372036854775.807", b"9223372036854775.808"])
    assert ok.tolist() == [True, False] and ns[0] == 2**63 - 1


def test_other_forms_take_the_exact_slow_path():
    # shortest float reprs, signs, exponents, more than 3 decimals (half-even below 1 ns)
    check([b"1010.4", b"0.25", b"-5.000", b"1.5e3", b"1E-3", b"0.0005", b"0.0015", b"0.0025", b"-0"])
    ns, _ = us_text_to_ns([b"0.0005", b"0.0015", b"0.0025"])
    assert ns.tolist() == [0, 2, 2]


def test_not_numbers_are_flagged_not_guessed():
    ns, ok = us_text_to_ns([b'"12"', b"null", b"abc", b"--5", b"1e999", b"[1]"])
    assert not ok.any() and not ns.any()
    ns, ok = us_text_to_ns([b"1.000", b"null", b"2.000"])  # one bad text does not spoil the others
    assert ok.tolist() == [True, False, True] and ns.tolist() == [1000, 0, 2000]


def test_empty():
    ns, ok = us_text_to_ns([])
    assert ns.dtype == np.int64 and ns.size == 0 and ok.size == 0


fixed_point = st.builds(lambda i, f: f"{i}.{f:03d}".encode(), st.integers(0, 9_223_372_036_854_775),
                        st.integers(0, 999))
any_number = st.one_of(
    fixed_point,
    st.integers(-(10**17), 10**17).map(lambda i: str(i).encode()),
    st.floats(-1e15, 1e15, allow_nan=False).map(lambda f: repr(f).encode()),
    st.builds(lambda i, f, d: f"{i}.{f:0{d}d}".encode(), st.integers(0, 10**6), st.integers(0, 9999),
              st.integers(1, 4)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(fixed_point, min_size=1, max_size=50))
def test_fixed_point_batches_match_decimal(texts):
    check(texts)


@settings(max_examples=300, deadline=None)
@given(st.lists(any_number, min_size=1, max_size=50))
def test_mixed_batches_match_decimal(texts):
    check(texts)
