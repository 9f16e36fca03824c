"""Write the dated results page of one `tools/gpu_check.sh` lease from what its steps left behind.

    python tools/gpu_results.py RUNS_DIR LOG OUT_DIR      # writes OUT_DIR/gpu-check-<date>-<gpu>.md

RUNS_DIR holds the steps' run directories (resnet50-b64, transformer, resnet50-b64-ncu, resnet50-b64-ddp,
busy-truth, train-*), LOG the script's log (the "== step: exit N after Ss" lines). Each figure is read from
what the runs wrote (profile.json, iterations.json, raw/nvml.json, truth.json, tta.json), and tbd's GPU busy
is put beside a recompute of the same trace written here with the standard library only, so a slip in tbd's
reader or analysis shows as a difference rather than being copied. A missing run is a line saying so.
Copy the page into docs/results/ when the lease is over.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from datetime import date
from pathlib import Path

PROFILES = ("resnet50-b64", "transformer", "resnet50-b64-ddp", "resnet50-b64-ncu")
TRAIN = ("train-resnet50", "train-seq2seq", "train-resnet50-full")


def _json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _trace_of(run: Path) -> Path | None:
    found = sorted(run.glob("*.json.gz")) or sorted(run.glob("ranks/rank-0/*.json.gz"))
    return next((p for p in found if "trace" in p.name), None)


def recompute_busy(run: Path) -> dict | None:
    """GPU busy from the run's own trace and iteration log, stdlib only: the union of kernel intervals over
    the traced steps (each step from its host start to the end of the last kernel it launched), per traced
    step, over the timing window's mean iteration."""
    trace, log = _trace_of(run), _json(run / "iterations.json")
    if trace is None or log is None or not log.get("timing_window"):
        return None
    events = json.loads(gzip.decompress(trace.read_bytes()))
    events = events["traceEvents"] if isinstance(events, dict) else events
    steps = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
             and e.get("cat") != "gpu_user_annotation"]
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel")]
    calls = {e["args"]["correlation"]: e["ts"] for e in events
             if e.get("cat") in ("cuda_runtime", "cuda_driver", "Runtime") and "correlation" in (e.get("args") or {})}
    if not steps or not kernels:
        return None
    ends = []
    for s in steps:
        end = s["ts"] + s["dur"]
        for k in kernels:
            launched = calls.get((k.get("args") or {}).get("correlation"))
            if launched is not None and s["ts"] <= launched <= s["ts"] + s["dur"]:
                end = max(end, k["ts"] + k["dur"])
        ends.append(end)
    lo, hi = min(s["ts"] for s in steps), max(ends)
    spans = sorted((max(k["ts"], lo), min(k["ts"] + k["dur"], hi)) for k in kernels
                   if k["ts"] < hi and k["ts"] + k["dur"] > lo)
    busy, cur = 0.0, None
    for a, b in spans:
        if cur is None or a > cur[1]:
            busy += 0.0 if cur is None else cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    busy += cur[1] - cur[0] if cur else 0.0
    first, last = log["timing_window"]
    iteration_us = log["timing_window_ns"] / (last - first + 1) / 1e3
    return {"steps": len(steps), "busy_ms_per_step": busy / len(steps) / 1e3, "iteration_ms": iteration_us / 1e3,
            "window_ms": (hi - lo) / 1e3,
            "busy_pct": 100 * busy / len(steps) / iteration_us, "traced_pct": 100 * busy / (hi - lo)}


def _pct(v) -> str:
    return "n/a" if v is None else f"{v:.1f} %"


def _value(block) -> float | None:
    return block.get("value") if isinstance(block, dict) else None


def _steps(log_text: str) -> list[tuple[str, str, str]]:
    return re.findall(r"^== (\S+): (exit \d+|skipped)[^\n]*?(?:after (\d+)s)?$", log_text, re.MULTILINE)


def profiles_section(runs: Path) -> list[str]:
    out = ["## Profiles: tbd's figures beside a recompute of the same trace", "",
           "| run | throughput | GPU busy (tbd) | recomputed | as traced (tbd / recomputed) | NVML | FLOP util |"
           " work per precision |", "|---|---|---|---|---|---|---|---|"]
    for name in PROFILES:
        run = runs / name
        p = _json(run / "profile.json")
        if p is None:
            out.append(f"| {name} | not run (no profile.json) | | | | | | |")
            continue
        m = p["metrics"]
        tp = m["throughput"]
        fu = m["flop_util_pct"]
        again = recompute_busy(run)
        work = ", ".join(f"{w['precision'] or '?'} {w['flops'] / 1e12:.2f} TFLOP at "
                         f"{(w['peak_flops'] or 0) / 1e12:.1f} TFLOP/s" for w in fu.get("by_precision", []))
        traced = _value(m.get("gpu_busy_traced_pct"))
        out.append(
            f"| {name} | {tp['value']:,.1f} {tp['unit']} | {_pct(_value(m['gpu_busy_pct']))} | "
            f"{_pct(again and again['busy_pct'])} | {_pct(traced)} / {_pct(again and again['traced_pct'])} | "
            f"{_pct(_value(m['gpu_busy_nvml_pct']))} | {_pct(fu.get('value'))} | {work or 'n/a'} |"
            if tp.get("value") is not None else f"| {name} | n/a | | | | | | |")
    return out + [""]


