"""Golden: `tbd analyze` on the hand-made CUDA-style Kineto trace, every figure by hand.

The fixture (tests/fixtures/README.md) describes an A100-like device (compute capability 8.0,
108 SMs); with --sm-clock-mhz 1410 the hardware model gives
FP32 = 108 x 1.41 GHz x 128 FLOP/clk and TF32 = 108 x 1.41 GHz x 1024 FLOP/clk.
FLOPs come from the real formula table (analysis/flops/ops.py).
"""

import json

import pytest
from testpaths import FIXTURES

from tbd.cli.main import main

FIXTURE = FIXTURES / "kineto_cuda_synthetic.json"
P32 = 108 * 1.41e9 * 128
PTF32 = 108 * 1.41e9 * 1024
US = 1e-6

# kernel: (duration s, FLOPs, peak) in the window
SGEMM = (3.3 * US, 2 * 33 * 100 * 100, P32)  # aten::addmm [33,100] x [100,100]
COPY = (2.0 * US, 0.0, P32)  # aten::copy_: data movement, a known zero
BN = (2.1 * US, 6 * 33 * 100, P32)  # native_batch_norm, training: 6 FLOPs per element
RELU = (1.2 * US, 1 * 33 * 100, P32)  # one compare per element
CONV_BWD = 2 * 20 * 50 * 20 * 20 * 10 * 1 * 1  # grad_weight only (output_mask [F, T, F])
FILL, WGRAD, DGRAD = ((d * US, CONV_BWD * d / 10, P32) for d in (1.0, 6.0, 3.0))  # split by duration
TF32_GEMM = (12.0 * US, 2 * 40 * 100 * 1200, PTF32)  # aten::mm under aten::matmul; tf32 kernel
ALL = [SGEMM, COPY, BN, RELU, FILL, WGRAD, DGRAD, TF32_GEMM]


def util(k):
    return 100 * k[1] / (k[2] * k[0])


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    out = tmp_path_factory.mktemp("analyze") / "profile.json"
    assert main(["analyze", str(FIXTURE), "--sm-clock-mhz", "1410", "--json", str(out)]) == 0
    return json.loads(out.read_text())


def test_gpu_busy(analysed):
    # union over streams 7 and 20: (1017.0 - 1010.4) + (1116 - 1109) + (1190 - 1178) us over 190 us
    busy = (1017.0 - 1010.4) + (1116 - 1109) + (1190 - 1178)
    assert analysed["metrics"]["gpu_busy_pct"]["value"] == pytest.approx(100 * busy / 190)


def test_overall_flop_utilization(analysed):
    fu = analysed["metrics"]["flop_util_pct"]
    busy_s = 25.6 * US
    expected = 100 * sum(k[1] / k[2] for k in ALL) / busy_s
    assert fu["value"] == pytest.approx(expected)
    assert fu["flops"] == pytest.approx(sum(k[1] for k in ALL))
    assert fu["peak_flops"] == pytest.approx(P32) and fu["peak_source"] == "hardware_model"
    # threshold of the ranking: busy-time-weighted average over the kernels (3.3 + 2 + 2.1 + 1.2 + 1 + 6 + 3 + 12 = 30.6 us summed)
    assert fu["kernel_average_pct"] == pytest.approx(100 * sum(k[1] / k[2] for k in ALL) / (30.6 * US))


def test_per_kernel_utilization(analysed):
    rows = {r["name"]: r for r in analysed["kernels"]}
    assert rows["volta_sgemm_64x32_sliced1x4_nn"]["util_pct"] == pytest.approx(util(SGEMM))
    assert rows["ampere_tf32_s1688gemm_64x64_sliced1x2_ldg8_tn"]["util_pct"] == pytest.approx(util(TF32_GEMM))
    assert rows["ampere_tf32_s1688gemm_64x64_sliced1x2_ldg8_tn"]["precision"] == "tf32"
    wgrad = [r for n, r in rows.items() if "wgrad" in n][0]
    assert wgrad["util_pct"] == pytest.approx(util(WGRAD))
    assert wgrad["flops"] == pytest.approx(CONV_BWD * 6 / 10)


