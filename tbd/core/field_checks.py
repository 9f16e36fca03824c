"""The rules of a result file's values, read from its declaration: `ResultFormatError` names the key.

A profile.json (a sweep.json, a comparison) may come from anywhere (an edited file, another tool, a
disk error), and Python's json reads the non-JSON tokens NaN and Infinity. What the loader accepts,
the renderers print as is, so every value is checked on loading: numbers are finite and never
booleans, percentages lie in [0, 100], sizes, counts, times and FLOP figures are not negative.

The result records are frozen dataclasses and each field's annotation is its rule: `loader(cls)`
reads them once and gives the function that checks a JSON object and builds the record.

- `str`, `bool`; `str | int` (a label: "cpu" or 0). A string holds at most MAX_TEXT characters (a
  renderer given a 300k-character name spends minutes on it), fewer where `Size(n)` says so.
- A number carries its range: `Annotated[float, Range(low, high)]`, `Annotated[int, Range(low)]`, or
  an alias below (`Pct`, `Amount`, `Delta`, `Count`, `PositiveInt`). A number without a Range is
  refused when the loader first compiles (tests/unit/test_schema_declaration.py loads every
  result schema), so a new field cannot go unchecked. No number is left unbounded: an integer
  without an upper bound stops at MAX_INT (2**53, where floats stop counting integers exactly; a
  10**400 read back raised OverflowError in every renderer that formats it); a float is any finite
  one (MAX_MAGNITUDE: the analysis may write a FLOP count of 1e45 from a trace's impossible shapes,
  and what tbd writes it reads back; every renderer was run at 1.7e308 without an infinity shown).
- `X | None`: null allowed; a missing key reads as null.
- A field with a default and no None (a key added in a later version): a missing or null key reads
  as the default, unless `Annotated[X, REQUIRED]`. Any other field must be present and not null.
- `list[X]`, `dict[str, X]`: each item, each value checked; at most MAX_ITEMS of them, fewer where
  `Size(n)` says so. `dict[str, Any]` (and `Any`): a free-form object whose contents are checked
  only for what no renderer survives (`free_value`: numbers finite and within MAX_MAGNITUDE,
  integers within MAX_FREE_INT, strings and containers capped, nesting at most MAX_DEPTH);
  `Annotated[dict[str, Any], Keys(T)]` also checks the keys the TypedDict T declares, where present
  (the keys of a free-form object that renderers print).
- A dataclass: a nested record. A TypedDict: a record kept as a plain dict of its declared keys.
- `Annotated[str, VERSION_TAG]`: the document's schema, checked by its loader first, never read.

Rules across fields (a util_pct above 100 needs its note, a status among the known ones) stay with
each document's loader.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import numbers
import sys
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any

from tbd.core.errors import ResultFormatError

#: Rounding slack above 100 %: a share computed as 100.0 * a / b with a == b is exactly 100.0,
#: but a sum of shares may land a few ulps above.
PCT_SLACK = 1e-6


@dataclass(frozen=True)
class Range:
    """A number's rule: finite, not a bool, low <= value <= high (+ PCT_SLACK); high None: no declared top
    (an integer then stops at MAX_INT, a float at MAX_MAGNITUDE)."""

    low: float = 0.0
    high: float | None = None


@dataclass(frozen=True)
class Size:
    """On a `str`, `list` or `dict`: at most `most` characters, items or keys."""

    most: int


@dataclass(frozen=True)
class Keys:
    """On `dict[str, Any]`: the keys checked where present, as the TypedDict `of` declares them."""

    of: type


@dataclass(frozen=True)
class Marker:
    """A field's marker in its annotation (`REQUIRED`, `VERSION_TAG`)."""

    name: str


#: A field with a default whose key must still be present and not null (there since version 1).
REQUIRED = Marker("required")
#: The document's schema: its loader checks it before the fields, and the record is always the current one.
VERSION_TAG = Marker("version tag")

#: The bounds every value meets, declared or not (see the module's docstring).
MAX_INT = 1 << 53
MAX_FREE_INT = 1 << 64  # in a free-form object (a seed, an address): any 64-bit integer
MAX_MAGNITUDE = sys.float_info.max
MAX_TEXT = 16_384
MAX_ITEMS = 1 << 20
MAX_DEPTH = 64

