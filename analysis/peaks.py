"""Peak FLOP/s of a GPU or CPU from its hardware description (docs/architecture.md, "peak FLOP/s").

peak = units x clock x FLOPs per clock per unit, where a fused multiply-add counts as 2 FLOPs.
An unknown part or a hidden clock gives `value=None` with the reason; nothing is guessed.

Sources for the per-SM tables:
- CUDA C++ Programming Guide, "Arithmetic Instructions" throughput table (results per clock
  cycle per multiprocessor, by compute capability): FP32 and FP64 add/multiply/FMA lanes.
- NVIDIA architecture whitepapers for dense tensor-core rates: Tesla V100 (Volta, 2017), Turing
  (2018), A100 Tensor Core GPU (Ampere, 2020), Ampere GA102 (2020), Ada Lovelace (2022),
  H100 Tensor Core GPU (Hopper, 2022), Blackwell (2024), RTX Blackwell (2025). Each rate below is
  the whitepaper's dense peak with FP32 accumulation divided by (SMs x boost clock), e.g. A100:
  312e12 / (108 x 1410e6) = 2048; GeForce parts get half (see _SPLIT_TENSOR_RATE).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tbd.analysis.gpu_table import GpuSpec, find_gpu

PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16")


@dataclass(frozen=True)
class PeakFlops:
    """A peak FLOP/s, or None with the reason; `formula` shows the derivation in words."""

    value: float | None
    reason: str | None
    formula: str


# FP32 FLOP/clk/SM on CUDA cores = 2 x FP32 FMA lanes per SM (CUDA Programming Guide table).
_GPU_FP32 = {
    (5, 0): 256, (5, 2): 256, (5, 3): 256,
    (6, 0): 128, (6, 1): 256, (6, 2): 256,
    (7, 0): 128, (7, 2): 128, (7, 5): 128,
    (8, 0): 128, (8, 6): 256, (8, 7): 256, (8, 9): 256,
    (9, 0): 256, (10, 0): 256, (12, 0): 256,
}
# FP64 FLOP/clk/SM = 2 x FP64 FMA lanes per SM (same table). Datacenter parts only run at a
# useful rate; consumer parts (6.1, 7.5, 8.6, 8.9) run FP64 at 1/32-1/64 of FP32.
_GPU_FP64 = {
    (5, 0): 8, (5, 2): 8, (5, 3): 8,
    (6, 0): 64, (6, 1): 8, (6, 2): 8,
    (7, 0): 64, (7, 2): 8, (7, 5): 4,
    (8, 0): 64, (8, 6): 4, (8, 7): 4, (8, 9): 4,
    (9, 0): 128,
}
# Dense tensor-core FLOP/clk/SM with FP32 accumulation, the mode PyTorch's FP16/BF16 matmuls and
# convolutions run in (cuBLAS/cuDNN compute type 32F), on a full-rate part (whitepapers; no 2:4 sparsity).
# E.g. A100: 312e12 / (108 x 1410e6) = 2048; RTX A6000 (GA102 whitepaper): 154.8e12 / (84 x 1800e6) = 1024.
_GPU_TENSOR = {
    (7, 0): {"fp16": 1024}, (7, 2): {"fp16": 1024}, (7, 5): {"fp16": 1024},
    (8, 0): {"fp16": 2048, "bf16": 2048, "tf32": 1024},
    (8, 6): {"fp16": 1024, "bf16": 1024, "tf32": 512},
    (8, 7): {"fp16": 1024, "bf16": 1024, "tf32": 512},
    (8, 9): {"fp16": 1024, "bf16": 1024, "tf32": 512},
    (9, 0): {"fp16": 4096, "bf16": 4096, "tf32": 2048},
    (10, 0): {"fp16": 8192, "bf16": 8192, "tf32": 4096},
    (12, 0): {"fp16": 1024, "bf16": 1024, "tf32": 512},
}
# At these capabilities the consumer parts run tensor math with FP32 accumulation at half the rate above
# (half their FP16-accumulate rate): Turing whitepaper, RTX 2080 Ti 53.8 against 107.6 TF FP16; GA102
# whitepaper, RTX 3090 71 TF FP16 and 35.6 TF TF32 against the RTX A6000's 1024 and 512 per SM per clock;
# Ada whitepaper, RTX 4090 165.2 TF; RTX Blackwell whitepaper, RTX 5090 209.5 TF. Workstation and
# datacenter parts (T4, TITAN RTX, A10, A40, RTX A6000, L4, L40S, RTX 6000 Ada) run the full rate; the L40
# (181 TF = 142 SMs x 2490 MHz x 512, its datasheet) is capped like GeForce.
_SPLIT_TENSOR_RATE = {(7, 5), (8, 6), (8, 9), (12, 0)}
_HALF_RATE_NAME = re.compile(r"GeForce|\bL40\b(?!S)", re.IGNORECASE)


def half_rate_fp32_accumulate(name: str | None, compute_capability: tuple[int, int]) -> bool | None:
    """Whether this part runs FP32-accumulate tensor math at half rate (GeForce); None when it cannot be told.

    Args:
        name: the device name ("NVIDIA GeForce RTX 2080 Ti"), or None when unknown.
        compute_capability: (major, minor).
    Returns:
        False where every part of the capability runs the full rate (Volta, A100, Hopper, Blackwell
        datacenter), True for GeForce (and the L40) at 7.5/8.6/8.9/12.0, None there without a name.
    """
    cc = (int(compute_capability[0]), int(compute_capability[1]))
    if cc not in _SPLIT_TENSOR_RATE:
        return False
    if not name:
        return None
    return bool(_HALF_RATE_NAME.search(name))


def _gpu_rate(cc: tuple[int, int], precision: str, name: str | None) -> tuple[int | None, str]:
    """FLOP/clk/SM for one capability and precision and the unit that delivers it; or None and why not."""
    major, _ = cc
    if precision == "fp32":
        # Blackwell (10.x datacenter, 12.x consumer) keeps 128 FP32 lanes per SM.
        rate = 256 if major in (10, 12) else _GPU_FP32.get(cc)
    elif precision == "fp64":
        rate = _GPU_FP64.get(cc)
    else:
        rate = _GPU_TENSOR.get(cc, {}).get(precision)
    if rate is None:
        return None, f"no {precision} peak known for compute capability {cc[0]}.{cc[1]}"
    if precision in ("fp32", "fp64"):
        return rate, f"{precision.upper()} CUDA-core"
    unit = f"dense {precision.upper()} tensor-core, FP32 accumulate"
    half = half_rate_fp32_accumulate(name, cc)
    if half is None:
        return None, (f"the {precision} tensor-core rate at compute capability {cc[0]}.{cc[1]} depends on the part "
                      f"(GeForce runs FP32 accumulation at half the workstation/datacenter rate) and the device "
                      f"name is unknown; pass --peak-flops")
    if half:
        return rate // 2, unit + " at half rate (GeForce: half the FP16-accumulate rate)"
    return rate, unit


def gpu_peak_flops(compute_capability: tuple[int, int], sm_count: int, max_sm_clock_hz: float | None,
                   precision: str, name: str | None = None) -> PeakFlops:
    """Peak FLOP/s of a CUDA GPU: SMs x max SM clock (Hz) x FLOP/clk/SM for `precision`.

    Args:
        compute_capability: (major, minor), e.g. (8, 0) for A100.
        sm_count: streaming multiprocessors on the device.
        max_sm_clock_hz: maximum SM clock in Hz (NVML max clock), or None when unknown.
        precision: "fp32" and "fp64" use CUDA cores; "tf32", "fp16", "bf16" dense tensor cores with
            FP32 accumulation (what PyTorch runs).
        name: the device name; at 7.5/8.6/8.9/12.0 it says whether the part is a GeForce (half the
            FP32-accumulate tensor rate). Without it those tensor peaks are None with the reason.
    Returns:
        PeakFlops in FLOP/s, or value None with the reason.
    """
    cc = (int(compute_capability[0]), int(compute_capability[1]))
    label = f"compute capability {cc[0]}.{cc[1]}"
    if precision not in PRECISIONS:
        return PeakFlops(None, f"no GPU peak model for precision {precision!r}", "")
    rate, unit = _gpu_rate(cc, precision, name)
    if rate is None:
        return PeakFlops(None, unit, "")
    if sm_count <= 0:
        return PeakFlops(None, f"invalid SM count {sm_count}", "")
    formula_tail = f"{rate} FLOP/clk/SM ({unit}, {label})"
    if max_sm_clock_hz is None or max_sm_clock_hz <= 0:
        return PeakFlops(None, "GPU max SM clock unknown", f"{sm_count} SMs x ? MHz x {formula_tail}")
    formula = f"{sm_count} SMs x {max_sm_clock_hz / 1e6:.0f} MHz x {formula_tail}"
    return PeakFlops(float(sm_count) * float(max_sm_clock_hz) * rate, None, formula)


# CPU FP32 FLOP/cycle/core by ISA, widest first: FMA units x FP32 lanes x 2 (FMA = 2 FLOPs).
# x86 figures assume two FMA ports (ports 0 and 1 on Haswell and later; ports 0 and 5 for
# AVX-512 on Skylake-SP Gold 6xxx/Platinum and Ice Lake/Sapphire Rapids server parts), per
# the Intel 64 and IA-32 Architectures Optimization Reference Manual; AVX-512 parts with a
# single FMA unit (some Xeon Silver/Bronze) reach half. Plain AVX has no FMA: one 8-lane add
# and one 8-lane multiply per cycle. SSE2: one 4-lane add and one 4-lane multiply.
# aarch64 assumes two 128-bit ASIMD FMA pipes (Arm Neoverse N1 Software Optimization Guide);
# wider cores (Neoverse V1/V2: four pipes) reach more.
_CPU_FP32 = (
    ("avx512f", ("avx512f",), 64, "2 FMA units x 16 fp32 lanes x 2"),
    ("avx2+fma", ("avx2", "fma"), 32, "2 FMA units x 8 fp32 lanes x 2"),
    ("avx", ("avx",), 16, "1 add + 1 mul unit x 8 fp32 lanes"),
    ("asimd", ("asimd",), 16, "2 FMA pipes x 4 fp32 lanes x 2 (assumed)"),
    ("sse2", ("sse2",), 8, "1 add + 1 mul unit x 4 fp32 lanes"),
)


def cpu_flops_per_cycle(isa_flags: Iterable[str], precision: str = "fp32") -> tuple[int | None, str]:
    """FLOP/cycle/core for the widest vector ISA in `isa_flags`, and its derivation (or the reason)."""
    flags = {f.lower() for f in isa_flags}
    for isa, needs, rate, how in _CPU_FP32:
        if all(n in flags for n in needs):
            if precision == "fp32":
                return rate, f"{isa}: {how}"
            if precision == "fp64":
                # Same units, half the lanes per register.
                return rate // 2, f"{isa}: ({how}) / 2 for fp64"
            return None, f"no CPU peak model for precision {precision!r}"
    return None, "no known vector ISA among the CPU flags"


def cpu_peak_flops(isa_flags: Iterable[str], cores: int, max_clock_hz: float | None,
                   precision: str = "fp32") -> PeakFlops:
    """Peak FLOP/s of a CPU: cores x max clock (Hz) x FLOP/cycle/core by ISA.

    Args:
        isa_flags: CPU feature flags (/proc/cpuinfo "flags" or "Features").
        cores: cores in use (physical cores: SMT siblings share the FMA units).
        max_clock_hz: maximum core clock in Hz, or None when the machine hides it.
        precision: "fp32" or "fp64".
    Returns:
        PeakFlops in FLOP/s, or value None with the reason.
    """
    rate, how = cpu_flops_per_cycle(isa_flags, precision)
    if rate is None:
        return PeakFlops(None, how, "")
    if cores <= 0:
        return PeakFlops(None, f"invalid core count {cores}", "")
    tail = f"{rate} FLOP/cycle/core ({how})"
    if max_clock_hz is None or max_clock_hz <= 0:
        return PeakFlops(None, "CPU clock hidden by the VM", f"{cores} cores x ? MHz x {tail}")
    formula = f"{cores} cores x {max_clock_hz / 1e6:.0f} MHz x {tail}"
    return PeakFlops(float(cores) * float(max_clock_hz) * rate, None, formula)


HARDWARE_MODEL = "hardware_model"  # units x clock x FLOP/clk/unit (this module's tables)
GPU_TABLE = "gpu_table"  # the GPU's datasheet row (analysis/gpu_table.py)
USER = "user"  # given with --peak-flops


@dataclass(frozen=True)
class PeakModel:
    """Peak FLOP/s per precision for the device that ran the kernels, and the measured ceiling."""

    by_precision: dict[str, PeakFlops]
    measured_ceiling_flops: float | None = None  # achieved FP32 GEMM FLOP/s on this device
    source: str = HARDWARE_MODEL  # where the FP32 peak comes from: HARDWARE_MODEL, GPU_TABLE or USER

    def denominators(self) -> tuple[dict[str, float], str, str | None]:
        """Peaks actually used per precision, the FP32 source and, if it fell back, why.

        When the hardware model cannot give the FP32 peak (a VM hiding the CPU clock), the
        measured GEMM ceiling is what remains; profile.json says so in `peak_source`.
        """
        used = {p: pk.value for p, pk in self.by_precision.items() if pk.value}
        fp32 = self.by_precision.get("fp32")
        if fp32 is not None and fp32.value:
            return used, self.source, None
        if self.measured_ceiling_flops:
            used["fp32"] = self.measured_ceiling_flops
            return used, "measured_gemm", fp32.reason if fp32 else "no hardware model"
        return used, "none", fp32.reason if fp32 else "no hardware model"


GPU_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
TABLE_PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")


def table_peak_model(spec: GpuSpec, how: str, ceiling: float | None = None) -> PeakModel:
    """Dense peaks per precision from the GPU's datasheet row; a precision it lacks is null with the reason."""
    by = {}
    for p in TABLE_PRECISIONS:
        value = spec.peak_flops.get(p)
        by[p] = PeakFlops(float(value), None, f"{spec.name} datasheet ({how})") if value else \
            PeakFlops(None, f"{spec.name} has no {p} peak in the GPU table", "")
    return PeakModel(by, ceiling, GPU_TABLE)