def test_rankings_split_compute_from_memory_bound(analysed):
    """On the A100 row the fixture matches (19.5 TFLOP/s FP32, 156 TF32, 1,555 GB/s) every group
    is left of its ridge: the compute ranking (Table V) is empty, the memory ranking holds the five
    groups below the average bandwidth utilization, longest first."""
    bw, fp32_ridge, tf32_ridge = 1555e9, 19.5e12 / 1555e9, 156e12 / 1555e9  # 12.54 and 100.3 FLOP/B
    rows = {r["name"]: r for r in analysed["kernels"]}
    sgemm = rows["volta_sgemm_64x32_sliced1x4_nn"]
    # addmm(bias[100], x[33,100], w[100,100]) -> out[33,100]: every tensor once, 4 bytes each
    assert sgemm["bytes"] == (100 + 33 * 100 + 100 * 100 + 33 * 100) * 4 == 66800
    assert sgemm["intensity"] == pytest.approx(660000 / 66800) and 660000 / 66800 < fp32_ridge
    tf32 = rows["ampere_tf32_s1688gemm_64x64_sliced1x2_ldg8_tn"]
    assert tf32["bytes"] == (40 * 100 + 100 * 1200 + 40 * 1200) * 4 == 688000  # matmul [40,100] x [100,1200]
    assert tf32["intensity"] == pytest.approx(9.6e6 / 688000) and 9.6e6 / 688000 < tf32_ridge
    assert tf32["bound"] == "memory" and tf32["attainable_flops_per_s"] == pytest.approx(9.6e6 / 688000 * bw)
    assert tf32["bandwidth_util_pct"] == pytest.approx(100 * 688000 / 12e-6 / bw)
    assert analysed["low_util_kernels"] == []
    total_bytes = sum(r["bytes"] for r in analysed["kernels"])
    average = 100 * total_bytes / (30.6 * US) / bw  # time-weighted mean of bytes/s over bandwidth
    assert analysed["metrics"]["memory_bandwidth"]["kernel_average_pct"] == pytest.approx(average)
    names = [r["name"] for r in analysed["low_bandwidth_kernels"]]
    assert names[:2] == ["ampere_tf32_s1688gemm_64x64_sliced1x2_ldg8_tn", "volta_sgemm_64x32_sliced1x4_nn"]
    assert "batch_norm_collect_statistics" in names[2] and "direct_copy" in names[3] and "clamp" in names[4]
    assert all(r["bandwidth_util_pct"] < average for r in analysed["low_bandwidth_kernels"])
    assert len(names) == 5


def test_what_a_trace_cannot_tell_is_null_with_reason(analysed):
    m = analysed["metrics"]
    for key in ("cpu_util_pct", "gpu_busy_nvml_pct"):
        assert m[key]["value"] is None and m[key]["reason"]
    assert m["throughput"]["value"] is None and m["throughput"]["reason"]
    assert analysed["schema"] == "tbd.profile/2"
    assert any("memcpy" in n for n in analysed["notes"])


def test_iterations_are_the_trace_steps_and_samples_per_step_gives_throughput(tmp_path):
    out = tmp_path / "p.json"
    assert main(["analyze", str(FIXTURE), "--samples-per-step", "32", "--json", str(out)]) == 0
    p = json.loads(out.read_text())
    it = p["iterations"]
    # ProfilerStep#1: host 1000-1100 µs; #2: host 1100-1180 µs, its last kernel ends at 1190 µs
    assert it["source"] == "trace" and it["step_numbers"] == [1, 2] and it["stable"] is None
    assert it["times_s"] == pytest.approx([100e-6, 90e-6])
    assert p["metrics"]["throughput"]["value"] == pytest.approx(32 * 2 / 190e-6)
    assert any("warm-up and stability cannot be told" in n for n in p["notes"])


def test_an_unnamed_gpu_with_a100_capability_and_sms_gets_the_a100_peaks(tmp_path, capsys):
    # The fixture's GPU is "Synthetic GPU" with compute capability 8.0 and 108 SMs: an A100 by the
    # GPU table's rule (an unfamiliar A100 SKU), whose dense peaks are FP32 19.5, TF32 156 TFLOP/s.
    out = tmp_path / "p.json"
    assert main(["analyze", str(FIXTURE), "--json", str(out)]) == 0
    fu = json.loads(out.read_text())["metrics"]["flop_util_pct"]
    assert fu["peak_source"] == "gpu_table" and "compute capability 8.0" in fu["peak_formula"]
    assert fu["peaks_by_precision"]["fp32"] == 19.5e12 and fu["peaks_by_precision"]["tf32"] == 156e12
    assert fu["value"] is not None and "Table V" in capsys.readouterr().out


def test_an_unknown_gpu_means_null_utilization_naming_it_and_the_flag(tmp_path, capsys):
    trace = json.loads(FIXTURE.read_text())
    trace["deviceProperties"][0].update(computeMajor=6, computeMinor=1, numSms=28)  # no such row
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    out = tmp_path / "p.json"
    assert main(["analyze", str(path), "--json", str(out)]) == 0
    fu = json.loads(out.read_text())["metrics"]["flop_util_pct"]
    assert fu["value"] is None and "Synthetic GPU" in fu["reason"] and "--peak-flops" in fu["reason"]
    assert fu["kernel_average_pct"] is None  # no threshold without a peak, not 0 %


def test_json_output_never_replaces_a_file_unasked_nor_writes_into_a_folder(tmp_path, capsys):
    out = tmp_path / "p.json"
    out.write_text("the user's file")
    assert main(["analyze", str(FIXTURE), "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists" in err and "--force" in err
    assert out.read_text() == "the user's file"
    assert main(["analyze", str(FIXTURE), "--json", str(out), "--force"]) == 0
    assert json.loads(out.read_text())["schema"] == "tbd.profile/2"
    assert main(["analyze", str(FIXTURE), "--json", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
