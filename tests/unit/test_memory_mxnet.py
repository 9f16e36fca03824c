"""MXNet memory categories from hand-built hook records and storage-counter events (no mxnet)."""

from __future__ import annotations

import numpy as np
import pytest

from tbd.analysis.memory.mxnet import RECORDS_SCHEMA, memory_breakdown
from tbd.core.errors import ResultFormatError
from tbd.core.records import KernelTable, MemoryEvents, OpTable, TraceRecords


def _records(**over):
    its = [{"step": 1, "weights_bytes": 4000, "gradients_bytes": 3000, "optimizer_state_bytes": 3000,
            "input_bytes": 500},
           {"step": 2, "weights_bytes": 4000, "gradients_bytes": 3000, "optimizer_state_bytes": 3200,
            "input_bytes": 500}]
    return {"schema": RECORDS_SCHEMA, "device_index": -1, "iterations": its, "reasons": {}, **over}


def _trace(ts, totals, device=-1, window=(100, 200)):
    n = len(ts)
    empty = np.array([], dtype=object)
    mem = MemoryEvents(np.array(ts, dtype=np.int64), np.zeros(n, dtype=np.uint64),
                       np.diff(np.array([0, *totals], dtype=np.int64)), np.array(totals, dtype=np.int64),
                       np.full(n, device, dtype=np.int64))
    ops = OpTable(empty, np.array([], dtype=np.int64), np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    return TraceRecords("t", "cpu", KernelTable.empty(), np.array([], dtype=np.int64), np.array([], dtype=np.int64),
                        (), window[0], window[1], ops, mem)


def test_exact_categories_and_split_at_peak():
    # Counter: 64 B live at the window start (left over), rises to 964 inside, 5000 after the window.
    m = memory_breakdown(_records(), _trace([50, 120, 150, 180, 250], [64, 564, 964, 64, 5000]))
    assert (m.weights, m.gradients) == (4000, 3000)
    assert m.dynamic == 3200 + 500  # optimizer state (max over iterations) + inputs
    assert m.feature_maps is None and m.workspace is None
    assert "without addresses" in m.reasons["feature_maps"] and "without addresses" in m.reasons["workspace"]
    assert m.allocator_peak == (4000 + 3000 + 3700) + (964 - 64)
    assert m.at_peak == {"weights": 4000, "gradients": 3000, "feature_maps": None, "workspace": None,
                         "dynamic": 3700, "unattributed": 964 - 64}
    assert sum(v for v in m.at_peak.values() if v is not None) == m.allocator_peak
    assert "64 B" in m.reasons["at_peak"]


def test_other_devices_counters_are_ignored():
    rec = _records(device_index=0)
    t = _trace([120, 150], [100, 300], device=0)
    assert memory_breakdown(rec, t).at_peak["unattributed"] == 300
    assert memory_breakdown(rec, _trace([120], [999], device=-1)).allocator_peak is None


def test_no_trace_or_no_counters_give_reasons():
    m = memory_breakdown(_records(), None)
    assert m.weights == 4000 and m.allocator_peak is None and m.reasons["allocator_peak"] == "no trace"
    assert all(v is None for v in m.at_peak.values())
    m = memory_breakdown(_records(), _trace([10], [5]))  # counter only before the window
    assert m.allocator_peak is None and "in the trace window" in m.reasons["at_peak"]


def test_without_records_only_reasons():
    m = memory_breakdown(None, _trace([120], [100]))
    assert (m.weights, m.gradients, m.dynamic, m.allocator_peak) == (None, None, None, None)
    for cat in ("weights", "gradients", "feature_maps", "workspace", "dynamic", "at_peak"):
        assert m.reasons[cat]


def test_missing_optimizer_is_left_out_of_dynamic_with_reason():
    rec = _records(reasons={"optimizer_state": "no gluon.Trainer given"})
    for it in rec["iterations"]:
        it["optimizer_state_bytes"] = None
    m = memory_breakdown(rec, None)
    assert m.dynamic == 500
    assert "no gluon.Trainer given" in m.reasons["dynamic"]


def test_malformed_records_raise():
    with pytest.raises(ResultFormatError):
        memory_breakdown({"schema": "other"}, None)
    with pytest.raises(ResultFormatError):
        memory_breakdown(_records(iterations=[{"step": 1, "weights_bytes": -5}]), None)
    with pytest.raises(ResultFormatError):
        memory_breakdown(_records(iterations="no"), None)


def test_hook_snapshot_counts_exact_array_bytes():
    """Runs only where mxnet imports (.venv-mxnet): the hook's byte counts on a tiny Dense net."""
    mx = pytest.importorskip("mxnet")
    from mxnet import autograd, gluon

    from tbd.profilers.mxnet.hook import memory_snapshot

    net = gluon.nn.Dense(3, in_units=5)
    net.initialize(ctx=mx.cpu())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    x = mx.nd.ones((2, 5))
    with autograd.record():
        loss = net(x).sum()
    loss.backward()
    trainer.step(2)
    snap = memory_snapshot(net, trainer, lambda: [x])
    params = 3 * 5 + 3  # weight [3, 5] + bias [3], float32
    assert snap == {"weights_bytes": params * 4, "gradients_bytes": params * 4,
                    "optimizer_state_bytes": params * 4, "input_bytes": 2 * 5 * 4}  # momentum per parameter


def test_hook_caveat_on_static_alloc_is_passed_on():
    rec = _records(reasons={"at_peak": "1 hybridized block(s) use static_alloc: ..."})
    m = memory_breakdown(rec, _trace([120], [100]))
    assert m.allocator_peak == 4000 + 3000 + 3700 + 100
    assert "static_alloc" in m.reasons["at_peak"] and "static_alloc" in m.reasons["allocator_peak"]


# --- feature maps (analytic: profilers/mxnet/memory.py) ------------------------------------------------

def test_feature_maps_are_analytic_and_stay_out_of_at_peak():
    rec = _records()
    for it, fm in zip(rec["iterations"], (2336, 2400)):
        it["feature_maps_bytes"] = fm
    rec["reasons"]["feature_maps"] = "analytic: the forward outputs MXNet's gradient graph reads"
    m = memory_breakdown(rec, _trace([50, 120, 150, 180, 250], [64, 564, 964, 64, 5000]))
    assert m.feature_maps == 2400  # max over the traced steps
    assert m.reasons["feature_maps"].startswith("analytic")
    assert m.sources == {"weights": "measured", "gradients": "measured", "dynamic": "measured",
                         "feature_maps": "analytic", "allocator_peak": "measured", "at_peak": "measured"}
    # The analytic figure is not forced into the measured split: the parts still add up.
    assert m.at_peak["feature_maps"] is None and m.at_peak["unattributed"] == 964 - 64
    assert sum(v for v in m.at_peak.values() if v is not None) == m.allocator_peak
    assert "analytic" in m.reasons["at_peak"]
    assert m.workspace is None and m.reasons["workspace"]


def test_feature_maps_null_with_the_hooks_reason_or_absent_in_older_records():
    rec = _records(reasons={"feature_maps": "no hybridized block: MXNet builds no graph"})
    for it in rec["iterations"]:
        it["feature_maps_bytes"] = None
    m = memory_breakdown(rec, None)
    assert m.feature_maps is None and m.reasons["feature_maps"] == "no hybridized block: MXNet builds no graph"
    assert "feature_maps" not in m.sources
    m = memory_breakdown(_records(), None)  # raw/memory.json written before feature maps were recorded
    assert m.feature_maps is None and "predate" in m.reasons["feature_maps"]
    with pytest.raises(ResultFormatError):
        bad = _records()
        bad["iterations"][0]["feature_maps_bytes"] = -1
        memory_breakdown(bad, None)


# A real MXNet 1.9.1 executor debug_str (cut down) of Conv -> BatchNorm -> relu -> Flatten -> Dense: the
# parser and the keep rule run on it without mxnet.
_DEBUG_STR = """Symbol Outputs:
\toutput[0]=dense0_fwd(0)
Variable:data
--------------------
Op:Convolution, Name=conv0_fwd
Inputs:
\targ[0]=data(0) version=0
\targ[1]=conv0_weight(0) version=0
Attrs:
\tkernel=(3, 3)
--------------------
Op:_identity_with_attr_like_rhs, Name=_head_grad_0_id
Inputs:
\targ[0]=_head_grad_0(0) version=0
\targ[1]=dense0_fwd(0)
--------------------
Op:_backward_FullyConnected, Name=dense0_fwd_backward
Inputs:
\targ[0]=_head_grad_0_id(0)
\targ[1]=flatten0(0)
\targ[2]=dense0_weight(0) version=0
Control deps:
\tcdep[0]=dense0_fwd
--------------------
Op:_backward_Activation, Name=relu0_fwd_backward
Inputs:
\targ[0]=dense0_fwd_backward(0)
\targ[1]=relu0_fwd(0)
--------------------
Op:_backward_BatchNorm, Name=batchnorm0_fwd_backward
Inputs:
\targ[0]=relu0_fwd_backward(0)
\targ[1]=batchnorm0_fwd(1)
\targ[2]=batchnorm0_fwd(2)
\targ[3]=conv0_fwd(0)
\targ[4]=batchnorm0_gamma(0) version=0
--------------------
Op:_backward_Convolution, Name=conv0_fwd_backward
Inputs:
\targ[0]=batchnorm0_fwd_backward(0)
\targ[1]=data(0) version=0
\targ[2]=conv0_weight(0) version=0
Total 0 MB allocated
"""
_NODES = [{"op": "null", "name": "data", "inputs": []}, {"op": "null", "name": "conv0_weight", "inputs": []},
          {"op": "Convolution", "name": "conv0_fwd", "inputs": [[0, 0, 0], [1, 0, 0]]},
          {"op": "null", "name": "batchnorm0_gamma", "inputs": []},
          {"op": "BatchNorm", "name": "batchnorm0_fwd", "inputs": [[2, 0, 0], [3, 0, 0]]},
          {"op": "Activation", "name": "relu0_fwd", "inputs": [[4, 0, 0]]},
          {"op": "Flatten", "name": "flatten0", "inputs": [[5, 0, 0]]},
          {"op": "null", "name": "dense0_weight", "inputs": []},
          {"op": "FullyConnected", "name": "dense0_fwd", "inputs": [[6, 0, 0], [7, 0, 0]]}]


def test_kept_entries_from_a_debug_str_by_hand():
    from tbd.profilers.mxnet.memory import backward_reads, feature_map_bytes, kept_entries

    forward = {n["name"] for n in _NODES if n["op"] != "null"}
    reads = backward_reads(_DEBUG_STR, forward)
    assert ("_backward_Convolution", 1, "data", 0) in reads and len(reads) == 2 + 3 + 2 + 5 + 3  # args of the 5 backward nodes
    kept = kept_entries(_NODES, reads)
    # data and weights are variables; dense0's output is read only for its shape (like_rhs); the
    # flatten is a view of relu0's output, which relu's backward keeps anyway: counted once.
    assert kept == {("conv0_fwd", 0), ("batchnorm0_fwd", 1), ("batchnorm0_fwd", 2), ("relu0_fwd", 0)}
    shapes = {"conv0_fwd_output": [2, 4, 6, 6], "batchnorm0_fwd_output": [2, 4, 6, 6],
              "relu0_fwd_output": [2, 4, 6, 6], "batchnorm0_gamma": [4]}
    got = feature_map_bytes(_NODES, kept, shapes, {k: "float32" for k in shapes})
    # conv out 2*4*6*6*4 = 1152, saved mean and var 2 * 4*4 = 32, relu out 1152
    assert got["bytes"] == 1152 + 32 + 1152 and got["left_out"] == []
    got = feature_map_bytes(_NODES, kept | {("relu0_fwd", 1)}, shapes, {k: "float32" for k in shapes})
    assert got["bytes"] == 2336 and got["left_out"] == ["relu0_fwd(1) (Activation)"]
    shapes["conv0_fwd_output"] = [2, 0, 6, 6]  # shape inference left a dimension unknown: null, not partial
    got = feature_map_bytes(_NODES, kept, shapes, {k: "float32" for k in shapes})
    assert got["bytes"] is None and "unknown" in got["reason"]


def _train_once(mx, net, x):
    from mxnet import autograd

    with autograd.record():
        loss = net(x).sum()
    loss.backward()
    mx.nd.waitall()


@pytest.mark.parametrize("with_bn", [False, True])
def test_hook_feature_maps_of_a_tiny_conv_fc_net_by_hand(with_bn):
    """Runs only where mxnet imports: conv 2->4 (3x3) [, BatchNorm], relu, Flatten, Dense(3) on a [2, 2, 8, 8] batch."""
    mx = pytest.importorskip("mxnet")
    from mxnet import gluon

    from tbd.profilers.mxnet.hook import add_feature_maps, memory_records
    from tbd.profilers.mxnet.memory import GraphCalls

    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(4, 3, in_channels=2), *([gluon.nn.BatchNorm(in_channels=4)] if with_bn else []),
            gluon.nn.Activation("relu"), gluon.nn.Flatten(), gluon.nn.Dense(3, in_units=4 * 6 * 6))
    net.initialize(ctx=mx.cpu())
    net.hybridize()
    x = mx.nd.ones((2, 2, 8, 8))
    _train_once(mx, net, x)  # builds the cached graph
    calls = GraphCalls([net], lambda: [x])
    with calls.step(7):
        _train_once(mx, net, x)
    calls.close()
    out = 2 * 4 * 6 * 6 * 4  # one [2, 4, 6, 6] float32 map: 1152 B
    # relu's backward keeps its output (the Flatten view of it is what Dense's backward reads: the
    # same buffer); without BN the conv output is not read by any backward (relu reads its own
    # output); with BN, BN's backward keeps its input (the conv output) and its saved mean and var.
    expected = out + (out + 2 * 4 * 4 if with_bn else 0)
    snaps = [{"step": 7}]
    reason = add_feature_maps(snaps, calls, mx, mx.cpu())
    assert snaps == [{"step": 7, "feature_maps_bytes": expected}]
    assert reason.startswith("analytic") and "leaves out" not in reason
    workload = type("W", (), {"model": net, "optimizer": None, "inputs": None})()
    from tbd.profilers.framework_hook import Device

    rec = memory_records(Device("cpu", -1, mx.cpu()), [{"step": 7, "weights_bytes": 1, "gradients_bytes": 1,
                                                        "optimizer_state_bytes": None, "input_bytes": None,
                                                        "feature_maps_bytes": expected}], workload, reason)
    m = memory_breakdown(rec, None)
    assert m.feature_maps == expected and m.sources["feature_maps"] == "analytic"


