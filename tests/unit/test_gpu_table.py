"""The GPU table against independent arithmetic, its name lookup on real device names, `tbd gpus`."""

from __future__ import annotations

import json
import re

import pytest

from tbd.analysis.gpu_table import GPU_TABLE, PRECISIONS, find_gpu, table_rows
from tbd.cli.main import main
from tbd.core.errors import UsageError
from tbd.reports.info_tables import render_gpu_table, short_gpu_name

BY_NAME = {s.name: s for s in GPU_TABLE}

# Device names as torch.cuda.get_device_name / Kineto deviceProperties report them -> the row.
REPORTED = {
    "Tesla V100-PCIE-16GB": "NVIDIA Tesla V100 PCIe 16GB",
    "Tesla V100-PCIE-32GB": "NVIDIA Tesla V100 PCIe 32GB",
    "Tesla V100-SXM2-16GB": "NVIDIA Tesla V100 SXM2 16GB (and DGXS)",
    "Tesla V100-DGXS-16GB": "NVIDIA Tesla V100 SXM2 16GB (and DGXS)",
    "Tesla V100-SXM2-32GB": "NVIDIA Tesla V100 SXM2 32GB (and DGXS)",
    "Tesla V100-DGXS-32GB": "NVIDIA Tesla V100 SXM2 32GB (and DGXS)",
    "Tesla T4": "NVIDIA T4",
    "NVIDIA A10": "NVIDIA A10",
    "NVIDIA A30": "NVIDIA A30",
    "NVIDIA A100-PCIE-40GB": "NVIDIA A100-PCIE-40GB",
    "NVIDIA A100 80GB PCIe": "NVIDIA A100 80GB PCIe",
    "NVIDIA A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB",
    "NVIDIA A100-SXM4-80GB": "NVIDIA A100-SXM4-80GB",
    "NVIDIA A100-SXM-80GB": "NVIDIA A100-SXM4-80GB",
    "NVIDIA H100 PCIe": "NVIDIA H100 PCIe",
    "NVIDIA H100 80GB HBM3": "NVIDIA H100 SXM5 80GB",
    "NVIDIA H100 NVL": "NVIDIA H100 NVL",
    "NVIDIA H200": "NVIDIA H200 SXM 141GB",
    "NVIDIA L4": "NVIDIA L4",
    "NVIDIA L40": "NVIDIA L40",
    "NVIDIA L40S": "NVIDIA L40S",
    "NVIDIA B200": "NVIDIA B200",
    "NVIDIA GeForce RTX 3090": "NVIDIA GeForce RTX 3090",
    "NVIDIA GeForce RTX 4090": "NVIDIA GeForce RTX 4090",
    "Tesla V100S-PCIE-32GB": "NVIDIA Tesla V100S PCIe 32GB",
    "NVIDIA TITAN V": "NVIDIA TITAN V",
    "NVIDIA GeForce RTX 2080 Ti": "NVIDIA GeForce RTX 2080 Ti",
    "NVIDIA GeForce RTX 2080": "NVIDIA GeForce RTX 2080",
    "NVIDIA GeForce RTX 2070": "NVIDIA GeForce RTX 2070",
    "NVIDIA TITAN RTX": "NVIDIA TITAN RTX",
    "NVIDIA A2": "NVIDIA A2",
    "NVIDIA A40": "NVIDIA A40",
    "NVIDIA RTX A6000": "NVIDIA RTX A6000",
    "NVIDIA H200 NVL": "NVIDIA H200 NVL",
    "NVIDIA RTX 6000 Ada Generation": "NVIDIA RTX 6000 Ada Generation",
    "NVIDIA GeForce RTX 3080": "NVIDIA GeForce RTX 3080",
    "NVIDIA GeForce RTX 4080": "NVIDIA GeForce RTX 4080",
    "NVIDIA GeForce RTX 5090": "NVIDIA GeForce RTX 5090",
    "NVIDIA GeForce RTX 5080": "NVIDIA GeForce RTX 5080",
    "AMD Instinct MI300X VF": "AMD Instinct MI300X",  # SR-IOV guest (rocminfo / torch in public notes)
    "AMD Instinct MI300A": "AMD Instinct MI300A",
    "AMD Instinct MI325X": "AMD Instinct MI325X",
    "AMD Instinct MI350X": "AMD Instinct MI350X",
    "AMD Instinct MI355X": "AMD Instinct MI355X",
    "AMD Instinct MI100": "AMD Instinct MI100",
    "AMD Instinct MI210": "AMD Instinct MI210",
    "AMD Instinct MI250X": "AMD Instinct MI250X (one GCD)",
    "AMD Instinct MI250": "AMD Instinct MI250 (one GCD)",
    "AMD Instinct MI300X": "AMD Instinct MI300X",
}
# Close relatives with other numbers: no row may claim them by name.
OTHERS = ["NVIDIA A10G", "NVIDIA GeForce RTX 3090 Ti", "NVIDIA GeForce RTX 4090 D", "NVIDIA GB200", "NVIDIA H100",
          "NVIDIA GeForce RTX 2080 SUPER", "NVIDIA GeForce RTX 2070 SUPER", "NVIDIA GeForce RTX 3080 Ti",
          "NVIDIA GeForce RTX 3080 Laptop GPU", "NVIDIA GeForce RTX 4080 SUPER", "NVIDIA GeForce RTX 5090 D",
          "NVIDIA RTX A2000", "NVIDIA RTX A5000", "NVIDIA H800", "NVIDIA H20", "NVIDIA TITAN Xp",
          "Quadro RTX 6000", "AMD Instinct MI308X"]

