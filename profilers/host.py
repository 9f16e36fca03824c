"""The run's environment as JSON-ready data: host, OS, Python, CPU, GPU, framework versions.

Imports without torch: the GPU part is `torch_gpu(torch, index)`, called by the framework hook
with the module it already imported, and its result is passed to `environment(...)`.

The CPU clock is the denominator of the CPU peak model, so its source is recorded:
1. /sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq (kHz): the real maximum;
2. /proc/cpuinfo "model name" suffix such as "@ 2.50GHz": the nominal (base) clock;
3. None: the machine hides it. /proc/cpuinfo "cpu MHz" is only core 0's *current* clock (VMs
   often show only this); it is recorded as `current_clock_hz`, never passed off as the maximum.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from tbd.profilers import nvml as _nvml

CPUFREQ_MAX = "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"
CPUINFO = "/proc/cpuinfo"

# Flags that matter to the peak model or to DL kernels (vector width, FMA, low precision).
_ISA_FLAGS = (
    "sse2", "avx", "fma", "f16c", "avx2", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
    "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
    "asimd", "asimdhp", "asimddp", "bf16", "i8mm", "sve", "sve2", "sme",
)
_MODEL_CLOCK = re.compile(r"@\s*([0-9]+(?:\.[0-9]+)?)\s*([GM])Hz", re.IGNORECASE)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def _first_value(cpuinfo: str, key: str) -> str | None:
    """Value of the first `key : value` line of /proc/cpuinfo text."""
    for line in cpuinfo.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == key:
            return value.strip()
    return None


def cpu_clock(cpuinfo: str | None, cpufreq_max_khz: str | None) -> tuple[float | None, str]:
    """Max CPU clock in Hz (or None) and where it came from, from the texts of the two files."""
    if cpufreq_max_khz and cpufreq_max_khz.strip().isdigit() and int(cpufreq_max_khz) > 0:
        return float(int(cpufreq_max_khz)) * 1e3, f"{CPUFREQ_MAX} (maximum)"
    if cpuinfo:
        match = _MODEL_CLOCK.search(_first_value(cpuinfo, "model name") or "")
        if match:
            scale = 1e9 if match.group(2).upper() == "G" else 1e6
            return float(match.group(1)) * scale, f'{CPUINFO} "model name" (nominal base clock)'
    return None, "CPU clock hidden by the VM"


def current_clock_hz(cpuinfo: str | None) -> float | None:
    """Core 0's current clock in Hz from /proc/cpuinfo "cpu MHz", or None."""
    try:
        return float(_first_value(cpuinfo or "", "cpu MHz") or "") * 1e6
    except ValueError:
        return None


def cpu_info(cpuinfo: str | None = None, cpufreq_max_khz: str | None = None) -> dict:
    """CPU model, logical/physical cores, relevant ISA flags, max clock (Hz) and its source.

    Reads /proc/cpuinfo and cpufreq when the texts are not given (tests pass them).
    """
    if cpuinfo is None:
        cpuinfo = _read(CPUINFO) or ""
    if cpufreq_max_khz is None:
        cpufreq_max_khz = _read(CPUFREQ_MAX)
    # x86 says "flags", aarch64 says "Features"; model: "model name" (x86), else the platform.
    flags = (_first_value(cpuinfo, "flags") or _first_value(cpuinfo, "Features") or "").split()
    clock_hz, clock_source = cpu_clock(cpuinfo, cpufreq_max_khz)
    current_hz = current_clock_hz(cpuinfo)
    if clock_hz is None and current_hz is not None:
        # "cpu MHz" is the current clock, not the maximum: on this project's 2-core VM
        # (2600 MHz shown, AVX-512) a measured fp32 GEMM reached 1.01-1.07x of
        # 2 x 2600 MHz x 64, so a peak built on it would read above 100 %. Kept beside, not as max.
        clock_source = f'{clock_source}: only the current clock is shown ({CPUINFO} "cpu MHz")'
    return {
        "model": _first_value(cpuinfo, "model name") or platform.processor() or platform.machine(),
        "arch": platform.machine(),
        "cores_logical": psutil.cpu_count(logical=True),
        "cores_physical": psutil.cpu_count(logical=False),
        # Cores this process may run on (taskset, cgroup cpusets): the ones a workload can use.
        "cores_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "isa": [f for f in _ISA_FLAGS if f in set(flags)],
        "max_clock_hz": clock_hz,
        "clock_source": clock_source,
        "current_clock_hz": current_hz,
    }


def torch_gpu(torch: Any, index: int = 0) -> tuple[dict | None, str | None]:
    """One CUDA device's facts via torch (and NVML for clock and driver); (None, reason) if none."""
    if not torch.cuda.is_available():
        return None, "no CUDA device"
    if index >= torch.cuda.device_count():
        return None, f"CUDA device {index} not present ({torch.cuda.device_count()} visible)"
    props = torch.cuda.get_device_properties(index)
    uuid = str(getattr(props, "uuid", "") or "") or None
    facts = _nvml.nvml_device_facts(index, uuid)
    clock_hz, clock_source = facts.get("max_sm_clock_hz"), "nvmlDeviceGetMaxClockInfo(NVML_CLOCK_SM)"
    if clock_hz is None and getattr(props, "clock_rate", 0):
        # cudaDeviceProp.clockRate: the peak SM clock in kHz (deprecated in CUDA 12 but still filled).
        clock_hz, clock_source = float(props.clock_rate) * 1e3, "cudaDeviceProp.clockRate"
    gpu = {
        "name": props.name,
        # ROCm builds of torch answer through torch.cuda too, with a CUDA-style capability.
        "vendor": "amd" if getattr(torch.version, "hip", None) else "nvidia",
        "index": index,
        "uuid": uuid,
        "compute_capability": [int(props.major), int(props.minor)],
        "sm_count": int(props.multi_processor_count),
        "memory_bytes": int(props.total_memory),
        "max_sm_clock_hz": clock_hz,
        "clock_source": clock_source if clock_hz is not None else None,
        "driver": facts.get("driver"),
        "cuda": torch.version.cuda,
        "nvml_reason": facts.get("nvml_reason"),
    }
    return gpu, None


def environment(framework_versions: dict, torch: Any = None, device: Any = None) -> dict:
    """JSON-ready environment: host, os, python, cpu, gpu (or None with gpu_reason), versions.

    Args:
        framework_versions: e.g. {"torch": "2.4.0"}, merged into "versions".
        torch: the torch module the run imported, or None (host.py never imports it).
        device: the torch.device (or "cpu"/"cuda:N") the run uses; the GPU is described only
            when it is a CUDA device.
    """
    cpu = cpu_info()
    gpu, gpu_reason = None, "no CUDA device"
    if torch is not None:
        # Threads beyond the cores this process may use add no FLOPs to the CPU peak.
        cpu["threads_in_use"] = min(int(torch.get_num_threads()), cpu["cores_available"] or cpu["cores_logical"])
        dev = torch.device(device) if device is not None else None
        if dev is not None and dev.type == "cuda":
            gpu, gpu_reason = torch_gpu(torch, dev.index if dev.index is not None else torch.cuda.current_device())
        elif dev is not None:
            gpu_reason = f"the run used device {dev}"
    return {
        "host": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "cpu": cpu,
        "gpu": gpu,
        "gpu_reason": None if gpu is not None else gpu_reason,
        "versions": {"python": sys.version.split()[0], "numpy": _version("numpy"),
                     "psutil": psutil.__version__, **framework_versions},
    }


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None
