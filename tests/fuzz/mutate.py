"""Deterministic hostile mutations of the committed fixture traces of every framework.

`case(fixture, index)` is one mutated file, always the same bytes for the same (fixture, index,
max_string): the random generator is seeded with that text. A case chains one to three
operators, each a plausible corruption or attack: events dropped, duplicated or reordered; a
field or an argument given another type or a hostile value (huge, negative, NaN-like strings,
control characters, lone surrogates); extreme times; huge strings; deep nesting; the top level
replaced; then, on the bytes, truncation at a random offset, flipped or inserted bytes, invalid
UTF-8, non-JSON NaN tokens, and gzip corruption (truncated, flipped, trailing garbage, several
members).

Used by tests/fuzz/test_corpus.py (a few hundred cases) and bench/fuzz_corpus.py (thousands),
which loads this file by path. No dependency on tbd: the cases are only bytes.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
import random
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

FIXTURE_DIR = Path(__file__).resolve().parent.parent / "fixtures"

#: fixture name -> (file, reader): "kineto" runs through `tbd analyze`, the others through their reader.
FIXTURES = {
    "kineto_cuda": ("kineto_cuda_synthetic.json", "kineto"),
    "kineto_cpu": ("kineto_cpu_small.json.gz", "kineto"),
    "mxnet_small": ("mxnet_cpu_small.json.gz", "mxnet"),
    "mxnet_hybrid": ("mxnet_cpu_hybrid.json.gz", "mxnet"),
    "mxnet_shapes": ("mxnet_cpu_hybrid_shapes.json", "mxnet_shapes"),  # the shape log mutated, the dump kept
    "tensorflow_small": ("tensorflow_cpu_small.json.gz", "tensorflow"),
    "tensorflow_lstm": ("tensorflow_cpu_lstm.json.gz", "tensorflow"),
}
MXNET_SHAPES_OF = "mxnet_cpu_hybrid.json.gz"  # the dump whose shape log mxnet_shapes mutates


def real_gpu_fixtures() -> dict[str, tuple[str, str]]:
    """The real public GPU traces of every PyTorch era, where tests/fixtures/gpu holds them.

    They are fetched, not committed (tests/fixtures/README.md), so only bench/fuzz_corpus.py
    mutates them, and only on a machine that has them; CI's corpus stays on FIXTURES.
    """
    return {"gpu_" + p.name.split(".")[0]: (f"gpu/{p.name}", "kineto")
            for p in sorted((FIXTURE_DIR / "gpu").glob("*.json.gz"))}


def _fixture(name: str) -> tuple[str, str]:
    return FIXTURES[name] if name in FIXTURES else real_gpu_fixtures()[name]


@dataclass(frozen=True)
class Case:
    """One mutated file: its bytes, the name to write it under and what was done to it."""

    fixture: str
    index: int
    reader: str  # "kineto", "mxnet", "mxnet_shapes" or "tensorflow"
    mutation: str
    data: bytes
    suffix: str  # ".json" or ".json.gz"


@lru_cache(maxsize=None)
def _original(fixture: str) -> tuple[str, bool]:
    """The fixture's JSON text and whether it was gzipped."""
    raw = (FIXTURE_DIR / _fixture(fixture)[0]).read_bytes()
    gz = raw[:2] == b"\x1f\x8b"
    return (gzip.decompress(raw) if gz else raw).decode("utf-8"), gz


def case(fixture: str, index: int, max_string: int = 1 << 16) -> Case:
    """Case `index` of `fixture`; `max_string` bounds the longest string a mutation writes."""
    rng = random.Random(f"{fixture}:{index}:{max_string}")
    text, gz = _original(fixture)
    obj = json.loads(text)
    names = []
    reader = _fixture(fixture)[1]
    shape_log = reader == "mxnet_shapes"
    for _ in range(rng.randint(1, 3)):
        op = rng.choice(_SHAPE_LOG_OPS if shape_log else _JSON_OPS)
        obj = op(rng, obj, max_string)
        names.append(op.__name__.strip("_"))
    data = _serialise(rng, obj)
    if shape_log:  # read as a run directory's JSON file: only its values matter here
        return Case(fixture, index, reader, "+".join(names), data, ".json")
    if rng.random() < 0.35:
        op = rng.choice(_BYTE_OPS)
        data = op(rng, data)
        names.append(op.__name__.strip("_"))
    if gz or rng.random() < 0.2:
        op = rng.choice(_GZIP_OPS) if rng.random() < 0.3 else _gzip_plain
        data = op(rng, data)
        names.append(op.__name__.strip("_"))
    return Case(fixture, index, reader, "+".join(names), data,
                ".json.gz" if data[:2] == b"\x1f\x8b" else ".json")