def _recount(mx, block, data_shape) -> int:
    """Independent recount of a hybridized block's kept forward outputs: every node's shape from MXNet's
    shape inference, listed layer by layer, and what each layer's backward reads as MXNet 1.9 defines it
    (FGradient of each operator), written out here."""
    import json

    _, out = block._cached_graph
    nodes = json.loads(out.tojson())["nodes"]
    internals = out.get_internals()
    _, shapes, _ = internals.infer_shape(data=data_shape)
    shape_of = dict(zip(internals.list_outputs(), shapes))
    arg_shape = dict(zip(out.list_arguments(), out.infer_shape(data=data_shape)[0]))
    kept: dict[str, int] = {}

    def keep(key: str, shape) -> None:
        kept[key] = int(np.prod(shape)) * 4  # float32

    def keep_input(node) -> None:  # the tensor a node reads as its first input, unless it is the batch
        src = nodes[node["inputs"][0][0]]
        if src["op"] != "null":
            keep(src["name"], shape_of[src["name"] + "_output"])

    for node in nodes:
        op, name = node["op"], node["name"]
        if op == "null" or op in ("elemwise_add", "_Plus", "broadcast_add"):  # add: its gradient reads nothing
            continue
        if op in ("Convolution", "FullyConnected"):  # dW = f(x, dy): the input
            keep_input(node)
        elif op == "BatchNorm":  # x, and the saved batch mean and variance ([C] each)
            keep_input(node)
            gamma = arg_shape[nodes[node["inputs"][1][0]]["name"]]
            keep(name + "#mean", gamma)
            keep(name + "#var", gamma)
        elif op in ("Activation", "relu"):  # relu's gradient reads its output
            keep(name, shape_of[name + "_output"])
        elif op == "Pooling":  # input and output (oneDNN's index workspace is scratch, left out)
            keep_input(node)
            keep(name, shape_of[name + "_output"])
        else:
            raise AssertionError(f"the recount has no rule for {op}")
    return sum(kept.values())


