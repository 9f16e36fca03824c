"""Numbers for tables and reports, all to the same number of significant digits.

A column that prints 0.0, 0.039 and 3e-05 side by side makes a reader decode three notations to
compare three values. Every figure here is rounded to `digits` significant digits (3 unless
asked), written positionally with thousands separators ("0.0394", "12.3", "1,235"), with its
trailing zeros, since they say how precise it is ("2.00 s"). Integer parts are never rounded
away: 12,345 stays "12,345", not "12,300".

Units with a prefix pick the prefix from the rounded value, so 999.96 GFLOP/s is "1.00 TFLOP/s",
never "1,000 GFLOP/s". Rates use decimal SI prefixes (k, M, G, T, P), as GPU vendors quote peak
FLOP/s. Bytes use one unit system everywhere, binary, as allocators and `nvidia-smi` count memory:
memory sizes (`fmt_bytes`: KiB, MiB, GiB, a fixed decimal), bytes a kernel moves (`fmt_byte_amount`,
significant digits) and bandwidths (`fmt_bandwidth`: GiB/s, TiB/s; a V100's datasheet "900 GB/s" is
838 GiB/s). Prose that analysis wrote with exact byte counts ("1728712 B", exact in profile.json) is
given the same units for a reader by `byte_counts_in_words`.

None, NaN and ±infinity print as "n/a"; "nan", "inf" and "-0" never appear. Renderers format,
never compute: each function takes a finished figure and only chooses how to write it.
"""

from __future__ import annotations

import math
import operator
import re

from tbd.core.errors import UsageError

NA = "n/a"
SI_PREFIXES = ("", "k", "M", "G", "T", "P")
BINARY_PREFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi")
#: Magnitudes written positionally; beyond them "1.23e-07" keeps a stray value readable.
_SMALLEST_EXP, _LARGEST_EXP = -6, 15
#: The smallest share worth a figure: below it, "<0.01 %".
PCT_FLOOR = 0.01
_DURATION_UNITS = ((0, "s"), (-3, "ms"), (-6, "µs"), (-9, "ns"))
_BYTE_UNITS = ((1 << 30, "GiB", 2), (1 << 20, "MiB", 1), (1 << 10, "KiB", 1))
#: An exact byte count as analysis writes one into a reason: a whole number, a space, "B" (not B/s).
_BYTE_COUNT = re.compile(r"(?<![\w.,-])(-?\d+) B(?![\w/])")


def _finite(value) -> float | None:
    """`value` as a float, or None when it is None, NaN, infinite or not a number at all."""
    if value is None or isinstance(value, str):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _whole(value) -> int | None:
    """`value` as an int when it is an integer type (int, numpy.int64; not bool, not float), else None."""
    if isinstance(value, (bool, float, str)) or value is None:
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _exponent(value: float, digits: int) -> int:
    """The decimal exponent of `value` once rounded to `digits` significant digits (99.96 -> 2 at 3)."""
    return int(f"{value:.{digits - 1}e}".rsplit("e", 1)[1])


def _unsigned_zero(text: str) -> str:
    """`text` without the minus of a figure that rounded to zero ("-0.00" -> "0.00")."""
    if text.startswith("-") and not any(ch in "123456789" for ch in text):
        return text[1:]
    return text


def fmt_sig(value, digits: int = 3) -> str:
    """`value` to `digits` significant digits: 0.0394 -> "0.0394", 3e-05 -> "0.0000300",
    12.345 -> "12.3", 99.96 -> "100", 12345.6 -> "12,346", 0 -> "0".

    Magnitudes below 1e-6 or from 1e15 up are written as "1.23e-07" (no table should hold them,
    but a stray one must not print 25 zeros). Raises UsageError if digits < 1.
    """
    if digits < 1:
        raise UsageError(f"cannot write a number to {digits} significant digits")
    number = _finite(value)
    if number is None:
        return NA
    if number == 0:
        return "0"
    exp = _exponent(number, digits)
    if not _SMALLEST_EXP <= exp < _LARGEST_EXP:
        return _unsigned_zero(f"{number:.{digits - 1}e}")
    return _unsigned_zero(f"{number:,.{max(0, digits - 1 - exp)}f}")


def fmt_pct(value, digits: int = 3, suffix: str = " %") -> str:
    """A percentage (12.3 means 12.3 %) to `digits` significant digits, with `suffix`.

    Zero is "0 %"; a share closer to zero than 0.01 % is "<0.01 %" (">-0.01 %" if negative), since
    three digits of a rounding residue (3e-05 %) claim a precision no timer has. Pass suffix=""
    for a column whose header already says %.
    """
    number = _finite(value)
    if number is None:
        return NA
    if number == 0:
        return "0" + suffix
    if abs(number) < PCT_FLOOR:
        return ("<" if number > 0 else ">-") + f"{PCT_FLOOR:g}" + suffix
    return fmt_sig(number, digits) + suffix


def _unprefixed(value, unit: str, below: int) -> tuple[str | None, float]:
    """The text of a value no prefix is for (an exact count below `below`, kept exact: "512 B"; zero; not
    a number: n/a), else (None, the value as a float)."""
    whole = _whole(value)
    if whole is not None and abs(whole) < below:
        return f"{whole} {unit}", 0.0
    number = _finite(value)
    if number is None:
        return NA, 0.0
    return (f"0 {unit}", 0.0) if number == 0 else (None, number)


