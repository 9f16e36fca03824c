"""The whole mutation corpus: thousands of hostile variants of every fixture trace, with outcome counts.

    .venv/bin/python bench/fuzz_corpus.py [--cases 500] [--start 0] [--max-string 8388608]
                                          [--fixtures kineto_cuda,mxnet_small] [--timeout 60]

The cases are tests/fuzz/mutate.py's (seeded: case i of a fixture is the same bytes every run),
judged by tests/fuzz/outcomes.py exactly as the CI subset in tests/fuzz/test_corpus.py is: "ok"
(a sane profile), "error" (one clean line, exit 2) or "bad" (a traceback, an absurd figure, a
message that is not one printable line). Here each case also runs under a wall-clock alarm
("hang" when it passes `--timeout`) and the process's peak RSS is watched ("memory" when one
case raises it by more than `--memory-gib`). Prints the counts per fixture, every distinct bad
outcome with its first cases (to re-run: `mutate.case(fixture, index, max_string)`), and the
slowest cases. Exit status 1 when any case was bad, hung or blew memory.

Both modules are loaded from their files (importlib), not through sys.path.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import resource
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"tbd_fuzz_{name}", ROOT / "tests" / "fuzz" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang("the case ran past --timeout")


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=500, help="cases per fixture (default 500)")
    parser.add_argument("--start", type=int, default=0, help="index of the first case")
    parser.add_argument("--max-string", type=int, default=8 << 20, help="longest string a mutation writes")
    parser.add_argument("--fixtures", default="", help="comma-separated fixture names (default: all committed ones and the real GPU traces "
                        "under tests/fixtures/gpu when fetched)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before a case counts as a hang")
    parser.add_argument("--memory-gib", type=float, default=2.0, help="peak-RSS rise of one case that counts")
    args = parser.parse_args(argv)
    mutate, outcomes = _load("mutate"), _load("outcomes")
    fixtures = [f for f in args.fixtures.split(",") if f] or [*mutate.FIXTURES, *mutate.real_gpu_fixtures()]
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    findings: dict[str, list[str]] = collections.defaultdict(list)
    slowest: list[tuple[float, str]] = []
    signal.signal(signal.SIGALRM, _alarm)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tbd-fuzz-corpus-") as tmp:
        for case in mutate.cases(args.cases, args.start, args.max_string, fixtures):
            rss = _peak_rss_bytes()
            signal.setitimer(signal.ITIMER_REAL, args.timeout)
            try:
                out = outcomes.run_case(case, Path(tmp))
            except _Hang:  # raised outside run_case's own handler (while writing the file, say)
                out = outcomes.Outcome("bad", "_Hang", args.timeout)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            kind = "hang" if "_Hang" in out.detail else out.kind
            if _peak_rss_bytes() - rss > args.memory_gib * (1 << 30):
                kind = "memory"
            counts[case.fixture][kind] += 1
            name = f"{case.fixture}#{case.index} ({case.mutation}, {out.seconds:.2f} s)"
            if kind not in ("ok", "error"):
                findings[f"{kind}: {out.detail[:200]}"].append(name)
            slowest.append((out.seconds, name))
    _report(counts, findings, sorted(slowest, reverse=True)[:5], time.perf_counter() - started)
    return 1 if findings else 0


def _report(counts, findings, slowest, seconds: float) -> None:
    kinds = ["ok", "error", "bad", "hang", "memory"]
    total = collections.Counter()
    width = max(len(f) for f in [*counts, "fixture"]) + 2
    print(f"{'fixture':<{width}}" + "".join(f"{k:>8}" for k in kinds))
    for fixture, c in sorted(counts.items()):
        total.update(c)
        print(f"{fixture:<{width}}" + "".join(f"{c[k]:>8}" for k in kinds))
    print(f"{'all':<{width}}" + "".join(f"{total[k]:>8}" for k in kinds))
    print(f"{sum(total.values())} cases in {seconds:.0f} s; peak RSS {_peak_rss_bytes() / (1 << 30):.2f} GiB")
    for detail, names in sorted(findings.items(), key=lambda kv: -len(kv[1])):
        print(f"\n{len(names)} x {detail}\n    " + "\n    ".join(names[:5]))
    print("\nslowest: " + "; ".join(f"{name}" for _, name in slowest))


if __name__ == "__main__":
    sys.exit(main())