def test_resnet50_test_size_feature_maps_equal_an_independent_recount():
    """Runs only where mxnet imports: the hook's figure for one step of the test-size resnet50 at batch 4."""
    mx = pytest.importorskip("mxnet")
    from tbd.cli.registry import load_builder
    from tbd.profilers.mxnet.hook import add_feature_maps
    from tbd.profilers.mxnet.memory import GraphCalls

    batch = 4
    w = load_builder("resnet50", "mxnet")(batch, mx.cpu(), "test", 0)
    w.step()
    mx.nd.waitall()
    calls = GraphCalls([w.model, *w.aux_modules], w.inputs)
    with calls.step(3):
        w.step()
    mx.nd.waitall()
    calls.close()
    snaps = [{"step": 3}]
    reason = add_feature_maps(snaps, calls, mx, mx.cpu())
    model = _recount(mx, w.model, (batch, 3, 32, 32))
    loss = batch * 10 * 4  # the hybridized loss keeps its log_softmax output [N, classes]
    assert snaps[0]["feature_maps_bytes"] == model + loss
    # The recount's own total, as a regression guard: 91,648 B of maps per image (scales with the batch)
    # + each BatchNorm's saved mean and var, 2 x 4 B per channel over 1,208 BN channels (8 in the stem;
    # 8+8+32+32, 16+16+64+64, 32+32+128+128, 64+64+256+256 in the four one-block stages).
    assert model == batch * 91_648 + 2 * 4 * (8 + 80 + 160 + 320 + 640) == 376_256
    assert "resnet_pool0_fwd(1) (Pooling)" in reason  # the oneDNN pooling workspace, said