def with_user_fp32(model: PeakModel, peak_flops: float) -> PeakModel:
    """`model` with its FP32 peak replaced by the user's (--peak-flops), labelled as such."""
    by = {**model.by_precision, "fp32": PeakFlops(float(peak_flops), None, "given with --peak-flops")}
    return PeakModel(by, model.measured_ceiling_flops, USER)


def gpu_spec_of(gpu: dict[str, Any]) -> tuple[GpuSpec | None, str]:
    """The table row for an environment's "gpu" record (name, vendor, compute_capability, sm_count, memory_bytes)."""
    cc = gpu.get("compute_capability")
    return find_gpu(gpu.get("name"), vendor=gpu.get("vendor"), compute_capability=tuple(cc) if cc else None,
                    sm_count=gpu.get("sm_count"), memory_bytes=gpu.get("memory_bytes"))


def device_peak_model(environment: dict[str, Any], device_kind: str, gemm: dict | None,
                      peak_flops: float | None = None) -> PeakModel:
    """Peaks per precision for the device the kernels ran on.

    A GPU's peaks come from its datasheet row (the GPU table, found by name, else by NVIDIA
    compute capability and SMs); a GPU the table does not know falls back to the SM model
    (compute capability x SMs x max SM clock) when the clock is known, else every peak is null
    with the reason naming the GPU. A CPU's from its ISA, cores and clock. `peak_flops` (the
    user's --peak-flops) replaces the FP32 peak on either.

    Args:
        environment: the run's environment record (profilers/host.py's keys): "gpu" with name,
            compute_capability, sm_count and max_sm_clock_hz; "cpu" with isa, threads_in_use
            (or cores_logical) and max_clock_hz.
        device_kind: "cuda" or "cpu", what the trace's kernels ran on.
        gemm: the measured GEMM ceiling record (its "flops_per_s"), or None.
        peak_flops: the user's FP32 peak FLOP/s, or None.
    """
    ceiling = gemm.get("flops_per_s") if isinstance(gemm, dict) else None
    if device_kind == "cuda":
        model = _gpu_peak_model(environment.get("gpu") or {}, ceiling)
    else:
        cpu = environment.get("cpu") or {}
        threads = cpu.get("threads_in_use") or cpu.get("cores_logical") or 0
        model = PeakModel({p: cpu_peak_flops(cpu.get("isa") or [], int(threads), cpu.get("max_clock_hz"), p)
                           for p in ("fp32", "fp64")}, ceiling)
    return with_user_fp32(model, peak_flops) if peak_flops else model