def cases(count_per_fixture: int, start: int = 0, max_string: int = 1 << 16, fixtures=None):
    """`count_per_fixture` cases of each fixture (all of FIXTURES unless named), from index `start`."""
    for fixture in fixtures or FIXTURES:
        for index in range(start, start + count_per_fixture):
            yield case(fixture, index, max_string)


# -- hostile values --------------------------------------------------------------------------

_HOSTILE = [None, True, False, 0, -1, 1, 7, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -2**63 - 1, 10**30, 1.5,
            -0.0, 1e-300, 1e308, -1e308, float("nan"), float("inf"), float("-inf"), "", "0", "-1", "7",
            "0x7fffffffffffffff", "1e999", "NaN", "Infinity", "abc", "stream 7", "\x1b[2J\x1b]0;pwned\x07",
            "a\x00b", "\ud800", "\udc00x", "\u202e", "ProfilerStep#", "ProfilerStep#3", "ProfilerStep#" + "9" * 30,
            "[memory]", [], {}, [[1, 2], [-3]], [[]], [1, "a", None], {"a": [1]}, "9" * 5000, [10**20], [[-5, 7]]]
_FIELD_VALUES = {
    "ph": ["X", "i", "B", "E", "b", "e", "M", "C", "s", "f", "x", ""],
    "cat": ["cpu_op", "kernel", "cuda_runtime", "cuda_driver", "user_annotation", "gpu_memcpy", "Trace", "Operator",
            "Kernel", "Runtime", "operator", "Device Storage", "tf_op", "step", "traceme", "tbd"],
    "s": ["t", "g", "p"],
}
_KEYS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "s", "args", "id"]
_ARG_KEYS = ["Input Dims", "Input dims", "Input type", "Concrete Inputs", "correlation", "device", "stream", "Addr",
             "Bytes", "Total Allocated", "Device Id", "External id", "ts_ps", "dur_ps", "tf_op", "tf_type", "name",
             "step_num", "deviceProperties"]


def _hostile(rng: random.Random, key: str | None, max_string: int):
    if key in _FIELD_VALUES and rng.random() < 0.5:
        return rng.choice(_FIELD_VALUES[key])
    roll = rng.random()
    if roll < 0.1:
        return _long_string(rng, max_string)
    if roll < 0.18:
        return _deep(rng)
    return copy.deepcopy(rng.choice(_HOSTILE))


