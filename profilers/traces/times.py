"""Microsecond numbers as trace files write them -> exact integer nanoseconds, many at once.

Chrome-trace writers put times in microseconds: Kineto since ~2023 as fixed-point decimals with
three places, often on an epoch-sized origin ("ts": 1712195495505582.988), older Kineto and MXNet
as integers, re-serialised traces as shortest float reprs ("1010.4"). The nanosecond value of
1712195495505582.988 µs needs 61 bits, so float64 (53-bit mantissa) cannot hold it: parsing to
float and scaling by 1000 moves ends by up to 128 ns and opens false gaps between back-to-back
kernels. `us_text_to_ns` reads the decimal text itself.

It takes the numbers' JSON texts (bytes, or buffers such as msgspec.Raw), joins them and checks
the joined bytes with numpy: when every text is Kineto's fixed-point form (digits, a point, three
decimals) the points are dropped and numpy's C text parser reads the digits as int64 ns; when
every text is an integer, the same parse times 1000. Anything else takes one exact Python parse
per number (`int` on the digits, `decimal.Decimal` for exponents or more than three decimals,
rounding half-even below the nanosecond). A value whose ns leave int64 is not a time.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

import numpy as np

_DOT, _ZERO, _SPACE = ord("."), ord("0"), ord(" ")
#: Longest integer part the fast paths accept: 16 digits with a leading digit at most 8 keeps
#: the ns (x 1000) inside int64 (9.22e18).
_MAX_INT_DIGITS = 16


def us_text_to_ns(texts: list) -> tuple[np.ndarray, np.ndarray]:
    """Exact integer ns of microsecond numbers given as JSON number texts.

    Args:
        texts: one bytes-like text per number (b"1712195495505582.988", b"400", msgspec.Raw).
    Returns:
        (ns int64 array, ok bool array): ok is False where a text is not a JSON number or is out
        of int64 ns range (ns is 0 there).
    """
    n = len(texts)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    ns = _fast_ns(texts, n)
    if ns is not None:
        return ns, np.ones(n, dtype=bool)
    out = np.zeros(n, dtype=np.int64)
    ok = np.zeros(n, dtype=bool)
    for i, text in enumerate(texts):
        value = _one_ns(bytes(text))
        if value is not None:
            out[i], ok[i] = value, True
    return out, ok


def fast_us_text_to_ns(texts: list) -> np.ndarray | None:
    """`us_text_to_ns`'s C-level path alone: the exact ns of texts all in Kineto's fixed-point form or
    all integers, inside int64; None for any other list (then `us_text_to_ns` reads them one by one).
    Lets a caller convert several columns in one call and fall back to one call per column."""
    return _fast_ns(texts, len(texts)) if texts else np.zeros(0, dtype=np.int64)


def _fast_ns(texts: list, n: int) -> np.ndarray | None:
    """All n texts in Kineto's fixed-point form, or all integers: their ns; else None."""
    joined = b" ".join(texts)
    a = np.frombuffer(joined, dtype=np.uint8)
    # One past each text: its separator (or the end). A number's text holds no space, so the
    # spaces are the n - 1 separators (anything else is no number: the exact path decides).
    ends = np.flatnonzero(a == _SPACE)
    if len(ends) != n - 1:
        return None
    ends = np.append(ends, len(a))
    lengths = np.diff(ends, prepend=-1) - 1
    # Every byte but the separators and (fixed-point) one point per text must be a digit; the
    # separators are where the lengths put them, so counting non-digits checks the rest.
    non_digits = int(np.count_nonzero((a - np.uint8(_ZERO)) > 9))
    if non_digits == 2 * n - 1 and (a[ends - 4] == _DOT).all():
        decimals, scale, text = 3, 1, joined.replace(b".", b"")
    elif non_digits == n - 1:
        decimals, scale, text = 0, 1000, joined
    else:
        return None  # signs, exponents, other decimal counts
    int_digits = lengths - (decimals + 1 if decimals else 0)
    if int_digits.min() < 1 or int_digits.max() > _MAX_INT_DIGITS:
        return None
    longest = int_digits == _MAX_INT_DIGITS
    if longest.any() and (a[(ends - lengths)[longest]] > _ZERO + 8).any():
        return None
    # Text-mode fromstring is numpy's C integer parser; the checks above make it exact.
    return np.fromstring(text, dtype=np.int64, sep=" ") * scale


def _one_ns(text: bytes) -> int | None:
    """One number's text -> exact ns, or None (not a JSON number, or outside int64 ns).

    Text longer than 64 bytes is no time (int() refuses 4,300+ digits), and neither is a
    number above 10^20 µs: a Decimal such as 1e999999 would take minutes to become an int.
    """
    if len(text) > 64:
        return None
    point = text.find(b".")
    decimals = len(text) - point - 1 if point >= 0 else 0
    unsigned = text[1:] if text[:1] == b"-" else text
    if decimals <= 3 and unsigned.replace(b".", b"", 1).isdigit():
        ns = int(text.replace(b".", b"", 1)) * 10 ** (3 - decimals)
    else:
        try:
            value = Decimal(text.decode("ascii"))
        except (InvalidOperation, UnicodeDecodeError):
            return None
        if not value.is_finite() or value.adjusted() > 20:
            return None
        ns = int(value.scaleb(3).to_integral_value())
    return ns if -(2**63) <= ns < 2**63 else None
