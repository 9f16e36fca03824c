"""Hardware peak model against published datasheet peaks, written as arithmetic."""

from __future__ import annotations

import pytest

from tbd.analysis.peaks import (
    PeakFlops,
    cpu_flops_per_cycle,
    cpu_peak_flops,
    device_peak_model,
    gpu_peak_flops,
    half_rate_fp32_accumulate,
)


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
    # T4 (a datacenter part: FP32 accumulate at full rate): 40 SMs at 1590 MHz -> 65 TF FP16 tensor, 8.1 TF FP32.
    assert _close(gpu_peak_flops((7, 5), 40, 1590e6, "fp16", "Tesla T4").value, 65e12, rel=0.01)
    assert _close(gpu_peak_flops((7, 5), 40, 1590e6, "fp32").value, 8.1e12, rel=0.01)


def test_formula_names_the_parts():
    peak = gpu_peak_flops((9, 0), 132, 1980e6, "fp32")
    assert peak.reason is None
    assert "132 SMs" in peak.formula and "1980 MHz" in peak.formula and "256 FLOP/clk/SM" in peak.formula


@pytest.mark.parametrize("cc,precision", [((3, 5), "fp32"), ((7, 5), "tf32"), ((7, 0), "bf16"),
                                          ((11, 0), "fp16"), ((9, 0), "int8")])
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


# (name, capability, SMs, boost MHz, precision, the whitepaper's / datasheet's dense FP32-accumulate figure)
GEFORCE_AND_WORKSTATION = [
    # Turing whitepaper: 2080 Ti FP16 tensor 107.6 TF with FP16 accumulate, 53.8 with FP32 accumulate.
    ("NVIDIA GeForce RTX 2080 Ti", (7, 5), 68, 1545e6, "fp16", 53.8e12),
    # GA102 whitepaper: RTX 3090 71 TF FP16/BF16 and 35.6 TF TF32; RTX A6000 154.8 and 77.4 (full rate).
    ("NVIDIA GeForce RTX 3090", (8, 6), 82, 1695e6, "fp16", 71e12),
    ("NVIDIA GeForce RTX 3090", (8, 6), 82, 1695e6, "bf16", 71e12),
    ("NVIDIA GeForce RTX 3090", (8, 6), 82, 1695e6, "tf32", 35.6e12),
    ("NVIDIA RTX A6000", (8, 6), 84, 1800e6, "fp16", 154.8e12),
    ("NVIDIA RTX A6000", (8, 6), 84, 1800e6, "tf32", 77.4e12),
    # Ada whitepaper: RTX 4090 165.2 TF; RTX 6000 Ada 364.2 (full rate); L40 datasheet 181.05 (capped).
    ("NVIDIA GeForce RTX 4090", (8, 9), 128, 2520e6, "fp16", 165.2e12),
    ("NVIDIA RTX 6000 Ada Generation", (8, 9), 142, 2505e6, "fp16", 364.2e12),
    ("NVIDIA L40", (8, 9), 142, 2490e6, "fp16", 181.05e12),
    # RTX Blackwell whitepaper: RTX 5090 209.5 TF FP16 with FP32 accumulate, 104.8 TF TF32.
    ("NVIDIA GeForce RTX 5090", (12, 0), 170, 2407e6, "fp16", 209.5e12),
    ("NVIDIA GeForce RTX 5090", (12, 0), 170, 2407e6, "tf32", 104.8e12),
    # TITAN RTX: 130 TF at the full rate.
    ("NVIDIA TITAN RTX", (7, 5), 72, 1770e6, "fp16", 130e12),
]


@pytest.mark.parametrize("name, cc, sms, clock, precision, published", GEFORCE_AND_WORKSTATION)
def test_sm_model_gives_the_fp32_accumulate_rate(name, cc, sms, clock, precision, published):
    peak = gpu_peak_flops(cc, sms, clock, precision, name)
    assert _close(peak.value, published, rel=0.01), peak.formula
    assert "FP32 accumulate" in peak.formula
    assert ("half rate" in peak.formula) == ("GeForce" in name or name == "NVIDIA L40")


def test_rtx_2080_ti_fp16_is_not_the_fp16_accumulate_rate():
    # The case: 68 SMs x 1545 MHz x 1024 = 107.6 TF is FP16-accumulate; PyTorch gets 53.8.
    peak = gpu_peak_flops((7, 5), 68, 1545e6, "fp16", "NVIDIA GeForce RTX 2080 Ti")
    assert peak.value == 68 * 1545e6 * 512
    assert "68 SMs x 1545 MHz x 512 FLOP/clk/SM" in peak.formula and "GeForce" in peak.formula


def test_without_a_name_the_split_capabilities_have_no_tensor_peak():
    for cc in ((7, 5), (8, 6), (8, 9), (12, 0)):
        peak = gpu_peak_flops(cc, 68, 1545e6, "fp16")
        assert peak.value is None and "GeForce" in peak.reason and "--peak-flops" in peak.reason
        assert gpu_peak_flops(cc, 68, 1545e6, "fp32").value == 68 * 1545e6 * (128 if cc == (7, 5) else 256)
        assert half_rate_fp32_accumulate(None, cc) is None
    # Every part of these capabilities runs the full rate: no name needed.
    assert _close(gpu_peak_flops((8, 0), 108, 1410e6, "fp16").value, 312e12)
    assert half_rate_fp32_accumulate(None, (9, 0)) is False
    assert half_rate_fp32_accumulate("NVIDIA L40S", (8, 9)) is False


def _trace_environment(name, cc, sms, clock_hz=None, given=False):
    """What tbd's trace path builds from Kineto's deviceProperties (no clock) and --sm-clock-mhz."""
    gpu = {"name": name, "vendor": "nvidia", "compute_capability": list(cc), "sm_count": sms,
           "memory_bytes": 12 * 2**30, "max_sm_clock_hz": clock_hz}
    if given:
        gpu["peak_clock_given"] = True
    return {"gpu": gpu}


def test_a_gpu_the_table_lacks_gets_no_guessed_clock():
    # RTX 3060 (GA106, 28 SMs) is not in the table; its trace records no clock.
    model = device_peak_model(_trace_environment("NVIDIA GeForce RTX 3060", (8, 6), 28), "cuda", None)
    for p in ("fp32", "tf32", "fp16", "bf16"):
        pk = model.by_precision[p]
        assert pk.value is None and "--sm-clock-mhz" in pk.reason and "--peak-flops" in pk.reason
        assert "NVIDIA GeForce RTX 3060" in pk.reason


def test_sm_clock_given_for_a_gpu_the_table_lacks():
    # --sm-clock-mhz 1777 (the 3060's boost): 28 x 1777 MHz x 256 = 12.74 TF FP32 (NVIDIA: 12.7);
    # FP16 with FP32 accumulate on a GeForce: 28 x 1777 MHz x 512 = 25.5 TF.
    env = _trace_environment("NVIDIA GeForce RTX 3060", (8, 6), 28, 1777e6, given=True)
    by = device_peak_model(env, "cuda", None).by_precision
    assert by["fp32"].value == 28 * 1777e6 * 256 and _close(by["fp32"].value, 12.74e12)
    assert by["fp16"].value == 28 * 1777e6 * 512 and "half rate" in by["fp16"].formula
