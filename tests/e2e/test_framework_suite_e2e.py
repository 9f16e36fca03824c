"""Every registered MXNet and TensorFlow workload, profiled end to end at test size through the CLI:
the runner child runs in the framework's own interpreter (.venv-mxnet, .venv-tensorflow) and the
parent reads what it wrote. Each metric of the contract is checked by value or is null with a
reason; weights and gradients equal the framework's own parameter sizes, summed in a separate
process of that framework."""

from __future__ import annotations

import importlib.util
import json
import subprocess

import numpy as np
import pytest

from tbd.cli import frameworks, registry
from tbd.cli.main import main
from tbd.core.errors import FrameworkMissingError

BATCH = {"resnet50": 2, "inception3": 2, "seq2seq": 4, "transformer": 4, "faster_rcnn": 1, "deepspeech2": 2,
         "wgan": 2, "a3c": 4}
WARMUP, ITERS, TRACE = 2, 3, 2
DEVICE = {"mxnet": "mx.cpu()", "tensorflow": '"/CPU:0"'}
VERSION = {"mxnet": "mxnet", "tensorflow": "tensorflow"}


def _available(fw: str) -> bool:
    try:
        frameworks.runtime(fw)
    except FrameworkMissingError:  # `make test` builds both venvs; a bare checkout may not have them
        return False
    return True


PAIRS = [pytest.param((fw, m), marks=pytest.mark.skipif(not _available(fw), reason=f"no {fw} runtime"),
                      id=f"{fw}-{m}")
         for fw in ("mxnet", "tensorflow") for m, info in registry.MODELS.items()
         if fw in info.implementations and importlib.util.find_spec(info.implementations[fw]) is not None]

# Sums the parameter bytes of each test-size workload in the framework's own interpreter, by the
# framework's own arrays: every parameter/variable (weights) and those that get gradients.
_PARAM_BYTES = {
    "mxnet": """
import json, sys, mxnet as mx
from tbd.cli.registry import load_builder
name, batch = sys.argv[1], int(sys.argv[2])
w = load_builder(name, "mxnet")(batch, mx.cpu(), "test", 0)
params = list(w.model.collect_params().values())
print(json.dumps([sum(p.data().asnumpy().nbytes for p in params),
                  sum(p.grad().asnumpy().nbytes for p in params if p.grad_req != "null")]))
w.close and w.close()
""",
    "tensorflow": """
import json, sys
from tbd.cli.registry import load_builder
name, batch = sys.argv[1], int(sys.argv[2])
w = load_builder(name, "tensorflow")(batch, "/CPU:0", "test", 0)
models = w.model if isinstance(w.model, (list, tuple)) else [w.model]
every = {id(v): v for m in models for v in m.weights}
trained = {id(v): v for m in models for v in m.trainable_variables}
print(json.dumps([sum(v.numpy().nbytes for v in every.values()), sum(v.numpy().nbytes for v in trained.values())]))
w.close and w.close()
""",
}


@pytest.fixture(scope="module", params=PAIRS)
def run(request, tmp_path_factory):
    fw, model = request.param
    out = tmp_path_factory.mktemp(f"{fw}-{model}") / "run"
    code = main(["profile", model, "--framework", fw, "--size", "test", "--batch", str(BATCH[model]),
                 "--warmup", str(WARMUP), "--iterations", str(ITERS), "--trace-iterations", str(TRACE),
                 "--repeat", "1", "--window-seconds", "0", "--out", str(out), "--quiet"])
    assert code == 0, (out / "workload.log").read_text() if (out / "workload.log").exists() else model
    return fw, model, out, json.loads((out / "profile.json").read_text())


def test_throughput_in_the_models_unit(run):
    fw, model, out, p = run
    assert p["spec"]["framework"] == fw and p["status"] == "complete"
    tp = p["metrics"]["throughput"]
    assert tp["unit"] == registry.MODELS[model].throughput_unit and tp["value"] > 0
    log = json.loads((out / "iterations.json").read_text())
    workload = json.loads((out / "raw" / "workload.json").read_text())
    assert tp["value"] == pytest.approx(workload["samples_per_step"] * ITERS / (log["timing_window_ns"] / 1e9))
    if tp["unit"] == "audio_s/s":  # seconds of audio per utterance: a wrong unit would give 1
        assert 0.5 < tp["value"] / tp["also"]["utterances/s"] < 30
    assert p["environment"]["versions"].get(VERSION[fw])


