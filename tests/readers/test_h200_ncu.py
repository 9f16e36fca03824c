"""A real Nsight Compute export from an H200, read and merged into the profile of the same run.

tests/fixtures/h200/ (README there): `tbd profile resnet50 --device cuda --size full --batch 64
--ncu 3` on a lent NVIDIA H200 (driver 580.159.04, torch 2.11.0+cu130, Nsight Compute 2025.3):
the profile.json written before the counters were merged, and ncu's raw-page export of the 50
launches it measured (cuDNN 9's batch-norm kernels). The expectations are recomputed here from the
CSV's own cells with the csv module, apart from tbd's reader.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections import defaultdict

import pytest
from testpaths import FIXTURES

from tbd.analysis.counters import canonical_name, merged_profile
from tbd.core.profile_result import Profile
from tbd.profilers.ncu_csv import measured_launches, read_ncu_csv

H200 = FIXTURES / "h200"
CSV = H200 / "ncu_resnet50_b64.csv.gz"
SASS = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"


def _rows() -> tuple[list[str], list[list[str]]]:
    rows = list(csv.reader(io.StringIO(gzip.decompress(CSV.read_bytes()).decode())))
    return rows[0], rows[2:]  # header, (units), launches


def _hand_flops(header: list[str], row: list[str]) -> float:
    cell = dict(zip(header, row))
    value = lambda op: float(cell[SASS.format(op)].replace(",", ""))  # noqa: E731
    return (value("fadd") + value("fmul") + 2 * value("ffma")
            + 2 * (value("hadd") + value("hmul")) + 4 * value("hfma")
            + value("dadd") + value("dmul") + 2 * value("dfma"))


def test_words_in_attribute_columns_are_kept_as_text_and_every_launch_is_read():
    header, rows = _rows()
    report = read_ncu_csv(CSV)
    assert len(report.launches) == len(rows) == 50
    first = report.launches[0]
    # ncu 2025 prints device and launch attributes as words beside the metrics asked for.
    assert first.attributes["device__attribute_display_name"] == "NVIDIA H200"
    assert first.attributes["device__attribute_confidential_computing_mode"] == "No-CC"
    assert first.attributes["launch__func_cache_config"] == "CachePreferNone"
    assert first.cc == "9.0" and first.device == 0
    cell = dict(zip(header, rows[0]))
    assert first.metrics["dram__bytes_read.sum"] == float(cell["dram__bytes_read.sum"].replace(",", ""))


def test_measured_flops_and_bytes_are_the_csv_cells_weighted_by_hand():
    header, rows = _rows()
    launches = measured_launches(CSV)
    for row, launch in zip(rows, launches):
        cell = dict(zip(header, row))
        assert launch.flops == pytest.approx(_hand_flops(header, row), rel=1e-12)
        dram = float(cell["dram__bytes_read.sum"].replace(",", "")) + float(cell["dram__bytes_write.sum"]
                                                                            .replace(",", ""))
        assert launch.dram_bytes == pytest.approx(dram, rel=1e-12)


def test_every_launch_finds_its_kernel_group_in_the_profile_of_the_same_run():
    """ncu names cuDNN 9's kernels without their namespace and with bools as 1/0
    ("bn_fw_tr_1C11_kernel_NCHW<float, float, int, 32, 1, 1, 1>"); the trace has
    "cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 32, true, 1, true>"."""
    header, rows = _rows()
    profile = Profile.from_dict(json.loads(gzip.decompress((H200 / "resnet50_b64_profile.json.gz").read_bytes())))
    merged, unmatched = merged_profile(profile, measured_launches(CSV), "ncu")
    assert unmatched == 0
    # Per kernel group: the mean of its launches' hand-weighted FLOPs.
    by_group: dict[str, list[float]] = defaultdict(list)
    name_at = header.index("Kernel Name")
    for row in rows:
        by_group[canonical_name(row[name_at])].append(_hand_flops(header, row))
    measured = {canonical_name(k.name): k.measured for k in merged.kernels if k.measured is not None}
    assert set(measured) == set(by_group) and len(measured) == 6
    for key, flops in by_group.items():
        assert measured[key]["launches"] == len(flops)
        assert measured[key]["flops"] == pytest.approx(sum(flops) / len(flops), rel=1e-12)
    # The training-mode batch-norm forward executes about 2.25x the analytic count on every size of it.
    fw = [m for key, m in measured.items() if key.startswith("bn_fw_tr_1C11_kernel_NCHW")]
    assert len(fw) == 3 and all(120 < m["flops_difference_pct"] < 130 for m in fw)
