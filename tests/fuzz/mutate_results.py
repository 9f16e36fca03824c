"""Hostile variants of everything else tbd reads back: saved results, run directories, names, the
terminal, numeric options (issue 29). Deterministic: case `index` of a kind is the same every run.

Each `Case` is a folder to lay out (`files`: relative path -> bytes, or a marker: "@fifo", "@dir",
"@link:/dev/zero", "@delete") and the command to run over it (`argv`, where "{dir}" is that folder
and "{out}" a scratch path beside it), how to run it (`mode`: "cli" in-process, "subprocess" with
`env`, "parse" for commands that would start a run: their parser alone), and what was done.

- results: profile.json (committed runs, the H200 profile, one `tbd analyze` makes at start),
  sweep.json and a saved comparison, mutated field by field (mutate_json.VALUE_OPS at each
  field in turn), through `tbd report` (text, --json, --csv, --html, --figures), `tbd kernels
  --json/--csv` and `tbd compare F F`.
- rundir: the committed run directories without profile.json (so `tbd report RUN` re-analyses),
  spec.json, iterations.json and raw/*.json mutated field by field, or the file deleted, truncated,
  emptied, binary, a FIFO, a directory, a symlink to /dev/zero or /dev/urandom.
- names: hostile names (mutate_json.HOSTILE_NAMES) in every name, label and note of a result.
- terminal: reports under LANG=C, PYTHONIOENCODING=ascii/latin-1 and a closed stdout (subprocess).
- options: every numeric option of every command at the edge of the representable.

`seeds` (name -> {relative path: bytes}) are the documents to mutate: `committed_seeds()` reads
the committed ones; outcomes_results.made_seeds() adds those tbd itself makes at start.
No dependency on tbd.
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import mutate_json as mj

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RUN_DIRS = {"run_cpu": FIXTURES / "runs" / "resnet50-test-cpu-b8-threads1",
            "run_h100": FIXTURES / "h100" / "resnet50-b64"}
NAME_KEYS = frozenset({"model", "name", "label", "labels", "note", "notes", "op", "kernel", "device", "device_name",
                       "cpu", "gpu", "reason", "error", "message", "group", "short_name", "title", "source", "run"})
KINDS = ("results", "rundir", "names", "terminal", "options")


@dataclass(frozen=True)
class Case:
    kind: str
    fixture: str
    index: int
    mutation: str
    files: tuple  # ((relative path, bytes or marker), ...)
    argv: tuple
    mode: str = "cli"  # "cli", "subprocess" or "parse"
    env: tuple = ()  # (("NAME", "value"), ...); ("@stdout", "closed") closes stdout
    extra: dict = field(default_factory=dict, compare=False, hash=False)


def committed_seeds() -> dict[str, dict[str, bytes]]:
    """The committed documents: two profiles and the two run directories (files as bytes)."""
    seeds = {"profile_cpu": {"profile.json": (RUN_DIRS["run_cpu"] / "profile.json").read_bytes()},
             "profile_h200": {"profile.json": gzip.decompress(
                 (FIXTURES / "h200" / "resnet50_b64_profile.json.gz").read_bytes())}}
    for name, folder in RUN_DIRS.items():
        seeds[name] = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
                       if p.is_file() and p.name != "profile.json"}  # absent: `tbd report` re-analyses
    return seeds


# -- results ------------------------------------------------------------------------------

#: What renders a saved result, per document kind; "{f}" is the file, "{out}" a scratch path.
RENDER = {
    "profile.json": [("report", "{f}"), ("report", "{f}", "--json"), ("report", "{f}", "--csv"),
                     ("kernels", "{f}", "--json"), ("kernels", "{f}", "--csv"), ("compare", "{f}", "{f}"),
                     ("report", "{f}", "--top", "3"), ("kernels", "{f}")],
    "sweep.json": [("report", "{f}"), ("report", "{f}", "--json"), ("report", "{f}", "--csv")],
    "cmp.json": [("report", "{f}"), ("report", "{f}", "--json"), ("report", "{f}", "--csv")],
}
SLOW_RENDER = [("report", "{f}", "--html", "{out}.html"), ("report", "{f}", "--figures", "{out}-figures")]


def _doc_kind(files: dict) -> str:
    return next(name for name in RENDER if name in files)


@lru_cache(maxsize=None)
def _paths(seed_name: str, text: bytes) -> tuple:
    return tuple(mj.field_paths(json.loads(text)))


def _argv(template: tuple, doc_name: str) -> tuple:
    return tuple(a.replace("{f}", "{dir}/" + doc_name) for a in template)


def results_case(seeds: dict, index: int) -> Case:
    """The seeds' documents by turns, each field by turns, set to one of VALUE_OPS."""
    names = sorted(n for n in seeds if any(k in seeds[n] for k in RENDER))
    rng = random.Random(f"results:{index}")
    seed = names[index % len(names)]
    doc_name = _doc_kind(seeds[seed])
    text = seeds[seed][doc_name]
    paths = _paths(seed, text)
    step = index // len(names)
    # Every field in turn, each pass with another value (7 is prime to len(VALUE_OPS)).
    path = paths[step % len(paths)]
    op_name, value = mj.VALUE_OPS[(step * 7 + step // len(paths)) % len(mj.VALUE_OPS)]
    doc = mj.set_at(json.loads(text), path, value, rng)
    render = _render(rng, doc_name, index)
    return Case("results", seed, index, f"{_show(path)}={op_name}", ((doc_name, mj.serialise(doc)),),
                _argv(render, doc_name))


def _render(rng: random.Random, doc_name: str, index: int) -> tuple:
    if index % 23 == 0:
        return SLOW_RENDER[(index // 23) % 2]
    return rng.choice(RENDER[doc_name])


def _show(path: tuple) -> str:
    return "/".join(str(p) for p in path)[:120] or "<root>"


# -- run directories ------------------------------------------------------------------------

RUNDIR_RENDER = [("report", "{dir}"), ("report", "{dir}", "--json"), ("report", "{dir}", "--csv"),
                 ("kernels", "{dir}", "--json"), ("analyze", "{dir}", "--json", "{out}.json")]
FILE_OPS = ["@delete", "@truncate", "@empty", "@binary", "@fifo", "@dir", "@link:/dev/zero", "@link:/dev/urandom",
            "@top_list", "@bom", "@not_utf8", "@link:/nonexistent"]


def rundir_case(seeds: dict, index: int) -> Case:
    """One file of a run directory mutated: field by field (3 cases in 4) or as a whole file."""
    rng = random.Random(f"rundir:{index}")
    seed = sorted(RUN_DIRS)[index % len(RUN_DIRS)]
    files = dict(seeds[seed])
    targets = sorted(n for n in files if n.endswith(".json"))
    target = targets[(index // len(RUN_DIRS)) % len(targets)]
    if index % 4 == 3:
        op = FILE_OPS[(index // 4) % len(FILE_OPS)]
        files[target] = _file_op(op, files[target])
        mutation = f"{target}:{op.lstrip('@')}"
    else:
        doc = json.loads(files[target])
        paths = mj.field_paths(doc)
        path = rng.choice(paths)
        op_name, value = rng.choice(mj.VALUE_OPS)
        files[target] = mj.serialise(mj.set_at(doc, path, value, rng))
        mutation = f"{target}:{_show(path)}={op_name}"
    render = rng.choice(RUNDIR_RENDER) if index % 31 else ("report", "{dir}", "--html", "{out}.html")
    return Case("rundir", seed, index, mutation, tuple(sorted(files.items())), render)


def _file_op(op: str, data: bytes):
    if op == "@truncate":
        return data[: len(data) // 2]
    if op == "@empty":
        return b""
    if op == "@binary":
        return bytes(range(256)) * 4
    if op == "@top_list":
        return b"[1, 2, 3]"
    if op == "@bom":
        return b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n")
    if op == "@not_utf8":
        return data[:10] + b"\xff\xfe\xed\xa0\x80" + data[10:]
    return op  # a marker the judge lays out: @delete, @fifo, @dir, @link:PATH


# -- hostile names --------------------------------------------------------------------------

NAME_RENDER = {"profile.json": [("report", "{f}"), ("report", "{f}", "--csv"), ("kernels", "{f}", "--csv"),
                               ("kernels", "{f}"), ("compare", "{f}", "{f}"), ("report", "{f}", "--json")],
               "sweep.json": [("report", "{f}"), ("report", "{f}", "--csv")],
               "cmp.json": [("report", "{f}"), ("report", "{f}", "--csv")]}
#: The page and the figures cost seconds a case: one case in SLOW_EVERY draws them, by turns.
SLOW_EVERY = 6


def names_case(seeds: dict, index: int) -> Case:
    """A hostile name put into 1 to all of a result's names, labels and notes."""
    names = sorted(n for n in seeds if any(k in seeds[n] for k in RENDER))
    rng = random.Random(f"names:{index}")
    seed = names[index % len(names)]
    doc_name = _doc_kind(seeds[seed])
    doc = json.loads(seeds[seed][doc_name])
    paths = mj.name_paths(doc, NAME_KEYS)
    hostile = mj.HOSTILE_NAMES[(index // len(names)) % len(mj.HOSTILE_NAMES)]
    chosen = paths if rng.random() < 0.3 else rng.sample(paths, min(len(paths), rng.randint(1, 5)))
    for path in chosen:
        if len(hostile) < 1000 or len(chosen) < 10:  # 300k characters in every name: gigabytes, not a case
            doc = mj.set_at(doc, path, hostile, rng, in_place=True)
    slow = index // len(names)
    render = (SLOW_RENDER[(slow // SLOW_EVERY) % 2] if slow % SLOW_EVERY == 0
              else NAME_RENDER[doc_name][slow % len(NAME_RENDER[doc_name])])
    return Case("names", seed, index, f"{len(chosen)} names={hostile[:30]!r}", ((doc_name, mj.serialise(doc)),),
                _argv(render, doc_name), extra={"clean": ((doc_name, seeds[seed][doc_name]),)})


# -- the terminal ---------------------------------------------------------------------------

#: LC_ALL=C alone puts Python in UTF-8 mode (PEP 540); with PYTHONUTF8=0 the streams are ASCII, as in
#: minimal containers, cron and CI images.
TERMINAL_ENVS = [(("LANG", "C"), ("LC_ALL", "C"), ("PYTHONUTF8", "0")), (("PYTHONIOENCODING", "ascii"),),
                 (("PYTHONIOENCODING", "latin-1"),), (("@stdout", "closed"),),
                 (("LANG", "C"), ("LC_ALL", "C"), ("PYTHONIOENCODING", "ascii"))]


def terminal_case(seeds: dict, index: int) -> Case:
    """A report of a seed (its names made non-ASCII one time in two) under a poor terminal."""
    rng = random.Random(f"terminal:{index}")
    env = TERMINAL_ENVS[index % len(TERMINAL_ENVS)]
    if index % 3 == 2:
        seed = sorted(RUN_DIRS)[index % len(RUN_DIRS)]
        files = tuple(sorted(seeds[seed].items()))
        argv = rng.choice(RUNDIR_RENDER[:4])
        return Case("terminal", seed, index, f"{dict(env)} {' '.join(argv[2:])}", files, argv, "subprocess", env)
    names = sorted(n for n in seeds if any(k in seeds[n] for k in RENDER))
    seed = rng.choice(names)
    doc_name = _doc_kind(seeds[seed])
    doc = json.loads(seeds[seed][doc_name])
    if index % 2:
        for path in mj.name_paths(doc, NAME_KEYS)[:20]:
            doc = mj.set_at(doc, path, "é—·中文😀 µs", rng, in_place=True)
    argv = _argv(rng.choice(RENDER[doc_name] + [("report", "{f}", "--html", "{out}.html")]), doc_name)
    return Case("terminal", seed, index, f"{dict(env)} {' '.join(argv[:1] + argv[2:])}{' unicode' * (index % 2)}",
                ((doc_name, mj.serialise(doc)),), argv, "subprocess", env)


# -- numeric options ------------------------------------------------------------------------

EDGE_VALUES = ["0", "-1", "1e-300", "5e-324", "1e308", "inf", "nan", str(2**64), "abc", "-0", "1e999"]
#: Values no option may accept (a peak no device has, a time no run takes, a seed no generator takes).
MUST_REFUSE = frozenset({"-1", "1e-300", "5e-324", "1e308", "inf", "nan", str(2**64), "abc", "1e999"})
TRACE = str(FIXTURES / "kineto_cuda_synthetic.json")
RUN = str(RUN_DIRS["run_cpu"])
#: (command and its positional arguments, numeric options, mode): "cli" runs it, "parse" parses only.
OPTION_COMMANDS = [
    (("analyze", TRACE), ["--peak-flops", "--memory-bandwidth", "--sm-clock-mhz", "--samples-per-step", "--top"], "cli"),
    (("compare", TRACE, TRACE), ["--top", "--peak-flops", "--memory-bandwidth"], "cli"),
    (("report", RUN), ["--top"], "cli"),
    (("kernels", RUN), ["--top"], "cli"),
    (("profile", "resnet50", "--size", "test"),
     ["--warmup", "--iterations", "--repeat", "--window-seconds", "--trace-iterations", "--max-seconds", "--threads",
      "--seed", "--memory-limit-gib", "--peak-flops", "--batch", "--top", "--ncu", "--nproc-per-node", "--nnodes",
      "--node-rank", "--rdzv-timeout", "--rank-timeout"], "parse"),
    (("sweep", "resnet50", "--batch", "2,4"), ["--batch-start", "--max-batch", "--timeout-min", "--runs", "--target",
                                               "--max-epochs"], "parse"),
    (("train", "resnet50"), ["--target", "--runs", "--batch", "--max-epochs", "--seed", "--cost-per-hour"], "parse"),
    (("tta", RUN), ["--target"], "parse"),
]


def option_cases() -> list[Case]:
    """Every (command, numeric option, edge value): a fixed list, not sampled."""
    out = []
    for command, options, mode in OPTION_COMMANDS:
        for option in options:
            for value in EDGE_VALUES:
                argv = (*command, f"{option}={value}") if value.startswith("-") else (*command, option, value)
                out.append(Case("options", command[0], len(out), f"{option} {value}", (), argv, mode,
                                extra={"option": option, "value": value}))
    return out


GENERATORS = {"results": results_case, "rundir": rundir_case, "names": names_case, "terminal": terminal_case}


def cases(kind: str, seeds: dict, count: int, start: int = 0):
    """`count` cases of `kind` from index `start` (options: the fixed list, sliced)."""
    if kind == "options":
        yield from option_cases()[start:start + count]
        return
    for index in range(start, start + count):
        yield GENERATORS[kind](seeds, index)