def test_every_metric_filled_or_null_with_reason(run):
    fw, model, _, p = run
    m = p["metrics"]
    for key in ("gpu_busy_pct", "gpu_busy_nvml_pct"):
        assert m[key]["value"] is None and "CUDA" in m[key]["reason"]
    cpu = m["cpu_util_pct"]
    # test-size windows can be shorter than the counters' 10 ticks: then null with that reason
    assert (cpu["value"] is None and "ticks" in cpu["reason"]) or 0 < cpu["value"] <= 100
    fu = m["flop_util_pct"]
    assert 0 < fu["value"] < 100 and fu["flops"] > 0 and fu["peak_flops"] > 1e9
    mem = m["memory_bytes"]
    for cat in ("weights", "gradients", "feature_maps", "workspace", "dynamic"):
        assert mem[cat] is not None or mem["reasons"].get(cat), cat
    # Neither framework's CPU trace tells what an allocation holds: workspace is said, not guessed. Feature
    # maps are derived from the graphs (analytic), labelled so, and never part of the measured at_peak;
    # an RNN's reserve space (MXNet) or a while loop's TensorLists (TF seq2seq) make them null, said.
    assert mem["workspace"] is None
    assert mem["at_peak"].get("feature_maps") is None
    if mem["feature_maps"] is None:
        assert "feature_maps" not in mem.get("sources", {})
    else:
        assert mem["feature_maps"] > 0 and mem["sources"]["feature_maps"] == "analytic"
        assert mem["reasons"]["feature_maps"].startswith("analytic")
    if model in ("resnet50", "inception3", "faster_rcnn"):  # graphs without RNN operators or while loops
        assert mem["feature_maps"] is not None, mem["reasons"]["feature_maps"]
    assert mem["dynamic"] > 0  # optimizer state and the input pool, exact


def test_weights_and_gradients_are_the_frameworks_parameter_bytes(run):
    fw, model, _, p = run
    script = _PARAM_BYTES[fw]
    done = subprocess.run([frameworks.runtime(fw).python, "-c", script, model, str(BATCH[model])],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    weights, gradients = json.loads(done.stdout.strip().splitlines()[-1])
    mem = p["metrics"]["memory_bytes"]
    assert (mem["weights"], mem["gradients"]) == (weights, gradients)


def test_kernel_tables_and_windows(run):
    _, _, _, p = run
    it = p["iterations"]
    assert it["timing_window"] == [WARMUP, WARMUP + ITERS - 1]
    assert it["trace_window"] == [WARMUP + ITERS + 1, WARMUP + ITERS + TRACE]
    rows = p["kernels"]
    assert rows and 0 < sum(r["time_share_pct"] for r in rows) <= 100 + 1e-6
    assert all(np.isfinite(r["time_s"]) and r["time_s"] >= 0 for r in rows)


def test_trace_files_are_where_perfetto_and_tensorboard_look(run):
    """The Chrome trace keeps the plain name (not a Kineto trace: TensorBoard's PyTorch plugin would fail on
    it); a TensorFlow run also keeps TF's XSpace where TensorBoard's profile plugin reads it."""
    fw, _, out, _ = run
    assert (out / "trace.json.gz").is_file() and not (out / "trace.pt.trace.json.gz").exists()
    xplanes = list(out.glob("plugins/profile/*/*.xplane.pb"))
    assert len(xplanes) == (1 if fw == "tensorflow" else 0)
    if xplanes:
        assert xplanes[0].stat().st_size > 0


def test_tbd_analyze_reads_the_runs_own_trace(run, tmp_path):
    """`tbd analyze RUN/trace.json.gz` of an MXNet or TensorFlow run: analysed as that run, not as Kineto."""
    fw, _, out, p = run
    again = tmp_path / "again.json"
    assert main(["analyze", str(out / "trace.json.gz"), "--json", str(again)]) == 0
    q = json.loads(again.read_text())
    assert q["spec"]["framework"] == fw
    assert q["metrics"]["flop_util_pct"]["flops"] == p["metrics"]["flop_util_pct"]["flops"]
    assert [r["name"] for r in q["kernels"]] == [r["name"] for r in p["kernels"]]