# CUDA C++ Programming Guide, "Arithmetic Instructions": results per clock per SM of 32-bit and
# 64-bit floating-point fused multiply-add; an FMA is 2 FLOPs.
FP32_FMA_PER_CLK_SM = {(7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 9): 128, (9, 0): 128, (10, 0): 128,
                       (12, 0): 128}
FP64_FMA_PER_CLK_SM = {(7, 0): 32, (8, 0): 32, (9, 0): 64, (10, 0): 64}  # full-rate FP64 parts only
# AMD ROCm microarchitecture pages (mi100/mi250/mi300.html) and the CDNA 4 whitepaper (gfx950),
# FLOPS/clock/CU: FP64 vector, FP32 vector, FP16 matrix.
AMD_FLOPS_PER_CLK_CU = {"gfx908": (64, 128, 1024), "gfx90a": (128, 128, 1024), "gfx942": (128, 256, 2048),
                        "gfx950": (128, 256, 4096)}


def _within(value: float, expected: float, rel: float) -> bool:
    return abs(value - expected) <= rel * expected


def _matching_rows(device_name: str) -> set[str]:
    return {s.name for s in GPU_TABLE if any(re.search(p, device_name, re.IGNORECASE) for p in s.patterns)}


@pytest.mark.parametrize("spec", GPU_TABLE, ids=lambda s: s.name)
def test_every_row_is_cited_and_positive(spec):
    assert re.search(r"https://\S+", spec.source)
    assert spec.vendor in ("nvidia", "amd") and spec.patterns and spec.architecture
    assert spec.sm_count > 0 and spec.boost_clock_mhz > 0
    assert spec.memory_bandwidth_bytes_per_s > 0 and spec.memory_bytes > 0
    assert spec.peak_flops and set(spec.peak_flops) <= set(PRECISIONS)
    assert all(v > 0 for v in spec.peak_flops.values())
    if spec.vendor == "amd":  # a gfx target, never a CUDA-style tuple ROCm would fake
        assert isinstance(spec.compute_capability, str) and spec.compute_capability.startswith("gfx")
    else:
        assert isinstance(spec.compute_capability, tuple) and len(spec.compute_capability) == 2


def test_names_are_unique():
    assert len(BY_NAME) == len(GPU_TABLE)