Pct = Annotated[float, Range(0.0, 100.0)]  # a percentage
Amount = Annotated[float, Range(0.0)]  # seconds, bytes, FLOPs, a rate, a ratio: >= 0
Delta = Annotated[float, Range(-math.inf)]  # a difference: any finite number
Count = Annotated[int, Range(0)]  # an integer >= 0
PositiveInt = Annotated[int, Range(1)]  # a batch size, a number of processes or nodes
#: A batch: samples in one step. 2**24 is thousands of times any batch a device holds.
Batch = Annotated[int, Range(1, 1 << 24)]
#: Iterations of a run (an index or a count of them): 2**31 is years of the fastest step.
IterationIndex = Annotated[int, Range(0, 1 << 31)]
#: A name a renderer prints (model, kernel, op) and a note: capped to what a page shows in full.
Name = Annotated[str, Size(4096)]
Note = Annotated[str, Size(4096)]
#: The notes of a result: a real run has tens; more only bury the ones that matter.
Notes = Annotated[list[Note], Size(1000)]

#: check(value, parent key, this key's part: a name or a list index) -> the value as the record holds it.
Check = Callable[[Any, str, "str | int"], Any]

_FINITE_MAX = sys.float_info.max
_ABSENT = object()
# How a field reads a missing key or null.
_NEEDED, _OPTIONAL, _DEFAULT, _MAY_BE_ABSENT = range(4)


def _key(parent: str, part: str | int) -> str:
    if part.__class__ is int:
        return f"{parent}[{part}]"
    return f"{parent}.{part}" if parent else part


def _null(parent: str, part: str | int) -> ResultFormatError:
    return ResultFormatError(f"profile key '{_key(parent, part)}' is null")


def _wrong_type(value: Any, parent: str, part: str | int, word: str) -> ResultFormatError:
    return ResultFormatError(f"profile key '{_key(parent, part)}' has type {type(value).__name__}, expected {word}")


def _show(value: Any) -> str:
    """A number as an error message shows it: an integer too large for a float by its digits."""
    if isinstance(value, int) and abs(value) > MAX_FREE_INT:
        return f"an integer of {len(str(abs(value))) if abs(value).bit_length() < 20_000 else 'over 6,000'} digits"
    return f"{value:g}"


def _number(rule: Range, integer: bool, nullable: bool) -> Check:
    """Each check tries the common case inline (a float or int well inside its range) and leaves
    everything else (null, NaN, bounds, other types) to `slow`, which decides and words the error."""
    cap = MAX_INT if integer else MAX_MAGNITUDE
    low = max(rule.low, -cap)
    high = cap if rule.high is None else rule.high
    lo, hi = low, high + PCT_SLACK
    kinds = (int,) if integer else (int, float)
    word = "an integer" if integer else "a number"

    def slow(value: Any, parent: str, part: str | int) -> Any:
        if value is None:
            if nullable:
                return None
            raise _null(parent, part)
        if type(value) is bool or not isinstance(value, kinds):
            raise _wrong_type(value, parent, part, word)
        key = _key(parent, part)
        if isinstance(value, float) and not math.isfinite(value):
            raise ResultFormatError(f"profile key '{key}' is {value} (NaN or infinite), expected a finite number")
        if rule.high is None and value > hi:
            raise ResultFormatError(f"profile key '{key}' is {_show(value)}, beyond any real value (at most {high:g})")
        if value < low or value > hi:
            span = f"[{low:g}, {high:g}]" if rule.high is not None else f">= {low:g}"
            raise ResultFormatError(f"profile key '{key}' is {_show(value)}, outside {span}")
        return value

    if integer:
        def check(value: Any, parent: str, part: str | int) -> Any:
            if value.__class__ is int and lo <= value <= hi:
                return value
            return slow(value, parent, part)
    else:
        def check(value: Any, parent: str, part: str | int) -> Any:
            kind = value.__class__
            if (kind is float or kind is int) and lo <= value <= hi:
                return value
            return slow(value, parent, part)
    return check