def test_profile_json_memory_sources_load_and_older_files_without_them():
    """Memory.sources round-trips through profile.json; a file written before it (no key, or null) loads as {}."""
    pytest.importorskip("msgspec")  # the trace reader's decoder: absent in the framework venvs
    import copy
    import dataclasses

    from testpaths import FIXTURES

    from tbd.cli.run_analysis import profile_from_trace
    from tbd.core.profile_result import Profile

    profile = profile_from_trace(FIXTURES / "kineto_cuda_synthetic.json", sm_clock_mhz=1410)
    labelled = dataclasses.replace(profile.metrics.memory_bytes, sources={"feature_maps": "analytic"})
    data = dataclasses.replace(profile, metrics=dataclasses.replace(profile.metrics, memory_bytes=labelled)).to_dict()
    assert Profile.from_dict(data).metrics.memory_bytes.sources == {"feature_maps": "analytic"}
    for old in (None, "absent"):
        d = copy.deepcopy(data)
        if old is None:
            d["metrics"]["memory_bytes"]["sources"] = None
        else:
            del d["metrics"]["memory_bytes"]["sources"]
        assert Profile.from_dict(d).metrics.memory_bytes.sources == {}
    d = copy.deepcopy(data)
    d["metrics"]["memory_bytes"]["sources"] = {"feature_maps": 3}
    with pytest.raises(ResultFormatError, match="memory_bytes.sources.feature_maps"):
        Profile.from_dict(d)


