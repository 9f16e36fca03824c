"""Checks of the values in a profile.json: each field's type and range, or `ResultFormatError` naming the key.

A profile.json may come from anywhere (an edited file, another tool, a disk error), and Python's
json reads the non-JSON tokens NaN and Infinity. What the loader accepts, the renderers print as
is, so every figure is checked here once: numbers are finite and never booleans, percentages lie
in [0, 100], sizes, counts, times and FLOP figures are not negative. A checker is a callable
`(value, key) -> value`; `nullable` says whether null (or a missing key) is allowed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tbd.core.errors import ResultFormatError

#: Rounding slack above 100 %: a share computed as 100.0 * a / b with a == b is exactly 100.0,
#: but a sum of shares may land a few ulps above.
PCT_SLACK = 1e-6


@dataclass(frozen=True)
class Checker:
    """One field's rule: `check(value, key)` returns the value or raises ResultFormatError."""

    check: Callable[[Any, str], Any]
    nullable: bool

    def __call__(self, value: Any, key: str) -> Any:
        if value is None:
            if self.nullable:
                return None
            raise ResultFormatError(f"profile key '{key}' is null")
        return self.check(value, key)


def _type_name(value: Any) -> str:
    return type(value).__name__


def _number(value: Any, key: str, low: float, high: float | None, integer: bool) -> float | int:
    kinds = (int,) if integer else (int, float)
    if type(value) is bool or not isinstance(value, kinds):
        raise ResultFormatError(f"profile key '{key}' has type {_type_name(value)}, expected "
                                f"{'an integer' if integer else 'a number'}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ResultFormatError(f"profile key '{key}' is {value} (NaN or infinite), expected a finite number")
    if value < low or (high is not None and value > high + PCT_SLACK):
        span = f"[{low:g}, {high:g}]" if high is not None else f">= {low:g}"
        raise ResultFormatError(f"profile key '{key}' is {value:g}, outside {span}")
    return value


def number(low: float = 0.0, high: float | None = None, null: bool = False) -> Checker:
    """A finite number in [low, high] (high None: no upper bound)."""
    return Checker(lambda v, k: _number(v, k, low, high, False), null)


def integer(low: int = 0, null: bool = False) -> Checker:
    """An integer (not a bool) >= low."""
    return Checker(lambda v, k: _number(v, k, low, None, True), null)


def pct(null: bool = False) -> Checker:
    """A percentage in [0, 100]."""
    return number(0.0, 100.0, null)


def _of_type(kind: type, word: str) -> Callable[[Any, str], Any]:
    def check(value: Any, key: str) -> Any:
        if not isinstance(value, kind):
            raise ResultFormatError(f"profile key '{key}' has type {_type_name(value)}, expected {word}")
        return value
    return check


def text(null: bool = False) -> Checker:
    return Checker(_of_type(str, "a string"), null)


def label(null: bool = False) -> Checker:
    """A string or an integer (a device: "cpu", 0)."""
    def check(value: Any, key: str) -> Any:
        if type(value) is bool or not isinstance(value, (str, int)):
            raise ResultFormatError(f"profile key '{key}' has type {_type_name(value)}, expected a string or integer")
        return value
    return Checker(check, null)


def flag(null: bool = False) -> Checker:
    return Checker(_of_type(bool, "true or false"), null)


def obj(null: bool = False) -> Checker:
    """Any JSON object, its contents unchecked (free-form: spec, provenance)."""
    return Checker(_of_type(dict, "an object"), null)


def seq(null: bool = False) -> Checker:
    return Checker(_of_type(list, "a list"), null)


def mapping(values: Checker, null: bool = False) -> Checker:
    """An object whose every value passes `values` (keys are strings in JSON)."""
    def check(value: Any, key: str) -> dict:
        _of_type(dict, "an object")(value, key)
        return {k: values(v, f"{key}.{k}") for k, v in value.items()}
    return Checker(check, null)


def items(each: Checker, null: bool = False) -> Checker:
    """A list whose every item passes `each`."""
    def check(value: Any, key: str) -> list:
        _of_type(list, "a list")(value, key)
        return [each(v, f"{key}[{i}]") for i, v in enumerate(value)]
    return Checker(check, null)


def fields(data: Any, where: str, rules: dict[str, Checker]) -> dict[str, Any]:
    """The checked values of `rules`' keys in `data` (an object); a missing nullable key is left out.

    Args:
        data: the JSON object. where: its key path with a trailing dot ("metrics.gpu_busy_pct.").
        rules: field name -> checker.
    Returns:
        keyword arguments for the record's constructor.
    """
    if not isinstance(data, dict):
        raise ResultFormatError(f"profile key '{where.rstrip('.')}' is not an object")
    out = {}
    for name, rule in rules.items():
        if name in data:
            out[name] = rule(data[name], where + name)
        elif not rule.nullable:
            raise ResultFormatError(f"profile is missing '{where}{name}'")
    return out


def known_keys(data: Any, where: str, rules: dict[str, Checker]) -> None:
    """Check the keys of a free-form object that renderers read (the rest stay unchecked)."""
    if isinstance(data, dict):
        for name, rule in rules.items():
            if name in data:
                rule(data[name], where + name)


@contextlib.contextmanager
def checking(what: str) -> Iterator[None]:
    """Name the record being checked in the errors raised inside ("sweep key 'points[0].batch' ...")."""
    try:
        yield
    except ResultFormatError as exc:
        raise ResultFormatError(str(exc).replace("profile key", f"{what} key", 1)
                                .replace("profile is missing", f"{what} is missing", 1), exc.hint) from None


def finite_json(obj: Any) -> Any:
    """`obj` as JSON-ready data with NaN and infinities as null (they never leave as numbers)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def make_record(cls: type, values: dict[str, Any]) -> Any:
    """`cls(**values)`, a nullable field that was absent and has no default given as null."""
    missing = {f.name: None for f in dataclasses.fields(cls) if f.name not in values
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    return cls(**values, **missing)