def _long_string(rng: random.Random, max_string: int) -> str:
    size = int(2 ** rng.uniform(0, math.log2(max_string)))  # log-uniform: mostly short, now and then max_string
    unit = rng.choice(["k", "x y ", "<a, b>", "\x1b[0m", "é", "ProfilerStep#1", "\ud83d\ude00"])
    return (unit * (size // len(unit) + 1))[:size]


def _deep(rng: random.Random):
    depth = rng.choice([10, 100, 500, 990, 1200, 5000])
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


# -- operators on the decoded JSON -------------------------------------------------------------

def _events(obj) -> list | None:
    if isinstance(obj, dict) and isinstance(obj.get("traceEvents"), list):
        return obj["traceEvents"]
    return obj if isinstance(obj, list) else None


def _some(rng: random.Random, events: list, most: int = 8) -> list:
    dicts = [e for e in events if isinstance(e, dict)]
    return rng.sample(dicts, min(len(dicts), rng.randint(1, most))) if dicts else []


def _drop(rng, obj, max_string):
    events = _events(obj)
    if events:
        keep = rng.random()
        events[:] = [e for e in events if rng.random() < keep]
    return obj


def _duplicate(rng, obj, max_string):
    events = _events(obj)
    if events:
        for e in rng.sample(events, min(len(events), rng.randint(1, 50))):
            # A shallow copy: later operators replace values, never edit them in place.
            events.insert(rng.randrange(len(events) + 1), dict(e) if isinstance(e, dict) else e)
    return obj


def _reorder(rng, obj, max_string):
    events = _events(obj)
    if events:
        if rng.random() < 0.5:
            rng.shuffle(events)
        else:
            events.reverse()
    return obj


def _retype_field(rng, obj, max_string):
    for e in _some(rng, _events(obj) or []):
        key = rng.choice(_KEYS + list(e))
        e[key] = _hostile(rng, key, max_string)
    return obj


def _retype_arg(rng, obj, max_string):
    for e in _some(rng, _events(obj) or []):
        args = e.get("args") if isinstance(e.get("args"), dict) else e.setdefault("args", {})
        if isinstance(args, dict):
            key = rng.choice(_ARG_KEYS + list(args))
            args[key] = _hostile(rng, key, max_string)
    return obj


_EXTREME = [-1, -1000, 0, -0.001, 0.0004, 1e15, 9.2e15, 1.7e16, 10**19, 2**63 // 1000 + 1, 1e300, -1e300,
            "1712195495505582.988", 1712195495505582.988, -9e15]


def _extreme_times(rng, obj, max_string):
    for e in _some(rng, _events(obj) or [], 30):
        key = rng.choice(["ts", "dur"])
        e[key] = rng.choice(_EXTREME)
        args = e.get("args")
        if isinstance(args, dict) and rng.random() < 0.5:
            args[rng.choice(["ts_ps", "dur_ps"])] = rng.choice([-5, 0, 10**25, 2**63, 1.5, -(10**20)])
    return obj


def _negative_durations(rng, obj, max_string):
    for e in _some(rng, _events(obj) or [], 200):
        if "dur" in e:
            e["dur"] = -abs(e["dur"]) if isinstance(e["dur"], (int, float)) else -1
    return obj


def _huge_string(rng, obj, max_string):
    for e in _some(rng, _events(obj) or [], 3):
        key = rng.choice(["name", "cat", "name", "tf_op"])
        target = e["args"] if key == "tf_op" and isinstance(e.get("args"), dict) else e
        target[key] = _long_string(rng, max_string)
    return obj


def _nest(rng, obj, max_string):
    for e in _some(rng, _events(obj) or [], 3):
        args = e.setdefault("args", {})
        if isinstance(args, dict):
            args[rng.choice(["Input Dims", "Input type", "Concrete Inputs", "other"])] = _deep(rng)
    return obj


def _control_names(rng, obj, max_string):
    for e in _some(rng, _events(obj) or [], 10):
        e["name"] = rng.choice(["\x1b[31mred\x1b[0m", "nul\x00", "bell\x07", "\r\rover", "\u202eevil", "\ud800x",
                                "tab\tname", "line\nbreak"]) + str(e.get("name", ""))
    return obj


def _memory_totals(rng, obj, max_string):
    for e in _events(obj) or []:
        args = e.get("args") if isinstance(e, dict) else None
        if isinstance(args, dict) and ("Total Allocated" in args or e.get("cat") == "Device Storage"):
            key = "Total Allocated" if "Total Allocated" in args else e.get("name")
            if isinstance(key, str) and rng.random() < 0.5:
                args[key] = rng.choice([-10**12, -1, 2**63, 10**30, -4096, 0, "x", 1.5])
            if "Bytes" in args and rng.random() < 0.3:
                args["Bytes"] = rng.choice([-10**12, 10**12, 2**64, -1.5])
    return obj


def _shape_junk(rng, obj, max_string):
    dims = [[[-33, 100], [100, -100]], [[10**15, 10**15], [10**15, 10**15]], [["a"]], [[1.5, 2]], [[True]],
            [[None]], [[2**62, 2**62, 2**62]], [[1] * 10000], "not a list", {"a": 1}, [[10**30]]]
    for e in _some(rng, _events(obj) or [], 10):
        args = e.setdefault("args", {})
        if isinstance(args, dict):
            args["Input Dims"] = copy.deepcopy(rng.choice(dims))
            if rng.random() < 0.3:
                args["Concrete Inputs"] = [rng.choice(["(" * 300, "[" * 5000, "1e999", "9" * 5000, "[-1, -1]", "x"])]
    # TF and MXNet logs: the shapes of graph nodes.
    shapes = obj.get("tfOpShapes") if isinstance(obj, dict) else None
    if isinstance(shapes, dict) and shapes:
        for key in rng.sample(list(shapes), min(len(shapes), 5)):
            node = shapes[key]
            if isinstance(node, dict):
                node[rng.choice(["inputs", "outputs", "dtype", "attrs", "type", "input_ops"])] = copy.deepcopy(
                    rng.choice(dims + _HOSTILE[:20]))
    return obj


def _shape_log(rng, obj, max_string):
    """The MXNet shape log: steps, calls and their fields retyped."""
    steps = obj.get("steps") if isinstance(obj, dict) else None
    if not isinstance(steps, dict) or rng.random() < 0.1:
        return _hostile(rng, None, max_string) if rng.random() < 0.5 else {"schema": "tbd.mxnet_shapes/1"}
    for calls in steps.values():
        if isinstance(calls, list):
            for call in rng.sample(calls, min(len(calls), 4)) if calls else []:
                if isinstance(call, dict):
                    key = rng.choice(list(call) + ["op", "params", "aggregate", "dtype"])
                    call[key] = _hostile(rng, key, max_string)
    return obj


def _top_level(rng, obj, max_string):
    roll = rng.random()
    if roll < 0.3:
        return copy.deepcopy(rng.choice([[], {}, "x", 0, None, {"traceEvents": {}}, {"traceEvents": [1, 2]},
                                         {"traceEvents": None}, [1], [[1]], {"traceEvents": [[]]}]))
    if isinstance(obj, dict):
        key = rng.choice(["schema", "tfOpShapes", "deviceProperties", "displayTimeUnit", "traceEvents",
                          "baseTimeNanoseconds", "distributedInfo"])
        if key == "deviceProperties" and rng.random() < 0.7:
            obj[key] = [{"name": _hostile(rng, None, max_string), "computeMajor": _hostile(rng, None, max_string),
                         "computeMinor": _hostile(rng, None, max_string), "numSms": _hostile(rng, None, max_string),
                         "totalGlobalMem": _hostile(rng, None, max_string), "warpSize": 32}]
        else:
            obj[key] = _hostile(rng, key, max_string)
    return obj


_JSON_OPS = [_drop, _duplicate, _reorder, _retype_field, _retype_field, _retype_arg, _retype_arg, _extreme_times,
             _negative_durations, _huge_string, _nest, _control_names, _memory_totals, _shape_junk, _top_level]
_SHAPE_LOG_OPS = [_shape_log, _shape_log, _shape_junk]


def _serialise(rng: random.Random, obj) -> bytes:
    """JSON text; NaN/Infinity tokens where floats are not finite; raw surrogates as invalid UTF-8."""
    try:
        text = json.dumps(obj, ensure_ascii=rng.random() < 0.7)
    except (RecursionError, ValueError):
        text = json.dumps({"traceEvents": []})
    return text.encode("utf-8", "surrogatepass")


# -- operators on bytes --------------------------------------------------------------------

def _truncate(rng, data: bytes) -> bytes:
    return data[:rng.randrange(len(data) + 1)]


def _flip(rng, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 20)):
        if out:
            out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


def _insert(rng, data: bytes) -> bytes:
    at = rng.randrange(len(data) + 1)
    junk = rng.choice([b"\xff\xfe", b"\x00" * 10, b"\xed\xa0\x80", b"NaN", b"-Infinity", b"\\ud800", b"]}", b"{["])
    return data[:at] + junk + data[at:]


def _number_tokens(rng, data: bytes) -> bytes:
    """Numbers JSON allows but no writer means (1e999999999, 5,000 digits) and tokens it does not (NaN)."""
    tokens = [b"NaN, \"x\": ", b"Infinity, \"x\": ", b"-", b"1e999999999, \"x\": ", b"-1e-999999, \"x\": ",
              b"1" * 5000 + b", \"x\": ", b"1" * 5000 + b".5, \"x\": ", b"1e19, \"x\": "]
    for key in (b'"dur": ', b'"ts": ', b'"Bytes": ', b'"Total Allocated": ', b'"ts_ps": ', b'"Memory: cpu/0": '):
        data = data.replace(key, key + rng.choice(tokens), rng.randint(1, 5))
    return data


def _gzip_plain(rng, data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _gzip_truncated(rng, data: bytes) -> bytes:
    packed = gzip.compress(data, mtime=0)
    return packed[:rng.randrange(2, len(packed) + 1)]


def _gzip_flipped(rng, data: bytes) -> bytes:
    return _flip(rng, gzip.compress(data, mtime=0))


def _gzip_trailing(rng, data: bytes) -> bytes:
    return gzip.compress(data, mtime=0) + rng.choice([b"\x00" * 100, b"garbage", b"\x1f\x8b\x08"])


def _gzip_members(rng, data: bytes) -> bytes:
    cut = rng.randrange(len(data) + 1)
    return gzip.compress(data[:cut], mtime=0) + gzip.compress(data[cut:], mtime=0)


def _gzip_bomb(rng, data: bytes) -> bytes:
    """A 300 KB member inflating to 300 MiB of spaces (valid JSON whitespace), then the trace: refused."""
    return _bomb_head() + gzip.compress(data, mtime=0)


@lru_cache(maxsize=1)
def _bomb_head() -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    blank = b" " * (1 << 20)
    return b"".join(packer.compress(blank) for _ in range(300)) + packer.flush()


_BYTE_OPS = [_truncate, _flip, _insert, _number_tokens, _number_tokens]
_GZIP_OPS = [_gzip_truncated, _gzip_flipped, _gzip_trailing, _gzip_members, _gzip_bomb]
