"""Field-by-field mutation of any JSON document tbd writes and reads back (profile.json, sweep.json,
a saved comparison, spec.json, iterations.json, raw/*.json), and the hostile names put into them.

`field_paths(doc)` lists one concrete path per field of the document's shape (list indices
collapsed: `kernels[*].grid` once, not once per kernel), so that case i of a document walks every
field in turn, each with every value of `VALUE_OPS` (a huge integer, -1, NaN and Infinity tokens,
1e308, each wrong type, a hostile string, the key removed, deep nesting, a huge list).
`serialise` writes NaN/Infinity as the tokens Python's json module accepts back, 10**400 as its
digits and the deep-nesting marker as 5,000 brackets, which no dumps() could write.

No dependency on tbd: the cases are only bytes. Used by mutate_results.py.
"""

from __future__ import annotations

import copy
import json
import random

DEEP = "\x00tbd-fuzz-deep\x00"  # replaced by 5,000 nested brackets when serialised
HUGE_INT = 10**400

#: Names that reach text, CSV, HTML and figures: mathtext, markup, formulas, terminal controls.
HOSTILE_NAMES = [
    "$x$", "cost $5 and $6", "\\undefinedcmd", "$\\undefinedcmd$", "a\\b_c^d{e}%f#g&h~",
    "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "</style><script>alert(1)</script>",
    "\"><svg/onload=alert(1)>", "javascript:alert(1)", "<a href=\"javascript:alert(1)\">x</a>",
    "=HYPERLINK(\"http://evil.example\",\"click\")", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)",
    "\tleading tab", "\x1b[2J\x1b]0;pwned\x07", "nul\x00byte", "line\nbreak\rreturn", "\u202eexe.tnemucod",
    "\u200f\u200erlm", "é—·中文😀", "x" * 300_000,
]

#: (name, value or marker): what a field is set to. "@remove" removes the key (or list item).
VALUE_OPS = [
    ("huge_int", HUGE_INT), ("minus_one", -1), ("nan", float("nan")), ("inf", float("inf")),
    ("minus_inf", float("-inf")), ("big_float", 1e308), ("tiny_float", 5e-324), ("zero", 0),
    ("minus_big", -(2**63) - 1), ("list", [1, "a", None]), ("object", {"a": [1]}), ("string", "abc"),
    ("bool", True), ("null", None), ("hostile_string", "@hostile"), ("remove", "@remove"), ("deep", DEEP),
    ("huge_list", "@huge_list"), ("empty_list", []), ("empty_string", ""),
]


def field_paths(doc) -> list[tuple]:
    """One concrete path per field of `doc`'s shape, in document order (list items: the first, and
    where items differ in keys, the first of each key set)."""
    found: dict[tuple, tuple] = {}

    def walk(node, path: tuple, shape: tuple) -> None:
        found.setdefault(shape, path)
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, (*path, key), (*shape, key))
        elif isinstance(node, list):
            seen = set()
            for i, item in enumerate(node):
                signature = tuple(sorted(item)) if isinstance(item, dict) else type(item).__name__
                if signature not in seen or i == len(node) - 1:
                    seen.add(signature)
                    walk(item, (*path, i), (*shape, "*"))
    walk(doc, (), ())
    return list(found.values())


def set_at(doc, path: tuple, value, rng: random.Random, in_place: bool = False):
    """`doc` (a deep copy, unless `in_place`) with the field at `path` replaced by `value` (or a VALUE_OPS marker)."""
    doc = doc if in_place else copy.deepcopy(doc)
    if not path:
        return _resolve(value, None, rng) if value != "@remove" else {}
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if value == "@remove":
        del parent[last]
    else:
        parent[last] = _resolve(value, parent[last], rng)
    return doc


def _resolve(value, old, rng: random.Random):
    if value == "@hostile":
        return rng.choice(HOSTILE_NAMES)
    if value == "@huge_list":
        return [copy.deepcopy(old)] * 200_000 if not isinstance(old, (dict, list)) else [copy.deepcopy(old)] * 2_000
    return copy.deepcopy(value)


def name_paths(doc, keys) -> list[tuple]:
    """Every path whose value is a string under a key in `keys` (names, labels, notes)."""
    out: list[tuple] = []

    def walk(node, path: tuple) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(value, str) and key in keys:
                    out.append((*path, key))
                elif isinstance(value, list) and key in keys and all(isinstance(v, str) for v in value):
                    out.extend((*path, key, i) for i in range(len(value)))
                else:
                    walk(value, (*path, key))
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, (*path, i))
    walk(doc, ())
    return out


def serialise(doc) -> bytes:
    """JSON bytes: NaN/Infinity tokens, huge integers as digits, DEEP as 5,000 nested brackets."""
    text = json.dumps(doc, ensure_ascii=False, allow_nan=True)
    text = text.replace(json.dumps(DEEP), "[" * 5000 + "]" * 5000)
    return text.encode("utf-8", "surrogatepass")