def _gpu_peak_model(gpu: dict[str, Any], ceiling: float | None) -> PeakModel:
    if gpu.get("peak_clock_given"):
        # The user named the clock (--sm-clock-mhz): the SM model at that clock, as asked.
        return _sm_model(gpu, ceiling)
    spec, how = gpu_spec_of(gpu)
    if spec is not None:
        return table_peak_model(spec, how, ceiling)
    nvidia = gpu.get("vendor", "nvidia") == "nvidia"
    if gpu.get("max_sm_clock_hz") and gpu.get("compute_capability") and nvidia:
        return _sm_model(gpu, ceiling)
    cc = gpu.get("compute_capability")
    if nvidia and cc and gpu.get("sm_count") and _gpu_rate(tuple(cc), "fp32", None)[0]:
        # Kineto's deviceProperties carry no clock, and a clock is not guessed: the SM model needs one.
        how += (f", or --sm-clock-mhz with the GPU's max SM clock for the SM model ({gpu['sm_count']} SMs x clock "
                f"x FLOP/clk/SM at compute capability {cc[0]}.{cc[1]}; the trace records no clock)")
    return PeakModel({p: PeakFlops(None, how, "") for p in GPU_PRECISIONS}, ceiling)


def _sm_model(gpu: dict[str, Any], ceiling: float | None) -> PeakModel:
    cc = gpu.get("compute_capability")
    if not cc:
        reason = "GPU compute capability unknown"
        return PeakModel({p: PeakFlops(None, reason, "") for p in GPU_PRECISIONS}, ceiling)
    return PeakModel({p: gpu_peak_flops(tuple(cc), int(gpu.get("sm_count") or 0), gpu.get("max_sm_clock_hz"), p,
                                        gpu.get("name")) for p in GPU_PRECISIONS}, ceiling)


