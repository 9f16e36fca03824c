"""GPU specification table: published peaks per precision, bandwidth and memory, a cited source per row.

Every number is the vendor's datasheet or architecture-whitepaper figure (the row's `source`).
Peaks are dense: tensor/matrix-core rates without 2:4 structured sparsity, FP16/BF16 (and TF32,
FP8) with FP32 accumulation, the mode PyTorch runs: on GeForce parts that is half the FP16-accumulate
rate their whitepapers also print (RTX 2080 Ti: 53.8, not 107.6 TF). Where a vendor prints only the
sparse figure the row halves it, and the comment says so. A precision the part does not publish is
left out, never derived.

`find_gpu` maps the device name a profiler reports (torch.profiler's deviceProperties "name",
torch.cuda.get_device_name) onto a row: by name first, else by compute capability and SM count
(NVIDIA) or by the gfx target ROCm's CUDA-style capability stands for and the CU count (AMD, whose
builds without the marketing-name table say "AMD Radeon Graphics" or nothing), the device's memory
breaking ties between rows of equal compute. An unknown GPU gives None and the reason; nothing is
guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tbd.core.errors import UsageError

PRECISIONS = ("fp64", "fp64_tensor", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")
_T = 1e12  # a datasheet TFLOP/s (TOP/s for int8), in FLOP/s
_GIB = 2**30  # datasheet "GB" of HBM/GDDR are binary: an "80GB" A100 has five 16 GiB stacks


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model as the vendor publishes it.

    Attributes:
        name: marketing name, e.g. "NVIDIA A100-SXM4-80GB".
        patterns: case-insensitive regexes searched in the device name a profiler reports.
        vendor: "nvidia" or "amd".
        architecture: e.g. "Ampere", "Hopper", "CDNA2".
        compute_capability: (major, minor) for NVIDIA; the gfx target (e.g. "gfx90a") for AMD,
            whose ROCm torch reports a fake CUDA-style capability (an MI250 says 9.0).
        sm_count: streaming multiprocessors (NVIDIA) or compute units (AMD) of one device.
        boost_clock_mhz: maximum boost (AMD: peak engine) clock in MHz.
        peak_flops: precision (one of PRECISIONS) -> dense peak in FLOP/s (OP/s for int8).
        memory_bandwidth_bytes_per_s: peak DRAM bandwidth in bytes/s.
        memory_bytes: device memory in bytes.
        source: citation with the URL(s) the numbers come from.
    """

    name: str
    patterns: tuple[str, ...]
    vendor: str
    architecture: str
    compute_capability: tuple[int, int] | str
    sm_count: int
    boost_clock_mhz: int
    peak_flops: dict[str, float]
    memory_bandwidth_bytes_per_s: float
    memory_bytes: int
    source: str


_V100 = ("NVIDIA Tesla V100 datasheet, https://images.nvidia.com/content/technologies/volta/pdf/"
         "volta-v100-datasheet-update-us-1165301-r5.pdf; Volta whitepaper (SMs, 1530 MHz SXM2 boost), "
         "https://images.nvidia.com/content/volta-architecture/pdf/volta-architecture-whitepaper.pdf")
_A100 = ("NVIDIA A100 datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
         "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf; A100 architecture whitepaper (108 SMs, 1410 MHz), "
         "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf")
_H100 = ("NVIDIA H100 datasheet (FP64/FP32; tensor figures there are sparse), "
         "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet; "
         "H100 whitepaper (dense tensor peaks, SMs), "
         "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper")
_ADA = ("NVIDIA Ada GPU architecture whitepaper, "
        "https://images.nvidia.com/aem-dam/Solutions/Data-Center/l4/nvidia-ada-gpu-architecture-whitepaper-v2.1.pdf")
_CDNA2 = ("AMD Instinct MI250 microarchitecture (per-CU rates; each GCD is one device, 1.6 TB/s per GCD), "
          "https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi250.html")
_TURING = ("NVIDIA Turing GPU architecture whitepaper, appendix A (reference boost clocks; Founders Edition cards "
           "run ~6% higher), https://images.nvidia.com/aem-dam/en-zz/Solutions/design-visualization/technologies/"
           "turing-architecture/NVIDIA-Turing-Architecture-Whitepaper.pdf")
_GA102 = ("NVIDIA Ampere GA102 whitepaper (dense | sparse; dense taken), https://www.nvidia.com/content/PDF/"
          "nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf")
_RTX_BLACKWELL = ("NVIDIA RTX Blackwell GPU architecture whitepaper (dense | sparse; dense taken), "
                  "https://images.nvidia.com/aem-dam/Solutions/geforce/blackwell/nvidia-rtx-blackwell-gpu-architecture.pdf")
_GH200 = ("NVIDIA GH200 Grace Hopper Superchip datasheet (tensor figures sparse, halved here), "
          "https://resources.nvidia.com/en-us-grace-cpu/grace-hopper-superchip")
_CDNA3 = "AMD Instinct MI300 microarchitecture, https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi300.html"
_CDNA4 = ("AMD CDNA 4 architecture whitepaper, https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/"
          "white-papers/amd-cdna-4-architecture-whitepaper.pdf")