@pytest.mark.parametrize("spec", [s for s in GPU_TABLE if s.vendor == "nvidia"], ids=lambda s: s.name)
def test_nvidia_fp32_is_sms_times_clock_times_cuda_core_rate(spec):
    # e.g. A100: 108 SMs x 1410 MHz x 64 FMA x 2 = 19.49e12 against the datasheet's 19.5e12.
    rate = 2 * FP32_FMA_PER_CLK_SM[spec.compute_capability]
    assert _within(spec.peak_flops["fp32"], spec.sm_count * spec.boost_clock_mhz * 1e6 * rate, 0.02)


@pytest.mark.parametrize("spec", [s for s in GPU_TABLE if "fp64" in s.peak_flops and s.vendor == "nvidia"],
                         ids=lambda s: s.name)
def test_nvidia_fp64_is_sms_times_clock_times_fp64_rate(spec):
    rate = 2 * FP64_FMA_PER_CLK_SM[spec.compute_capability]
    assert _within(spec.peak_flops["fp64"], spec.sm_count * spec.boost_clock_mhz * 1e6 * rate, 0.02)


def test_a100_by_hand():
    a100 = BY_NAME["NVIDIA A100-SXM4-80GB"]
    assert a100.peak_flops["fp32"] == 19.5e12 and _within(108 * 1410e6 * 128, 19.5e12, 0.001)
    assert a100.peak_flops["fp16"] == 312e12 and _within(108 * 1410e6 * 2048, 312e12, 0.001)
    assert a100.peak_flops["fp64_tensor"] == 19.5e12 and a100.peak_flops["int8"] == 624e12
    assert a100.memory_bandwidth_bytes_per_s == 2039e9
    assert BY_NAME["NVIDIA A100-SXM4-40GB"].memory_bandwidth_bytes_per_s == 1555e9


def test_v100_and_h100_sxm_datasheet_figures():
    v100 = BY_NAME["NVIDIA Tesla V100 SXM2 32GB (and DGXS)"].peak_flops
    assert (v100["fp64"], v100["fp32"], v100["fp16"]) == (7.8e12, 15.7e12, 125e12)
    h100 = BY_NAME["NVIDIA H100 SXM5 80GB"]
    assert h100.peak_flops == {"fp64": 34e12, "fp64_tensor": 67e12, "fp32": 67e12, "tf32": 494.7e12,
                               "fp16": 989.4e12, "bf16": 989.4e12, "fp8": 1978.9e12, "int8": 1978.9e12}
    assert h100.memory_bandwidth_bytes_per_s == 3.35e12


@pytest.mark.parametrize("spec", [s for s in GPU_TABLE if s.vendor == "nvidia" and s.compute_capability in
                                  ((8, 0), (8, 6), (9, 0)) and "GeForce" not in s.name], ids=lambda s: s.name)
def test_tf32_is_half_of_fp16_on_ampere_and_hopper_datacenter_parts(spec):
    assert _within(spec.peak_flops["tf32"], spec.peak_flops["fp16"] / 2, 0.01)
    assert spec.peak_flops["bf16"] == spec.peak_flops["fp16"]


@pytest.mark.parametrize("spec", [s for s in GPU_TABLE if s.vendor == "amd"], ids=lambda s: s.name)
def test_amd_peaks_are_cus_times_clock_times_rocm_rates(spec):
    fp64, fp32, fp16 = AMD_FLOPS_PER_CLK_CU[spec.compute_capability]
    per_clock = spec.sm_count * spec.boost_clock_mhz * 1e6
    assert _within(spec.peak_flops["fp64"], per_clock * fp64, 0.02)
    assert _within(spec.peak_flops["fp32"], per_clock * fp32, 0.02)
    assert _within(spec.peak_flops["fp16"], per_clock * fp16, 0.02)


def test_one_mi250x_gcd_is_half_the_oam():
    gcd = BY_NAME["AMD Instinct MI250X (one GCD)"]
    assert gcd.peak_flops["fp64"] == 47.9e12 / 2 and gcd.peak_flops["fp16"] == 383e12 / 2
    assert gcd.sm_count == 220 / 2 and gcd.memory_bytes == 128 * 2**30 / 2


