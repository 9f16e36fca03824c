"""RAPL energy on a hand-made /sys/class/powercap tree: packages summed, subzones left out, a wrap undone,
and no counter said as such (this project's machines have none)."""

from __future__ import annotations

from pathlib import Path

from tbd.profilers.energy import EnergyMeter, rapl_domains


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
