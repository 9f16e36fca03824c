"""Energy of a span of time: the CPU packages' (Linux RAPL) or one GPU board's (NVML), or why there is none.

RAPL (Running Average Power Limit) exposes each CPU package's cumulative energy in microjoules at
/sys/class/powercap/intel-rapl:N/energy_uj (AMD's Zen packages too, under the same name); the
counter wraps at max_energy_range_uj. Only top-level package domains are summed (their subzones,
intel-rapl:N:M, are parts of them). The counters are package energy: cores, caches and the memory
controller, not DRAM on every part nor the rest of the machine, and the reading says so. Virtual
machines usually expose none (this project's CI machines have no /sys/class/powercap), and a
reading is then None with that reason: never an estimate.

On a GPU, NVML's `nvmlDeviceGetTotalEnergyConsumption` gives the board's energy in millijoules
since the driver last loaded (Volta and later): the whole board (GPU and its memory), not the
host. A product without the counter gives None with NVML's reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tbd.profilers.nvml import device_handle, load_nvml

POWERCAP = Path("/sys/class/powercap")
_PACKAGE = re.compile(r"^intel-rapl:\d+$")
#: What a reading covers, said beside every figure.
SCOPE = "CPU packages (RAPL), not the whole machine"
GPU_SCOPE = "GPU board (NVML total energy counter), not the host"


@dataclass(frozen=True)
class Domain:
    path: Path
    wrap_uj: int


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def rapl_domains(root: Path = POWERCAP) -> tuple[list[Domain], str | None]:
    """The readable package domains, or ([], why not)."""
    if not root.is_dir():
        return [], f"no RAPL energy counter: {root} does not exist here (a virtual machine exposes none)"
    domains = []
    for entry in sorted(root.iterdir()):
        if _PACKAGE.match(entry.name) and _read_int(entry / "energy_uj") is not None:
            domains.append(Domain(entry, _read_int(entry / "max_energy_range_uj") or 0))
    if not domains:
        return [], f"no readable RAPL package counter under {root} (energy_uj needs root on recent kernels)"
    return domains, None


class EnergyMeter:
    """`start()`, then `stop()` gives the joules the CPU packages used in between (None with `reason`)."""

    scope = SCOPE

    def __init__(self, root: Path = POWERCAP) -> None:
        self.domains, self.reason = rapl_domains(root)
        self._start: list[int | None] = []

    def start(self) -> None:
        self._start = [_read_int(d.path / "energy_uj") for d in self.domains]

    def stop(self) -> float | None:
        if not self.domains:
            return None
        total = 0
        for domain, before in zip(self.domains, self._start):
            after = _read_int(domain.path / "energy_uj")
            if before is None or after is None:
                self.reason = f"{domain.path / 'energy_uj'} could not be read again"
                return None
            delta = after - before
            if delta < 0:  # the counter wrapped (once: a span shorter than a wrap, minutes at full load)
                if not domain.wrap_uj:
                    self.reason = f"{domain.path} wrapped and gives no max_energy_range_uj"
                    return None
                delta += domain.wrap_uj
            total += delta
        return total / 1e6


class GpuEnergyMeter:
    """`start()`, then `stop()` gives the joules one GPU board used in between (None with `reason`).

    The caller synchronises the device before each call: the counter sees the board, not the queue.
    """

    scope = GPU_SCOPE

    def __init__(self, index: int, uuid: str | None = None, nvml: Any = None) -> None:
        self.index, self.uuid, self._nvml = index, uuid, nvml
        self.reason: str | None = None
        self._lib: Any = None
        self._handle: Any = None
        self._start_mj: int | None = None

    def start(self) -> None:
        self._start_mj = None
        self._lib, self.reason = load_nvml(self._nvml)
        if self._lib is None:
            return
        try:
            self._handle, _ = device_handle(self._lib, self.index, self.uuid)
            self._start_mj = int(self._lib.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        except Exception as exc:  # noqa: BLE001 - NOT_SUPPORTED before Volta; any NVML error is the reason
            self.reason = f"NVML total energy of GPU {self.index} unreadable: {exc}"
            self._close()

    def stop(self) -> float | None:
        if self._lib is None or self._start_mj is None:
            return None
        try:
            after = int(self._lib.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        except Exception as exc:  # noqa: BLE001
            self.reason = f"NVML total energy of GPU {self.index} unreadable at the end: {exc}"
            return None
        finally:
            self._close()
        if after < self._start_mj:
            self.reason = f"NVML total energy of GPU {self.index} went back (the driver reloaded?)"
            return None
        return (after - self._start_mj) / 1e3

    def _close(self) -> None:
        if self._lib is not None:
            self._lib.nvmlShutdown()
            self._lib = None


def meter_for(device_index: int, uuid: str | None = None) -> EnergyMeter | GpuEnergyMeter:
    """The meter of a run on device `device_index` (-1: the CPU, RAPL; N: GPU N, NVML)."""
    return EnergyMeter() if device_index < 0 else GpuEnergyMeter(device_index, uuid)
