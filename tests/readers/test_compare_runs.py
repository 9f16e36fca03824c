"""`tbd compare` on two committed run directories and on real public GPU traces, every ratio checked
against a recompute from the raw files (iterations.json, raw/*.json, the trace's own events) or a
datasheet, never against tbd's own comparison output."""

import collections
import csv
import gzip
import io
import json
from decimal import Decimal

import pytest
from testpaths import FIXTURES, real_trace

from tbd.cli.main import main
from tbd.core.comparison import Comparison
from tbd.reports.figures.saving import comparison_figures

RUNS = FIXTURES / "runs"
A_RUN, B_RUN = RUNS / "resnet50-test-cpu-b8-threads1", RUNS / "resnet50-test-cpu-b8-threads2"
GPU = FIXTURES / "gpu"
PT18, PT19, A100 = (real_trace("gpu/pt18_resnet50_bare_array.json.gz"), real_trace("gpu/pt19_resnet50_v100.json.gz"),
                    real_trace("gpu/pt2x_a100_nccl2_fractional.json.gz"))
#: A recommendation model (embedding lookups, TF32 addmm) on an A100: not ResNet-50.
RECSYS = real_trace("gpu/pt2x_a100_tf32_nccl16_cudagraph.json.gz")
fetched = pytest.mark.skipif(not (PT18.exists() and PT19.exists() and A100.exists()),
                             reason="real GPU traces not fetched (tests/fixtures/README.md, gpu/)")


