"""The TensorFlow trace reader and memory analysis on a real CPU trace (tests/fixtures/tensorflow_cpu_small.json.gz).

Runs in the parent venv: no tensorflow. Expected values are recounted from the file's own events
(integer ps in args) or written as the FLOP formula's arithmetic for the net's shapes (fixtures README):
Conv2D(4, 3x3, SAME) on [2, 8, 8, 3] -> ReLU -> Flatten -> Dense(10) on [2, 256], SGD momentum 0.9.
"""

from __future__ import annotations

import copy
import gzip
import json

import numpy as np
import pytest
from testpaths import FIXTURES

from tbd.analysis.flops.ops import op_flops, precision_of
from tbd.analysis.memory.tensorflow import RECORDS_SCHEMA, memory_breakdown
from tbd.core.errors import ResultFormatError, TraceFormatError
from tbd.profilers.tensorflow.ops import TF_TO_ATEN, TF_ZERO_FLOPS, base_type
from tbd.profilers.tensorflow.trace import read_trace_file, trace_records

FIXTURE = FIXTURES / "tensorflow_cpu_small.json.gz"
FLOPS = {"flops_of": op_flops, "precision_of": precision_of}  # the shared formula table, as tbd.cli.run_analysis passes it
PS = 1000  # ps per ns


@pytest.fixture(scope="module")
def trace():
    return read_trace_file(FIXTURE)


@pytest.fixture(scope="module")
def records(trace):
    return trace_records(trace, "fixture", **FLOPS)


def _raw(trace, cat):
    return [e for e in trace["traceEvents"] if e.get("cat") == cat]