def _fmt_si(value, unit: str, digits: int) -> str:
    """`value` with the SI prefix that keeps its rounded mantissa in [1, 1000) (from P up, larger)."""
    text, number = _unprefixed(value, unit, 1000)
    if text is not None:
        return text
    step = min(max(_exponent(number, digits) // 3, 0), len(SI_PREFIXES) - 1)
    return f"{fmt_sig(number / 1000 ** step, digits)} {SI_PREFIXES[step]}{unit}"


def fmt_rate(value, unit: str = "FLOP/s", digits: int = 3) -> str:
    """A rate with a decimal prefix: 1.23e13 -> "12.3 TFLOP/s", 9.5e11 -> "950 GFLOP/s"."""
    return _fmt_si(value, unit, digits)


def _fmt_binary(value, unit: str, digits: int) -> str:
    """`value` with the binary prefix that keeps its rounded mantissa in [1, 1024) (from Pi up, larger)."""
    text, number = _unprefixed(value, unit, 1024)
    if text is not None:
        return text
    step = 0
    while step < len(BINARY_PREFIXES) - 1 and (abs(number / 1024 ** step) >= 1024 or  # as written, rounded
                                                abs(float(fmt_sig(number / 1024 ** step, digits).replace(",", "")))
                                                >= 1024):
        step += 1
    return f"{fmt_sig(number / 1024 ** step, digits)} {BINARY_PREFIXES[step]}{unit}"


def fmt_byte_amount(value, digits: int = 3) -> str:
    """Bytes in binary units to `digits` significant digits: 2**40 -> "1.00 TiB", 9e11 -> "838 GiB", 512 -> "512 B"."""
    return _fmt_binary(value, "B", digits)



def fmt_bandwidth(value, digits: int = 3) -> str:
    """Bytes per second in binary units, as every byte figure: 9e11 -> "838 GiB/s", 3.35e12 -> "3.05 TiB/s"."""
    return _fmt_binary(value, "B/s", digits)


def fmt_duration(seconds, digits: int = 3) -> str:
    """A duration in s, ms, µs or ns: 0.00123 -> "1.23 ms", 4.56e-05 -> "45.6 µs", 2 -> "2.00 s".

    The unit is chosen from the rounded value (0.99996 ms is "1.00 ms"); from 1000 s up the
    figure stays in seconds ("1,235 s"), below 1 ns it stays in ns ("0.500 ns").
    """
    number = _finite(seconds)
    if number is None:
        return NA
    if number == 0:
        return "0 s"
    exp = _exponent(number, digits)
    scale, unit = next(((s, u) for s, u in _DURATION_UNITS if exp >= s), _DURATION_UNITS[-1])
    return f"{fmt_sig(number * 10.0 ** -scale, digits)} {unit}"


def fmt_count(value) -> str:
    """A count with thousands separators: 1234567 -> "1,234,567" (a float is rounded to a whole number)."""
    whole = _whole(value)
    if whole is not None:
        return f"{whole:,}"
    number = _finite(value)
    if number is None:
        return NA
    return f"{round(number):,}"


def fmt_intensity(value, digits: int = 3) -> str:
    """Arithmetic intensity in FLOP per byte: 12.34 -> "12.3 FLOP/B"."""
    text = fmt_sig(value, digits)
    return text if text == NA else f"{text} FLOP/B"


def fmt_bytes(value) -> str:
    """A memory size in binary units: 569569536 -> "543.2 MiB", 1536 -> "1.5 KiB", 352 -> "352 B"."""
    number = _finite(value)
    if number is None:
        return NA
    for size, unit, digits in _BYTE_UNITS:
        if abs(number) >= size:
            return f"{number / size:.{digits}f} {unit}"
    whole = _whole(value)
    return f"{whole if whole is not None else round(number)} B"


def byte_counts_in_words(text: str) -> str:
    """`text` with each exact byte count ("569569536 B") written as `fmt_bytes` writes it ("543.2 MiB")."""
    return _BYTE_COUNT.sub(lambda m: fmt_bytes(int(m.group(1))), text)


def fmt_pct_cell(value: float | None) -> str:
    """A percentage as a bare number with one decimal ("12.3"), the terminal metrics table's and the
    per-rank table's format (`fmt_pct` gives significant digits and a unit); tiny non-zero shares keep two significant digits, and
    a figure of 10,000 or more (only ever a flagged above-peak one) is written as "1.2e+05"."""
    if value is None or not math.isfinite(value):
        return NA
    if 0 < abs(value) < 0.1 or abs(value) >= 1e4:
        return f"{value:.2g}"
    return f"{value:.1f}"


def fmt_seconds_cell(value: float | None) -> str:
    """A duration in seconds with fixed decimals per unit ("12.5 µs", "3.25 ms", "1.500 s"), the
    terminal metrics table's format (`fmt_duration` gives significant digits)."""
    if value is None or not math.isfinite(value):
        return NA
    if value < 1e-3:
        return f"{value * 1e6:.1f} µs"
    if value < 1:
        return f"{value * 1e3:.2f} ms"
    return f"{value:.3f} s"


def fmt_elapsed(seconds: float) -> str:
    """Wall-clock time a person waits, to the second: "12 s", "3 min 05 s" (how long a stage took or
    should take; `fmt_duration` is for measured durations, to significant digits)."""
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest:02d} s"