def device_bandwidth(environment: dict[str, Any], device_kind: str,
                     measured: dict | None, given: float | None = None) -> tuple[float | None, str, str]:
    """The memory bandwidth (bytes/s) of the device the kernels ran on: (value, source, how or why not).

    A GPU's is its datasheet figure (the GPU table row found as for the peaks); a CPU's is the
    copy bandwidth the run measured (profilers/ceilings.py), there being no datasheet for a
    host's memory system as configured. `measured`: that record ({"bytes_per_s", ...}) or None.
    `given`: the user's figure (`--memory-bandwidth`), which replaces either, labelled as theirs
    (source USER). Where none is known, the reason says what would give one.
    """
    if given is not None and math.isfinite(given) and given > 0:
        return float(given), USER, "given with --memory-bandwidth"
    if device_kind == "cuda":
        spec, how = gpu_spec_of(environment.get("gpu") or {})
        if spec is None:
            # The table's own advice names --peak-flops, which sets no bandwidth: say what does.
            for advice in ("; pass --peak-flops", " or --peak-flops"):
                how = how[:-len(advice)] if how.endswith(advice) else how
            return None, "none", f"memory bandwidth unknown: {how}; {_GPU_BANDWIDTH_ADVICE}"
        return float(spec.memory_bandwidth_bytes_per_s), GPU_TABLE, f"{spec.name} datasheet ({how})"
    value = measured.get("bytes_per_s") if isinstance(measured, dict) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return float(value), "measured_copy", (f"best of {measured.get('repeats')} copies of "
                                               f"{measured.get('nbytes', 0) / 2**20:.0f} MiB (read + write)")
    return None, "none", ("memory bandwidth not measured (a trace alone does not say it); pass --memory-bandwidth "
                          "BYTES_PER_S (e.g. a STREAM copy figure), or profile with `tbd profile`, which measures it")


#: What gives tbd a GPU's memory bandwidth it could not find (--peak-flops sets none).
_GPU_BANDWIDTH_ADVICE = ("pass --memory-bandwidth BYTES_PER_S (the datasheet's figure), or add the GPU's row to the "
                         "GPU table (analysis/gpu_table.py; `tbd gpus` lists it)")
