"""The public API profiles a user's own step; the README's example runs as written and prints its warnings."""

import json
import re

import pytest
import torch
from testpaths import ROOT

import tbd

README = ROOT / "README.md"


def test_readme_example_runs(tmp_path, monkeypatch, capsys):
    code = re.search(r"```python\n(import torch, tbd.*?)```", README.read_text(), re.S).group(1)
    code = code.replace('out="runs/my-mlp"', f'out="{tmp_path / "my-mlp"}"')
    code = code.replace("samples_per_step=64,", "samples_per_step=64, warmup=2, iterations=4, trace_iterations=1,")
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - the README's own example
    profile = scope["profile"]
    assert profile.status == "complete"
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"throughput: {profile.metrics.throughput.value:,.1f} samples/s"
    assert printed[1].startswith("FLOP utilization: ") and printed[1].endswith((" %", ")"))
    # the example reads profile.quality: an UNRELIABLE run prints each reason, a reliable one nothing
    quality = profile.quality
    assert quality is not None and quality.reliable == (quality.warnings == [])
    expected = [] if quality.reliable else ["UNRELIABLE:", *(f"  {w}" for w in quality.warnings)]
    assert "\n".join(printed[2:]) == "\n".join(expected)
    # warmup=2 is given, so stability is not checked (None): the example must not call it NOT STABLE
    assert profile.iterations.stable is None and not any("NOT STABLE" in line for line in printed)
    saved = json.loads((tmp_path / "my-mlp" / "profile.json").read_text())
    assert saved["metrics"]["throughput"]["value"] == pytest.approx(profile.metrics.throughput.value)
    model = scope["model"]
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert profile.metrics.memory_bytes.weights == param_bytes
    assert profile.metrics.memory_bytes.gradients == param_bytes


def test_api_without_model_gives_reasons(tmp_path):
    w = torch.nn.Linear(8, 2)
    x = torch.randn(4, 8)

    def step():
        w.zero_grad()
        w(x).sum().backward()

    profile = tbd.profile_step(step, samples_per_step=4, warmup=1, iterations=3, trace_iterations=1)
    mem = profile.metrics.memory_bytes
    assert mem.weights is None and "model" in mem.reasons["weights"]
    assert profile.metrics.throughput.value > 0
