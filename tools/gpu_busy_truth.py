"""GPU busy of a suite workload measured apart from tbd's analysis, to check tbd's figure against.

    python tools/gpu_busy_truth.py --model resnet50 --batch 64 --out DIR      (on a CUDA machine)

Three readings of the same workload in one process, each from a few lines written here:
1. iteration time: N steps timed with time.perf_counter around torch.cuda.synchronize (no profiler);
2. a light trace (torch.profiler, CPU and CUDA activities only): the union of the kernel intervals
   of N steps over the span from the first step's CPU start to the last kernel's end;
3. a heavy trace, with what `tbd profile` asks of the profiler (record_shapes, profile_memory,
   with_stack), read the same way.
Busy from (2) and (3) shows how much the profiler's own host overhead stretches the traced wall
time; kernel time per step from (2) over the iteration time from (1) is busy as the untraced run
has it. The traces are kept in DIR (light.json.gz, heavy.json.gz) for later recomputation.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from tbd.cli.registry import load_builder


def union_ns(spans: list[tuple[int, int]]) -> int:
    """Total length of the union of [start, end) spans."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(spans):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def read_trace(path: Path, steps: int) -> dict:
    events = json.loads(gzip.open(path).read())["traceEvents"]
    marks = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("truth_step_")]
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    # Chrome traces hold microseconds (floats); nanosecond integers keep the union exact enough.
    spans = [(round(e["ts"] * 1e3), round((e["ts"] + e["dur"]) * 1e3)) for e in kernels]
    start = min(round(m["ts"] * 1e3) for m in marks)
    end = max(max(e for _, e in spans), max(round((m["ts"] + m["dur"]) * 1e3) for m in marks))
    inside = [(max(s, start), min(e, end)) for s, e in spans if e > start and s < end]
    busy = union_ns(inside)
    return {"steps": steps, "kernels": len(kernels), "wall_ms": (end - start) / 1e6, "kernel_union_ms": busy / 1e6,
            "busy_pct": 100.0 * busy / (end - start), "kernel_ms_per_step": busy / 1e6 / steps,
            "wall_ms_per_step": (end - start) / 1e6 / steps}


def traced(step, steps: int, path: Path, heavy: bool) -> dict:
    extra = {"record_shapes": True, "profile_memory": True, "with_stack": True} if heavy else {}
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], **extra) as prof:
        for i in range(steps):
            with record_function(f"truth_step_{i}"):
                step()
        torch.cuda.synchronize()
    raw = path.with_suffix("")  # x.json.gz -> x.json
    prof.export_chrome_trace(str(raw))
    with open(raw, "rb") as src, gzip.open(path, "wb") as dst:
        dst.write(src.read())
    raw.unlink()
    return read_trace(path, steps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", default="full", choices=("full", "test"))
    ap.add_argument("--warmup", type=int, default=15)
    ap.add_argument("--steps", type=int, default=20, help="untimed-profiler steps timed by the clock")
    ap.add_argument("--trace-steps", type=int, default=3)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda", 0)
    workload = load_builder(args.model, "pytorch")(batch=args.batch, device=device, size=args.size, seed=0)
    for _ in range(args.warmup):
        workload.step()
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    for _ in range(args.steps):
        workload.step()
    torch.cuda.synchronize()
    clock_ms = (time.perf_counter_ns() - t0) / 1e6 / args.steps
    light = traced(workload.step, args.trace_steps, args.out / "light.json.gz", heavy=False)
    heavy = traced(workload.step, args.trace_steps, args.out / "heavy.json.gz", heavy=True)
    result = {"model": args.model, "batch": args.batch, "size": args.size, "device": torch.cuda.get_device_name(0),
              "torch": torch.__version__, "clock_ms_per_step": clock_ms,
              "samples_per_s": workload.samples_per_step / clock_ms * 1e3, "light": light, "heavy": heavy,
              "busy_pct_untraced": 100.0 * light["kernel_ms_per_step"] / clock_ms}
    (args.out / "truth.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
