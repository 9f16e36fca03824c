"""profile.json that is not what tbd wrote: each bad value is a ResultFormatError naming its key.

Before issue 12 these loaded and then broke the renderers (an AttributeError on environment.cpu
given as a string), or printed as figures: "nan %", "-1.0 %", "250.0 %", "-931.32 GiB". Python's
json reads the non-JSON tokens NaN and Infinity, so the loader itself must refuse them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from testpaths import FIXTURES

from tbd.cli.main import main
from tbd.cli.run_analysis import load_profile, profile_from_trace
from tbd.core.errors import ResultFormatError
from tbd.core.profile_result import Profile
from tbd.core.sweep_result import Sweep, SweepPoint
from tbd.reports.kernels.tables import render_kernel_report
from tbd.reports.terminal import render_profile


@pytest.fixture(scope="module")
def good() -> dict:
    """What `tbd analyze kineto_cuda_synthetic.json --sm-clock-mhz 1410 --json` writes."""
    return profile_from_trace(FIXTURES / "kineto_cuda_synthetic.json", sm_clock_mhz=1410).to_dict()


def _set(data: dict, path: str, value) -> dict:
    data = copy.deepcopy(data)
    keys = [int(k) if k.isdigit() else k for k in path.split(".")]
    parent = data
    for key in keys[:-1]:
        parent = parent[key]
    parent[keys[-1]] = value
    return data


def _write(tmp_path: Path, data, name: str = "profile.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))  # json.dumps writes NaN as NaN
    return path


def test_the_real_profile_loads_and_renders(good, tmp_path):
    profile = load_profile(_write(tmp_path, good))
    assert profile == Profile.from_dict(good)
    assert "nan" not in render_profile(profile) and render_kernel_report(profile)


@pytest.mark.parametrize("path, value, message", [
    ("environment.cpu", "Intel", "profile key 'environment.cpu' has type str, expected an object"),
    ("environment.gpu.name", 7, "profile key 'environment.gpu.name' has type int, expected a string"),
    ("metrics.memory_bytes.at_peak", "lots", "profile key 'metrics.memory_bytes.at_peak' has type str"),
    ("metrics.memory_bytes.at_peak.workspace", "4 KiB", "'metrics.memory_bytes.at_peak.workspace' has type str"),
    ("kernels.0.calls", "1", "profile key 'kernels[0].calls' has type str, expected an integer"),
    ("kernels.0.calls", True, "profile key 'kernels[0].calls' has type bool, expected an integer"),
    ("kernels.0.name", None, "profile key 'kernels[0].name' is null"),
    ("kernels.1.time_s", [1], "profile key 'kernels[1].time_s' has type list, expected a number"),
    ("metrics.gpu_busy_pct.value", float("nan"), "'metrics.gpu_busy_pct.value' is nan (NaN or infinite)"),
    ("metrics.flop_util_pct.flops", float("inf"), "'metrics.flop_util_pct.flops' is inf (NaN or infinite)"),
    ("metrics.gpu_busy_pct.value", -1, "profile key 'metrics.gpu_busy_pct.value' is -1, outside [0, 100]"),
    ("metrics.gpu_busy_pct.value", 250, "profile key 'metrics.gpu_busy_pct.value' is 250, outside [0, 100]"),
    ("metrics.flop_util_pct.value", 100.5, "'metrics.flop_util_pct.value' is 100.5, outside [0, 100]"),
    ("kernels.0.time_share_pct", 101, "'kernels[0].time_share_pct' is 101, outside [0, 100]"),
    ("metrics.memory_bytes.allocator_peak", -1000, "'metrics.memory_bytes.allocator_peak' is -1000, outside >= 0"),
    ("metrics.memory_bytes.at_peak.unattributed", -5, "'metrics.memory_bytes.at_peak.unattributed' is -5"),
    ("metrics.throughput.also", {"tokens/s": -3.0}, "'metrics.throughput.also.tokens/s' is -3, outside >= 0"),
    ("iterations.times_s", [0.1, -0.2], "'iterations.times_s[1]' is -0.2, outside >= 0"),
    ("metrics.no_flop_formula", {"pct": 5.0, "causes": [{"cause": "no_formula", "pct": 5.0, "detail": "",
                                                         "ops": [{"name": 1, "pct": 5}]}]},
     "'metrics.no_flop_formula.causes[0].ops[0].name' has type int"),
    ("spec.batch", 2.5, "profile key 'spec.batch' has type float, expected an integer"),
    ("notes", ["ok", 3], "profile key 'notes[1]' has type int, expected a string"),
])
def test_a_bad_value_is_refused_naming_its_key(good, tmp_path, path, value, message):
    with pytest.raises(ResultFormatError) as err:
        load_profile(_write(tmp_path, _set(good, path, value)))
    assert message in str(err.value)
    assert "\n" not in err.value.one_line()


def test_util_above_100_needs_its_note(good, tmp_path):
    flagged = _set(_set(good, "kernels.0.util_pct", 250.0), "kernels.0.util_note", "above peak: precision misdetected")
    assert load_profile(_write(tmp_path, flagged)).kernels[0].util_pct == 250.0
    bare = _set(_set(good, "kernels.0.util_pct", 250.0), "kernels.0.util_note", None)
    with pytest.raises(ResultFormatError, match=r"'kernels\[0\]\.util_pct' is 250 % without a util_note"):
        load_profile(_write(tmp_path, bare))


def test_nan_and_infinity_tokens_in_the_file_are_refused(good, tmp_path):
    text = json.dumps(good).replace('"busy_s": 2.56e-05', '"busy_s": Infinity')
    assert "Infinity" in text
    with pytest.raises(ResultFormatError, match="'metrics.flop_util_pct.busy_s' is inf"):
        load_profile(_write(tmp_path, text))


def test_a_directory_named_profile_json_is_refused(tmp_path):
    # Before: IsADirectoryError escaped from the reader as a traceback.
    run = tmp_path / "run"
    (run / "profile.json").mkdir(parents=True)
    with pytest.raises(ResultFormatError, match="run/profile.json: not a regular file"):
        load_profile(run)
    with pytest.raises(ResultFormatError, match="no profile.json here"):
        load_profile(run / "profile.json")  # a folder: its own profile.json is looked for


def test_nesting_too_deep_for_json_is_refused(tmp_path):
    with pytest.raises(ResultFormatError, match="nested too deeply"):
        load_profile(_write(tmp_path, "[" * 100_000 + "]" * 100_000))


# Issue 29: values the declaration let through before, each of which broke a renderer or an export.
@pytest.mark.parametrize("path, value, message", [
    # OverflowError at the CSV's number cell (int too large to convert to float)
    ("metrics.memory_bytes.weights", 10**400, "'metrics.memory_bytes.weights' is an integer of 401 digits, "
                                              "beyond any real value (at most 9.0072e+15)"),
    # OverflowError shading the warm-up in the run figure
    ("iterations.warmup", 10**400, "'iterations.warmup' is an integer of 401 digits, outside [0, 2.14748e+09]"),
    ("iterations.warmup", 2**40, "'iterations.warmup' is 1.09951e+12, outside [0, 2.14748e+09]"),
    # a NaN launch grid read back and written out by `tbd kernels --json`
    ("kernels.0.launch.grid.0", float("nan"), "'kernels[0].launch.grid[0]' has type float, expected an integer"),
    ("kernels.0.launch.block", 1.5, "'kernels[0].launch.block' has type float, expected a list"),
    ("kernels.0.launch.registers_per_thread", 10**400, "'kernels[0].launch.registers_per_thread' is an integer"),
    ("kernels.0.name", "k" * 20_000, "'kernels[0].name' holds 20,000 characters, more than 16,384"),
    ("spec.model", "m" * 300_000, "'spec.model' holds 300,000 characters, more than 4,096"),
    ("spec.batch", float("nan"), "'spec.batch' has type float, expected an integer"),
    ("notes", ["n"] * 5000, "'notes' holds 5,000 items, more than 1,000"),
    ("metrics.flop_util_pct.flops", 10**400, "'metrics.flop_util_pct.flops' is an integer of 401 digits, beyond"),
    ("provenance", {"x": [[[float("inf")]]]}, "'provenance.x[0][0][0]' is inf (NaN or infinite)"),
])
def test_a_value_no_renderer_survives_is_refused(good, tmp_path, path, value, message):
    with pytest.raises(ResultFormatError) as err:
        load_profile(_write(tmp_path, _set(good, path, value)))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_saved_sweep_and_comparison_refuse_the_same_values(tmp_path, capsys):
    point = SweepPoint(8, "ok", None, "b8", 1397.0, "images/s", 0.0057, None, 3.7, 50.0, True, {"weights": 5})
    sweep = Sweep("resnet50", "pytorch", "cpu", "AMD EPYC", "test", "list", [point], 8, None).to_dict()
    cases = [("points.0.batch", 10**400, "sweep key 'points[0].batch' is an integer of 401 digits, outside [1, "),
             ("points.0.batch", 2**40, "sweep key 'points[0].batch' is 1.09951e+12, outside [1, 1.67772e+07]"),
             ("points.0.memory_bytes.weights", 10**30, "'points[0].memory_bytes.weights' is an integer of 31 digits"),
             ("points.0.throughput", float("nan"), "'points[0].throughput' is nan (NaN or infinite)")]
    for path, value, message in cases:
        saved = _write(tmp_path, _set(sweep, path, value), "sweep.json")
        assert main(["report", str(saved), "--csv"]) == 2
        err = capsys.readouterr().err
        assert message in err and err.startswith("tbd: error: ") and err.count("\n") == 1, err
    runs = FIXTURES / "runs"
    saved = tmp_path / "ab.json"
    assert main(["compare", str(runs / "resnet50-test-cpu-b8-threads1"), str(runs / "resnet50-test-cpu-b8-threads2"),
                 "--out", str(saved)]) == 0
    comparison = json.loads(saved.read_text())
    capsys.readouterr()
    for path, value, message in [("metrics.0.values.0", 10**400, "'metrics[0].values[0]' is an integer of 401"),
                                 ("runs.0.batch", 2**40, "'runs[0].batch' is 1.09951e+12, outside [0, 1.67772e+07]"),
                                 ("notes", ["n"] * 2000, "'notes' holds 2,000 items, more than 1,000")]:
        _write(tmp_path, _set(comparison, path, value), "ab.json")
        assert main(["report", str(saved), "--csv"]) == 2
        err = capsys.readouterr().err
        assert message in err and err.startswith("tbd: error: ") and err.count("\n") == 1, err