def truth_section(runs: Path) -> list[str]:
    t = _json(runs / "busy-truth" / "truth.json")
    if t is None:
        return ["## GPU busy measured apart from tbd", "", "busy-truth did not run.", ""]
    return ["## GPU busy measured apart from tbd (tools/gpu_busy_truth.py)", "",
            f"{t['model']} batch {t['batch']} on {t['device']}, torch {t['torch']}: untraced clock "
            f"{t['clock_ms_per_step']:.2f} ms per step, kernels {t['light']['kernel_ms_per_step']:.2f} ms per step "
            f"under a light trace: busy {t['busy_pct_untraced']:.1f} % untraced; a light trace's own wall time gives "
            f"{t['light']['busy_pct']:.1f} %, a heavy one's {t['heavy']['busy_pct']:.1f} %.", ""]


def ncu_section(runs: Path) -> list[str]:
    p = _json(runs / "resnet50-b64-ncu" / "profile.json")
    rows = [k for k in (p or {}).get("kernels", []) if k.get("measured")]
    out = ["## Nsight Compute counters beside the analytic count (`--ncu 3`)", ""]
    if not rows:
        return out + ["No measured kernel group (the step did not run or merged nothing).", ""]
    out += ["| kernel | launches | measured FLOPs | analytic | difference | DRAM bytes | analytic bytes |",
            "|---|---|---|---|---|---|---|"]
    for k in rows:
        ms = k["measured"]
        diff = ms.get("flops_difference_pct")
        out.append(f"| `{k['name'][:70]}` | {ms.get('launches')} | {ms['flops']:.4g} | "
                   f"{ms.get('analytic_flops') or 0:.4g} | {'n/a' if diff is None else f'{diff:+.1f} %'} | "
                   f"{ms.get('dram_bytes') or 0:.4g} | {ms.get('analytic_bytes') or 0:.4g} |")
    return out + [""]


def train_section(runs: Path) -> list[str]:
    out = ["## Time to accuracy (`tbd train`)", "", "| run | time to target | energy | runs |", "|---|---|---|---|"]
    for name in TRAIN:
        t = _json(runs / name / "tta.json")
        if t is None:
            out.append(f"| {name} | not run | | |")
            continue
        for table in t.get("tables", []):
            for s in table.get("systems", []):
                tt = s.get("time_to_target_s")
                energy = s.get("energy_j")
                out.append(f"| {name}: {s.get('label')} | {'n/a (' + str(s.get('score_reason')) + ')' if tt is None else f'{tt:.2f} s'}"
                           f" | {'n/a' if energy is None else f'{energy:.0f} J'} | {len(s.get('runs', []))} |")
    return out + [""]


def page(runs: Path, log_text: str) -> tuple[str, str]:
    env = next((_json(p) for p in sorted(runs.glob("*/raw/environment.json"))), None) or {}
    gpu = (env.get("gpu") or {}).get("name") or "unknown GPU"
    versions = env.get("versions") or {}
    today = date.today().isoformat()
    lines = [f"# GPU check: {gpu}, {today}", "",
             "Written by tools/gpu_results.py from the run directories of one `tools/gpu_check.sh` lease. "
             "tbd's figures are read from what the runs wrote; the recomputed columns parse the same traces "
             "with the standard library alone.", "",
             f"torch {versions.get('torch', 'n/a')}, driver {(env.get('gpu') or {}).get('driver', 'n/a')}.", "",
             "## Steps", "", "| step | result | seconds |", "|---|---|---|"]
    lines += [f"| {name} | {result} | {seconds or ''} |" for name, result, seconds in _steps(log_text)] + [""]
    lines += profiles_section(runs) + truth_section(runs) + ncu_section(runs) + train_section(runs)
    slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-")
    return f"gpu-check-{today}-{slug}.md", "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    runs, log, out = Path(argv[0]), Path(argv[1]), Path(argv[2])
    name, text = page(runs, log.read_text(encoding="utf-8", errors="replace") if log.exists() else "")
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text(text + "\n", encoding="utf-8")
    print(f"results page: {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