def test_steps_are_the_marked_iterations_in_exact_ns(trace, records):
    raw = {e["name"]: e["args"] for e in _raw(trace, "step")}
    assert [s.number for s in records.steps] == [1, 2]
    for s in records.steps:
        a = raw[f"ProfilerStep#{s.number}"]
        assert (s.start_ns, s.host_end_ns) == (a["ts_ps"] // PS, (a["ts_ps"] + a["dur_ps"]) // PS)
    assert records.window_start_ns == raw["ProfilerStep#1"]["ts_ps"] // PS


def test_rows_are_the_window_ops_with_exact_durations(trace, records):
    lo, hi = records.window_start_ns, records.window_end_ns
    inside = [e for e in _raw(trace, "tf_op") if lo <= e["args"]["ts_ps"] // PS <= hi]
    # The lead-in iteration (unmarked) is traced too: 3 iterations of ops in the file, 2 in the window.
    assert len(_raw(trace, "tf_op")) == len(inside) * 3 // 2
    assert len(records.kernels) == len(inside)
    want = sorted((e["args"]["ts_ps"] // PS, e["args"]["dur_ps"] // PS, e["args"]["tf_op"]) for e in inside)
    got = sorted(zip(records.kernels.start_ns.tolist(), records.kernels.dur_ns.tolist(), records.kernels.name))
    assert got == want  # op events do not nest in this trace: self time = duration
    assert set(records.kernels.device.tolist()) == {-1}
    assert records.device_kind == "cpu"
    assert int((records.busy_end_ns - records.busy_start_ns).sum()) == sum(e["args"]["dur_ps"] // PS for e in inside)


def test_op_counts_per_step(records):
    k = records.kernels
    for step in (1, 2):
        types = [t for t, s in zip(k.op, k.step) if s == step]
        assert types.count("_MklNativeFusedConv2D") == 1
        assert types.count("_MklMatMul") == 2  # the Dense layer's two backward products
        assert types.count("_MklNativeFusedMatMul") == 1


def test_flops_of_conv_and_matmul_rows_by_hand(records):
    k = records.kernels
    by = {(str(n), int(s)): (f, p) for n, s, f, p in zip(k.name, k.step, k.flops, k.precision)}
    conv = 2 * 2 * (8 * 8) * (4 * 3 * 3 * 3)  # 2 · N · out positions · (Cout · Cin · kh · kw), SAME pad
    dense = 2 * 2 * 256 * 10  # 2 · M · K · N
    for step in (1, 2):
        assert by[("functional_1/re_lu_1/Relu", step)] == (conv, "fp32")  # Conv2D+BiasAdd+Relu fused
        assert by[("functional_1/dense_1/BiasAdd", step)] == (dense, "fp32")  # MatMul+BiasAdd fused
        assert by[("gradient_tape/functional_1/dense_1/MatMul/MatMul", step)][0] == dense  # dX = dY Wᵀ
        assert by[("gradient_tape/functional_1/dense_1/MatMul/MatMul_1", step)][0] == dense  # dW = Xᵀ dY
        # grad_weight only (the input needs no gradient): the forward's MACs · 2.
        assert by[("gradient_tape/functional_1/conv2d_1/convolution/Conv2DBackpropFilter", step)][0] == conv
        assert by[("gradient_tape/functional_1/re_lu_1/ReluGrad", step)][0] == 2 * 8 * 8 * 4
    # Reading a variable moves data: a known 0, not an unknown.
    assert (k.flops[np.array([str(o) == "ReadVariableOp" for o in k.op])] == 0).all()


def test_base_type_strips_onednn_rewrites():
    assert base_type("_MklNativeFusedConv2D") == "Conv2D"
    assert base_type("_MklNativeConv2DBackpropFilterWithBias") == "Conv2DBackpropFilter"
    assert base_type("_MklMatMul") == "MatMul"
    assert base_type("BatchMatMulV2") == "BatchMatMulV2"
    assert base_type("_MklNativePadWithConv2D") == "Conv2D"
    assert base_type("_MklNativePadWithFusedConv2D") == "Conv2D"


def test_without_shapes_flops_are_nan_with_a_note(trace):
    bare = {**trace, "tfOpShapes": None}
    r = trace_records(bare, "bare", **FLOPS)
    zero = np.array([base_type(str(o)) in TF_ZERO_FLOPS for o in r.kernels.op])
    assert zero.any() and (r.kernels.flops[zero] == 0).all()  # data movement needs no shapes
    assert np.isnan(r.kernels.flops[~zero]).all()
    assert any("FLOPs unknown" in n for n in r.notes)


@pytest.mark.parametrize("mutate, match", [
    (lambda t: t.pop("traceEvents"), "traceEvents"),
    (lambda t: t.update(schema="other"), "schema"),
    (lambda t: [e["args"].pop("ts_ps") for e in t["traceEvents"] if e.get("cat") == "tf_op"][:1], "ts_ps"),
    (lambda t: t.update(traceEvents=[e for e in t["traceEvents"] if e.get("cat") != "tf_op"]), "no TensorFlow op"),
    (lambda t: t.update(tfOpShapes=[1]), "tfOpShapes"),
])
def test_corrupt_input_raises(trace, mutate, match):
    bad = copy.deepcopy(trace)
    mutate(bad)
    with pytest.raises(TraceFormatError, match=match):
        trace_records(bad, "bad", **FLOPS)


def test_corrupt_gzip_raises(tmp_path):
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": []}).encode())[:20])
    with pytest.raises(TraceFormatError):
        read_trace_file(path)


# The hook's raw/memory.json of the fixture's run (exact bytes, recounted by hand below).
_IT = {"weights_bytes": (4 * 3 * 3 * 3 + 4 + 256 * 10 + 10) * 4, "non_trainable_bytes": 0,
       "gradients_bytes": (4 * 3 * 3 * 3 + 4 + 256 * 10 + 10) * 4,
       "optimizer_state_bytes": (4 * 3 * 3 * 3 + 4 + 256 * 10 + 10) * 4 + 8 + 4,  # momenta + int64 step + fp32 lr
       "input_bytes": 2 * 8 * 8 * 3 * 4 + 2 * 4}  # x float32 + y int32
MEMORY = {"schema": RECORDS_SCHEMA, "device_index": -1, "iterations": [{"step": 1, **_IT}, {"step": 2, **_IT}],
          "reasons": {"gradients": "dense gradients"}}


def test_memory_breakdown(records):
    m = memory_breakdown(MEMORY, records)
    assert m.weights == 10728 and m.gradients == 10728
    assert m.dynamic == 10740 + 1544
    assert m.feature_maps is None and m.workspace is None and m.allocator_peak is None
    for k in ("feature_maps", "workspace", "allocator_peak", "at_peak", "gradients", "dynamic"):
        assert m.reasons[k]


def test_memory_bad_records_raise():
    with pytest.raises(ResultFormatError):
        memory_breakdown({"schema": "x"}, None)
    bad = copy.deepcopy(MEMORY)
    bad["iterations"][0]["weights_bytes"] = -1
    with pytest.raises(ResultFormatError):
        memory_breakdown(bad, None)


def test_memory_without_records_gives_reasons():
    m = memory_breakdown(None, None)
    assert m.weights is None and "no memory records" in m.reasons["weights"]


def test_hook_module_imports_without_tensorflow():
    from tbd.profilers.tensorflow import hook

    assert hook.is_out_of_memory(MemoryError())
    assert not hook.is_out_of_memory(ValueError("x"))
    assert "tensorflow" in hook.versions()


def test_graph_shapes_of_a_tf_function():
    tf = pytest.importorskip("tensorflow")
    from tbd.profilers.tensorflow.xspace import graph_shapes

    a, b = tf.ones((3, 5)), tf.ones((5, 7))

    @tf.function
    def step():
        return tf.linalg.matmul(a, b)

    step()
    shapes, why = graph_shapes(step)
    assert why is None
    (node,) = [v for v in shapes.values() if v["type"] == "MatMul"]
    assert node["inputs"] == [[3, 5], [5, 7]] and node["outputs"] == [[3, 7]] and node["dtype"] == "float32"
    assert graph_shapes(lambda: None)[0] is None


# --- tests/fixtures/tensorflow_cpu_lstm.json.gz: a Keras LSTM (a while loop on the CPU), Dense,
# sparse softmax cross-entropy and Adam (fixtures README). Batch 2, 5 steps of 3 features, 4 units.
LSTM_FIXTURE = FIXTURES / "tensorflow_cpu_lstm.json.gz"
CELL = "functional_1/lstm_1/while/lstm_cell_1/"


@pytest.fixture(scope="module")
def lstm():
    return trace_records(read_trace_file(LSTM_FIXTURE), LSTM_FIXTURE.name, **FLOPS)


def test_ops_inside_the_while_body_get_their_body_graphs_shapes(lstm):
    # Executed as "<loop>/body/_<id>/<node of the body's function graph>"; the log is keyed by the latter.
    k = lstm.kernels
    for step in (1, 2):
        rows = {n: [] for n in ("MatMul", "MatMul_1", "Sigmoid")}
        for name, s, f in zip(k.name, k.step, k.flops):
            if s == step and "/while/body/_" in name and name.rsplit(CELL, 1)[-1] in rows:
                rows[name.rsplit(CELL, 1)[-1]].append(f)
        assert rows["MatMul"] == [2 * 2 * 3 * 16] * 5  # x_t [2, 3] @ W [3, 4 gates x 4], once per time step
        assert rows["MatMul_1"] == [2 * 2 * 4 * 16] * 5  # h [2, 4] @ U [4, 16]
        assert rows["Sigmoid"] == [3 * 2 * 4] * 5  # exp, add, divide per element of [2, 4]


def test_sparse_softmax_cross_entropy_counts_the_loss_and_its_gradient(lstm):
    k = lstm.kernels
    xent = [f for n, o, s, f in zip(k.name, k.op, k.step, k.flops)
            if o == "SparseSoftmaxCrossEntropyWithLogits" and s == 1]
    # logits [2, 6]: log_softmax 5/element, nll 1 per label, its backward 1 per label, softmax - onehot 4/element.
    assert xent == [5 * 12 + 2 + 2 + 4 * 12]


def test_every_op_of_the_lstm_fixture_has_flops(lstm):
    k = lstm.kernels
    assert np.isfinite(k.flops).all()
    assert any("936 of 936" in n for n in lstm.notes)
    # Optimizer step counters (int64) and the loop's Less on int32 counters do no floating-point work.
    assert {f for o, f, p in zip(k.op, k.flops, k.precision) if o == "Less"} == {0.0}


def test_the_hook_logs_shapes_for_every_mapped_op_type():
    from tbd.profilers.tensorflow.xspace import SHAPED_OPS

    assert set(TF_TO_ATEN) <= SHAPED_OPS