def _too_many(value: Any, parent: str, part: str | int, most: int, what: str) -> ResultFormatError:
    return ResultFormatError(f"profile key '{_key(parent, part)}' holds {len(value):,} {what}, more than {most:,}")


def _text(most: int, nullable: bool) -> Check:
    def check(value: Any, parent: str, part: str | int) -> Any:
        if value.__class__ is str:
            if len(value) <= most:
                return value
            raise _too_many(value, parent, part, most, "characters")
        if value is None:
            if nullable:
                return None
            raise _null(parent, part)
        if not isinstance(value, str):
            raise _wrong_type(value, parent, part, "a string")
        return check(str(value), parent, part)
    return check


def free_value(value: Any, where: str = "", depth: int = 0) -> Any:
    """`value` (decoded JSON) as is, when nothing in it is what no renderer survives; else
    ResultFormatError naming the key: a number NaN, infinite or beyond MAX_MAGNITUDE, an integer
    beyond MAX_INT, a string over MAX_TEXT characters, a list or object over MAX_ITEMS, nesting
    deeper than MAX_DEPTH."""
    kind = value.__class__
    if kind is str:
        if len(value) > MAX_TEXT:
            raise ResultFormatError(f"profile key '{where}' holds {len(value):,} characters, more than {MAX_TEXT:,}")
    elif kind is int:
        if not -MAX_FREE_INT <= value <= MAX_FREE_INT:
            raise ResultFormatError(f"profile key '{where}' is {_show(value)}, outside "
                                    f"[{-MAX_FREE_INT:g}, {MAX_FREE_INT:g}]")
    elif kind is float:
        if not -MAX_MAGNITUDE <= value <= MAX_MAGNITUDE:
            raise ResultFormatError(f"profile key '{where}' is {value} (NaN or infinite), expected a finite number")
    elif kind is dict or kind is list or kind is tuple:  # tuple: a record built in memory
        if depth >= MAX_DEPTH:
            raise ResultFormatError(f"profile key '{where}' is nested more than {MAX_DEPTH} deep")
        if len(value) > MAX_ITEMS:
            raise ResultFormatError(f"profile key '{where}' holds {len(value):,} items, more than {MAX_ITEMS:,}")
        if kind is dict:
            for k, v in value.items():
                free_value(v, _key(where, k if k.__class__ is str else str(k)), depth + 1)
        else:
            for i, v in enumerate(value):
                free_value(v, _key(where, i), depth + 1)
    elif kind is not bool and isinstance(value, numbers.Real):  # a record built in memory: numpy's numbers
        free_value(float(value), where, depth)
    return value


def _of_type(kind: type, word: str, nullable: bool) -> Check:
    def check(value: Any, parent: str, part: str | int) -> Any:
        if value.__class__ is kind:
            return value
        if value is None:
            if nullable:
                return None
            raise _null(parent, part)
        if not isinstance(value, kind):
            raise _wrong_type(value, parent, part, word)
        return value
    return check


def _label(nullable: bool) -> Check:
    """A string or an integer (a device: "cpu", 0)."""
    def check(value: Any, parent: str, part: str | int) -> Any:
        kind = value.__class__
        if (kind is str and len(value) <= MAX_TEXT) or (kind is int and -MAX_INT <= value <= MAX_INT):
            return value
        if kind is str:
            raise _too_many(value, parent, part, MAX_TEXT, "characters")
        if kind is int:
            raise ResultFormatError(f"profile key '{_key(parent, part)}' is {_show(value)}, beyond any real value "
                                    f"(at most {MAX_INT:g})")
        if value is None:
            if nullable:
                return None
            raise _null(parent, part)
        if type(value) is bool or not isinstance(value, (str, int)):
            raise _wrong_type(value, parent, part, "a string or integer")
        return value
    return check


def _anything(value: Any, parent: str, part: str | int) -> Any:
    return free_value(value, _key(parent, part))


def _items(each: Check, nullable: bool, most: int) -> Check:
    def check(value: Any, parent: str, part: str | int) -> Any:
        if value.__class__ is not list:
            if value is None:
                if nullable:
                    return None
                raise _null(parent, part)
            if not isinstance(value, list):
                raise _wrong_type(value, parent, part, "a list")
        if len(value) > most:
            raise _too_many(value, parent, part, most, "items")
        key = _key(parent, part)
        return [each(v, key, i) for i, v in enumerate(value)]
    return check


