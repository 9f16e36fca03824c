"""Deterministic hostile inputs of `tbd tta`: MLPerf result folders and logs, DAWNBench entries.

`case(kind, index)` is always the same files for the same (kind, index): the random generator is
seeded with that text. Each case is a small tree of files (relative path -> bytes) plus the paths
given to `tbd tta` and the members the runner must make itself (`specials`: a FIFO, a symlink to
/dev/zero or /dev/urandom, a folder of thousands of files), which bytes cannot carry.

Kinds:
- "mlperf_folder": training_results_v4.0/<org>/results/<system>/resnet/result_*.txt with
  systems/<system>.json (an open-division submission small enough for mlperf-logging's compliance
  checker to pass: tests/unit/test_mlperf_scoring.py's shape), some logs mutated, the system JSON or
  scaling.json mutated, hostile members;
- "mlperf_log": one result log given alone, mutated;
- "mlperf_real": one of the real v4.0 logs under /work/shared/mlperf, mutated (only where present:
  `kinds()` leaves it out elsewhere);
- "dawnbench": a committed DAWNBench entry (tests/fixtures/dawnbench: JSON + TSV, or an inference
  JSON) mutated.

Mutations: truncated lines, broken `:::MLLOG` JSON, huge, negative or non-finite times, run_stop
(and other keys) missing or duplicated, keys duplicated inside one JSON object, hostile values and
metadata (huge, negative, NaN tokens, strings, lists, deep nesting), lines reordered, BOMs, CRLF,
UTF-16, binary bytes, truncation of the file, an empty file, a system JSON that is not JSON, and
the members above. No dependency on tbd: the cases are only bytes. bench/fuzz_corpus.py loads this
file by path; tests/fuzz/test_tta_corpus.py runs a CI share.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

FIXTURE_DIR = Path(__file__).resolve().parent.parent / "fixtures"
DAWNBENCH_DIR = FIXTURE_DIR / "dawnbench"
SHARED_MLPERF = Path("/work/shared/mlperf/training_results_v4.0")
ROUND = "training_results_v4.0"
KINDS = ("mlperf_folder", "mlperf_log", "dawnbench")


def kinds() -> tuple[str, ...]:
    """Every kind this machine can make: the real MLPerf logs only where they are."""
    return KINDS + (("mlperf_real",) if _real_logs() else ())


@dataclass(frozen=True)
class Case:
    """One hostile input of `tbd tta`: files to write under a folder, and what to pass."""

    kind: str
    index: int
    mutation: str
    files: dict[str, bytes]  # relative path -> bytes
    args: tuple[str, ...]  # the PATH arguments, relative to the folder the files are written in
    #: relative path -> "fifo", "devzero", "urandom", "many:N" (a folder of N small files), "dirloop"
    specials: dict[str, str] = field(default_factory=dict)


def case(kind: str, index: int) -> Case:
    rng = random.Random(f"tta:{kind}:{index}")
    return _MAKERS[kind](rng, index)


def cases(n: int, start: int = 0, kinds_: tuple[str, ...] | None = None):
    """`n` cases of each kind (all of `kinds()` unless named), from index `start`."""
    for kind in kinds_ or kinds():
        for index in range(start, start + n):
            yield case(kind, index)


# --- hostile values ----------------------------------------------------------------------------------

_HOSTILE = [None, True, False, 0, -1, 1, 2**31, 2**53 + 1, 2**63, 2**64, -2**63 - 1, 10**30, 10**400, 1.5, -0.0,
            1e-300, 5e-324, 1e308, -1e308, "NaN", "Infinity", "-Infinity", "", "0", "-1", "1e999", "abc", "nan",
            "\x1b[2J\x1b]0;pwned\x07", "a\x00b", "\u202e", "<script>alert(1)</script>", "=HYPERLINK(\"x\")", "$\\x$",
            [], {}, [1, 2], {"a": [1]}, "9" * 400]
#: Non-JSON tokens some writers emit; put in the text as they are.
_RAW_TOKENS = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1" * 400, "0x10", "+5", ".5", "1.", "--1",
               "nan", "inf", "undefined", "1e-400"]


def _hostile(rng: random.Random):
    roll = rng.random()
    if roll < 0.08:
        return "x" * rng.choice([1000, 20_000])
    if roll < 0.14:
        value: object = 1
        for _ in range(rng.choice([50, 500, 3000])):
            value = [value]
        return value
    return rng.choice(_HOSTILE)


def _dumps(obj) -> str:
    try:
        return json.dumps(obj, allow_nan=True)
    except (ValueError, RecursionError):
        return '"unserialisable"'


# --- MLPerf logs -------------------------------------------------------------------------------------

T0 = 1_700_000_000_000


def _event(t: float, key: str, value=None, **meta) -> dict:
    return {"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME", "key": key, "value": value,
            "metadata": {"file": "train.py", "lineno": 1, **meta}}


def _log_events(rng: random.Random, minutes: float, converge: bool = True) -> list[dict]:
    """A small open-division resnet run as mlperf-logging writes one: blocks, evals, run_stop."""
    run_start = T0 + 60_000
    end = run_start + int(minutes * 60_000)
    blocks = rng.randint(1, 4)
    events = [_event(T0, "submission_org", "Lab"), _event(T0, "submission_platform", "box"),
              _event(T0, "submission_division", "open"), _event(T0, "submission_status", "onprem"),
              _event(T0, "submission_benchmark", "resnet"), _event(T0, "cache_clear", True),
              _event(T0, "init_start"), _event(T0, "global_batch_size", 256), _event(T0, "train_samples", 1000),
              _event(T0, "eval_samples", 100), _event(run_start - 1, "init_stop"), _event(run_start, "run_start")]
    span = (end - run_start) / blocks
    for b in range(blocks):
        s = run_start + b * span
        events += [_event(s, "block_start", None, first_epoch_num=b + 1, epoch_count=1, samples_count=1000),
                   _event(s + span * 0.8, "block_stop", None, first_epoch_num=b + 1),
                   _event(s + span * 0.8, "eval_start", None, epoch_num=b + 1),
                   _event(s + span * 0.95, "eval_accuracy", 0.5 + 0.27 * (b + 1) / blocks, epoch_num=b + 1),
                   _event(s + span * 0.95, "eval_stop", None, epoch_num=b + 1)]
    events.append(_event(end, "run_stop", None, status="success" if converge else "aborted"))
    return events


def _lines_of(events: list[dict], rng: random.Random) -> list[str]:
    prefix = rng.choice(["", "", "0: ", "[1,0]<stdout>: "])
    return ["console noise before the events"] + [prefix + ":::MLLOG " + _dumps(e) for e in events]


def _mutate_events(rng: random.Random, events: list[dict], names: list[str]) -> list[dict]:
    op = rng.choice(["time", "value", "meta", "drop", "dup", "reorder", "drop_run_stop", "time", "keyless",
                     "status", "top"])
    names.append(f"events_{op}")
    if not events:
        return events
    i = rng.randrange(len(events))
    e = dict(events[i]) if isinstance(events[i], dict) else {}
    if op == "time":
        e["time_ms"] = rng.choice([1e308, -1e308, 10**30, -T0, 0, -1, 2**64, 1e-300, "nan", "1e999", None, [], "12",
                                   T0 * 1000, float("nan"), float("inf"), float("-inf")])
        events[i] = e
    elif op == "value":
        e["value"] = _hostile(rng)
        events[i] = e
    elif op == "meta":
        meta = dict(e.get("metadata") or {})
        meta[rng.choice(["epoch_num", "first_epoch_num", "epoch_count", "samples_count", "status", "file"])] = \
            _hostile(rng)
        e["metadata"] = rng.choice([meta, meta, meta, None, [], "x", 5])
        events[i] = e
    elif op == "drop":
        key = rng.choice(["run_start", "run_stop", "init_start", "init_stop", "eval_accuracy", "block_start",
                          "submission_benchmark", "eval_stop"])
        names[-1] += f"({key})"
        events = [x for x in events if not isinstance(x, dict) or x.get("key") != key]
    elif op == "dup":
        key = rng.choice(["run_start", "run_stop", "eval_accuracy", "init_start", "block_stop"])
        names[-1] += f"({key})"
        found = [x for x in events if isinstance(x, dict) and x.get("key") == key]
        if found:
            at = rng.randrange(len(events) + 1)
            events.insert(at, dict(found[0], time_ms=rng.choice([found[0].get("time_ms"), T0 - 5, T0 + 10**9])))
    elif op == "reorder":
        rng.shuffle(events)
    elif op == "drop_run_stop":
        events = [x for x in events if not isinstance(x, dict) or x.get("key") != "run_stop"]
    elif op == "keyless":
        e.pop(rng.choice(["key", "time_ms", "metadata", "value"]), None)
        events[i] = e
    elif op == "status":
        stops = [j for j, x in enumerate(events) if isinstance(x, dict) and x.get("key") == "run_stop"]
        if stops:
            events[stops[-1]] = dict(events[stops[-1]], metadata={"status": _hostile(rng)})
    elif op == "top":
        events[i] = rng.choice([[], "x", 5, None, [e]])
    return events


def _mutate_lines(rng: random.Random, lines: list[str], names: list[str]) -> list[str]:
    op = rng.choice(["truncate_line", "break_json", "dup_json_key", "raw_token", "long_line", "drop_lines",
                     "dup_lines", "token_only"])
    names.append(op)
    if not lines:
        return lines
    i = rng.randrange(len(lines))
    line = lines[i]
    if op == "truncate_line":
        lines[i] = line[:rng.randrange(len(line) + 1)]
    elif op == "break_json":
        at = line.find("{")
        if at >= 0:
            cut = rng.randrange(at, len(line))
            lines[i] = line[:cut] + rng.choice(["}", "{", "\"", ",", "]", "\\", "\x00", "\udcff"]) + line[cut + 1:]
    elif op == "dup_json_key":
        key = rng.choice(["key", "time_ms", "value", "metadata"])
        value = rng.choice(['"run_stop"', '"init_start"', "-5", "1e999", "null", '"x"', "{}"])
        lines[i] = line.replace(":::MLLOG {", f':::MLLOG {{"{key}": {value}, ', 1)
    elif op == "raw_token":
        for field_name in ('"time_ms": ', '"value": ', '"epoch_num": ', '"samples_count": '):
            if field_name in line:
                start = line.index(field_name) + len(field_name)
                end = start
                while end < len(line) and line[end] not in ",}":
                    end += 1
                lines[i] = line[:start] + rng.choice(_RAW_TOKENS) + line[end:]
                break
    elif op == "long_line":
        lines.insert(i, rng.choice([":::MLLOG ", "", "x"]) + "y" * rng.choice([10_000, 300_000]))
    elif op == "drop_lines":
        j = rng.randrange(i, len(lines) + 1)
        del lines[i:j]
    elif op == "dup_lines":
        lines[i:i] = [line] * rng.choice([2, 50, 5000])
    elif op == "token_only":
        lines[i] = rng.choice([":::MLLOG", ":::MLLOG ", ":::MLLOG {}", ":::MLLOG []", ":::MLLOG null",
                               ":::MLLOG " + "[" * 5000, ':::MLLOG {"key": "run_stop"}'])
    return lines


def _mutate_bytes(rng: random.Random, data: bytes, names: list[str]) -> bytes:
    op = rng.choice(["bom", "crlf", "cr", "binary", "nul", "truncate", "utf16", "latin1", "empty", "invalid_utf8"])
    names.append(op)
    if op == "bom":
        return b"\xef\xbb\xbf" + data
    if op == "crlf":
        return data.replace(b"\n", b"\r\n")
    if op == "cr":
        return data.replace(b"\n", b"\r")
    if op == "binary":
        blob = bytes(rng.randrange(256) for _ in range(rng.choice([16, 4096])))
        at = rng.randrange(len(data) + 1)
        return data[:at] + blob + data[at:]
    if op == "nul":
        return data.replace(b" ", b"\x00", rng.randint(1, 20))
    if op == "truncate":
        return data[:rng.randrange(len(data) + 1)]
    if op == "utf16":
        return data.decode("utf-8", errors="replace").encode("utf-16")
    if op == "latin1":
        return data.replace(b"Lab", "L\xe4b\u00ff".encode("latin-1"))
    if op == "empty":
        return b""
    return data.replace(b"box", b"b\xff\xfe\xc3x")


def _mutated_log(rng: random.Random, events: list[dict], names: list[str]) -> bytes:
    for _ in range(rng.randint(0, 2)):
        events = _mutate_events(rng, events, names)
    lines = _lines_of(events, rng)
    if rng.random() < 0.5:
        lines = _mutate_lines(rng, lines, names)
    data = ("\n".join(lines) + "\n").encode("utf-8", errors="surrogateescape")
    if rng.random() < 0.3:
        data = _mutate_bytes(rng, data, names)
    return data


_SYSTEM = {"division": "open", "status": "onprem", "submitter": "Lab", "system_name": "sys", "number_of_nodes": "2",
           "host_processor_model_name": "cpu", "host_processors_per_node": "2", "host_processor_core_count": "32",
           "accelerator_model_name": "GPU-X", "accelerators_per_node": "4", "framework": "fw", "hw_notes": "",
           "sw_notes": ""}


def _system_json(rng: random.Random, names: list[str]) -> bytes | None:
    desc = dict(_SYSTEM)
    roll = rng.random()
    if roll < 0.6:
        return json.dumps(desc).encode()
    if roll < 0.75:
        key = rng.choice(list(desc))
        desc[key] = _hostile(rng)
        names.append(f"system_{key}")
        return _dumps(desc).encode()
    names.append("system_not_json")
    return rng.choice([b"not json", b"[1, 2]", b"", b"\x00\x01\x02", b'{"division": "open",', b"null",
                       b'{"accelerators_per_node": 1e999, "number_of_nodes": NaN}', b"\xef\xbb\xbf{}",
                       ("[" * 100_000).encode(), b'{"a": 1, "a": 2}'])


def _scaling(rng: random.Random, names: list[str]) -> bytes | None:
    if rng.random() < 0.8:
        return None
    names.append("scaling_json")
    return rng.choice([b'{"scaling_factor": 1.5}', b'{"scaling_factor": -1}', b'{"scaling_factor": 1e308}',
                       b'{"scaling_factor": NaN}', b'{"scaling_factor": "x"}', b"[]", b"not json", b"",
                       b'{"scaling_factor": 0}'])


_SPECIALS = ["fifo", "devzero", "urandom", "many:3000", "many:12000", "dirloop", "dir_named_log"]


def _mlperf_folder(rng: random.Random, index: int) -> Case:
    names: list[str] = []
    org = f"{ROUND}/Lab"
    files: dict[str, bytes] = {}
    specials: dict[str, str] = {}
    systems = ["sysA"] if rng.random() < 0.6 else ["sysA", "sysB"]
    for system in systems:
        folder = f"{org}/results/{system}/resnet"
        runs = rng.choice([5, 5, 5, 3, 1, 6])
        mutated = set(rng.sample(range(runs), rng.randint(0, min(runs, 2))))
        for r in range(runs):
            minutes = rng.choice([10.0, 11.0, 12.5, 13.0, 30.0, 0.001, 1e-6, 5000.0])
            events = _log_events(rng, minutes, converge=rng.random() > 0.1)
            if r in mutated:
                files[f"{folder}/result_{r}.txt"] = _mutated_log(rng, events, names)
            else:
                files[f"{folder}/result_{r}.txt"] = ("\n".join(_lines_of(events, rng)) + "\n").encode()
        system_json = _system_json(rng, names)
        if system_json is not None:
            files[f"{org}/systems/{system}.json"] = system_json
        scaling = _scaling(rng, names)
        if scaling is not None:
            files[f"{folder}/scaling.json"] = scaling
    if rng.random() < 0.25:
        special = rng.choice(_SPECIALS)
        where = f"{org}/results/sysA/resnet/" + ("result_7.txt" if not special.startswith("many") else "junk")
        if special == "dir_named_log":
            where = f"{org}/results/sysA/resnet/result_8.txt/x"
            files[where] = b"x"
        else:
            specials[where] = special
        names.append(f"special_{special}")
    given = rng.choice([ROUND, org, f"{org}/results", f"{org}/results/sysA", f"{org}/results/sysA/resnet"])
    return Case("mlperf_folder", index, "+".join(names) or "none", files, (given,), specials)


def _mlperf_log(rng: random.Random, index: int) -> Case:
    names: list[str] = []
    events = _log_events(rng, rng.choice([10.0, 0.5, 1e-6, 9999.0]), converge=rng.random() > 0.1)
    data = _mutated_log(rng, events, names)
    name = rng.choice(["result_0.txt", "result_0.txt", "run.log", "result_x.txt"])
    specials = {}
    if rng.random() < 0.05:
        specials[name] = rng.choice(["fifo", "devzero", "urandom"])
        names.append(f"special_{specials[name]}")
    return Case("mlperf_log", index, "+".join(names) or "none", {name: data}, (name,), specials)


@lru_cache(maxsize=None)
def _real_logs() -> tuple[Path, ...]:
    if not SHARED_MLPERF.is_dir():
        return ()
    logs = sorted(SHARED_MLPERF.rglob("result_*.txt"), key=lambda p: (p.stat().st_size, str(p)))
    return tuple(logs[:20])  # the smallest: the summarizer's time grows with a log's length


def _mlperf_real(rng: random.Random, index: int) -> Case:
    source = rng.choice(_real_logs())
    names = [f"real:{source.parent.parent.name}/{source.parent.name}"]
    lines = source.read_bytes().decode("latin-1").splitlines()
    for _ in range(rng.randint(1, 2)):
        lines = _mutate_lines(rng, lines, names)
    data = ("\n".join(lines) + "\n").encode("latin-1", errors="replace")
    if rng.random() < 0.3:
        data = _mutate_bytes(rng, data, names)
    rel = f"{ROUND}/{source.parent.parent.parent.parent.name}/results/{source.parent.parent.name}/" \
          f"{source.parent.name}/{source.name}"
    return Case("mlperf_real", index, "+".join(names), {rel: data}, (rel,))


# --- DAWNBench ---------------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _dawnbench_entries() -> tuple[tuple[str, bytes | None, bytes | None], ...]:
    """(relative stem, JSON bytes or None, TSV bytes or None) of each committed entry."""
    out = {}
    for path in sorted(DAWNBENCH_DIR.rglob("*")):
        if path.suffix in (".json", ".tsv"):
            stem = str(path.relative_to(DAWNBENCH_DIR).with_suffix(""))
            json_b, tsv_b = out.get(stem, (None, None))
            out[stem] = (path.read_bytes(), tsv_b) if path.suffix == ".json" else (json_b, path.read_bytes())
    return tuple((stem, j, t) for stem, (j, t) in out.items())


def _mutate_tsv(rng: random.Random, data: bytes, names: list[str]) -> bytes:
    lines = data.decode("utf-8-sig", errors="replace").splitlines()
    op = rng.choice(["cell", "cell", "header", "rows", "many_rows", "drop", "tabs", "negative_hours"])
    names.append(f"tsv_{op}")
    if op == "cell" and len(lines) > 1:
        i = rng.randrange(1, len(lines))
        cells = lines[i].split("\t")
        j = rng.randrange(len(cells))
        cells[j] = rng.choice(_RAW_TOKENS + ["-1", "1e308", "-0", "", " ", "1e-320", "99999999999999999999", "x",
                                            "=1+1", "\x1b[31m"])
        lines[i] = "\t".join(cells)
    elif op == "header":
        lines[0] = rng.choice(["epoch\thours\ttop1Accuracy\ttop1Accuracy", "", "epoch\thours", "hours\tepoch\tf1Score",
                               "EPOCH\tHOURS\tTOP5ACCURACY", "epoch\t\thours\ttop1Accuracy", "x" * 10_000,
                               "epoch hours top1Accuracy top5Accuracy f1Score"])
    elif op == "rows":
        rng.shuffle(lines)
    elif op == "many_rows":
        lines += [f"{k}\t{k * 0.001}\t{(k % 100) * 1.0}" for k in range(rng.choice([10_000, 60_000]))]
    elif op == "drop":
        lines = lines[:rng.randrange(len(lines) + 1)]
    elif op == "tabs":
        lines = [line.replace("\t", rng.choice(["  ", "\t\t", ",", " \t "])) for line in lines]
    elif op == "negative_hours" and len(lines) > 1:
        lines[1:] = [f"{k}\t{rng.choice(['-5', '1e308', '0', '1e-300'])}\t{95.0}" for k in range(len(lines) - 1)]
    return ("\n".join(lines) + "\n").encode("utf-8", errors="surrogateescape")


def _mutate_json(rng: random.Random, data: bytes, names: list[str]) -> bytes:
    op = rng.choice(["value", "value", "value", "dup_key", "not_object", "broken"])
    names.append(f"json_{op}")
    try:
        obj = json.loads(data.decode("utf-8-sig"))
    except ValueError:
        obj = {}
    if op == "value" and isinstance(obj, dict):
        key = rng.choice(["costPerHour", "latency", "cost", "top1Accuracy", "top5Accuracy", "f1Score", "author",
                          "model", "hardware", "framework", "timestamp", "accuracy", "CostPerHour"])
        obj[key] = _hostile(rng)
        names[-1] += f"({key})"
        return _dumps(obj).encode("utf-8", errors="surrogateescape")
    if op == "dup_key":
        text = data.decode("utf-8-sig", errors="replace")
        return text.replace("{", rng.choice(['{"costPerHour": -5, ', '{"author": null, ', '{"latency": 1e999, ',
                                             '{"costPerHour": NaN, ']), 1).encode()
    if op == "not_object":
        return rng.choice([b"[]", b"null", b"5", b'"x"', b"[" * 50_000])
    cut = rng.randrange(len(data) + 1)
    return data[:cut]


def _dawnbench(rng: random.Random, index: int) -> Case:
    stem, json_b, tsv_b = rng.choice(_dawnbench_entries())
    names = [f"entry:{stem}"]
    files: dict[str, bytes] = {}
    specials: dict[str, str] = {}
    if json_b is not None:
        files[stem + ".json"] = _mutate_json(rng, json_b, names) if rng.random() < 0.5 else json_b
    if tsv_b is not None:
        files[stem + ".tsv"] = _mutate_tsv(rng, tsv_b, names) if rng.random() < 0.6 else tsv_b
    for rel in list(files):
        if rng.random() < 0.15:
            files[rel] = _mutate_bytes(rng, files[rel], names)
    if rng.random() < 0.08 and tsv_b is not None:
        specials[stem + ".tsv"] = rng.choice(["fifo", "devzero", "urandom"])
        files.pop(stem + ".tsv")
        names.append(f"special_{specials[stem + '.tsv']}")
    first = next(iter(files), None) or next(iter(specials))
    given = rng.choice([first, first, stem.split("/")[0], "."])
    return Case("dawnbench", index, "+".join(names), files, (given,), specials)


_MAKERS = {"mlperf_folder": _mlperf_folder, "mlperf_log": _mlperf_log, "mlperf_real": _mlperf_real,
           "dawnbench": _dawnbench}
