"""`tbd profile MODEL --framework mxnet` end to end: the runner child runs in MXNet's own interpreter
(.venv-mxnet: MXNet 1.9 needs numpy < 1.24) and the parent reads what it wrote."""

import json

import pytest

from tbd import frameworks
from tbd.cli import main
from tbd.errors import FrameworkMissingError

try:
    frameworks.runtime("mxnet")
except FrameworkMissingError as exc:  # `make test` builds .venv-mxnet; a bare checkout may not have it
    pytest.skip(f"no MXNet runtime: {exc.one_line()}", allow_module_level=True)

WARMUP, ITERS, TRACE = 2, 4, 2


@pytest.fixture(scope="module", params=[("seq2seq", 4), ("resnet50", 2)])
def run(request, tmp_path_factory):
    model, batch = request.param
    out = tmp_path_factory.mktemp(f"mx-{model}") / "run"
    code = main(["profile", model, "--framework", "mxnet", "--size", "test", "--batch", str(batch),
                 "--warmup", str(WARMUP), "--iterations", str(ITERS), "--trace-iterations", str(TRACE),
                 "--out", str(out), "--quiet"])
    assert code == 0, (out / "workload.log").read_text() if (out / "workload.log").exists() else model
    return model, batch, out, json.loads((out / "profile.json").read_text())


def test_contract_by_value(run):
    model, batch, out, p = run
    assert p["spec"]["framework"] == "mxnet" and p["status"] == "complete"
    log = json.loads((out / "iterations.json").read_text())
    tp = p["metrics"]["throughput"]
    assert tp["value"] == pytest.approx(batch * ITERS / (log["timing_window_ns"] / 1e9))
    m = p["metrics"]
    assert m["gpu_busy_pct"]["value"] is None and m["gpu_busy_pct"]["reason"]
    cpu = m["cpu_util_pct"]
    # test-size windows can be shorter than the counters' 10 ticks: then null with that reason
    assert (cpu["value"] is None and "ticks" in cpu["reason"]) or 0 < cpu["value"] <= 100
    assert 0 < m["flop_util_pct"]["value"] < 100 and m["flop_util_pct"]["flops"] > 0
    assert p["iterations"]["trace_window"] == [WARMUP + ITERS + 1, WARMUP + ITERS + TRACE]
    assert p["kernels"] and p["environment"]["versions"].get("mxnet") == "1.9.1"


def test_memory_says_plainly_what_mxnet_cannot_measure(run):
    _, _, out, p = run
    mem = p["metrics"]["memory_bytes"]
    records = json.loads((out / "raw" / "memory.json").read_text())
    # weights: every parameter array (BatchNorm's running statistics too, grad_req 'null');
    # gradients: the arrays of the trainable ones
    assert mem["weights"] >= mem["gradients"] > 0
    assert mem["feature_maps"] is None and "MXNet 1.9" in mem["reasons"]["feature_maps"]
    assert mem["workspace"] is None and mem["reasons"]["workspace"]
    assert sum(v for v in mem["at_peak"].values() if v is not None) == mem["allocator_peak"]
    assert records  # the hook wrote its exact array sizes
