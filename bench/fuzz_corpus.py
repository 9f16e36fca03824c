"""The whole mutation corpus: hostile variants of every input kind tbd reads, with outcome counts per kind.

    .venv/bin/python bench/fuzz_corpus.py [--kinds traces,results,rundir,names,terminal,options,tta]
                                          [--cases 500] [--results 4000] [--rundir 2000] [--names 900]
                                          [--terminal 100] [--tta 250] [--timeout 60]

Kinds (issue 29): "traces" are tests/fuzz/mutate.py's (every fixture trace, `--cases` each, judged
by outcomes.py); "results", "rundir", "names", "terminal" and "options" are
tests/fuzz/mutate_results.py's (saved profile/sweep/comparison mutated field by field, run
directories with hostile files, hostile names rendered as text/CSV/HTML/figures, reports under
LANG=C, ascii/latin-1 and a closed stdout, numeric options at the edge), judged by
outcomes_results.py; "tta" is mutate_tta.py/outcomes_tta.py's where they exist. Every case is
seeded: case i of a kind is the same every run. "ok" (a sane result), "error" (one clean line,
exit 2) or "bad" (a traceback, an absurd figure, NaN, a negative percentage, an injected element,
a formula cell, a message that is not one printable line). Each case runs under a wall-clock alarm
("hang" past `--timeout`: a FIFO read is interrupted so) and the peak RSS is watched ("memory").
Prints the counts per kind, every distinct bad outcome with its first cases, the slowest cases
and the time. Exit status 1 when any case was bad, hung or blew memory.

The modules are loaded from their files (tests/fuzz on sys.path), not as a package.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import resource
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


FUZZ = ROOT / "tests" / "fuzz"
_SEEDS: dict = {}  # the documents the non-trace kinds mutate, made once
KINDS = ("traces", "results", "rundir", "names", "terminal", "options", "tta")


def _load(name: str):
    if str(FUZZ) not in sys.path:
        sys.path.insert(0, str(FUZZ))
    return importlib.import_module(name)


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang("the case ran past --timeout")


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _kind_cases(kind: str, args, tmp: Path):
    """(case, judge, label) of one kind; label names the case to re-run it."""
    if kind == "traces":
        mutate, outcomes = _load("mutate"), _load("outcomes")
        fixtures = [f for f in args.fixtures.split(",") if f] or [*mutate.FIXTURES, *mutate.real_gpu_fixtures()]
        for case in mutate.cases(args.cases, args.start, args.max_string, fixtures):
            yield case, outcomes.run_case, f"{case.fixture}#{case.index} ({case.mutation})"
        return
    if kind == "tta":
        if not ((FUZZ / "mutate_tta.py").exists() and (FUZZ / "outcomes_tta.py").exists()):
            print("tta: tests/fuzz/mutate_tta.py or outcomes_tta.py missing: no cases", file=sys.stderr)
            return
        mutate, outcomes = _load("mutate_tta"), _load("outcomes_tta")
        for case in mutate.cases(args.tta, args.start):
            yield case, outcomes.run_case, f"tta:{case.kind}#{case.index} ({case.mutation})"
        return
    generator, judge = _load("mutate_results"), _load("outcomes_results")
    if not _SEEDS:
        _SEEDS.update({**generator.committed_seeds(), **judge.made_seeds(tmp)})
    seeds = _SEEDS
    count = getattr(args, kind)
    for case in generator.cases(kind, seeds, count, args.start):
        yield case, judge.run_case, f"{kind}:{case.fixture}#{case.index} ({case.mutation})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated kinds (default all: {','.join(KINDS)})")
    parser.add_argument("--cases", type=int, default=500, help="traces: cases per fixture (default 500)")
    parser.add_argument("--results", type=int, default=4000, help="saved results cases (default 4000)")
    parser.add_argument("--rundir", type=int, default=2000, help="run-directory cases (default 2000)")
    parser.add_argument("--names", type=int, default=900, help="hostile-name cases (default 900)")
    parser.add_argument("--terminal", type=int, default=100, help="terminal cases, ~3 s each (default 100)")
    parser.add_argument("--options", type=int, default=10**6, help="option cases (default: all of the fixed list)")
    parser.add_argument("--tta", type=int, default=250, help="tta/train input cases per tta kind (default 250)")
    parser.add_argument("--start", type=int, default=0, help="index of the first case")
    parser.add_argument("--max-string", type=int, default=8 << 20, help="traces: longest string a mutation writes")
    parser.add_argument("--fixtures", default="", help="traces: comma-separated fixture names (default: all committed ones "
                        "and the real GPU traces under tests/fixtures/gpu when fetched)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before a case counts as a hang")
    parser.add_argument("--memory-gib", type=float, default=2.0, help="peak-RSS rise of one case that counts")
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        parser.error(f"unknown kind {', '.join(unknown)} (one of {', '.join(KINDS)})")
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    findings: dict[str, list[str]] = collections.defaultdict(list)
    slowest: list[tuple[float, str]] = []
    signal.signal(signal.SIGALRM, _alarm)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tbd-fuzz-corpus-") as tmp:
        for kind in kinds:
            kind_started = time.perf_counter()
            for case, judge, label in _kind_cases(kind, args, Path(tmp)):
                outcomes = _load("outcomes")
                rss = _peak_rss_bytes()
                signal.setitimer(signal.ITIMER_REAL, args.timeout)
                try:
                    out = judge(case, Path(tmp))
                except _Hang:  # raised outside the judge's own handler (while writing the file, say)
                    out = outcomes.Outcome("bad", "_Hang", args.timeout)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                verdict = "hang" if "_Hang" in out.detail else out.kind
                if _peak_rss_bytes() - rss > args.memory_gib * (1 << 30):
                    verdict = "memory"
                counts[kind][verdict] += 1
                name = f"{label}, {out.seconds:.2f} s"
                if verdict not in ("ok", "error"):
                    findings[f"{kind} {verdict}: {out.detail[:200]}"].append(name)
                slowest.append((out.seconds, name))
            counts[kind]["seconds"] = round(time.perf_counter() - kind_started)
            print(f"{kind}: {dict(counts[kind])}", file=sys.stderr, flush=True)
    _report(counts, findings, sorted(slowest, reverse=True)[:5], time.perf_counter() - started)
    return 1 if findings else 0


def _report(counts, findings, slowest, seconds: float) -> None:
    kinds = ["ok", "error", "bad", "hang", "memory"]
    total = collections.Counter()
    width = max(len(f) for f in [*counts, "kind"]) + 2
    print(f"{'kind':<{width}}" + "".join(f"{k:>8}" for k in [*kinds, "cases", "seconds"]))
    for kind, c in counts.items():
        total.update(c)
        cases = sum(c[k] for k in kinds)
        print(f"{kind:<{width}}" + "".join(f"{c[k]:>8}" for k in kinds) + f"{cases:>8}{c['seconds']:>8}")
    print(f"{'all':<{width}}" + "".join(f"{total[k]:>8}" for k in kinds) + f"{sum(total[k] for k in kinds):>8}")
    print(f"{sum(total[k] for k in kinds)} cases in {seconds:.0f} s; peak RSS {_peak_rss_bytes() / (1 << 30):.2f} GiB")
    for detail, names in sorted(findings.items(), key=lambda kv: -len(kv[1])):
        print(f"\n{len(names)} x {detail}\n    " + "\n    ".join(names[:5]))
    print("\nslowest: " + "; ".join(f"{name}" for _, name in slowest))


if __name__ == "__main__":
    sys.exit(main())
