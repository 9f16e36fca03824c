"""`tbd analyze` at scale, side by side with json.loads and HolisticTraceAnalysis, on exact synthetic traces.

    .venv/bin/python bench/trace_analysis.py [--sizes 100000,1000000,3000000] [--repeats 3] [--markdown PATH]

For each size it writes (once, cached) a realistic Kineto trace with bench/synthetic_kineto.py,
then:

1. checks tbd's reading against the generator's ground truth, in this process: device busy time
   and the window to the nanosecond, the kernel count, every kernel name's calls and total time,
   and the conv + GEMM FLOPs (textbook formulas, relative 1e-9);
2. times whole processes, round-robin in one run (the order rotates every round, so drift on a
   shared machine hits every tool alike): `tbd analyze TRACE --json OUT`, `python -c
   json.loads(...)` (the floor any JSON reader pays) and, when HTA's own environment exists
   (`--hta-python`, default .venv-hta/bin/python; see bench/hta_analysis.py for how to make it),
   HTA's parse + temporal breakdown + kernel breakdown; `tbd analyze` again with its reading kept in
   one process (TBD_TRACE_PROCESSES=1: a trace of 64 MiB or more is otherwise read by two processes
   where a second core is free); with `--baseline DIR`, another tbd
   installed there (before/after a change); above `--others-max-events`, tbd alone.
   Wall time from spawn to exit, peak RSS from the child's rusage. Every tbd reads its modules'
   bytecode, as an installed tbd does (pip compiles it, as it did HTA's): the tbd children run with
   bytecode caching on, into a folder of their own (PYTHONPYCACHEPREFIX), after one untimed start
   each, so that a checkout run under PYTHONDONTWRITEBYTECODE=1 does not compile every module of
   tbd (~0.3 s) in every timed run.

Prints, per size, best and worst wall time and peak RSS per tool, and ratios against tbd taken
round by round (each round's pair ran back to back), as min / median / max; then tbd's time per
event at each size, also net of the startup (interpreter and imports, timed as its own process in
the same rounds), against the smallest. `--markdown` also writes the tables there.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np
from synthetic_kineto import GENERATOR_VERSION, write_trace

from tbd.analysis.flops.ops import op_flops, precision_of
from tbd.analysis.ranking import factorize
from tbd.analysis.utilization import device_busy_ns
from tbd.profilers.kineto.reader import read_trace_file, trace_records
from tbd.profilers.traces import forked

ROOT = Path(__file__).resolve().parent.parent
_JSON_LOADS = "import json, sys; json.loads(open(sys.argv[1], 'rb').read())"
_CONV_GEMM_OPS = ("aten::convolution", "aten::convolution_backward", "aten::addmm", "aten::mm")


def _trace(cache: Path, events: int) -> tuple[Path, dict]:
    """The cached synthetic trace of about `events` events and its ground truth."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"synthetic-{events}-v{GENERATOR_VERSION}.json"
    truth_path = path.with_suffix(".truth.json")
    if not (path.exists() and truth_path.exists()):
        truth = write_trace(path.with_suffix(".tmp.json"), events=events)
        os.replace(path.with_suffix(".tmp.json"), path)
        truth_path.write_text(json.dumps(truth.to_dict()))
    return path, json.loads(truth_path.read_text())


