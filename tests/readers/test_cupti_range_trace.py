"""`tbd analyze` on a CUPTI range-profiler trace: device, measured FP32 FLOPs per range, kernel and op.

The real trace is HolisticTraceAnalysis's tests/data/cupti_profiler trace (an A100, AlexNet, 77
ranges; tests/fixtures/README.md "gpu/"). The expectations are recomputed here from the raw JSON with
json/gzip only, no tbd code: each range's FP32 FLOPs = fadd + fmul + 2 x ffma; the n-th range (by
"ts") paired with the n-th cudaLaunchKernel (by "ts"), as HTA's CuptiCounterAnalysis does; the op of
a launch is the innermost cpu_op on its thread enclosing it, lifted to the outermost enclosing op that
has a FLOP formula. Which ops have one is the formula table's definition (`op_flops` not None), taken
from it; the pairing, the tree walk and the sums are the test's own.
"""

from __future__ import annotations

import gzip
import json
import math

import pytest
from testpaths import FIXTURES

from tbd.analysis.flops.ops import op_flops
from tbd.cli.main import main
from tbd.cli.run_analysis import profile_from_trace
from tbd.core.profile_result import Profile
from tbd.core.records import OpShapes

HTA = FIXTURES / "gpu" / "pt20_a100_cupti_range_alexnet.json.gz"
SYNTHETIC = FIXTURES / "kineto_cupti_counters.json"
_OP = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"


def _has_formula(name: str) -> bool:
    return op_flops(OpShapes(name, (), (), ())) is not None

needs_hta = pytest.mark.skipif(not HTA.exists(), reason=f"{HTA.name} absent (tests/fixtures/README.md, gpu/)")


def _shown(name: str) -> str:
    """A name as tbd bounds it (profilers/traces/names.py: 4,096 characters, head and tail around "…")."""
    tail = (4096 - 1) // 4
    return name if len(name) <= 4096 else name[:4096 - 1 - tail] + "…" + name[-tail:]


def _fp32(args: dict) -> float:
    return args[_OP.format("fadd")] + args[_OP.format("fmul")] + 2 * args[_OP.format("ffma")]


