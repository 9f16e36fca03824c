"""Property: a mutated profile.json loads as a valid Profile that renders cleanly, or fails with ResultFormatError.

The starting point is the real profile `tbd analyze tests/fixtures/kineto_cuda_synthetic.json
--sm-clock-mhz 1410 --json X` writes. Each example replaces up to three of its values (any key,
at any depth) with a hostile one, or deletes the key, writes the file (Python's json writes
NaN and Infinity tokens as it reads them) and loads it with `tbd.cli.run_analysis.load_profile`. Either
the loader refuses it with a ResultFormatError whose message names a key of the mutated path, or
the Profile renders (`render_profile`, `render_kernel_report`) with no nan/inf figure and no control
character, and round-trips through `Profile.from_dict`.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from outcomes import profile_problem, text_problem
from testpaths import FIXTURES

from tbd.cli import main as cli
from tbd.cli.run_analysis import load_profile
from tbd.core.errors import ResultFormatError
from tbd.reports.kernels.tables import render_kernel_report
from tbd.reports.terminal import render_profile

_DIR = Path(tempfile.mkdtemp(prefix="tbd-fuzz-profile-"))
_DELETE = object()
_HOSTILE = st.one_of(
    st.sampled_from([None, True, False, -1, 0, 1, 250, 100.5, -0.5, 1e308, -1e308, 2**70, "", "x", "\x1b[2J",
                     "\ud800", [], {}, [1, "a"], {"a": -1}, float("nan"), float("inf"), float("-inf"), _DELETE]),
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**64), 2**64), st.text(max_size=8))


@pytest.fixture(scope="module")
def analyzed() -> dict:
    """The profile.json `tbd analyze` writes for the synthetic CUDA fixture."""
    out = _DIR / "profile.json"
    out.unlink(missing_ok=True)
    with contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(["analyze", str(FIXTURES / "kineto_cuda_synthetic.json"), "--sm-clock-mhz", "1410",
                         "--json", str(out)])
    assert code == 0
    return json.loads(out.read_text())


def _paths(value, prefix=()) -> list[tuple]:
    """Every key path in a JSON value (objects and lists), the root excluded."""
    out = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        out.append(prefix + (key,))
        out += _paths(child, prefix + (key,))
    return out


def _mutated(data: dict, path: tuple, value) -> dict:
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    if value is _DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = copy.deepcopy(value)
    return data


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(choices=st.lists(st.tuples(st.integers(0, 10**6), _HOSTILE), min_size=1, max_size=3))
def test_mutated_profile_loads_valid_or_fails_naming_the_key(analyzed, choices):
    data = copy.deepcopy(analyzed)
    touched = []
    for pick, value in choices:
        paths = _paths(data)
        path = paths[pick % len(paths)]
        touched.append(path)
        data = _mutated(data, path, value)
    target = _DIR / "mutated.json"
    target.write_text(json.dumps(data), encoding="utf-8", errors="surrogatepass")
    try:
        profile = load_profile(target)
    except ResultFormatError as exc:
        message = str(exc)
        named = {str(p[0]) for p in touched} | {"JSON", "schema", "status"}
        assert any(word in message for word in named), message
        assert "\n" not in exc.one_line()
        return
    assert profile_problem(profile) is None, profile_problem(profile)
    assert text_problem(render_profile(profile, width=100)) is None
    assert text_problem(render_kernel_report(profile, width=100)) is None