def _compare_json(capsys, *targets) -> dict:
    assert main(["compare", *map(str, targets), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _metric(c: dict, key: str) -> dict:
    return next(m for m in c["metrics"] if m["key"] == key)


def _op(c: dict, name: str) -> dict:
    return next(o for o in c["ops"] if o["op"] == name)


def _read(path):
    return json.loads(path.read_text())


# --- two committed runs: test-size ResNet-50, batch 8, on the CPU with 1 and with 2 threads ---

def _throughput(run) -> float:
    """images/s = batch x timing-window iterations / the window's wall time (iterations.json)."""
    log, spec = _read(run / "iterations.json"), _read(run / "spec.json")
    first, last = log["timing_window"]
    return spec["batch"] * (last - first + 1) / (log["timing_window_ns"] / 1e9)


def _mean_iteration_s(run) -> float:
    log = _read(run / "iterations.json")
    first, last = log["timing_window"]
    times = log["times_ns"][first:last + 1]
    return sum(times) / len(times) / 1e9


def _cpu_util(run) -> float:
    cpu = _read(run / "raw/cpu.json")
    return 100.0 * sum(cpu["busy_s"]) / sum(cpu["total_s"])


def test_two_committed_runs_ratios_by_hand(capsys):
    c = _compare_json(capsys, A_RUN, B_RUN)
    assert [r["label"] for r in c["runs"]] == ["A", "B"] and c["differences"] == ["threads: 1 / 2"]
    tp = _metric(c, "throughput")
    assert tp["values"] == [pytest.approx(_throughput(A_RUN), rel=1e-12), pytest.approx(_throughput(B_RUN), rel=1e-12)]
    assert tp["ratios"][1] == pytest.approx(_throughput(B_RUN) / _throughput(A_RUN), rel=1e-12)
    it = _metric(c, "iteration_s")
    assert it["ratios"][1] == pytest.approx(_mean_iteration_s(B_RUN) / _mean_iteration_s(A_RUN), rel=1e-12)
    assert _metric(c, "cpu_util_pct")["ratios"][1] == pytest.approx(_cpu_util(B_RUN) / _cpu_util(A_RUN), rel=1e-9)
    # weights: the workload's parameter count x 4 bytes (fp32) on both sides, so the ratio is exactly 1
    params = _read(A_RUN / "raw/workload.json")["parameters"]
    assert _metric(c, "memory.weights")["values"] == [params * 4, params * 4]
    assert _metric(c, "memory.weights")["ratios"][1] == 1.0
    # the CPU's FP32 peak is each run's measured GEMM ceiling (the VM hides its clock)
    gemm_a, gemm_b = (_read(r / "raw/gemm.json")["flops_per_s"] for r in (A_RUN, B_RUN))
    assert [r["peak_fp32_flops"] for r in c["runs"]] == [gemm_a, gemm_b]
    gap = c["gaps"][0]
    assert gap["peak_ratio"] == pytest.approx(gemm_b / gemm_a, rel=1e-12)
    assert gap["speed_basis"] == "throughput" and gap["speed_ratio"] == pytest.approx(tp["ratios"][1], rel=1e-12)
    # per-op time per traced iteration: each profile's op group time over its 2 traced iterations
    groups = [{g["name"]: g["time_s"] for g in _read(r / "profile.json")["op_groups"]} for r in (A_RUN, B_RUN)]
    total_a, total_b = (sum(g.values()) / 2 for g in groups)
    assert _metric(c, "kernel_time_per_iteration_s")["values"] == [pytest.approx(total_a), pytest.approx(total_b)]
    for name in ("aten::convolution_backward", "aten::convolution", "aten::native_batch_norm"):
        op = _op(c, name)
        a, b = groups[0][name] / 2, groups[1][name] / 2
        assert op["time_per_iteration_s"] == [pytest.approx(a), pytest.approx(b)]
        assert op["delta_s"][1] == pytest.approx(b - a)
        assert op["gap_share_pct"][1] == pytest.approx(100 * (b - a) / (total_b - total_a))
    assert gap["top_op"] == max(groups[0], key=lambda n: groups[1].get(n, 0.0) - groups[0][n])


def test_two_committed_runs_terminal_and_csv(capsys):
    assert main(["compare", str(A_RUN), str(B_RUN)]) == 0
    text = capsys.readouterr().out
    ratio = _throughput(B_RUN) / _throughput(A_RUN)
    assert f"({ratio:.3g}x)" in text
    assert "Not only the device differs: threads: 1 / 2" in text
    assert main(["compare", str(A_RUN), str(B_RUN), "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    tp = next(r for r in rows if r["key"] == "throughput" and r["run"] == "B")
    assert float(tp["value"]) == pytest.approx(_throughput(B_RUN), rel=1e-12)
    assert float(tp["ratio_to_first"]) == pytest.approx(ratio, rel=1e-12)


def test_compare_saves_json_for_report(tmp_path, capsys):
    out = tmp_path / "compare.json"
    assert main(["compare", str(A_RUN), str(B_RUN), "--out", str(out)]) == 0
    assert _read(out)["schema"] == "tbd.compare/1"
    assert main(["compare", str(A_RUN), str(B_RUN), "--out", str(out)]) == 2  # never overwritten unasked
    assert "exists" in capsys.readouterr().err


def test_compare_errors_are_one_line(tmp_path, capsys):
    assert main(["compare", str(A_RUN)]) == 2
    assert "at least two" in capsys.readouterr().err
    assert main(["compare", str(A_RUN), str(tmp_path / "nope")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{")
    assert main(["compare", str(A_RUN), str(tmp_path / "bad.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tbd: error:")


# --- real public GPU traces (fetched, not committed: see tests/fixtures/README.md) ---

def _events(path):
    with gzip.open(path, "rt") as f:
        data = json.load(f, parse_float=Decimal)
    return data if isinstance(data, list) else data["traceEvents"]


def _ns(value) -> int:
    return int(Decimal(str(value)) * 1000)


CONV_OPS = ("aten::convolution", "aten::cudnn_convolution_backward_input", "aten::cudnn_convolution_backward_weight")


def _conv_kernel_ns(path) -> dict[str, int]:
    """Kernel time (ns) under the outermost convolution op enclosing each kernel's launching runtime
    call on that call's thread (correlation id -> runtime call -> open ops), recounted from the events."""
    events = _events(path)
    ops_on = collections.defaultdict(list)
    for e in events:
        if e.get("cat") in ("Operator", "cpu_op") and e.get("ph") == "X":
            ops_on[e["tid"]].append(e)
    calls = {e["args"]["correlation"]: e for e in events
             if e.get("cat") in ("Runtime", "cuda_runtime") and "correlation" in e.get("args", {})}
    out = collections.Counter()
    for k in (e for e in events if e.get("cat") in ("Kernel", "kernel")):
        call = calls.get(k["args"].get("correlation"))
        if call is None:
            continue
        t = _ns(call["ts"])
        open_ops = sorted((o for o in ops_on[call["tid"]] if _ns(o["ts"]) <= t <= _ns(o["ts"]) + _ns(o["dur"])),
                          key=lambda o: (_ns(o["ts"]), -_ns(o["dur"])))
        conv = [o["name"] for o in open_ops if o["name"] in CONV_OPS]
        if conv:
            out[conv[0]] += _ns(k["dur"])
    return out


def _all_kernel_ns(path, expected) -> int:
    lo, hi = expected["window_start_ns"], expected["window_end_ns"]
    return sum(_ns(k["dur"]) for k in _events(path) if k.get("cat") in ("Kernel", "kernel") and lo <= _ns(k["ts"]) <= hi)


@pytest.fixture(scope="module")
def expected():
    return _read(GPU / "expected.json")


@fetched
def test_two_resnet50_traces_pytorch_18_and_19(capsys, expected):
    """ResNet-50 recorded by PyTorch 1.8 (no device recorded) and 1.9 (V100), one ProfilerStep each."""
    e18, e19 = expected[PT18.name], expected[PT19.name]
    c = _compare_json(capsys, PT18, PT19)
    assert [r["traced_iterations"] for r in c["runs"]] == [1, 1]
    busy = _metric(c, "gpu_busy_pct")
    assert busy["ratios"][1] == pytest.approx((e19["busy_ns"] / e19["window_ns"]) / (e18["busy_ns"] / e18["window_ns"]))
    # one step each: its span is the window (recompute.py's definition of both)
    assert _metric(c, "iteration_s")["values"] == [e18["window_ns"] / 1e9, e19["window_ns"] / 1e9]
    kt = _metric(c, "kernel_time_per_iteration_s")
    k18, k19 = _all_kernel_ns(PT18, e18), _all_kernel_ns(PT19, e19)
    assert kt["values"] == [pytest.approx(k18 / 1e9, rel=1e-12), pytest.approx(k19 / 1e9, rel=1e-12)]
    conv18, conv19 = _conv_kernel_ns(PT18), _conv_kernel_ns(PT19)
    assert set(conv18) == set(conv19) == set(CONV_OPS)
    for name in CONV_OPS:
        op = _op(c, name)
        assert op["time_per_iteration_s"] == [pytest.approx(conv18[name] / 1e9, rel=1e-12),
                                              pytest.approx(conv19[name] / 1e9, rel=1e-12)]
        assert op["delta_s"][1] == pytest.approx((conv19[name] - conv18[name]) / 1e9, rel=1e-9)
    gap = c["gaps"][0]
    # no deviceProperties in the 1.8 trace: no peak, so no peak ratio; the speed ratio is by iteration time
    assert c["runs"][0]["peak_fp32_flops"] is None and gap["peak_ratio"] is None
    assert gap["speed_basis"] == "iteration time"
    assert gap["speed_ratio"] == pytest.approx(e18["window_ns"] / e19["window_ns"])


@fetched
def test_v100_against_a100_peak_ratio_from_datasheets(capsys, expected):
    """B's peak over A's: 19.5 TFLOP/s FP32 (NVIDIA A100 datasheet) over 15.7 (V100 SXM2/DGXS datasheet)."""
    ev, ea = expected[PT19.name], expected[A100.name]
    c = _compare_json(capsys, PT19, A100)
    assert [r["device_name"] for r in c["runs"]] == ["Tesla V100-DGXS-32GB", "NVIDIA A100-PG509-200"]
    assert [r["peak_fp32_flops"] for r in c["runs"]] == [15.7e12, 19.5e12]
    assert [(r["compute_units"], r["compute_unit_name"]) for r in c["runs"]] == [(80, "SMs"), (108, "SMs")]
    assert c["gaps"][0]["peak_ratio"] == pytest.approx(19.5 / 15.7)
    assert _metric(c, "gpu_busy_pct")["values"] == [pytest.approx(100 * ev["busy_ns"] / ev["window_ns"]),
                                                    pytest.approx(100 * ea["busy_ns"] / ea["window_ns"])]
    assert c["differences"] == [f"model: {PT19.name} / {A100.name}"]
    assert main(["compare", str(PT19), str(A100)]) == 0
    text = capsys.readouterr().out
    assert f"B has {19.5 / 15.7:.3g}x A's FP32 peak" in text


@fetched
def test_a_resnet50_trace_against_a_recommendation_model_claims_no_ratio(capsys):
    """The issue's case: a V100 ResNet-50 trace against an A100 recommendation-model trace."""
    if not RECSYS.exists():
        pytest.skip("real GPU traces not fetched")
    c = _compare_json(capsys, PT19, RECSYS)
    gap = c["gaps"][0]
    assert gap["comparable"] is False and "different models" in gap["not_comparable_reason"]
    assert gap["speed_ratio"] is None and gap["top_op"] is None and gap["top_op_share_pct"] is None
    assert all(o["gap_share_pct"][1] is None for o in c["ops"])
    # the ops both launched: their share of each trace's kernel time, recounted from the JSON's op rows
    shared = [o for o in c["ops"] if o["op"] != "(no launching op)" and all(o["time_per_iteration_s"])]
    own = [sum(o["time_per_iteration_s"][i] for o in c["ops"] if o["op"] != "(no launching op)") for i in (0, 1)]
    for i in (0, 1):
        assert 100 * sum(o["time_per_iteration_s"][i] for o in shared) / own[i] < 50
    assert main(["compare", str(PT19), str(RECSYS), "--label", "A=rn50-v100", "B=recsys-a100"]) == 0
    text = capsys.readouterr().out
    assert "as fast" not in text and "of that in" not in text and "Not the same workload" in text
    assert "rn50-v100" in text and "recsys-a100" in text


@fetched
def test_labels_in_text_json_and_figure_legends(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert main(["compare", str(PT18), str(PT19), "--label", "A=torch 1.8", "B=torch 1.9 V100", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert "torch 1.8" in text and "torch 1.9 V100" in text
    assert captured.err == f"comparison saved: {out} (`tbd report {out} --html` makes its page)\n"  # says where
    saved = _read(out)
    assert [r["name"] for r in saved["runs"]] == ["torch 1.8", "torch 1.9 V100"]
    # the same model on both sides: the ratio stands
    assert saved["gaps"][0]["comparable"] is True and saved["gaps"][0]["speed_basis"] == "iteration time"
    for figure in comparison_figures(Comparison.from_dict(saved)).values():
        legend = [t.get_text() for ax in figure.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
        ticks = [t.get_text() for ax in figure.axes for t in ax.get_xticklabels()]
        assert {"A: torch 1.8", "B: torch 1.9 V100"} <= set(legend + ticks) or not figure.axes[0].has_data()
    # default names: the trace's stem and its GPU
    c = _compare_json(capsys, PT18, PT19)
    assert [r["name"] for r in c["runs"]] == ["pt18_resnet50_bare_array · cuda",
                                              "pt19_resnet50_v100 · Tesla V100-DGXS-32GB"]
    assert main(["compare", str(PT18), str(PT19), "--label", "C=x"]) == 2
    assert "there is no run C" in capsys.readouterr().err


@fetched
def test_peak_flops_applies_to_traces_without_a_peak_unless_a_run_is_named(capsys):
    # PyTorch 1.8's trace records no device; 1.9's names a V100 (15.7 TFLOP/s FP32, NVIDIA's datasheet).
    c = _compare_json(capsys, PT18, PT19, "--peak-flops", "1e13")
    assert [r["peak_fp32_flops"] for r in c["runs"]] == [1e13, 15.7e12]
    assert any("applied to A" in n for n in c["notes"]) and any(n.startswith("B keeps its own FP32 peak")
                                                               for n in c["notes"])
    c = _compare_json(capsys, PT18, PT19, "--peak-flops", "B=1e13")
    assert [r["peak_fp32_flops"] for r in c["runs"]] == [None, 1e13]
    assert any("B's FP32 peak is 10.0 TFLOP/s, given with --peak-flops B=" in n for n in c["notes"])
    assert main(["compare", str(A_RUN), str(PT19), "--peak-flops", "A=1e13"]) == 2
    assert "tbd analyze" in capsys.readouterr().err