# GeForce tensor cores run FP16/BF16 (and TF32, FP8) with FP32 accumulation, the mode PyTorch uses, at half
# the FP16-accumulate rate; the rows below take that FP32-accumulate figure. Workstation and datacenter parts
# (RTX A6000, RTX 6000 Ada, A40, L4, L40S, TITAN RTX) run both at full rate. The L40 is capped like GeForce.
_HOPPER_DENSE = {"fp32": 67 * _T, "tf32": 989 / 2 * _T, "fp16": 1979 / 2 * _T, "bf16": 1979 / 2 * _T,
                 "fp8": 3958 / 2 * _T, "int8": 3958 / 2 * _T}  # H200/GH200 datasheets' sparse figures halved
_MI300X_PEAKS = {"fp64": 81.7 * _T, "fp64_tensor": 163.4 * _T, "fp32": 163.4 * _T, "tf32": 653.7 * _T,
                 "fp16": 1307.4 * _T, "bf16": 1307.4 * _T, "fp8": 2614.9 * _T, "int8": 2614.9 * _T}
# A100 peaks are the same for all four boards (datasheet); only memory and bandwidth differ.
_A100_PEAKS = {"fp64": 9.7 * _T, "fp64_tensor": 19.5 * _T, "fp32": 19.5 * _T, "tf32": 156 * _T,
               "fp16": 312 * _T, "bf16": 312 * _T, "int8": 624 * _T}
_V100_PCIE = {"fp64": 7 * _T, "fp32": 14 * _T, "fp16": 112 * _T}  # 1380 MHz boost
_V100_SXM2 = {"fp64": 7.8 * _T, "fp32": 15.7 * _T, "fp16": 125 * _T}  # 1530 MHz; DGX Station (DGXS) alike


def _nv(name, patterns, arch, cc, sms, mhz, peaks, bw, gib, source) -> GpuSpec:
    return GpuSpec(name, patterns, "nvidia", arch, cc, sms, mhz, peaks, bw, gib * _GIB, source)


def _amd(name, patterns, arch, gfx, cus, mhz, peaks, bw, gib, source) -> GpuSpec:
    return GpuSpec(name, patterns, "amd", arch, gfx, cus, mhz, peaks, bw, gib * _GIB, source)


