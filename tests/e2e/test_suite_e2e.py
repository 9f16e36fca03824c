"""Every registered PyTorch workload, profiled end to end at test size: each metric of the contract
filled or null with a reason, checked by values that would catch a wrong unit."""

import importlib.util
import json

import numpy as np
import pytest

from tbd.cli import registry
from tbd.cli.main import main

BATCH = {"resnet50": 2, "resnet101": 2, "resnet152": 2, "inception3": 2, "seq2seq": 4, "transformer": 4,
         "faster_rcnn": 1, "deepspeech2": 2, "wgan": 2, "a3c": 5}
WARMUP, ITERS, TRACE = 2, 3, 1
MODELS = [m for m, info in registry.MODELS.items()
          if importlib.util.find_spec(info.implementations["pytorch"]) is not None]


@pytest.fixture(scope="module", params=MODELS)
def run(request, tmp_path_factory):
    model = request.param
    out = tmp_path_factory.mktemp(model) / "run"
    code = main(["profile", model, "--size", "test", "--batch", str(BATCH[model]), "--device", "cpu",
                 "--threads", "1", "--warmup", str(WARMUP), "--iterations", str(ITERS),
                 "--trace-iterations", str(TRACE), "--repeat", "1", "--window-seconds", "0", "--out", str(out),
                 "--quiet"])
    assert code == 0, (out / "workload.log").read_text() if (out / "workload.log").exists() else model
    return model, out, json.loads((out / "profile.json").read_text())


def test_throughput_in_the_models_unit(run):
    model, out, p = run
    tp = p["metrics"]["throughput"]
    assert tp["unit"] == registry.MODELS[model].throughput_unit and tp["value"] > 0
    log = json.loads((out / "iterations.json").read_text())
    window_s = log["timing_window_ns"] / 1e9
    workload = json.loads((out / "raw" / "workload.json").read_text())
    if log.get("timing_window_samples") is not None:  # several workers (A3C) count their own frames
        assert tp["value"] == pytest.approx(log["timing_window_samples"] / window_s)
        # all workers together do at least the hook's own worker's frames
        assert log["timing_window_samples"] >= workload["samples_per_step"] * ITERS
    else:
        assert tp["value"] == pytest.approx(workload["samples_per_step"] * ITERS / window_s)
    if tp["unit"] == "audio_s/s":
        # seconds of audio per utterance: a wrong unit (utterances/s) would give 1
        per_utt = tp["value"] / tp["also"]["utterances/s"]
        assert 0.5 < per_utt < 30


def test_every_metric_filled_or_null_with_reason(run):
    model, _, p = run
    m = p["metrics"]
    for key in ("gpu_busy_pct", "gpu_busy_nvml_pct"):
        assert m[key]["value"] is None and "CUDA" in m[key]["reason"]
    cpu = m["cpu_util_pct"]
    # test-size windows can be shorter than the counters' 10 ticks: then null with that reason
    assert (cpu["value"] is None and "ticks" in cpu["reason"]) or 0 < cpu["value"] <= 100
    fu = m["flop_util_pct"]
    assert 0 < fu["value"] < 100 and fu["flops"] > 0 and fu["peak_flops"] > 1e9
    assert 0 <= fu["unattributed_busy_pct"] < 50
    mem = m["memory_bytes"]
    for cat in ("weights", "gradients", "feature_maps", "workspace", "dynamic"):
        assert mem[cat] is not None or mem["reasons"].get(cat), cat
    assert mem["weights"] > 0 and mem["gradients"] > 0 and mem["feature_maps"] > 0
    assert sum(v for v in mem["at_peak"].values() if v is not None) == mem["allocator_peak"]


def test_weights_are_the_parameter_bytes(run):
    model, _, p = run
    build = registry.load_builder(model, "pytorch")
    wl = build(batch=BATCH[model], device="cpu", size="test", seed=0)
    try:
        params = {q.data_ptr(): q.numel() * q.element_size() for q in wl.model.parameters()}
    finally:
        if wl.close is not None:
            wl.close()
    assert p["metrics"]["memory_bytes"]["weights"] == sum(params.values())


def test_kernel_tables_and_windows(run):
    _, _, p = run
    it = p["iterations"]
    assert it["timing_window"] == [WARMUP, WARMUP + ITERS - 1]
    assert it["trace_window"] == [WARMUP + ITERS + 1, WARMUP + ITERS + TRACE]
    rows = p["kernels"]
    assert rows and 0 < sum(r["time_share_pct"] for r in rows) <= 100 + 1e-6
    assert all(np.isfinite(r["time_s"]) and r["time_s"] >= 0 for r in rows)