@pytest.mark.parametrize("device_name, row", sorted(REPORTED.items()))
def test_reported_names_find_their_row_and_only_it(device_name, row):
    assert _matching_rows(device_name) == {row}
    spec, how = find_gpu(device_name)
    assert spec is BY_NAME[row] and how == f"by name {device_name!r}"


@pytest.mark.parametrize("device_name", OTHERS)
def test_relatives_with_other_numbers_match_no_row(device_name):
    assert _matching_rows(device_name) == set()
    spec, reason = find_gpu(device_name)
    assert spec is None and device_name in reason and "--peak-flops" in reason


@pytest.mark.parametrize("cus, row", [(110, "AMD Instinct MI250X (one GCD)"), (104, "AMD Instinct MI250 (one GCD)")])
def test_rocm_mi250_name_needs_the_cu_count(cus, row):
    name = "AMD Instinct MI250X / MI250"  # what ROCm's torch reports for either part
    assert find_gpu(name, compute_capability=(9, 0), sm_count=cus)[0] is BY_NAME[row]
    spec, reason = find_gpu(name)
    assert spec is None and "ambiguous" in reason and "CU count" in reason


def test_unfamiliar_a100_sku_is_found_by_capability_and_sms():
    spec, how = find_gpu("NVIDIA A100-SXM4-64GB", compute_capability=(8, 0), sm_count=108)
    assert spec is not None and "A100" in spec.name and spec.peak_flops["fp32"] == 19.5e12
    assert how.startswith("by compute capability 8.0 and 108 SMs")


def test_capability_shared_by_rows_with_different_peaks_is_ambiguous():
    spec, reason = find_gpu("NVIDIA H100", compute_capability=(9, 0), sm_count=132)
    assert spec is None and "ambiguous" in reason and "H100 NVL" in reason and "--peak-flops" in reason


def test_amd_name_is_never_looked_up_as_an_nvidia_capability():
    # ROCm's torch reports MI250 as computeMajor 9: must not become a Hopper. 132 "SMs" would fit H100 SXM.
    spec, reason = find_gpu("AMD Instinct MI999", compute_capability=(9, 0), sm_count=132)
    assert spec is None and "AMD Instinct MI999" in reason and "ROCm capability 9.0 and 132 CUs" in reason
    assert "--peak-flops" in reason
    spec, _ = find_gpu("AMD Radeon Graphics", vendor="nvidia", compute_capability=(9, 0), sm_count=114)
    assert spec is None


def test_a_mig_slice_does_not_get_the_whole_gpu():
    spec, reason = find_gpu("NVIDIA A100-SXM4-40GB MIG 1g.5gb", compute_capability=(8, 0), sm_count=14)
    assert spec is None and "108 SMs" in reason and "14" in reason


def test_unknown_gpu_names_itself_and_the_fix():
    spec, reason = find_gpu("NVIDIA Quadro P1000")
    assert spec is None and "'NVIDIA Quadro P1000'" in reason and "--peak-flops" in reason
    spec, reason = find_gpu("NVIDIA GeForce GTX 1080", compute_capability=(6, 1), sm_count=20)
    assert spec is None and "6.1" in reason and "--peak-flops" in reason
    assert find_gpu(None)[0] is None and find_gpu("  ")[0] is None
    assert "vendor" in find_gpu(None, compute_capability=(8, 0), sm_count=108)[1]
    assert find_gpu(None, vendor="nvidia", compute_capability=(8, 0), sm_count=108)[0] is not None


def test_bad_vendor_is_a_usage_error():
    with pytest.raises(UsageError):
        find_gpu("NVIDIA A10", vendor="intel")