def _mapping(values: Check, nullable: bool, most: int) -> Check:
    def check(value: Any, parent: str, part: str | int) -> Any:
        if value.__class__ is not dict:
            if value is None:
                if nullable:
                    return None
                raise _null(parent, part)
            if not isinstance(value, dict):
                raise _wrong_type(value, parent, part, "an object")
        if len(value) > most:
            raise _too_many(value, parent, part, most, "keys")
        key = _key(parent, part)
        return {k: values(v, key, k if k.__class__ is str else str(k)) for k, v in value.items()}
    return check


def _free_object(plan: list[tuple[str, Check, int]], nullable: bool) -> Check:
    """Any object, returned as is; the keys of `plan` checked where present."""
    def check(value: Any, parent: str, part: str | int) -> Any:
        if value.__class__ is not dict:
            if value is None:
                if nullable:
                    return None
                raise _null(parent, part)
            if not isinstance(value, dict):
                raise _wrong_type(value, parent, part, "an object")
        key = _key(parent, part)
        if plan:
            _read_fields(value, key, plan)  # first: a declared key's error says what it expected
        return free_value(value, key)
    return check


def _read_fields(data: dict, key: str, plan: list[tuple[str, Check, int]]) -> dict[str, Any]:
    """The checked values of `plan`'s fields in `data`, as keyword arguments (a defaulted field left out)."""
    out = {}
    for name, check, mode in plan:
        value = data.get(name, _ABSENT)
        if value is _ABSENT:
            if mode == _NEEDED:
                raise ResultFormatError(f"profile is missing '{_key(key, name)}'")
            if mode == _OPTIONAL:
                out[name] = None
            continue
        if value is None and (mode == _OPTIONAL or mode == _DEFAULT):
            if mode == _OPTIONAL:
                out[name] = None
            continue
        out[name] = check(value, key, name)
    return out


def _record(make: Callable[..., Any] | None, plan: list[tuple[str, Check, int]], nullable: bool,
            null_is_null: bool) -> Check:
    """A nested record: `make(**fields)`, or the dict of its fields (`make` None: a TypedDict)."""
    def check(value: Any, parent: str, part: str | int) -> Any:
        if value.__class__ is not dict:
            if value is None and nullable:
                return None
            if value is None and null_is_null:
                raise _null(parent, part)
            if not isinstance(value, dict):
                raise ResultFormatError(f"profile key '{_key(parent, part)}' is not an object")
        out = _read_fields(value, _key(parent, part), plan)
        return out if make is None else make(**out)
    return check


def _terse(inner: Check, kind: type) -> Check:
    """The type error as the top of profile.json has always worded it: "profile key 'metrics' has type list"."""
    def check(value: Any, parent: str, part: str | int) -> Any:
        if not isinstance(value, kind):
            raise ResultFormatError(f"profile key '{_key(parent, part)}' has type {type(value).__name__}")
        return inner(value, parent, part)
    return check


def peel(annotation: Any) -> tuple[Any, tuple[Any, ...], bool]:
    """(the type, its Annotated metadata, whether null is allowed) of an annotation.

    `str | int` comes back as the tuple (str, int); `Pct | None` as (float, (Range(0, 100),), True).
    """
    metadata: tuple[Any, ...] = ()
    nullable = False
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation, metadata = annotation.__origin__, metadata + annotation.__metadata__
        elif origin is typing.Required or origin is typing.NotRequired:  # a TypedDict's key, required or not
            annotation = typing.get_args(annotation)[0]
        elif origin is typing.Union or origin is types.UnionType:
            args = typing.get_args(annotation)
            rest = tuple(a for a in args if a is not type(None))
            nullable = nullable or len(rest) < len(args)
            if len(rest) != 1:
                return rest, metadata, nullable
            annotation = rest[0]
        else:
            return annotation, metadata, nullable


