"""`tbd profile MODEL --framework tensorflow` end to end: the runner child runs in TensorFlow's own
interpreter (.venv-tensorflow) and the parent reads the trace it converted from TF's XSpace."""

import json

import pytest

from tbd import frameworks
from tbd.cli import main
from tbd.errors import FrameworkMissingError

try:
    frameworks.runtime("tensorflow")
except FrameworkMissingError as exc:  # `make test` builds .venv-tensorflow; a bare checkout may not have it
    pytest.skip(f"no TensorFlow runtime: {exc.one_line()}", allow_module_level=True)

WARMUP, ITERS, TRACE = 2, 4, 2


@pytest.fixture(scope="module", params=[("resnet50", 2), ("seq2seq", 4)])
def run(request, tmp_path_factory):
    model, batch = request.param
    out = tmp_path_factory.mktemp(f"tf-{model}") / "run"
    code = main(["profile", model, "--framework", "tensorflow", "--size", "test", "--batch", str(batch),
                 "--warmup", str(WARMUP), "--iterations", str(ITERS), "--trace-iterations", str(TRACE),
                 "--out", str(out), "--quiet"])
    assert code == 0, (out / "workload.log").read_text() if (out / "workload.log").exists() else model
    return model, batch, out, json.loads((out / "profile.json").read_text())


def test_contract_by_value(run):
    model, batch, out, p = run
    assert p["spec"]["framework"] == "tensorflow" and p["status"] == "complete"
    log = json.loads((out / "iterations.json").read_text())
    assert p["metrics"]["throughput"]["value"] == pytest.approx(batch * ITERS / (log["timing_window_ns"] / 1e9))
    m = p["metrics"]
    assert m["gpu_busy_pct"]["value"] is None and m["gpu_busy_pct"]["reason"]
    cpu = m["cpu_util_pct"]
    assert (cpu["value"] is None and "ticks" in cpu["reason"]) or 0 < cpu["value"] <= 100
    assert 0 < m["flop_util_pct"]["value"] < 100 and m["flop_util_pct"]["flops"] > 0
    assert p["iterations"]["trace_window"] == [WARMUP + ITERS + 1, WARMUP + ITERS + TRACE]
    assert p["kernels"] and p["environment"]["versions"].get("tensorflow")


def test_memory_says_plainly_what_tensorflow_cannot_measure_on_the_cpu(run):
    _, _, _, p = run
    mem = p["metrics"]["memory_bytes"]
    assert mem["weights"] >= mem["gradients"] > 0 and mem["dynamic"] > 0
    for cat in ("feature_maps", "workspace", "allocator_peak"):
        assert mem[cat] is None and mem["reasons"][cat]