def _storage_allocations(dump) -> tuple[list[int], int]:
    """(each allocation's bytes, the counter's peak rise over its first level) from MXNet's "Device Storage"
    counter events for cpu/0, read here with json alone (independent of tbd's trace reader)."""
    import json

    events = json.loads(dump.read_text())["traceEvents"]
    values = [next(iter(e["args"].values())) for e in sorted(
        (e for e in events if e.get("cat") == "Device Storage" and e.get("name") == "Memory: cpu/0"),
        key=lambda e: e["ts"])]
    steps = [b - a for a, b in zip([0, *values], values)]
    return [s for s in steps if s > 0], max(values, default=0)


def _lstm_step_under_profiler(mx, tmp_path, steps=2, profile=True):
    """A hybridized 2-layer LSTM (H = I = 16, NTC, batch 64, 8 steps) trained `steps` times with MXNet's profiler
    counting storage (one profiling session per process: MXNet 1.9 fails a second set_config after a dump);
    returns (allocations, peak rise, the hook's feature maps, its reason)."""
    from mxnet.gluon import rnn

    from tbd.profilers.mxnet.hook import add_feature_maps
    from tbd.profilers.mxnet.memory import GraphCalls

    net = rnn.LSTM(16, 2, layout="NTC", input_size=16)
    net.initialize(ctx=mx.cpu())
    net.hybridize()
    x = mx.nd.ones((64, 8, 16))
    _train_once(mx, net, x)  # builds the cached graph; storage made here is not in the counter
    calls = GraphCalls([net], lambda: [x])
    dump = tmp_path / "dump.json"
    if profile:
        mx.profiler.set_config(profile_imperative=True, profile_symbolic=True, profile_memory=True, profile_api=False,
                               aggregate_stats=False, continuous_dump=False, filename=str(dump))
        mx.profiler.set_state("run")
    for k in range(steps):
        with calls.step(k + 1):
            _train_once(mx, net, x)
    if profile:
        mx.profiler.set_state("stop")
        mx.profiler.dump()
    calls.close()
    snaps = [{"step": k + 1} for k in range(steps)]
    reason = add_feature_maps(snaps, calls, mx, mx.cpu())
    allocations, rise = _storage_allocations(dump) if profile else ([], None)
    return allocations, rise, [s["feature_maps_bytes"] for s in snaps], reason


