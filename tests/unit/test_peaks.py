"""Hardware peak model against published datasheet peaks, written as arithmetic."""

from __future__ import annotations

import pytest

from tbd.analysis.peaks import PeakFlops, cpu_flops_per_cycle, cpu_peak_flops, gpu_peak_flops


def _close(value: float | None, expected: float, rel: float = 0.005) -> bool:
    return value is not None and abs(value - expected) <= rel * expected


def test_v100_sxm2_fp32_and_fp16():
    # Tesla V100 whitepaper: 80 SMs, 1530 MHz boost; 15.7 TFLOPS FP32, 125 TFLOPS tensor FP16.
    fp32 = gpu_peak_flops((7, 0), 80, 1530e6, "fp32")
    assert fp32.value == 80 * 1530e6 * 64 * 2
    assert _close(fp32.value, 15.7e12)
    assert _close(gpu_peak_flops((7, 0), 80, 1530e6, "fp16").value, 125e12)
    assert _close(gpu_peak_flops((7, 0), 80, 1530e6, "fp64").value, 7.8e12)


def test_a100_fp32_tf32_fp16_bf16_fp64():
    # A100 datasheet (SXM4): 108 SMs at 1410 MHz; 19.5 TF FP32, 156 TF TF32, 312 TF FP16/BF16, 9.7 TF FP64.
    assert gpu_peak_flops((8, 0), 108, 1410e6, "fp32").value == 108 * 1410e6 * 64 * 2
    assert _close(gpu_peak_flops((8, 0), 108, 1410e6, "fp32").value, 19.5e12)
    assert _close(gpu_peak_flops((8, 0), 108, 1410e6, "tf32").value, 156e12)
    assert _close(gpu_peak_flops((8, 0), 108, 1410e6, "fp16").value, 312e12)
    assert _close(gpu_peak_flops((8, 0), 108, 1410e6, "bf16").value, 312e12)
    assert _close(gpu_peak_flops((8, 0), 108, 1410e6, "fp64").value, 9.7e12)


def test_h100_sxm():
    # H100 SXM datasheet: 132 SMs; 66.9 TF FP32 (1980 MHz), 67 TF FP64 tensor / 34 TF FP64 vector.
    assert _close(gpu_peak_flops((9, 0), 132, 1980e6, "fp32").value, 66.9e12)
    assert _close(gpu_peak_flops((9, 0), 132, 1980e6, "fp64").value, 33.5e12)
    # Its dense tensor figures (989.4 TF FP16, 494.7 TF TF32) work out at 1830 MHz.
    assert _close(gpu_peak_flops((9, 0), 132, 1830e6, "fp16").value, 989.4e12)
    assert _close(gpu_peak_flops((9, 0), 132, 1830e6, "tf32").value, 494.7e12)


def test_consumer_ampere_and_turing_rates():
    # RTX 3090 (GA102 whitepaper): 82 SMs at 1695 MHz -> 35.6 TF FP32.
    assert _close(gpu_peak_flops((8, 6), 82, 1695e6, "fp32").value, 35.6e12)
    # T4: 40 SMs at 1590 MHz -> 65 TF FP16 tensor, 8.1 TF FP32.
    assert _close(gpu_peak_flops((7, 5), 40, 1590e6, "fp16").value, 65e12, rel=0.01)
    assert _close(gpu_peak_flops((7, 5), 40, 1590e6, "fp32").value, 8.1e12, rel=0.01)


def test_formula_names_the_parts():
    peak = gpu_peak_flops((9, 0), 132, 1980e6, "fp32")
    assert peak.reason is None
    assert "132 SMs" in peak.formula and "1980 MHz" in peak.formula and "256 FLOP/clk/SM" in peak.formula


@pytest.mark.parametrize("cc,precision", [((3, 5), "fp32"), ((7, 5), "tf32"), ((7, 0), "bf16"),
                                          ((12, 0), "fp16"), ((9, 0), "int8")])
def test_unknown_combination_is_none_with_reason(cc, precision):
    peak = gpu_peak_flops(cc, 80, 1500e6, precision)
    assert peak.value is None
    assert peak.reason


def test_blackwell_fp32_by_major():
    assert gpu_peak_flops((10, 0), 148, 1e9, "fp32").value == 148 * 1e9 * 256
    assert gpu_peak_flops((12, 0), 170, 1e9, "fp32").value == 170 * 1e9 * 256


def test_missing_gpu_clock_is_none_with_reason():
    peak = gpu_peak_flops((8, 0), 108, None, "fp32")
    assert peak == PeakFlops(None, "GPU max SM clock unknown", peak.formula)
    assert "108 SMs" in peak.formula


@pytest.mark.parametrize("flags,expected", [
    (["sse2", "avx", "fma", "avx2", "avx512f"], 2 * 16 * 2),
    (["sse2", "avx", "fma", "avx2"], 2 * 8 * 2),
    (["sse2", "avx", "avx2"], 8 * 2),  # AVX2 without FMA: add + mul only
    (["sse2", "avx"], 8 * 2),
    (["sse2"], 4 * 2),
    (["fp", "asimd"], 2 * 4 * 2),
])
def test_cpu_isa_table(flags, expected):
    assert cpu_flops_per_cycle(flags)[0] == expected
    assert cpu_flops_per_cycle(flags, "fp64")[0] == expected // 2


def test_cpu_peak_arithmetic():
    peak = cpu_peak_flops(["avx512f", "avx2", "fma"], cores=2, max_clock_hz=2.6e9)
    assert peak.value == 2 * 2.6e9 * (2 * 16 * 2)
    assert "2 cores" in peak.formula and "2600 MHz" in peak.formula
    assert cpu_peak_flops(["avx512f"], 4, 3e9, "fp64").value == 4 * 3e9 * (2 * 8 * 2)


def test_cpu_peak_without_clock_or_isa():
    hidden = cpu_peak_flops(["avx2", "fma"], 2, None)
    assert hidden.value is None and hidden.reason == "CPU clock hidden by the VM"
    assert cpu_peak_flops(["mmx"], 2, 3e9).value is None
    assert cpu_peak_flops(["avx2", "fma"], 2, 3e9, "bf16").value is None
