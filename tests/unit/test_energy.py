"""RAPL energy on a hand-made /sys/class/powercap tree: packages summed, subzones left out, a wrap undone,
and no counter said as such (this project's machines have none). NVML's total energy counter through a
pynvml stand-in (a lent H200 gave 169 J for a 1.35 s tbd train run: docs/results/gpu-check-h200.md)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tbd.profilers.energy import GPU_SCOPE, SCOPE, EnergyMeter, GpuEnergyMeter, meter_for, rapl_domains


def _zone(root: Path, name: str, energy_uj: int, wrap_uj: int = 1_000_000) -> Path:
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{wrap_uj}\n")
    return zone


def test_packages_are_summed_and_a_wrap_is_undone(tmp_path):
    a = _zone(tmp_path, "intel-rapl:0", 100)
    b = _zone(tmp_path, "intel-rapl:1", 999_000)
    _zone(tmp_path, "intel-rapl:0:0", 5)  # a subzone: part of package 0, not counted again
    meter = EnergyMeter(tmp_path)
    assert [d.path.name for d in meter.domains] == ["intel-rapl:0", "intel-rapl:1"]
    meter.start()
    (a / "energy_uj").write_text("2100\n")  # +2,000 uJ
    (b / "energy_uj").write_text("500\n")  # wrapped at 1,000,000: +1,500 uJ
    assert meter.stop() == (2_000 + 1_500) / 1e6


def test_no_counter_is_a_reason_not_a_number(tmp_path):
    domains, reason = rapl_domains(tmp_path / "absent")
    assert domains == [] and "does not exist here" in reason
    meter = EnergyMeter(tmp_path / "absent")
    meter.start()
    assert meter.stop() is None and "does not exist here" in meter.reason


class _NVMLError(Exception):
    pass


def _fake_nvml(readings_mj, fails=False):
    """pynvml's calls GpuEnergyMeter makes; nvmlDeviceGetTotalEnergyConsumption gives `readings_mj` in turn."""
    state = SimpleNamespace(readings=list(readings_mj), opened=0, closed=0)

    def energy(handle):
        if fails:
            raise _NVMLError("Not Supported")
        return state.readings.pop(0)

    lib = SimpleNamespace(nvmlInit=lambda: setattr(state, "opened", state.opened + 1),
                          nvmlShutdown=lambda: setattr(state, "closed", state.closed + 1),
                          nvmlDeviceGetHandleByIndex=lambda i: ("gpu", i),
                          nvmlDeviceGetTotalEnergyConsumption=energy)
    return lib, state


def test_gpu_energy_is_the_millijoule_counter_difference():
    lib, state = _fake_nvml([5_000_000_123, 5_000_169_338])  # mJ since the driver loaded
    meter = GpuEnergyMeter(0, nvml=lib)
    meter.start()
    assert meter.stop() == (169_338 - 123) / 1e3  # 169.215 J
    assert state.opened == state.closed == 1
    assert meter.scope == GPU_SCOPE and "GPU board" in GPU_SCOPE


def test_a_gpu_without_the_counter_gives_nvmls_reason():
    lib, state = _fake_nvml([], fails=True)
    meter = GpuEnergyMeter(1, nvml=lib)
    meter.start()
    assert meter.stop() is None
    assert meter.reason == "NVML total energy of GPU 1 unreadable: Not Supported"
    assert state.opened == state.closed == 1


def test_a_counter_that_goes_back_is_no_reading():
    lib, _ = _fake_nvml([900, 100])
    meter = GpuEnergyMeter(0, nvml=lib)
    meter.start()
    assert meter.stop() is None and "went back" in meter.reason


def test_the_meter_follows_the_device():
    assert isinstance(meter_for(-1), EnergyMeter) and meter_for(-1).scope == SCOPE
    assert isinstance(meter_for(0), GpuEnergyMeter) and meter_for(0).index == 0