#: What the LSTM's graph keeps besides the reserve, as _backward_RNN reads it: the data swapped to TNC [8, 64, 16],
#: the outputs y [8, 64, 16], hy and cy [2, 64, 16] each, and the packed parameters (_rnn_param_concat: per layer
#: 4H x (I + H) weights + 2 x 4H biases = 2,176 floats, two layers), all float32.
_LSTM_GRAPH_KEPT = (8 * 64 * 16 + 8 * 64 * 16 + 2 * 2 * 64 * 16 + 2 * (64 * 32 + 2 * 64)) * 4


def test_native_rnn_reserve_is_one_storage_allocation_per_step(tmp_path, monkeypatch):
    """Runs only where mxnet imports: with MXNet's own CPU RNN kernels (MXNET_USE_MKLDNN_RNN=0) the reserve
    space is one NDArray per training forward; the analytic figure must equal that allocation exactly."""
    mx = pytest.importorskip("mxnet")
    monkeypatch.setenv("MXNET_USE_MKLDNN_RNN", "0")  # dmlc::GetEnv reads it at every operator call
    allocations, rise, maps, reason = _lstm_step_under_profiler(mx, tmp_path)
    reserve = 1 * 8 * 64 * 16 * (2 * 7 - 1) * 4  # GetRNNReserveSpaceSize: D*T*N*H*(7L-1) float32 = 425,984 B
    assert allocations.count(reserve) == 2  # once per traced step, exactly this size
    assert "(425984 B of" in reason and "GetRNNReserveSpaceSize" in reason
    assert maps == [reserve + _LSTM_GRAPH_KEPT] * 2
    # What the counter saw rise (two steps, each freed before the next) holds all of one step's maps: the
    # rest of the rise is the operator's workspace (GetRNNWorkspaceSize: 48,128 floats = 192,512 B), the
    # gradients of the activations and the loss.
    assert maps[0] <= rise