def test_renderer_formats_every_row():
    text = render_gpu_table(table_rows(), width=200, color=False)
    lines = text.splitlines()
    assert all(len(line) <= 200 for line in lines) and "\x1b" not in text
    a100 = next(line for line in lines if line.startswith("A100-SXM4-80GB "))
    assert a100.split()[-10:] == ["9.700", "19.50", "19.50", "156.0", "312.0", "312.0", "—", "624.0", "1.854", "80"]  # 2,039 GB/s in TiB/s
    # Each name whole on one line, without its vendor's prefix (the vendor heads its rows).
    assert all(any(line.startswith(short_gpu_name(r) + "  ") for line in lines) for r in table_rows())
    assert "not shown" not in text  # 200 columns hold every column


def _gpu_lines(width):
    lines = render_gpu_table(table_rows(), width=width, color=False).splitlines()
    return lines, lines.index("NVIDIA") - 2  # the header line sits above the rule above "NVIDIA"


@pytest.mark.parametrize("width", (80, 120))
def test_gpu_table_fits_80_and_120_columns_one_line_per_gpu(width):
    """Issue 28: `COLUMNS=80 tbd gpus` printed 396 lines, headers one letter per line; at 120 names wrapped."""
    lines, header = _gpu_lines(width)
    assert max(len(line) for line in lines) <= width
    rows = table_rows()
    body = lines[header + 2:header + 2 + len(rows) + 2]  # every GPU and the two vendor lines
    assert [line for line in body if line in ("NVIDIA", "AMD")] == ["NVIDIA", "AMD"]
    assert [line.split("  ")[0] for line in body if line not in ("NVIDIA", "AMD")] == [short_gpu_name(r) for r in rows]
    assert len(lines) <= len(rows) + 14  # title, header, rule, vendors, a legend of a few lines


def test_gpu_table_at_80_columns_keeps_the_training_precisions_and_says_what_it_dropped():
    lines, header = _gpu_lines(80)
    assert lines[header].split() == ["GPU", "FP32", "TF32", "FP16", "BF16", "FP8", "TiB/s", "GiB"]
    # The A100 SXM4 80GB datasheet: 19.5 TF FP32, 156 TF TF32, 312 TF FP16/BF16 dense, no FP8, 2,039 GB/s, 80 GiB;
    # bytes are binary everywhere: 2.039e12 / 2**40 = 1.8545 TiB/s.
    a100 = next(line for line in lines if line.startswith("A100-SXM4-80GB "))
    assert a100.split()[1:] == ["19.50", "156.0", "312.0", "312.0", "—", "1.854", "80"]
    flat = " ".join(" ".join(lines).split())
    assert "not shown: MHz, SMs/CUs, FP64 TC, Arch, FP64, CC, INT8 (at 80 columns" in flat
    lines120, header120 = _gpu_lines(120)
    assert lines120[header120].split()[:4] == ["GPU", "Arch", "CC", "FP64"]
    assert "not shown: MHz, SMs/CUs, FP64 TC (at 120 columns" in " ".join(" ".join(lines120).split())