GPU_TABLE: tuple[GpuSpec, ...] = (
    _nv("NVIDIA Tesla V100 PCIe 16GB", (r"V100-PCIE-16GB",), "Volta", (7, 0), 80, 1380, _V100_PCIE, 900e9, 16, _V100),
    _nv("NVIDIA Tesla V100 PCIe 32GB", (r"V100-PCIE-32GB",), "Volta", (7, 0), 80, 1380, _V100_PCIE, 900e9, 32, _V100),
    _nv("NVIDIA Tesla V100 SXM2 16GB (and DGXS)", (r"V100-(SXM2|DGXS)-16GB",), "Volta", (7, 0), 80, 1530,
        _V100_SXM2, 900e9, 16, _V100),
    _nv("NVIDIA Tesla V100 SXM2 32GB (and DGXS)", (r"V100-(SXM2|DGXS)-32GB",), "Volta", (7, 0), 80, 1530,
        _V100_SXM2, 900e9, 32, _V100),
    # V100S: 80 SMs at 1601 MHz (16.4 TF FP32 = 80 x 1601 MHz x 128); tensor 130 TF.
    _nv("NVIDIA Tesla V100S PCIe 32GB", (r"V100S-PCIE-32GB",), "Volta", (7, 0), 80, 1601,
        {"fp64": 8.2 * _T, "fp32": 16.4 * _T, "fp16": 130 * _T}, 1134e9, 32,
        "NVIDIA V100 product page (V100S PCIe column), https://www.nvidia.com/en-us/data-center/v100/"),
    # TITAN V (GV100, 80 SMs, 1455 MHz): "110 deep learning TFLOPS" (FP16 tensor, FP32 accumulate at full
    # rate as on every Volta part), 14.9 TF FP32; NVIDIA prints no FP64 figure on the product page.
    _nv("NVIDIA TITAN V", (r"\bTITAN V\b",), "Volta", (7, 0), 80, 1455, {"fp32": 14.9 * _T, "fp16": 110 * _T},
        652.8e9, 12, "NVIDIA TITAN V product page, https://www.nvidia.com/en-us/titan/titan-v/"),
    # T4 datasheet: FP32 8.1 TF, "mixed precision (FP16/FP32)" 65 TF, INT8 130 TOPS; no FP64 figure.
    _nv("NVIDIA T4", (r"\bT4\b",), "Turing", (7, 5), 40, 1590,
        {"fp32": 8.1 * _T, "fp16": 65 * _T, "int8": 130 * _T}, 320e9, 16,
        "NVIDIA T4 datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/"
        "t4-tensor-core-datasheet-951643.pdf"),
    # GeForce Turing: FP16 tensor with FP32 accumulate at half the FP16-accumulate rate (2080 Ti: 53.8 against
    # 107.6 TF); the row takes the FP32-accumulate figure. INT8 is not halved. No TF32 or BF16 on Turing.
    _nv("NVIDIA GeForce RTX 2080 Ti", (r"\bRTX 2080 Ti\b",), "Turing", (7, 5), 68, 1545,
        {"fp32": 13.4 * _T, "fp16": 53.8 * _T, "int8": 215.2 * _T}, 616e9, 11, _TURING),
    _nv("NVIDIA GeForce RTX 2080", (r"\bRTX 2080\b(?!\s*(Ti|Super|with Max-Q|Laptop)\b)",), "Turing", (7, 5), 46,
        1710, {"fp32": 10.1 * _T, "fp16": 40.3 * _T, "int8": 161.1 * _T}, 448e9, 8, _TURING),
    _nv("NVIDIA GeForce RTX 2070", (r"\bRTX 2070\b(?!\s*(Super|with Max-Q|Laptop)\b)",), "Turing", (7, 5), 36,
        1620, {"fp32": 7.5 * _T, "fp16": 29.9 * _T, "int8": 119.4 * _T}, 448e9, 8, _TURING),
    # TITAN RTX (TU102, 72 SMs, 1770 MHz) runs FP32 accumulate at the full rate: 130 TF = 72 x 1770 MHz x 1024.
    _nv("NVIDIA TITAN RTX", (r"\bTITAN RTX\b",), "Turing", (7, 5), 72, 1770, {"fp32": 16.3 * _T, "fp16": 130 * _T},
        672e9, 24, "NVIDIA TITAN RTX product page, https://www.nvidia.com/en-us/deep-learning-ai/products/titan-rtx/"),
    # A10 datasheet prints dense | sparse; dense taken. \bA10\b leaves A100 and AWS's A10G alone.
    _nv("NVIDIA A10", (r"\bA10\b",), "Ampere", (8, 6), 72, 1695,
        {"fp32": 31.2 * _T, "tf32": 62.5 * _T, "fp16": 125 * _T, "bf16": 125 * _T, "int8": 250 * _T}, 600e9, 24,
        "NVIDIA A10 datasheet, "
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf"),
    _nv("NVIDIA A2", (r"\bA2\b",), "Ampere", (8, 6), 10, 1770,
        {"fp32": 4.5 * _T, "tf32": 9 * _T, "fp16": 18 * _T, "bf16": 18 * _T, "int8": 36 * _T}, 200e9, 16,
        "NVIDIA A2 datasheet (dense | sparse; dense taken), https://www.nvidia.com/content/dam/en-zz/solutions/"
        "data-center/a2/pdf/a2-datasheet.pdf"),
    _nv("NVIDIA A40", (r"\bA40\b",), "Ampere", (8, 6), 84, 1740,
        {"fp32": 37.4 * _T, "tf32": 74.8 * _T, "fp16": 149.7 * _T, "bf16": 149.7 * _T, "int8": 299.3 * _T}, 696e9, 48,
        "NVIDIA A40 datasheet (dense | sparse; dense taken), https://images.nvidia.com/content/Solutions/"
        "data-center/a40/nvidia-a40-datasheet.pdf"),
    # Workstation GA102: FP16/BF16 with FP32 accumulate at the full rate (154.8 = 84 x 1800 MHz x 1024).
    _nv("NVIDIA RTX A6000", (r"\bRTX A6000\b",), "Ampere", (8, 6), 84, 1800,
        {"fp32": 38.7 * _T, "tf32": 77.4 * _T, "fp16": 154.8 * _T, "bf16": 154.8 * _T, "int8": 309.7 * _T}, 768e9, 48,
        _GA102),
    _nv("NVIDIA A30", (r"\bA30\b",), "Ampere", (8, 0), 56, 1440,
        {"fp64": 5.2 * _T, "fp64_tensor": 10.3 * _T, "fp32": 10.3 * _T, "tf32": 82 * _T, "fp16": 165 * _T,
         "bf16": 165 * _T, "int8": 330 * _T}, 933e9, 24,
        "NVIDIA A30 datasheet (dense | sparse; dense taken), https://www.nvidia.com/content/dam/en-zz/Solutions/"
        "data-center/products/a30-gpu/pdf/a30-datasheet.pdf"),
    _nv("NVIDIA A100-PCIE-40GB", (r"A100-PCIE-40GB",), "Ampere", (8, 0), 108, 1410, _A100_PEAKS, 1555e9, 40, _A100),
    _nv("NVIDIA A100 80GB PCIe", (r"A100 80GB PCIe", r"A100-PCIE-80GB"), "Ampere", (8, 0), 108, 1410,
        _A100_PEAKS, 1935e9, 80, _A100),
    _nv("NVIDIA A100-SXM4-40GB", (r"A100-SXM4?-40GB",), "Ampere", (8, 0), 108, 1410, _A100_PEAKS, 1555e9, 40, _A100),
    _nv("NVIDIA A100-SXM4-80GB", (r"A100-SXM4?-80GB",), "Ampere", (8, 0), 108, 1410, _A100_PEAKS, 2039e9, 80, _A100),
    # Hopper: FP64/FP32 from the datasheet; dense tensor peaks from the whitepaper (the datasheet's are sparse).
    _nv("NVIDIA H100 PCIe", (r"H100 PCIe", r"H100 80GB HBM2e"), "Hopper", (9, 0), 114, 1755,
        {"fp64": 26 * _T, "fp64_tensor": 51 * _T, "fp32": 51 * _T, "tf32": 378 * _T, "fp16": 756 * _T,
         "bf16": 756 * _T, "fp8": 1513 * _T, "int8": 1513 * _T}, 2.0e12, 80, _H100),
    # SXM5: FP32 67 TF = 132 SMs x 1980 MHz x 256; the whitepaper's tensor peaks work out at 1830 MHz.
    _nv("NVIDIA H100 SXM5 80GB", (r"H100 80GB HBM3", r"H100 SXM"), "Hopper", (9, 0), 132, 1980,
        {"fp64": 34 * _T, "fp64_tensor": 67 * _T, "fp32": 67 * _T, "tf32": 494.7 * _T, "fp16": 989.4 * _T,
         "bf16": 989.4 * _T, "fp8": 1978.9 * _T, "int8": 1978.9 * _T}, 3.35e12, 80, _H100),
    # NVL: the datasheet gives sparse tensor figures only (835, 1671, 3341); halved here.
    _nv("NVIDIA H100 NVL", (r"H100 NVL",), "Hopper", (9, 0), 132, 1785,
        {"fp64": 30 * _T, "fp64_tensor": 60 * _T, "fp32": 60 * _T, "tf32": 835 / 2 * _T, "fp16": 1671 / 2 * _T,
         "bf16": 1671 / 2 * _T, "fp8": 3341 / 2 * _T, "int8": 3341 / 2 * _T}, 3.9e12, 94, _H100),
    # H200 datasheet gives sparse tensor figures only (989, 1979, 3958); halved here. Same GH100 as H100 SXM.
    _nv("NVIDIA H200 SXM 141GB", (r"\bH200\b(?!\s*NVL)",), "Hopper", (9, 0), 132, 1980,
        {"fp64": 34 * _T, "fp64_tensor": 67 * _T, "fp32": 67 * _T, "tf32": 989 / 2 * _T, "fp16": 1979 / 2 * _T,
         "bf16": 1979 / 2 * _T, "fp8": 3958 / 2 * _T, "int8": 3958 / 2 * _T}, 4.8e12, 141,
        "NVIDIA H200 datasheet, https://resources.nvidia.com/en-us-gpu-resources/hpc-datasheet-sc23; "
        "https://www.nvidia.com/en-us/data-center/h200/"),
    # H200 NVL: the datasheet's sparse tensor figures (835, 1671, 3341) halved, as for the H100 NVL.
    _nv("NVIDIA H200 NVL", (r"\bH200 NVL\b",), "Hopper", (9, 0), 132, 1785,
        {"fp64": 30 * _T, "fp64_tensor": 60 * _T, "fp32": 60 * _T, "tf32": 835 / 2 * _T, "fp16": 1671 / 2 * _T,
         "bf16": 1671 / 2 * _T, "fp8": 3341 / 2 * _T, "int8": 3341 / 2 * _T}, 4.8e12, 141,
        "NVIDIA H200 datasheet (H200 NVL column), https://resources.nvidia.com/en-us-gpu-resources/hpc-datasheet-sc23"),
    # GH200: the Hopper GPU of the superchip, H100 SXM compute; 96 GB HBM3 (the "480GB" module counts its
    # LPDDR5X) or 144 GB HBM3e. The memory a device reports tells the two apart when the name does not.
    _nv("NVIDIA GH200 96GB HBM3", (r"\bGH200 480GB\b", r"\bGH200\b"), "Hopper", (9, 0), 132, 1980,
        {"fp64": 34 * _T, "fp64_tensor": 67 * _T, **_HOPPER_DENSE}, 4.0e12, 96, _GH200),
    _nv("NVIDIA GH200 144GB HBM3e", (r"\bGH200\b.*\b144\s?GB?\b", r"\bGH200\b"), "Hopper", (9, 0), 132, 1980,
        {"fp64": 34 * _T, "fp64_tensor": 67 * _T, **_HOPPER_DENSE}, 4.9e12, 144, _GH200),
    # L4 datasheet gives sparse tensor figures only (120, 242, 485); halved here.
    _nv("NVIDIA L4", (r"\bL4\b",), "Ada Lovelace", (8, 9), 58, 2040,
        {"fp32": 30.3 * _T, "tf32": 60 * _T, "fp16": 121 * _T, "bf16": 121 * _T, "fp8": 242.5 * _T,
         "int8": 242.5 * _T}, 300e9, 24,
        "NVIDIA L4 datasheet, https://images.nvidia.com/content/Solutions/data-center/"
        "vgpu-L4-background-image-background-image/l4-datasheet.pdf; " + _ADA),
    _nv("NVIDIA L40", (r"\bL40\b",), "Ada Lovelace", (8, 9), 142, 2490,
        {"fp32": 90.5 * _T, "tf32": 90.5 * _T, "fp16": 181.05 * _T, "bf16": 181.05 * _T, "fp8": 362 * _T,
         "int8": 362 * _T}, 864e9, 48,
        "NVIDIA L40 datasheet (dense | sparse; dense taken), https://www.nvidia.com/en-us/data-center/l40/"),
    _nv("NVIDIA L40S", (r"\bL40S\b",), "Ada Lovelace", (8, 9), 142, 2520,
        {"fp32": 91.6 * _T, "tf32": 183 * _T, "fp16": 362.05 * _T, "bf16": 362.05 * _T, "fp8": 733 * _T,
         "int8": 733 * _T}, 864e9, 48,
        "NVIDIA L40S datasheet (dense | sparse; dense taken), https://www.nvidia.com/en-us/data-center/l40s/"),
    # Workstation AD102: FP32 accumulate at the full rate (364.2 = 142 x 2505 MHz x 1024).
    _nv("NVIDIA RTX 6000 Ada Generation", (r"\bRTX 6000 Ada\b",), "Ada Lovelace", (8, 9), 142, 2505,
        {"fp32": 91.1 * _T, "tf32": 182.1 * _T, "fp16": 364.2 * _T, "bf16": 364.2 * _T, "fp8": 728.5 * _T,
         "int8": 728.5 * _T}, 960e9, 48, _ADA),
    # HGX B200 per-GPU figures; tensor ones are printed with sparsity (2.2, 4.5, 9, 9 P), halved here.
    # 148 SMs x 1980 MHz x 256 = 75 TF matches the FP32 figure; NVIDIA's sheet gives neither number.
    _nv("NVIDIA B200", (r"\bB200\b",), "Blackwell", (10, 0), 148, 1980,
        {"fp64": 37 * _T, "fp64_tensor": 37 * _T, "fp32": 75 * _T, "tf32": 2200 / 2 * _T, "fp16": 4500 / 2 * _T,
         "bf16": 4500 / 2 * _T, "fp8": 9000 / 2 * _T, "int8": 9000 / 2 * _T}, 7.7e12, 180,
        "NVIDIA HGX B200 specifications (per GPU), https://www.nvidia.com/en-us/data-center/hgx/"),
    # GeForce tensor cores run FP16/BF16 with FP32 accumulate at half the FP16-accumulate rate.
    _nv("NVIDIA GeForce RTX 3090", (r"\bRTX 3090\b(?!\s*Ti\b)",), "Ampere", (8, 6), 82, 1695,
        {"fp32": 35.6 * _T, "tf32": 35.6 * _T, "fp16": 71 * _T, "bf16": 71 * _T, "int8": 284 * _T}, 936e9, 24,
        "NVIDIA Ampere GA102 whitepaper, https://www.nvidia.com/content/PDF/"
        "nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf"),
    # The 12 GB RTX 3080 has 70 SMs under the same name: the SM count keeps it off this 10 GB row.
    _nv("NVIDIA GeForce RTX 3080", (r"\bRTX 3080\b(?!\s*(Ti|Laptop)\b)",), "Ampere", (8, 6), 68, 1710,
        {"fp32": 29.8 * _T, "tf32": 29.8 * _T, "fp16": 59.5 * _T, "bf16": 59.5 * _T, "int8": 238 * _T}, 760e9, 10,
        _GA102),
    _nv("NVIDIA GeForce RTX 4090", (r"\bRTX 4090\b(?!\s*(D|Laptop)\b)",), "Ada Lovelace", (8, 9), 128, 2520,
        {"fp32": 82.6 * _T, "tf32": 82.6 * _T, "fp16": 165.2 * _T, "bf16": 165.2 * _T, "fp8": 330.3 * _T,
         "int8": 660.6 * _T}, 1008e9, 24, _ADA),
    _nv("NVIDIA GeForce RTX 4080", (r"\bRTX 4080\b(?!\s*(Super|Laptop)\b)",), "Ada Lovelace", (8, 9), 76, 2505,
        {"fp32": 48.7 * _T, "tf32": 48.7 * _T, "fp16": 97.5 * _T, "bf16": 97.5 * _T, "fp8": 194.9 * _T,
         "int8": 389.9 * _T}, 716.8e9, 16, _ADA),
    # GeForce Blackwell (compute capability 12.0): FP32 accumulate still at half the FP16-accumulate rate.
    _nv("NVIDIA GeForce RTX 5090", (r"\bRTX 5090\b(?!\s*(D|Laptop)\b)",), "Blackwell", (12, 0), 170, 2407,
        {"fp32": 104.8 * _T, "tf32": 104.8 * _T, "fp16": 209.5 * _T, "bf16": 209.5 * _T}, 1792e9, 32,
        _RTX_BLACKWELL),
    _nv("NVIDIA GeForce RTX 5080", (r"\bRTX 5080\b(?!\s*Laptop\b)",), "Blackwell", (12, 0), 84, 2617,
        {"fp32": 56.3 * _T, "tf32": 56.3 * _T, "fp16": 112.6 * _T, "bf16": 112.6 * _T}, 960e9, 16, _RTX_BLACKWELL),
    # AMD: FP64 vector -> fp64, FP64 matrix -> fp64_tensor, FP32 vector -> fp32 (the FP32 matrix rate,
    # 2x on CDNA1/2, has no key here), FP16/BF16/FP8/INT8 matrix.
    _amd("AMD Instinct MI100", (r"\bMI100\b",), "CDNA", "gfx908", 120, 1502,
         {"fp64": 11.5 * _T, "fp32": 23.1 * _T, "fp16": 184.6 * _T, "bf16": 92.3 * _T, "int8": 184.6 * _T},
         1228.8e9, 32,
         "AMD Instinct MI100 microarchitecture (per-CU rates), "
         "https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi100.html; AMD MI100 datasheet "
         "(INT8 184.6 TOPS, 32 GB HBM2, 1.2288 TB/s), "
         "https://www.amd.com/en/products/accelerators/instinct/mi100.html"),
    _amd("AMD Instinct MI210", (r"\bMI210\b",), "CDNA2", "gfx90a", 104, 1700,
         {"fp64": 22.6 * _T, "fp64_tensor": 45.3 * _T, "fp32": 22.6 * _T, "fp16": 181 * _T, "bf16": 181 * _T,
          "int8": 181 * _T}, 1.6e12, 64,
         "AMD Instinct MI210 datasheet, https://www.amd.com/en/products/accelerators/instinct/mi200/mi210.html; "
         + _CDNA2),
    # MI250X/MI250: two GCDs per OAM, each a separate device to ROCm, so a row is one GCD: the OAM
    # datasheet figures halved. ROCm names both "AMD Instinct MI250X / MI250": the CU count tells them apart.
    _amd("AMD Instinct MI250X (one GCD)", (r"MI250X / MI250", r"\bMI250X\b"), "CDNA2", "gfx90a", 110, 1700,
         {"fp64": 47.9 / 2 * _T, "fp64_tensor": 95.7 / 2 * _T, "fp32": 47.9 / 2 * _T, "fp16": 383 / 2 * _T,
          "bf16": 383 / 2 * _T, "int8": 383 / 2 * _T}, 1.6e12, 64,
         "AMD Instinct MI250X datasheet (OAM: 220 CUs, 47.9/95.7/383 TF, 128 GB, 3.2 TB/s), "
         "https://www.amd.com/en/products/accelerators/instinct/mi200/mi250x.html; " + _CDNA2),
    _amd("AMD Instinct MI250 (one GCD)", (r"MI250X / MI250", r"\bMI250\b"), "CDNA2", "gfx90a", 104, 1700,
         {"fp64": 45.3 / 2 * _T, "fp64_tensor": 90.5 / 2 * _T, "fp32": 45.3 / 2 * _T, "fp16": 362.1 / 2 * _T,
          "bf16": 362.1 / 2 * _T, "int8": 362.1 / 2 * _T}, 1.6e12, 64,
         "AMD Instinct MI250 OAM peaks (208 CUs, 45.3/90.5/362.1 TF, 128 GB), " + _CDNA2),
    # "Vector TF32" in AMD's table is the matrix xf32 rate.
    # ROCm names it "AMD Instinct MI300X", "AMD Instinct MI300X VF" under SR-IOV; a container without the
    # marketing-name table says "AMD Radeon Graphics" or nothing: then gfx942 (ROCm's 9.4), CUs and memory.
    _amd("AMD Instinct MI300X", (r"\bMI300X\b",), "CDNA3", "gfx942", 304, 2100, _MI300X_PEAKS, 5.3e12, 192,
         "AMD Instinct MI300 microarchitecture (MI300X peaks, 5.3 TB/s), "
         "https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi300.html; "
         "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html"),
    _amd("AMD Instinct MI300A", (r"\bMI300A\b",), "CDNA3", "gfx942", 228, 2100,
         {"fp64": 61.3 * _T, "fp64_tensor": 122.6 * _T, "fp32": 122.6 * _T, "tf32": 490.3 * _T, "fp16": 980.6 * _T,
          "bf16": 980.6 * _T, "fp8": 1961.2 * _T, "int8": 1961.2 * _T}, 5.3e12, 128,
         "AMD Instinct MI300A product page (228 CUs, 128 GB HBM3 shared with the CPU), "
         "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300a.html; " + _CDNA3),
    # MI325X: the MI300X's 304 CUs at 2100 MHz with 256 GB HBM3E at 6 TB/s.
    _amd("AMD Instinct MI325X", (r"\bMI325X\b",), "CDNA3", "gfx942", 304, 2100, _MI300X_PEAKS, 6.0e12, 256,
         "AMD Instinct MI325X product page, https://www.amd.com/en/products/accelerators/instinct/mi300/mi325x.html"),
    # CDNA4 (gfx950, ROCm's 9.5): matrix FP16 4096 and FP8 8192 FLOPs/clk/CU, FP64 matrix at the vector rate;
    # no TF32 matrix path (AMD prints none). Dense figures as AMD prints them (2.5 PF = 256 x 2400 MHz x 4096).
    _amd("AMD Instinct MI350X", (r"\bMI350X\b",), "CDNA4", "gfx950", 256, 2200,
         {"fp64": 72.1 * _T, "fp64_tensor": 72.1 * _T, "fp32": 144.2 * _T, "fp16": 2300 * _T, "bf16": 2300 * _T,
          "fp8": 4600 * _T, "int8": 4600 * _T}, 8e12, 288,
         "AMD Instinct MI350X product page, https://www.amd.com/en/products/accelerators/instinct/mi350/mi350x.html; "
         + _CDNA4),
    _amd("AMD Instinct MI355X", (r"\bMI355X\b",), "CDNA4", "gfx950", 256, 2400,
         {"fp64": 78.6 * _T, "fp64_tensor": 78.6 * _T, "fp32": 157.3 * _T, "fp16": 2500 * _T, "bf16": 2500 * _T,
          "fp8": 5000 * _T, "int8": 5000 * _T}, 8e12, 288,
         "AMD Instinct MI355X product page, https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html; "
         + _CDNA4),
)

_AMD_NAME = re.compile(r"\b(AMD|Instinct|Radeon)\b", re.IGNORECASE)


def table_rows() -> list[dict]:
    """Every row as plain data: peaks in FLOP/s (OP/s for int8), bandwidth in bytes/s, memory in bytes."""
    return [{"name": s.name, "vendor": s.vendor, "architecture": s.architecture,
             "compute_capability": list(s.compute_capability) if s.vendor == "nvidia" else s.compute_capability,
             "sm_count": s.sm_count, "boost_clock_mhz": s.boost_clock_mhz,
             "peak_flops": {p: s.peak_flops[p] for p in PRECISIONS if p in s.peak_flops},
             "memory_bandwidth_bytes_per_s": s.memory_bandwidth_bytes_per_s, "memory_bytes": s.memory_bytes,
             "patterns": list(s.patterns), "source": s.source} for s in GPU_TABLE]


def _units(spec: GpuSpec) -> str:
    return "CUs" if spec.vendor == "amd" else "SMs"


def _names(specs: list[GpuSpec]) -> str:
    return ", ".join(s.name for s in specs)


def _peaks_differ(specs: list[GpuSpec]) -> bool:
    """True unless every row publishes the same precisions at peaks within the datasheets' rounding.

    Two printings of one configuration differ in their last digit: an MI210 and one MI250 GCD are both
    104 CUs at 1700 MHz, printed 22.6 and 45.3 / 2 = 22.65 TF FP64. 0.5% tells those apart from real
    differences (an MI250X GCD has 6% more CUs, an H100 NVL runs 10% slower than the SXM5).
    """
    first = specs[0].peak_flops
    return any(s.peak_flops.keys() != first.keys()
               or any(abs(v - first[p]) > _SAME_PEAK_REL * first[p] for p, v in s.peak_flops.items())
               for s in specs[1:])


def _fit_memory(specs: list[GpuSpec], memory_bytes: int | None) -> list[GpuSpec]:
    """The rows whose memory is within _MEMORY_REL of what the device reports; all of them when none is.

    A device reports a little less than its datasheet size (ECC, the driver's reserve): an 80 GB A100
    says 79.2 GiB, a T4 14.8 of 16. Memory only breaks ties between rows with the same compute.
    """
    if not memory_bytes:
        return specs
    near = [s for s in specs if abs(s.memory_bytes - memory_bytes) <= _MEMORY_REL * s.memory_bytes]
    return near or specs


_SAME_PEAK_REL = 0.005
_MEMORY_REL = 0.1
# The CUDA-style capability ROCm's torch reports (hipDeviceProp major.minor): the gfx target's major and
# its middle digit, the stepping letter dropped. The MI250 trace (gfx90a) says 9.0, MI300X traces 9.4.
_ROCM_CAPABILITY = {"gfx908": (9, 0), "gfx90a": (9, 0), "gfx942": (9, 4), "gfx950": (9, 5)}


def _match_len(spec: GpuSpec, name: str) -> int:
    """Characters of `name` the longest-matching pattern covers (0: no match): more is more specific."""
    hits = [re.search(p, name, re.IGNORECASE) for p in spec.patterns]
    return max((len(m.group(0)) for m in hits if m), default=0)


def _by_name(name: str, vendor: str | None, sm_count: int | None,
             memory_bytes: int | None) -> tuple[GpuSpec | None, str] | None:
    """The row `name` picks out, or None with why; None when no pattern matches at all."""
    scored = [(n, s) for s in GPU_TABLE if (n := _match_len(s, name)) and vendor in (None, s.vendor)]
    if not scored:
        return None
    how = f"by name {name!r}"
    if sm_count is not None:
        fitting = [(n, s) for n, s in scored if s.sm_count == sm_count]
        if not fitting:
            longest = max(n for n, _ in scored)
            like = " or ".join(f"{s.name} ({s.sm_count} {_units(s)})" for n, s in scored if n == longest)
            return None, (f"GPU {name!r} looks like the {like}, but the device reports {sm_count} "
                          f"(a MIG slice or a partition?), so those peaks do not apply; pass --peak-flops")
        if len(fitting) < len(scored):
            how += f" and {sm_count} {_units(fitting[0][1])}"
        scored = fitting
    longest = max(n for n, _ in scored)
    top = [s for n, s in scored if n == longest]
    if _peaks_differ(top):
        return None, (f"GPU {name!r} is ambiguous: it names the {_names(top)}, whose peaks differ; pass its "
                      f"{_units(top[0])[:-1]} count or --peak-flops")
    fit = _fit_memory(top, memory_bytes)
    if len(fit) < len(top):
        how += f" and its {memory_bytes / _GIB:.0f} GiB"
    return fit[0], how


def _by_capability(name: str | None, cc: tuple[int, int], sm_count: int,
                   memory_bytes: int | None) -> tuple[GpuSpec | None, str]:
    """NVIDIA rows with this compute capability and SM count (memory breaking ties), if their peaks agree."""
    label = f"GPU {name!r}" if name else "the GPU"
    what = f"compute capability {cc[0]}.{cc[1]} and {sm_count} SMs"
    rows = [s for s in GPU_TABLE if s.vendor == "nvidia" and s.compute_capability == cc and s.sm_count == sm_count]
    return _shared_row(label, what, _fit_memory(rows, memory_bytes), memory_bytes,
                       "" if name is None else f" ({name!r} is not in the table by name)")


def _by_rocm_capability(name: str | None, cc: tuple[int, int] | None, cus: int | None,
                        memory_bytes: int | None) -> tuple[GpuSpec | None, str]:
    """AMD rows with the gfx target ROCm's capability stands for and this CU count, if their peaks agree.

    ROCm builds without the marketing-name table report "AMD Radeon Graphics" (HTA's MI250 trace) or
    nothing (an MI300X vLLM trace) as the name; the target, the CUs and the memory still tell the part.
    """
    label = f"AMD GPU {name!r}" if name else "an AMD GPU without a device name"
    if cc is None or cus is None:
        return None, (f"{label} is not in the GPU table by name, and its ROCm capability (gfx target) and CU "
                      f"count are unknown; pass --peak-flops")
    what = f"ROCm capability {cc[0]}.{cc[1]} and {cus} CUs"
    rows = [s for s in GPU_TABLE if s.vendor == "amd" and _ROCM_CAPABILITY.get(str(s.compute_capability)) == cc
            and s.sm_count == cus]
    return _shared_row(label, what, _fit_memory(rows, memory_bytes), memory_bytes,
                       "" if name is None else f" ({name!r} is not in the table by name)")


def _shared_row(label: str, what: str, rows: list[GpuSpec], memory_bytes: int | None,
                unnamed: str) -> tuple[GpuSpec | None, str]:
    """The first of `rows` (found by `what`) when their peaks agree, else None with the reason."""
    if not rows:
        return None, f"{label} ({what}) is not in the GPU table; pass --peak-flops"
    if _peaks_differ(rows):
        return None, (f"{label} ({what}) is ambiguous: the {_names(rows)} share them but their peaks differ; "
                      f"pass --peak-flops")
    how = f"by {what}"
    if memory_bytes:
        how += f" and {memory_bytes / _GIB:.0f} GiB"
    how += unnamed
    if len(rows) > 1:
        how += f"; {_names(rows)} share these peaks, memory and bandwidth are the {rows[0].name}'s"
    return rows[0], how


def _vendor_of(name: str | None, vendor: str | None) -> str | None:
    """'nvidia', 'amd' or None (unknown). An AMD-looking name wins: ROCm's torch calls itself CUDA."""
    if vendor is not None and vendor.lower() not in ("nvidia", "amd"):
        raise UsageError(f"unknown GPU vendor {vendor!r}", hint="use 'nvidia' or 'amd'")
    if name and _AMD_NAME.search(name):
        return "amd"
    return vendor.lower() if vendor else None


def find_gpu(name: str | None, *, vendor: str | None = None, compute_capability: tuple[int, int] | None = None,
             sm_count: int | None = None, memory_bytes: int | None = None) -> tuple[GpuSpec | None, str]:
    """The table row for a device, and how it was found; or None and the reason, naming the fix.

    Args:
        name: device name as the profiler reports it ("NVIDIA A100-SXM4-80GB"), or None.
        vendor: "nvidia" or "amd" when known; a name containing AMD/Instinct/Radeon is AMD regardless.
        compute_capability: (major, minor) as reported. NVIDIA's is the chip's; ROCm's torch reports a
            CUDA-style one derived from the gfx target (an MI250 says 9.0, like a Hopper), so it is only
            ever compared with AMD rows' targets, and only for a device known to be AMD.
        sm_count: SMs (CUs on AMD) of the device as reported; a name match must agree with it
            (a MIG slice or partition has fewer) and it tells MI250X from MI250 GCDs.
        memory_bytes: device memory as reported (Kineto's totalGlobalMem), or None; it only breaks ties
            between rows of equal compute (GH200 96 GB or 144 GB; an unnamed A100 40 GB or 80 GB).
    Returns:
        (spec, "by name ...") or (spec, "by compute capability ...") when found, else (None, reason).
        The most specific name pattern wins; ties with different peaks are ambiguous. Without a
        name match, rows with the same compute capability (AMD: the gfx target ROCm's number stands
        for) and SM/CU count are used if their peaks agree (an unfamiliar A100 SKU with 8.0 and 108
        SMs is an A100; "AMD Radeon Graphics" with 9.4, 304 CUs and 192 GiB is an MI300X).
    """
    name = name.strip() if name and name.strip() else None
    kind = _vendor_of(name, vendor)
    if name is None and compute_capability is None:
        return None, "GPU unknown: no device name and no compute capability; pass --peak-flops"
    cc = None if compute_capability is None else (int(compute_capability[0]), int(compute_capability[1]))
    if name is not None:
        found = _by_name(name, kind if vendor or kind == "amd" else None, sm_count, memory_bytes)
        if found is not None:
            return found
    if kind == "amd":
        return _by_rocm_capability(name, cc, sm_count, memory_bytes)
    if name is None and kind is None:
        return None, ("GPU without a device name or vendor: a compute capability alone cannot tell NVIDIA "
                      "from ROCm's CUDA-style numbers; pass --peak-flops")
    if cc is None or sm_count is None:
        return None, (f"GPU {name!r} is not in the GPU table and its compute capability and SM count are "
                      f"unknown; pass --peak-flops")
    return _by_capability(name, cc, int(sm_count), memory_bytes)