def check_exact(path: Path, truth: dict) -> list[str]:
    """tbd's records of `path` against the generator's truth; returns the checks that held."""
    rec = trace_records(read_trace_file(path), str(path), flops_of=op_flops, precision_of=precision_of)
    k = rec.kernels
    busy = device_busy_ns(rec)
    assert busy == truth["busy_ns"], f"busy {busy} ns, truth {truth['busy_ns']} ns"
    assert (rec.window_start_ns, rec.window_end_ns) == (truth["window_start_ns"], truth["window_end_ns"])
    assert len(k) == truth["kernels"], f"{len(k)} kernels, truth {truth['kernels']}"
    codes, names = factorize(k.name)
    calls = np.bincount(codes, minlength=len(names))
    total = np.bincount(codes, weights=k.dur_ns, minlength=len(names))
    got = {n: [int(c), int(t)] for n, c, t in zip(names, calls, total)}
    assert got == truth["kernel_totals"], "per-kernel calls or total time differ from the truth"
    # The drill-down's columns: the generator gives every kernel its launch configuration (grid,
    # block, registers per thread, shared memory), so none may be unknown (-1) after the reading.
    configured = int(np.count_nonzero((k.grid >= 0).all(axis=1) & (k.block >= 0).all(axis=1)
                                      & (k.registers >= 0) & (k.shared_memory >= 0)))
    assert configured == len(k) == truth["kernels"], f"{configured} of {len(k)} kernels with a launch configuration"
    shaped = int(np.count_nonzero(k.op_shapes != ""))
    conv_gemm = float(np.nansum(k.flops[np.isin(k.op, _CONV_GEMM_OPS)]))
    assert abs(conv_gemm - truth["conv_gemm_flops"]) <= 1e-9 * truth["conv_gemm_flops"], (conv_gemm, truth)
    return [f"busy {busy:,} ns = truth", f"window {rec.window_end_ns - rec.window_start_ns:,} ns = truth",
            f"{len(k):,} kernels, {len(names)} names: calls and total ns = truth",
            f"conv+GEMM {conv_gemm:.6e} FLOPs = truth",
            f"every kernel's grid, block, registers and shared memory read; {shaped:,} with their op's shapes"]