def test_gpus_command_at_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["gpus"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80 and len(out.splitlines()) < 70


def test_gpus_json(capsys):
    assert main(["gpus", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {r["name"]: r for r in doc["gpus"]}
    a100 = rows["NVIDIA A100-SXM4-80GB"]
    assert a100["peak_flops"]["fp32"] == 1.95e13 and a100["memory_bytes"] == 80 * 2**30
    assert a100["compute_capability"] == [8, 0] and "nvidia-a100-datasheet" in a100["source"]
    assert rows["AMD Instinct MI300X"]["compute_capability"] == "gfx942"
    assert len(rows) == len(GPU_TABLE) and "FLOP/s" in doc["units"]["peak_flops"]


def test_gpus_table(capsys):
    assert main(["gpus"]) == 0
    out = capsys.readouterr().out
    assert "A100" in out and "MI300X" in out and "TFLOP/s" in out


def test_rtx_2080_ti_by_hand():
    # Turing whitepaper appendix A: 68 SMs at 1545 MHz; 13.4 TF FP32 (68 x 1545e6 x 128 = 13.45e12); FP16
    # tensor 107.6 TF with FP16 accumulate, 53.8 with FP32 accumulate (what PyTorch runs); 616 GB/s, 11 GB.
    row = BY_NAME["NVIDIA GeForce RTX 2080 Ti"]
    assert row.peak_flops["fp32"] == 13.4e12 and _within(68 * 1545e6 * 128, 13.45e12, 0.001)
    assert row.peak_flops["fp16"] == 53.8e12 and _within(68 * 1545e6 * 1024 / 2, 53.8e12, 0.001)
    assert "bf16" not in row.peak_flops and "tf32" not in row.peak_flops  # Turing has neither
    assert row.memory_bandwidth_bytes_per_s == 616e9 and row.memory_bytes == 11 * 2**30


# name -> (SMs, boost MHz, FLOP/clk/SM of FP16 tensor math with FP32 accumulate), from each whitepaper:
# GeForce at half the full rate of its generation (Turing/Ampere/Ada/Blackwell consumer 1024 -> 512).
FP32_ACCUMULATE = {
    "NVIDIA GeForce RTX 2080 Ti": (68, 1545, 512), "NVIDIA GeForce RTX 2080": (46, 1710, 512),
    "NVIDIA GeForce RTX 2070": (36, 1620, 512), "NVIDIA GeForce RTX 3090": (82, 1695, 512),
    "NVIDIA GeForce RTX 3080": (68, 1710, 512), "NVIDIA GeForce RTX 4090": (128, 2520, 512),
    "NVIDIA GeForce RTX 4080": (76, 2505, 512), "NVIDIA GeForce RTX 5090": (170, 2407, 512),
    "NVIDIA GeForce RTX 5080": (84, 2617, 512),
    # full rate: TITAN RTX 130 TF, RTX A6000 154.8, RTX 6000 Ada 364.2, A40 149.7, A2 18
    "NVIDIA TITAN RTX": (72, 1770, 1024), "NVIDIA RTX A6000": (84, 1800, 1024),
    "NVIDIA RTX 6000 Ada Generation": (142, 2505, 1024), "NVIDIA A40": (84, 1740, 1024), "NVIDIA A2": (10, 1770, 1024),
}


@pytest.mark.parametrize("name", sorted(FP32_ACCUMULATE))
def test_fp16_peak_is_the_fp32_accumulate_rate(name):
    sms, mhz, rate = FP32_ACCUMULATE[name]
    row = BY_NAME[name]
    assert (row.sm_count, row.boost_clock_mhz) == (sms, mhz)
    assert _within(row.peak_flops["fp16"], sms * mhz * 1e6 * rate, 0.01)
    if "bf16" in row.peak_flops:
        assert row.peak_flops["bf16"] == row.peak_flops["fp16"]
    if "tf32" in row.peak_flops:  # TF32 is half the FP16 rate, GeForce halving included
        assert _within(row.peak_flops["tf32"], row.peak_flops["fp16"] / 2, 0.01)


# deviceProperties[0] of real public traces (HTA tests/data, Kineto, TraceLens-format, tbd's H200 fixture)
# as Kineto writes them: name, computeMajor/Minor, numSms, totalGlobalMem, warpSize -> the row found.
TRACE_DEVICES = [
    ("Tesla V100-SXM2-16GB", (7, 0), 80, 16945512448, 32, "NVIDIA Tesla V100 SXM2 16GB (and DGXS)"),
    ("Tesla V100-SXM2-32GB", (7, 0), 80, 34089730048, 32, "NVIDIA Tesla V100 SXM2 32GB (and DGXS)"),
    ("Tesla V100-DGXS-32GB", (7, 0), 80, 34084028416, 32, "NVIDIA Tesla V100 SXM2 32GB (and DGXS)"),
    ("NVIDIA A100-SXM4-80GB", (8, 0), 108, 84990623744, 32, "NVIDIA A100-SXM4-80GB"),
    ("NVIDIA H100 80GB HBM3", (9, 0), 132, 85018279936, 32, "NVIDIA H100 SXM5 80GB"),
    ("NVIDIA H200", (9, 0), 132, 150109880320, 32, "NVIDIA H200 SXM 141GB"),
    ("NVIDIA B200", (10, 0), 148, 191503138816, 32, "NVIDIA B200"),
    ("AMD Instinct MI300X", (9, 4), 304, 206141652992, 64, "AMD Instinct MI300X"),
    ("AMD Instinct MI350X", (9, 5), 256, 309220868096, 64, "AMD Instinct MI350X"),
    # ROCm without its marketing-name table: HTA's MI250 trace (ROCm 6.2) and an MI300X vLLM trace.
    ("AMD Radeon Graphics", (9, 0), 104, 68702699520, 64, "AMD Instinct MI210"),
    ("", (9, 4), 304, 206141652992, 64, "AMD Instinct MI300X"),
    # Meta's A100 board name (HTA's traces): not a table name; 8.0, 108 SMs and 39 GiB make it an A100 40GB.
    ("NVIDIA A100-PG509-200", (8, 0), 108, 42297524224, 32, "NVIDIA A100-PCIE-40GB"),
]


@pytest.mark.parametrize("name, cc, sms, memory, warp, row", TRACE_DEVICES, ids=[d[0] or "unnamed" for d in TRACE_DEVICES])
def test_real_trace_devices_find_their_row(name, cc, sms, memory, warp, row):
    vendor = "amd" if warp == 64 else "nvidia"  # what tbd's trace path reads (run_analysis._device_properties)
    spec, how = find_gpu(name, vendor=vendor, compute_capability=cc, sm_count=sms, memory_bytes=memory)
    assert spec is BY_NAME[row], how


def test_radeon_graphics_mi250_names_both_parts_sharing_its_peaks():
    # An MI210 and one MI250 GCD are both 104 CUs at 1700 MHz with 64 GB at 1.6 TB/s: 22.6 vs 45.3 / 2 TF.
    spec, how = find_gpu("AMD Radeon Graphics", vendor="amd", compute_capability=(9, 0), sm_count=104,
                         memory_bytes=68702699520)
    assert how.startswith("by ROCm capability 9.0 and 104 CUs and 64 GiB")
    assert "AMD Instinct MI250 (one GCD)" in how and spec.memory_bandwidth_bytes_per_s == 1.6e12


def test_unnamed_mi300x_and_mi325x_differ_only_by_memory():
    common = {"vendor": "amd", "compute_capability": (9, 4), "sm_count": 304}
    assert find_gpu(None, memory_bytes=256 * 2**30, **common)[0] is BY_NAME["AMD Instinct MI325X"]
    spec, how = find_gpu(None, **common)  # no memory: both rows, same peaks, the first one's bandwidth
    assert spec is BY_NAME["AMD Instinct MI300X"] and "MI325X" in how
    spec, reason = find_gpu("AMD Radeon Graphics", vendor="amd", compute_capability=(9, 5), sm_count=256)
    assert spec is None and "ambiguous" in reason and "MI355X" in reason  # MI350X and MI355X clocks differ


def test_gh200_memory_picks_the_hbm_variant():
    assert find_gpu("NVIDIA GH200 480GB")[0] is BY_NAME["NVIDIA GH200 96GB HBM3"]
    spec, how = find_gpu("NVIDIA GH200", memory_bytes=143 * 2**30)
    assert spec is BY_NAME["NVIDIA GH200 144GB HBM3e"] and "143 GiB" in how
    assert spec.peak_flops == BY_NAME["NVIDIA H200 SXM 141GB"].peak_flops


def test_unnamed_hopper_with_80_gib_is_an_h100_sxm():
    spec, how = find_gpu(None, vendor="nvidia", compute_capability=(9, 0), sm_count=132, memory_bytes=85018279936)
    assert spec is BY_NAME["NVIDIA H100 SXM5 80GB"] and "79 GiB" in how


def test_the_12_gb_rtx_3080_is_not_the_10_gb_row():
    spec, reason = find_gpu("NVIDIA GeForce RTX 3080", compute_capability=(8, 6), sm_count=70)
    assert spec is None and "68 SMs" in reason and "70" in reason