def _recompute(path) -> dict:
    """Per range: (name, FP32 FLOPs, innermost op, outermost formula op or innermost), by hand."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    ranges = sorted((e for e in events if e.get("cat") == "cuda_profiler_range"), key=lambda e: e["ts"])
    launches = sorted((e for e in events if e.get("cat") == "cuda_runtime" and e["name"] == "cudaLaunchKernel"),
                      key=lambda e: e["ts"])
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    rows = []
    for r, call in zip(ranges, launches):
        around = [o for o in ops if o["tid"] == call["tid"] and o["ts"] <= call["ts"] < o["ts"] + o["dur"]]
        around.sort(key=lambda o: (o["ts"], -o["dur"]))  # outermost first
        inner = around[-1]["name"] if around else ""
        formula = [o["name"] for o in around if _has_formula(o["name"])]
        rows.append((_shown(r["name"]), _fp32(r["args"]), inner, formula[0] if formula else inner))
    return {"ranges": len(ranges), "launches": len(launches), "rows": rows}


@pytest.fixture(scope="module")
def hta() -> Profile:
    return profile_from_trace(HTA)


@needs_hta
def test_the_trace_is_a_cuda_a100_with_table_peaks(hta):
    assert hta.spec["device"] == "cuda"
    assert hta.environment["gpu"]["name"] == "NVIDIA A100-PG509-200"
    # A100 FP32: 108 SMs x 1410 MHz x 128 FLOP/clk = 19.5 TFLOP/s (the GPU table's datasheet row).
    assert hta.metrics.flop_util_pct.peak_source == "gpu_table"
    assert hta.metrics.flop_util_pct.peak_flops == pytest.approx(19.5e12, rel=1e-3)
    assert hta.metrics.gpu_busy_pct.value is None and "range-profiler" in hta.metrics.gpu_busy_pct.reason
    assert hta.metrics.flop_util_pct.value is None
    assert hta.kernels == []  # no kernel times: the range profiler writes no kernel events


@needs_hta
def test_measured_fp32_flops_match_an_independent_recompute(hta):
    expected = _recompute(HTA)
    assert expected["ranges"] == expected["launches"] == 77
    c = hta.counters
    assert c.source == "cupti_range" and c.ranges == 77 and c.paired == 77 and c.unpaired == []
    rows = expected["rows"]
    assert c.fp32_flops == pytest.approx(math.fsum(r[1] for r in rows), rel=1e-12)
    # Per range, in launch order: the name, the FLOPs and the op of the n-th launch.
    assert [(r.name, r.fp32_flops, r.launching_op) for r in c.per_range] == [(n, f, i) for n, f, i, _ in rows]
    assert [r.op for r in c.per_range] == [r[3] for r in rows]
    per_kernel: dict[str, list[float]] = {}
    per_op: dict[str, list[float]] = {}
    for name, flops, _, op in rows:
        per_kernel.setdefault(name, []).append(flops)
        per_op.setdefault(op, []).append(flops)
    assert {k.name: (k.launches, k.fp32_flops) for k in c.kernels} == \
        {n: (len(v), pytest.approx(math.fsum(v), rel=1e-12)) for n, v in per_kernel.items()}
    assert {o.name: (o.launches, o.fp32_flops) for o in c.ops} == \
        {n: (len(v), pytest.approx(math.fsum(v), rel=1e-12)) for n, v in per_op.items()}


@needs_hta
def test_the_first_ranges_by_hand(hta):
    """Ranges 0 and 1 written out: uniform_ (ffma 38,731,776) and the first convolution (__missing__)."""
    first, second = hta.counters.per_range[:2]
    assert first.fp32_flops == 2 * 38_731_776 and first.op == "aten::uniform_"
    assert first.flops_by_precision["fp16"] == 4 * 4_866_048  # packed HFMA2: 4 FLOPs per thread instruction
    assert second.name == "__missing__" and second.fp32_flops == 24_780_800 + 2 * 9_119_334_400
    assert (second.launching_op, second.op) == ("aten::cudnn_convolution", "aten::convolution")
    conv = next(o for o in hta.counters.ops if o.name == "aten::convolution")
    assert conv.analytic_flops is None and "shapes not recorded" in conv.analytic_reason


@needs_hta
def test_tbd_analyze_prints_the_measured_section(capsys):
    assert main(["analyze", str(HTA)]) == 0
    out = capsys.readouterr().out
    assert "device: cuda — NVIDIA A100-PG509-200" in out
    total = math.fsum(r[1] for r in _recompute(HTA)["rows"])
    assert f"FP32 FLOPs measured: {total / 1e9:.1f} GFLOP" in out
    assert "77 of 77 ranges paired" in out and "By op (7 of 7)" in out


@needs_hta
def test_the_json_round_trips(hta, tmp_path):
    assert Profile.from_dict(json.loads(json.dumps(hta.to_dict()))) == hta


def test_measured_beside_analytic_on_the_synthetic_trace():
    """kineto_cupti_counters.json (tests/fixtures/COUNTERS.md): five launches with shapes. aten::mm's three
    calls: two 512x256x1024 sgemms (ffma 134,217,728, fmul 524,288 each) and a 1024^3 half GEMM on tensor
    cores (no FP32 work), against 2*512*256*1024*2 + 2*1024^3 analytic."""
    profile = profile_from_trace(SYNTHETIC)
    rows = _recompute(SYNTHETIC)["rows"]
    mm = next(o for o in profile.counters.ops if o.name == "aten::mm")
    assert (mm.launches, mm.calls) == (3, 3)
    assert mm.fp32_flops == 2 * (524_288 + 2 * 134_217_728) == math.fsum(f for _, f, _, op in rows if op == "aten::mm")
    analytic = 2 * (2 * 512 * 256 * 1024) + 2 * 1024**3
    assert mm.analytic_flops == analytic
    assert mm.fp32_difference_pct == pytest.approx(100 * (mm.fp32_flops - analytic) / analytic)
    conv = next(o for o in profile.counters.ops if o.name == "aten::cudnn_convolution")
    assert conv.analytic_flops is None and conv.analytic_reason == "no FLOP formula for the op"


def _trace(launches: int, ranges: int, devices=(0,)) -> dict:
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 10 * k, "dur": 5,
               "args": {}} for k in range(launches)]
    events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10 * k + 1,
                "dur": 1, "args": {"correlation": 100 + k}} for k in range(launches)]
    events += [{"ph": "X", "cat": "cuda_profiler_range", "name": f"k{k}", "pid": devices[k % len(devices)], "tid": 0,
                "ts": 1000 + k, "dur": 1, "args": {_OP.format(o): 1 for o in ("fadd", "fmul", "ffma")}}
               for k in range(ranges)]
    return {"deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0,
                                  "numSms": 108}], "traceEvents": events}


@pytest.mark.parametrize("launches, ranges, devices, paired", [
    (3, 3, (0,), 3),  # one launch per range
    (4, 2, (0,), 2),  # the range profiler stopped early: the first launches
    (2, 3, (0,), 0),  # more ranges than launches: which is which cannot be told
    (4, 4, (0, 1), 0),  # two devices, launches naming none
])
def test_ranges_never_paired_by_a_guess(tmp_path, launches, ranges, devices, paired):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_trace(launches, ranges, devices)))
    c = profile_from_trace(path).counters
    assert (c.ranges, c.paired) == (ranges, paired)
    assert c.fp32_flops == 4.0 * ranges  # unpaired ranges still count: 1 + 1 + 2 x 1 each
    assert sorted(c.unpaired) == ([] if paired else [f"k{k}" for k in range(ranges)])  # by device, then launch
    assert sum(o.launches for o in c.ops) == paired