def test_onednn_rnn_reserve_is_its_workspace(tmp_path, monkeypatch):
    """Runs only where mxnet imports and has oneDNN (the pip wheels): the default CPU path keeps oneDNN's
    workspace, which oneDNN allocates itself (MXNet's storage counter never sees it: the reason says so;
    the next test checks the size against oneDNN's own allocation)."""
    mx = pytest.importorskip("mxnet")
    if not mx.runtime.Features().is_enabled("MKLDNN"):
        pytest.skip("this MXNet build has no oneDNN")
    monkeypatch.delenv("MXNET_USE_MKLDNN_RNN", raising=False)
    _, _, maps, reason = _lstm_step_under_profiler(mx, tmp_path, profile=False)
    workspace = (1024 * 64 + 1024 * 16 + 7 * 1728 * 16) * 4  # test_mxnet_rnn_reserve.py works it out: 1,101,824 B
    assert "outside MXNet's storage" in reason and f"({workspace} B of" in reason
    assert maps == [workspace + _LSTM_GRAPH_KEPT] * 2


def test_onednn_workspace_formula_equals_onednns_allocation(tmp_path):
    """Runs only where mxnet (with oneDNN) imports and a C compiler exists: a 20-line LD_PRELOAD shim logs every
    posix_memalign of 64 KiB or more while one training forward runs; oneDNN's workspace is one of them."""
    import os
    import shutil
    import subprocess
    import sys

    mx = pytest.importorskip("mxnet")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or not mx.runtime.Features().is_enabled("MKLDNN"):
        pytest.skip("needs a C compiler and MXNet with oneDNN")
    (tmp_path / "shim.c").write_text(
        "#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
        "static int (*real)(void **, size_t, size_t);\n"
        "int posix_memalign(void **p, size_t a, size_t s) {\n"
        "  if (!real) real = dlsym(RTLD_NEXT, \"posix_memalign\");\n"
        "  if (s >= 65536 && getenv(\"SHIM_ON\")) fprintf(stderr, \"ALLOC %zu\\n\", s);\n"
        "  return real(p, a, s);\n}\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp_path / "shim.so"), str(tmp_path / "shim.c"), "-ldl"],
                   check=True)
    script = (
        "import os, sys\nimport mxnet as mx\nfrom mxnet import autograd\nfrom mxnet.gluon import rnn\n"
        "mode, layers, h, i, t, n = sys.argv[1], *map(int, sys.argv[2:])\n"
        "cls = {'lstm': rnn.LSTM, 'gru': rnn.GRU, 'rnn_tanh': rnn.RNN}[mode]\n"
        "net = cls(h, layers, layout='TNC', input_size=i); net.initialize()\n"
        "x = mx.nd.ones((t, n, i)); x.attach_grad()\n"
        "with autograd.record(): y = net(x)\n"
        "y.backward(); mx.nd.waitall()\n"
        "os.environ['SHIM_ON'] = '1'\n"
        "with autograd.record(): y = net(x)\n"
        "mx.nd.waitall()\n")
    env = {**os.environ, "LD_PRELOAD": str(tmp_path / "shim.so"), "OMP_NUM_THREADS": "1"}
    env.pop("MXNET_USE_MKLDNN_RNN", None)
    # (mode, L, H, I, T, N) -> workspace bytes worked out by hand in test_mxnet_rnn_reserve.py
    for args, workspace in ((("lstm", 2, 16, 16, 8, 64), 1_101_824), (("rnn_tanh", 3, 48, 48, 7, 5), 204_800),
                            (("gru", 2, 64, 32, 10, 64), 3_112_960)):
        out = subprocess.run([sys.executable, "-c", script, *map(str, args)], env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        sizes = [int(line.split()[1]) for line in out.stderr.splitlines() if line.startswith("ALLOC ")]
        assert workspace in sizes, (args, sizes)
