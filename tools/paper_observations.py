"""Re-check two of the TBD paper's observations on this machine and write docs/paper_observations.md.

    .venv/bin/python tools/paper_observations.py [--device cpu] [--out docs/paper_observations.md]

Observation 1: throughput rises with the mini-batch size (ResNet-50 and Seq2Seq, three batches each).
Observation 10: feature maps are the largest memory category (ResNet-50, Seq2Seq, Transformer).

Every figure comes from a real `tbd profile` run (full-size models, each in its own runner child);
run directories are kept under runs/observations/ so each number can be traced back.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from tbd.cli.orchestrate import profile_run
from tbd.core.profile_result import MEMORY_CATEGORIES, Profile
from tbd.core.records import RunSpec

THROUGHPUT_BATCHES = {"resnet50": (2, 8, 32), "seq2seq": (16, 32, 64)}
MEMORY_RUNS = {"resnet50": 32, "seq2seq": 64, "transformer": 32}


def _profile(model: str, batch: int, device: str, root: Path) -> Profile:
    spec = RunSpec(model=model, batch=batch, device=device, iterations=10, trace_iterations=2, max_seconds=900)
    out = root / f"{model}-b{batch}-{dt.datetime.now().strftime('%H%M%S')}"
    print(f"profiling {model} at batch {batch} -> {out}", flush=True)
    return profile_run(spec, out, lambda event: None)


def _dynamic_parts(p: Profile) -> tuple[float, float, float]:
    """Dynamic memory split into optimizer state, inputs and the rest (MiB), from the run's raw records."""
    records = json.loads((Path(p.provenance["run_dir"]) / "raw" / "memory.json").read_text())
    its = records["iterations"]
    opt = max(i["optimizer_state_bytes"] or 0 for i in its)
    inputs = max(i["input_bytes"] or 0 for i in its)
    dynamic = p.metrics.memory_bytes.dynamic or 0
    return opt / 2**20, inputs / 2**20, (dynamic - opt - inputs) / 2**20


def _throughput_section(runs: dict[str, list[tuple[int, Profile]]]) -> list[str]:
    lines = ["## Observation 1: throughput rises with the batch size", "",
             "| model | batch | throughput | vs the smallest batch | FLOP util % | stable |",
             "|---|---:|---:|---:|---:|---|"]
    verdicts = []
    for model, points in runs.items():
        base = points[0][1].metrics.throughput.value
        values = []
        for batch, p in points:
            tp = p.metrics.throughput
            values.append(tp.value)
            fu = p.metrics.flop_util_pct.value
            lines.append(f"| {model} | {batch} | {tp.value:.2f} {tp.unit} | {tp.value / base:.2f}x | "
                         f"{fu:.1f} | {'yes' if p.iterations and p.iterations.stable else 'NO'} |")
        rising = all(b > a for a, b in zip(values, values[1:]))
        verdicts.append(f"- {model}: throughput {'rises' if rising else 'does NOT rise'} monotonically over "
                        f"batches {', '.join(str(b) for b, _ in points)}.")
    return lines + [""] + verdicts + [""]


def _memory_section(runs: dict[str, tuple[int, Profile]]) -> list[str]:
    lines = ["## Observation 10: feature maps are the largest memory category", "",
             "Each category's own peak over the trace window, MiB, and its share of the five categories' sum.", "",
             "| model | batch | " + " | ".join(MEMORY_CATEGORIES) + " | feature-map share | largest |"
             " dynamic = optimizer state + inputs + other |",
             "|---|---:|" + "---:|" * len(MEMORY_CATEGORIES) + "---:|---|---|"]
    verdicts = []
    for model, (batch, p) in runs.items():
        mem = p.metrics.memory_bytes
        values = {c: getattr(mem, c) or 0 for c in MEMORY_CATEGORIES}
        total = sum(values.values())
        largest = max(values, key=values.get)
        share = 100 * values["feature_maps"] / total
        cells = " | ".join(f"{values[c] / 2**20:.1f}" for c in MEMORY_CATEGORIES)
        opt, inputs, other = _dynamic_parts(p)
        lines.append(f"| {model} | {batch} | {cells} | {share:.1f} % | {largest} | "
                     f"{opt:.1f} + {inputs:.1f} + {other:.1f} |")
        verdicts.append(f"- {model}: the largest category is {largest.replace('_', ' ')} "
                        f"(feature maps {share:.1f} % of the categories' sum).")
    return lines + [""] + verdicts + [""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "paper_observations.md")
    args = ap.parse_args()
    root = ROOT / "runs" / "observations"
    throughput = {m: [(b, _profile(m, b, args.device, root)) for b in batches]
                  for m, batches in THROUGHPUT_BATCHES.items()}
    # Reuse a throughput run where the batch matches: same model, same batch, same figures.
    memory = {}
    for model, batch in MEMORY_RUNS.items():
        done = dict(throughput.get(model, []))
        memory[model] = (batch, done[batch] if batch in done else _profile(model, batch, args.device, root))
    env = next(iter(throughput.values()))[0][1].environment
    cpu = (env.get("cpu") or {}).get("model", "?")
    header = ["# The TBD paper's observations, re-checked with tbd", "",
              f"Generated by `tools/paper_observations.py` on {dt.date.today()} ({platform.machine()}, {cpu}, "
              f"device {args.device}, torch {env.get('versions', {}).get('torch', '?')}). Full-size models; "
              "timing window 10 iterations, trace window 2.", ""]
    text = "\n".join(header + _throughput_section(throughput) + _memory_section(memory))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
