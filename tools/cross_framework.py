"""Profile models at one batch in every framework that has them; write a side-by-side table.

    .venv/bin/python tools/cross_framework.py [--models resnet50:16,seq2seq:64] [--size full|test]
        [--device cpu] [--out docs/results/cross-framework-cpu.md]

`--models` takes any of the suite's models, each with its batch (`MODEL:BATCH`, or `MODEL` for
its default batch). Per model, the frameworks' profiles are also saved as one comparison
(runs/cross_framework/<model>-t<threads>-compare.json, the first framework the reference) for `tbd compare`'s
readers: `tbd report runs/cross_framework/resnet50-tdefault-compare.json --html`.

The TBD paper's Observation 3 compares one model across frameworks. Each pair runs twice: with each
framework's own default threading (as shipped) and with every framework given all the cores
(`--threads N`), the fair comparison of the frameworks' kernels. Every figure here comes from a
real `tbd profile` run of the full-size model (each framework's runner child in its own interpreter,
.venv, .venv-tensorflow, .venv-mxnet); run directories are kept under runs/cross_framework/ so each
number can be traced back. The table goes between the markers of the output file, so the reading
written under it by hand survives a re-run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from tbd.analysis.compare_runs import Side, compare_profiles
from tbd.cli import registry
from tbd.cli.orchestrate import profile_run
from tbd.core import rundir
from tbd.core.errors import TbdError, UsageError
from tbd.core.profile_result import MEMORY_CATEGORIES, Profile
from tbd.core.records import RunSpec

DEFAULT_MODELS = "resnet50:16,seq2seq:64"
ITERATIONS, TRACE_ITERATIONS = 10, 2
START, END = "<!-- cross-framework table: start (tools/cross_framework.py rewrites this part) -->", \
    "<!-- cross-framework table: end -->"


def parse_models(text: str) -> dict[str, int]:
    """"resnet50:16,seq2seq" -> {"resnet50": 16, "seq2seq": its default batch}; unknown models refused."""
    out = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        model, _, batch = item.partition(":")
        info = registry.model_info(model)  # UsageError for an unknown model
        if batch and not (batch.isdigit() and int(batch) > 0):
            raise UsageError(f"--models {item!r}: the batch must be a positive integer")
        out[model] = int(batch) if batch else info.default_batch
    if not out:
        raise UsageError("--models names no model")
    return out


def _profile(model: str, framework: str, batch: int, threads: int | None, device: str, size: str,
             root: Path) -> Profile:
    spec = RunSpec(model=model, framework=framework, batch=batch, device=device, size=size, iterations=ITERATIONS,
                   trace_iterations=TRACE_ITERATIONS, max_seconds=900, threads=threads)
    out = root / f"{model}-{framework}-b{batch}-t{threads or 'default'}-{dt.datetime.now().strftime('%H%M%S')}"
    print(f"profiling {model} in {framework} at batch {batch}, threads {threads or 'default'} -> {out}", flush=True)
    return profile_run(spec, out, lambda event: None).profile


def _mib(value: float | None) -> str:
    return "n/a" if value is None else f"{value / 2**20:,.1f}"


def _row(model: str, framework: str, batch: int, threads: int | None, p: Profile) -> str:
    m = p.metrics
    tp, fu = m.throughput, m.flop_util_pct
    traced = p.iterations.trace_window[1] - p.iterations.trace_window[0] + 1
    gflop_iter = fu.flops / traced / 1e9 if fu.flops else None
    achieved = fu.flops / fu.busy_s / 1e9 if fu.flops and fu.busy_s else None
    cpu = "n/a" if m.cpu_util_pct.value is None else f"{m.cpu_util_pct.value:.1f}"
    mem = m.memory_bytes
    cells = [model, framework, str(batch), str(threads or "default"), f"{tp.value:,.2f} {tp.unit}",
             "n/a" if fu.value is None else f"{fu.value:.1f}",
             "n/a" if achieved is None else f"{achieved:,.1f}", f"{fu.peak_flops / 1e9:,.0f}",
             "n/a" if gflop_iter is None else f"{gflop_iter:,.2f}", "n/a" if fu.unattributed_busy_pct is None else f"{fu.unattributed_busy_pct:.1f}", cpu]
    cells += [_mib(getattr(mem, c)) for c in MEMORY_CATEGORIES] + [_mib(mem.allocator_peak)]
    return "| " + " | ".join(cells) + " |"


def table(runs: list[tuple[str, str, int, int | None, Profile]], device: str, size: str) -> list[str]:
    """The markdown table and its legend (renders measured values only; no metric computed here)."""
    env = runs[0][-1].environment
    cpu = (env.get("cpu") or {}).get("model", "?")
    versions = {}
    for _, fw, _, _, p in runs:
        v = (p.environment.get("versions") or {}).get({"pytorch": "torch"}.get(fw, fw))
        versions[fw] = v or "?"
    head = ["model", "framework", "batch", "threads", "throughput", "FLOP util %", "achieved GFLOP/s", "ceiling GFLOP/s",
            "GFLOP / iteration", "no formula %", "CPU util %"] + [f"{c} MiB" for c in MEMORY_CATEGORIES] \
        + ["allocator peak MiB"]
    lines = [START, "",
             f"Generated by `tools/cross_framework.py` on {dt.date.today()} ({platform.machine()}, {cpu}, device "
             f"{device}; {', '.join(f'{fw} {v}' for fw, v in versions.items())}). {size.capitalize()}-size models, timing window "
             f"{ITERATIONS} iterations, trace window {TRACE_ITERATIONS}.", "",
             "| " + " | ".join(head) + " |", "|---|---|---:|---:|" + "---:|" * (len(head) - 4)]
    lines += [_row(*r) for r in runs]
    lines += ["",
              "- threads: `default` is each framework's own choice; a number is `--threads N` (PyTorch "
              "torch.set_num_threads, TensorFlow intra-op threads, MXNet OMP_NUM_THREADS).",
              "- FLOP util %: analytic FLOPs of the trace window / (busy time x the ceiling); each framework's "
              "ceiling is its own measured FP32 GEMM rate on this machine (the hardware peak is hidden by the VM), "
              "so compare achieved GFLOP/s across frameworks, utilization within one.",
              "- GFLOP / iteration: the analytic FLOPs the trace window's ops add up to, per iteration: the same "
              "model should count the same in every framework (differences are ops without a formula).",
              "- no formula %: busy time in ops with no FLOP formula (left out of the utilization).",
              "- Memory: each category's own peak; n/a where the framework's CPU trace cannot tell it (the "
              "profile's notes give the reason for each).", "", END]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS, help=f"MODEL[:BATCH],... (default {DEFAULT_MODELS})")
    ap.add_argument("--size", choices=("full", "test"), default="full")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "cross-framework-cpu.md")
    args = ap.parse_args()
    try:
        models = parse_models(args.models)
    except TbdError as exc:
        raise SystemExit(f"cross_framework: {exc.one_line()}") from None
    root = ROOT / "runs" / "cross_framework"
    runs = []
    for model, batch in models.items():
        for threads in (None, os.cpu_count()):
            done = []
            for fw in registry.FRAMEWORKS:
                if fw not in registry.MODELS[model].implementations:
                    continue
                try:
                    p = _profile(model, fw, batch, threads, args.device, args.size, root)
                except TbdError as exc:  # a framework missing here: said in the output, not skipped silently
                    print(f"{model} in {fw}: {exc.one_line()}", flush=True)
                    continue
                runs.append((model, fw, batch, threads, p))
                done.append(Side(f"{model} {fw} threads {threads or 'default'}", p))
            if len(done) > 1:
                path = root / f"{model}-t{threads or 'default'}-compare.json"
                rundir.atomic_write_json(path, compare_profiles(done).to_dict())
                print(f"comparison of {model}'s frameworks: {path} (`tbd report {path} --html`)", flush=True)
    if not runs:
        raise SystemExit("no run succeeded")
    block = "\n".join(table(runs, args.device, args.size))
    old = args.out.read_text() if args.out.exists() else ""
    if START in old and END in old:
        text = old[:old.index(START)] + block + old[old.index(END) + len(END):]
    else:
        text = "# One model, three frameworks (CPU)\n\n" + block + "\n\n## Reading\n\n(write it here)\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(args.out)
    print(block)


if __name__ == "__main__":
    main()
