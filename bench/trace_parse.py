"""Trace reading and analysis speed on a trace of realistic size, against plain json.loads.

    .venv/bin/python bench/trace_parse.py [--copies 200] [--source tests/fixtures/kineto_cuda_synthetic.json]

Builds a large CUDA-style Kineto trace by repeating the fixture's events `--copies` times, each copy
shifted past the previous one (steps renumbered), writes it once, then times, side by side in this
run: json.loads alone (the floor any reader pays), tbd's exact-decimal read, the records
(op tree, kernel correlation, FLOP split) and the whole `tbd analyze` path.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from tbd.analysis.flops import op_flops, precision_of
from tbd.collect import profile_from_trace
from tbd.profilers.kineto import read_trace_file, trace_records


def _scaled_trace(source: Path, copies: int) -> dict:
    trace = json.loads(source.read_text(), parse_float=Decimal)
    events = trace["traceEvents"]
    times = [e["ts"] + e.get("dur", 0) for e in events if "ts" in e]
    span = max(times) - min(times) + 10
    out = []
    for c in range(copies):
        for e in events:
            e2 = dict(e)
            if "ts" in e2:
                e2["ts"] = e["ts"] + c * span
            for key in ("correlation", "External id"):
                if key in e2.get("args", {}):
                    e2["args"] = {**e2["args"], key: e2["args"][key] + c * 100000}
            if str(e2.get("name", "")).startswith("ProfilerStep#"):
                e2["name"] = f"ProfilerStep#{int(e2['name'].split('#')[1]) + 2 * c}"
            out.append(e2)
    return {**trace, "traceEvents": out}


def _best(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=200)
    ap.add_argument("--source", type=Path, default=ROOT / "tests" / "fixtures" / "kineto_cuda_synthetic.json")
    args = ap.parse_args()
    trace = _scaled_trace(args.source, args.copies)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.json"
        # Decimal times go back out as JSON numbers (3 decimals survive the float round trip).
        path.write_text(json.dumps(trace, default=float))
        size_mb = path.stat().st_size / 1e6
        n = len(trace["traceEvents"])
        raw_text = path.read_text()
        t_json = _best(lambda: json.loads(raw_text))
        t_read = _best(lambda: read_trace_file(path))
        loaded = read_trace_file(path)
        t_records = _best(lambda: trace_records(loaded, str(path), flops_of=op_flops, precision_of=precision_of))
        t_analyze = _best(lambda: profile_from_trace(path, sm_clock_mhz=1410))
    print(f"trace: {n:,} events, {size_mb:.1f} MB")
    print(f"json.loads (floor)      {t_json:7.3f} s")
    print(f"read_trace_file (exact) {t_read:7.3f} s  ({t_read / t_json:.2f}x json.loads)")
    print(f"trace_records           {t_records:7.3f} s  ({n / t_records:,.0f} events/s)")
    print(f"tbd analyze, end to end {t_analyze:7.3f} s  ({t_analyze / t_json:.2f}x json.loads)")


if __name__ == "__main__":
    main()
