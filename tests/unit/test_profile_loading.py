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

from tbd.cli.run_analysis import load_profile, profile_from_trace
from tbd.core.errors import ResultFormatError
from tbd.core.profile_result import Profile
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