class _Compiler:
    """Turns annotations into checks, each record's fields once (`terse`: the records whose required
    fields word a type error the old way, see `_terse`)."""

    def __init__(self, terse: tuple[type, ...]):
        self.terse = terse
        self.plans: dict[type, list[tuple[str, Check, int]]] = {}

    def check(self, annotation: Any, where: str) -> Check:
        base, metadata, nullable = peel(annotation)
        rule = next((m for m in metadata if isinstance(m, Range)), None)
        size = next((m.most for m in metadata if isinstance(m, Size)), None)
        if base is bool:
            return _of_type(bool, "true or false", nullable)
        if base is str:
            return _text(min(size or MAX_TEXT, MAX_TEXT), nullable)
        if base is int or base is float:
            if rule is None:
                raise TypeError(f"{where}: a number needs its Range: Annotated[{base.__name__}, Range(low, high)]")
            return _number(rule, base is int, nullable)
        if isinstance(base, tuple):
            if set(base) == {str, int}:
                return _label(nullable)
            raise TypeError(f"{where}: no rule for the union {base}")
        if base is Any:
            return _anything
        origin, args = typing.get_origin(base), typing.get_args(base)
        if origin is list:
            return _items(self.check(args[0], where + "[]"), nullable, min(size or MAX_ITEMS, MAX_ITEMS))
        if base is dict or origin is dict:
            if not args or args[1] is Any:
                keys = next((m for m in metadata if isinstance(m, Keys)), None)
                return _free_object(self.plan(keys.of) if keys else [], nullable)
            return _mapping(self.check(args[1], where + "{}"), nullable, min(size or MAX_ITEMS, MAX_ITEMS))
        if dataclasses.is_dataclass(base):
            return _record(base, self.plan(base), nullable, null_is_null=False)
        if typing.is_typeddict(base):
            return _record(None, self.plan(base), nullable, null_is_null=True)
        raise TypeError(f"{where}: no rule for {base!r}")

    def plan(self, cls: type) -> list[tuple[str, Check, int]]:
        """(field name, check, how a missing key or null reads) for each field of a dataclass or TypedDict."""
        if cls in self.plans:
            return self.plans[cls]
        plan = self.plans[cls] = []
        hints = typing.get_type_hints(cls, include_extras=True)
        if typing.is_typeddict(cls):
            for name, annotation in hints.items():
                mode = _NEEDED if name in cls.__required_keys__ else _MAY_BE_ABSENT
                plan.append((name, self.check(annotation, f"{cls.__name__}.{name}"), mode))
            return plan
        for f in dataclasses.fields(cls):
            annotation, where = hints[f.name], f"{cls.__name__}.{f.name}"
            base, metadata, nullable = peel(annotation)
            if VERSION_TAG in metadata:
                continue
            has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            if nullable and has_default and f.default is not None:
                raise TypeError(f"{where}: a field that may be null has no default but None")
            mode = (_OPTIONAL if nullable else _DEFAULT if has_default and REQUIRED not in metadata else _NEEDED)
            check = self.check(annotation, where)
            if mode == _NEEDED and cls in self.terse:
                check = _terse(check, _json_kind(base))
            plan.append((f.name, check, mode))
        return plan


def _json_kind(base: Any) -> type | tuple[type, ...]:
    if dataclasses.is_dataclass(base) or typing.is_typeddict(base) or typing.get_origin(base) is dict:
        return dict
    origin = typing.get_origin(base)
    return origin if origin is not None else base


def loader(cls: type, terse: tuple[type, ...] = ()) -> Callable[..., Any]:
    """`load(data, where="")`: the record `cls` from its JSON object, every field checked by its
    annotation; raises ResultFormatError naming the key (`where` is the prefix: "cluster.").

    The checks are compiled on the first load, not at import: compiling the Profile's takes tens of
    ms, which every `tbd` command paid at start-up though most never load a result.

    Raises:
        TypeError: on the first load, a field whose annotation gives no rule (a number without a Range).
    """
    compiled: list[Check] = []

    def load(data: Any, where: str = "") -> Any:
        if not compiled:
            compiled.append(_Compiler(terse).check(cls, getattr(cls, "__name__", "record")))
        return compiled[0](data, "", where.rstrip("."))
    return load


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