def _check_in_child(path: Path) -> list[str]:
    """check_exact in its own process: the harness stays small, so the children it forks (whose
    peak RSS counts the pages they shared with it before exec) measure only themselves."""
    done = subprocess.run([sys.executable, __file__, "--check", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"exactness check failed on {path}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def _run(cmd: list[str], cwd: Path) -> tuple[float, int]:
    """(wall seconds, peak RSS bytes) of one child process; raises if it fails."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            out.seek(0)
            raise RuntimeError(f"{cmd[:3]} exited {proc.returncode}: {out.read()[-2000:].decode(errors='replace')}")
    return wall, usage.ru_maxrss * 1024  # Linux reports KiB


#: What every tbd command pays before it reads a byte: the interpreter and the command's imports
#: (tbd.cli.main and its analyze command, imported when it runs, since the command became a package;
#: tbd.cli, a module, before).
_STARTUP = "try:\n    import tbd.cli.main, tbd.cli.commands.analyze\nexcept ImportError:\n    import tbd.cli"


def _tools(path: Path, work: Path, hta_python: Path | None, others: bool,
           baseline: list[Path] | None) -> dict[str, list[str]]:
    analyze = ["-m", "tbd.cli", "analyze", str(path), "--sm-clock-mhz", "1410", "--json", str(work / "profile.json")]
    cached = ["env", "-u", "PYTHONDONTWRITEBYTECODE", f"PYTHONPYCACHEPREFIX={work / 'pycache'}"]  # module docstring
    tools = {"tbd analyze": [*cached, sys.executable, *analyze],
             # The same with the reading kept in one process (profilers.traces.forked): what one core gives.
             "tbd analyze (one process)": [*cached, f"{forked.ENV_SWITCH}=1", sys.executable, *analyze],
             # What every tbd command pays before it reads a byte: the interpreter and tbd's imports.
             "tbd startup": [*cached, sys.executable, "-c", _STARTUP]}
    if others:
        tools["json.loads"] = [sys.executable, "-c", _JSON_LOADS, str(path)]
    for folder in (baseline or []) if others else []:
        # -S: an editable install's import finder (a .pth file in site-packages) comes before
        # PYTHONPATH, so the checkout's tbd would shadow the one under test; site-packages itself
        # then comes back through PYTHONPATH, after it.
        env = [*cached, f"PYTHONPATH={folder}{os.pathsep}{sysconfig.get_paths()['purelib']}", sys.executable, "-S"]
        tools[f"tbd analyze ({folder.name})"] = [*env, *analyze]
        tools[f"tbd startup ({folder.name})"] = [*env, "-c", _STARTUP]
    if others and hta_python is not None:
        hta_dir = work / "hta"
        hta_dir.mkdir(exist_ok=True)
        link = hta_dir / "rank-0.json"
        if not link.exists():
            link.symlink_to(path)
        tools["HTA 0.5.0"] = [str(hta_python), str(ROOT / "bench" / "hta_analysis.py"), str(hta_dir)]
    return tools


def measure(path: Path, repeats: int, hta_python: Path | None, others: bool,
            baseline: list[Path] | None) -> dict[str, list[tuple[float, int]]]:
    """Round-robin wall time and peak RSS per tool, `repeats` rounds, order rotating each round."""
    with tempfile.TemporaryDirectory() as tmp:
        tools = _tools(path, Path(tmp), hta_python, others, baseline)
        names = list(tools)
        for name in names:  # untimed: each tbd compiles its modules' bytecode once (module docstring)
            if name.startswith("tbd startup"):
                _run(tools[name], Path(tmp))
        runs: dict[str, list[tuple[float, int]]] = {n: [] for n in names}
        for r in range(repeats):
            for name in names[r % len(names):] + names[:r % len(names)]:
                (Path(tmp) / "profile.json").unlink(missing_ok=True)  # `tbd analyze --json` never overwrites
                runs[name].append(_run(tools[name], Path(tmp)))
        return runs


def _table(events: int, size_mb: float, runs: dict) -> list[str]:
    tbd = [t for t, _ in runs["tbd analyze"]]
    lines = [f"### {events:,} events ({size_mb:,.0f} MB)", "",
             "| tool | best s | worst s | peak RSS MiB | time vs tbd (per round: min / median / max) |",
             "|---|---:|---:|---:|---|"]
    for name, got in runs.items():
        times = [t for t, _ in got]
        ratios = [t / b for t, b in zip(times, tbd)]
        vs = "1" if name == "tbd analyze" else "" if name.startswith("tbd startup") else \
            f"{min(ratios):.2f}x / {statistics.median(ratios):.2f}x / {max(ratios):.2f}x"
        lines.append(f"| {name} | {min(times):.2f} | {max(times):.2f} | {max(m for _, m in got) / 2**20:,.0f} | {vs} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000,3000000", help="trace sizes in events, comma-separated")
    ap.add_argument("--repeats", type=int, default=3, help="rounds per size (default 3)")
    ap.add_argument("--hta-python", type=Path, default=ROOT / ".venv-hta" / "bin" / "python",
                    help="HTA's interpreter (skipped when absent)")
    ap.add_argument("--others-max-events", type=int, default=1_000_000,
                    help="largest size json.loads and HTA are timed at (beyond it, tbd alone: time per event)")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "tbd-bench-traces")
    ap.add_argument("--markdown", type=Path, default=None, help="also write the tables here")
    ap.add_argument("--baseline", type=Path, action="append", default=None,
                    help="a folder holding another tbd (pip install --no-deps --target DIR <checkout>), timed beside "
                         "this one as 'tbd analyze (DIR's name)': a change's before and after in one run; repeatable "
                         "(e.g. the commit before and this one, both installed the same way)")
    ap.add_argument("--check", type=Path, default=None, help=argparse.SUPPRESS)  # _check_in_child
    args = ap.parse_args()
    if args.check:
        print(json.dumps(check_exact(args.check, json.loads(args.check.with_suffix(".truth.json").read_text()))))
        return
    hta = args.hta_python if args.hta_python.exists() else None
    out = [f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
           f"{os.getloadavg()[0]:.1f} at start; Python {platform.python_version()}; {time.strftime('%Y-%m-%d')}."
           + ("" if hta else " HTA not installed: not timed."), ""]
    per_event = {}
    for events in [int(s) for s in args.sizes.split(",")]:
        path, truth = _trace(args.cache, events)
        checks = _check_in_child(path)
        runs = measure(path, args.repeats, hta, events <= args.others_max_events, args.baseline)
        best = min(t for t, _ in runs["tbd analyze"])
        per_event[truth["events"]] = (best / truth["events"], (best - min(t for t, _ in runs["tbd startup"])) / truth["events"])
        out += _table(truth["events"], path.stat().st_size / 1e6, runs)
        out += ["", "Exact against the generator: " + "; ".join(checks) + ".", ""]
        print("\n".join(out[-len(runs) - 7:]), flush=True)
    smallest = per_event[min(per_event)]
    out += ["### tbd analyze: time per event (best run; net: less the startup measured beside it)", "",
            "| events | µs per event | net µs per event | net vs the smallest |", "|---:|---:|---:|---:|"]
    out += [f"| {n:,} | {s * 1e6:.2f} | {net * 1e6:.2f} | {net / smallest[1]:.2f}x |"
            for n, (s, net) in sorted(per_event.items())]
    print("\n".join(out[-len(per_event) - 4:]))
    if args.markdown:
        args.markdown.write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
