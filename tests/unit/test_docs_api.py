"""The public API shows real signatures and docstrings: `help(tbd.profile_step)` is a page to read.

tbd/__init__.py resolves the API on first use (the framework venvs import `tbd` without its
dependencies), so its functions repeat tbd.cli.api's signature; these tests keep the two equal and
every parameter documented (issue 28: help() showed `(*args, **kwargs)`).
"""

from __future__ import annotations

import inspect
import pydoc
import re
from types import SimpleNamespace

import pytest
from testpaths import ROOT

import tbd
import tbd.cli.api
import tbd.cli.results
from tbd.core.profile_result import Profile

PUBLIC_FUNCTIONS = ["profile_step", "load_profile"]


def _documented(doc: str) -> set[str]:
    """Parameter names an `Args:` section documents (`name:` or `a, b:` at the start of an entry)."""
    args = doc.split("Args:", 1)[1].split("Returns:", 1)[0]
    return {n.strip() for entry in re.findall(r"^ {4}([\w, ]+):", args, re.M) for n in entry.split(",")}


def test_public_surface():
    assert sorted(tbd.__all__) == sorted(["Profile", "__version__", *PUBLIC_FUNCTIONS])
    assert tbd.Profile is Profile and "Profile" in dir(tbd)
    with pytest.raises(AttributeError):
        tbd.not_a_name  # noqa: B018 - the module's __getattr__ must still refuse unknown names


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_public_functions_have_real_signatures(name):
    params = inspect.signature(getattr(tbd, name)).parameters
    assert not any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params.values()), name
    assert params, name


def test_profile_step_signature_is_the_apis():
    ours, api = inspect.signature(tbd.profile_step), inspect.signature(tbd.cli.api.profile_step)
    assert ours == api  # names, kinds, defaults and annotations
    assert list(ours.parameters)[:2] == ["step", "samples_per_step"]
    assert ours.parameters["samples_per_step"].kind is inspect.Parameter.KEYWORD_ONLY
    assert ours.parameters["samples_per_step"].default is inspect.Parameter.empty
    assert ours.parameters["iterations"].default == 20 and ours.parameters["trace_iterations"].default == 3


def test_load_profile_signature_is_the_loaders():
    assert list(inspect.signature(tbd.load_profile).parameters) == \
        list(inspect.signature(tbd.cli.results.profile_at).parameters) == ["path"]


@pytest.mark.parametrize("function", [tbd.profile_step, tbd.cli.api.profile_step, tbd.load_profile])
def test_every_parameter_is_documented(function):
    doc = inspect.getdoc(function)
    params = set(inspect.signature(function).parameters)
    assert _documented(doc) == params, f"{function.__module__}.{function.__name__}: {_documented(doc) ^ params}"
    assert "Returns:" in doc and "Raises:" in doc


def test_help_shows_the_parameters():
    text = pydoc.render_doc(tbd.profile_step, renderer=pydoc.plaintext)
    assert "*args" not in text and "samples_per_step: 'int'" in text and "quality" in text
    module = pydoc.render_doc(tbd, renderer=pydoc.plaintext)
    assert "profile_step(step" in module and "load_profile(path" in module


def _readme_example_tail() -> str:
    """The README example's reading part: from `tp, flop = ...` to the end of the block."""
    code = re.search(r"```python\n(import torch, tbd.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)[1]
    return code[code.index("tp, flop = "):]


@pytest.mark.parametrize("reliable", [True, False])
def test_readme_example_prints_a_warning_when_unreliable(reliable, capsys):
    figure = SimpleNamespace
    warnings = [] if reliable else ["another load used 1.50 cores of 2", "the GEMM ceiling moved 40 %"]
    profile = SimpleNamespace(
        metrics=SimpleNamespace(throughput=figure(value=1234.56, unit="samples/s"),
                                flop_util_pct=figure(value=None, reason="no peak")),
        quality=SimpleNamespace(reliable=reliable, warnings=warnings),
        iterations=SimpleNamespace(stable=False))
    exec(_readme_example_tail(), {"profile": profile})  # noqa: S102 - the README's own example
    expected = ["throughput: 1,234.6 samples/s", "FLOP utilization: n/a (no peak)"]
    if not reliable:
        expected += ["UNRELIABLE:", "  another load used 1.50 cores of 2", "  the GEMM ceiling moved 40 %"]
    expected.append("NOT STABLE: iteration times never settled during warm-up; every figure is flagged")
    assert capsys.readouterr().out.splitlines() == expected
