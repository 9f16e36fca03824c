"""The MXNet profiler dump reader on a real CPU dump (tests/fixtures/mxnet_cpu_small.json.gz).

Runs in the parent venv: no mxnet. Expected values are recounted here from the raw JSON events
or written as the FLOP formula's arithmetic for the logged shapes (fixtures README).
"""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pytest
from testpaths import FIXTURES

from tbd.analysis.flops.ops import op_flops, precision_of
from tbd.core.errors import TraceFormatError
from tbd.core.rundir import MXNET_SHAPES_SCHEMA as SHAPES_SCHEMA
from tbd.profilers.mxnet.ops import MXNET_ZERO_FLOPS
from tbd.profilers.mxnet.trace import read_trace_file, trace_records

FIXTURE = FIXTURES / "mxnet_cpu_small.json.gz"
FLOPS = {"flops_of": op_flops, "precision_of": precision_of}  # the shared formula table, as tbd.cli.run_analysis passes it
US = 1000  # ns per µs: MXNet writes integer microseconds

# The hook's shape log for this recording (raw/mxnet_shapes.json, steps 1 and 2 are the same net):
# Conv2D(4, 3x3, pad 1) on [2, 3, 8, 8], Dense(10) on [2, 256].
_CALLS = [
    {"op": "Convolution", "input": [2, 3, 8, 8], "weight": [4, 3, 3, 3], "output": [2, 4, 8, 8],
     "stride": [1, 1], "pad": [1, 1], "dilate": [1, 1], "groups": 1, "bias": True, "input_grad": False,
     "dtype": "float32"},
    {"op": "FullyConnected", "input": [2, 256], "weight": [10, 256], "output": [2, 10], "input_grad": True,
     "dtype": "float32"},
]
SHAPES = {"schema": SHAPES_SCHEMA, "steps": {"1": _CALLS, "2": _CALLS}}


@pytest.fixture(scope="module")
def trace():
    return read_trace_file(FIXTURE)


@pytest.fixture(scope="module")
def records(trace):
    return trace_records(trace, "fixture", shapes=SHAPES, **FLOPS)


def _raw_ops(trace):
    """(name, B ts, E ts) of the operator pairs, straight from the JSON (B and E are adjacent)."""
    ev = [e for e in trace["traceEvents"] if e.get("cat") == "operator" and e["ph"] in "BE"]
    return [(b["name"], b["ts"], e["ts"]) for b, e in zip(ev[::2], ev[1::2])]


def _raw_steps(trace):
    ev = {(e["name"], e["ph"]): e["ts"] for e in trace["traceEvents"] if e.get("cat") == "tbd"}
    return {int(n.split("#")[1]): (ev[(n, "b")], ev[(n, "e")]) for n, ph in ev if ph == "b"}


def test_steps_are_the_marked_iterations_in_exact_ns(trace, records):
    raw = _raw_steps(trace)
    assert [s.number for s in records.steps] == [1, 2]
    for s in records.steps:
        assert (s.start_ns, s.host_end_ns, s.end_ns) == (raw[s.number][0] * US, raw[s.number][1] * US,
                                                         raw[s.number][1] * US)
    assert records.window_start_ns == raw[1][0] * US
    assert records.window_end_ns == raw[2][1] * US


def test_rows_are_the_window_operators_with_exact_durations(trace, records):
    lo, hi = records.window_start_ns, records.window_end_ns
    inside = [(n, b, e) for n, b, e in _raw_ops(trace) if lo <= b * US <= hi]
    assert len(records.kernels) == len(inside)
    assert records.device_kind == "cpu"
    assert set(records.kernels.device.tolist()) == {-1}
    # MXNet operator events do not nest here: self time is the whole duration.
    want = sorted((b * US, (e - b) * US, n) for n, b, e in inside)
    got = sorted(zip(records.kernels.start_ns.tolist(), records.kernels.dur_ns.tolist(), records.kernels.name))
    assert got == want
    # Busy intervals are the operator intervals (outermost ones).
    assert int((records.busy_end_ns - records.busy_start_ns).sum()) == sum((e - b) * US for _, b, e in inside)


def test_every_row_belongs_to_a_step_and_backward_ops_are_named(records):
    k = records.kernels
    assert set(k.step.tolist()) == {1, 2}
    names = set(k.name)
    assert {"Convolution", "_backward_Convolution", "FullyConnected", "_backward_FullyConnected"} <= names
    assert "ImperativeBulk" not in names  # the hook switches backward bulking off


def test_flops_follow_the_shared_formulas(records):
    k = records.kernels
    flops = {(n, s): f for n, s, f in zip(k.name, k.step.tolist(), k.flops.tolist()) if np.isfinite(f)}
    conv = 2 * 2 * 4 * (8 * 8) * 3 * (3 * 3)  # 2·N·Cout·out spatial·Cin·kernel
    fc = 2 * 2 * 10 * 256  # 2·m·n·k
    for step in (1, 2):
        assert flops[("Convolution", step)] == conv
        assert flops[("_backward_Convolution", step)] == conv  # grad_weight only: input needs no grad
        assert flops[("FullyConnected", step)] == fc
        assert flops[("_backward_FullyConnected", step)] == 2 * fc  # grad_weight + grad_input
    # The shape log above has no optimizer record and the net is not hybridized (only Conv/Dense hooks):
    # the other FLOPs are the data-movement operators' known zeros.
    assert sorted(name for (name, _), f in flops.items() if f != 0) == sorted(
        ["Convolution", "_backward_Convolution", "FullyConnected", "_backward_FullyConnected"] * 2)
    assert all(str(n) in MXNET_ZERO_FLOPS for (n, _), f in flops.items() if f == 0)
    assert set(k.precision[np.isfinite(k.flops) & (k.flops > 0)]) == {"fp32"}
    assert set(k.flop_source[np.isfinite(k.flops)]) == {"analytic"}
    assert all(k.flop_source[~np.isfinite(k.flops)] == "")


def test_without_shape_log_flops_are_unknown_and_said_so(trace):
    r = trace_records(trace, "fixture", **FLOPS)
    zero = np.array([str(n) in MXNET_ZERO_FLOPS for n in r.kernels.name])
    assert zero.any() and (r.kernels.flops[zero] == 0).all()  # data movement needs no shapes
    assert np.isnan(r.kernels.flops[~zero]).all()
    assert any("no operand shapes" in n for n in r.notes)


def test_storage_counters_become_memory_events(trace, records):
    raw = [(e["ts"], e["args"][e["name"]]) for e in trace["traceEvents"] if e.get("cat") == "Device Storage"]
    m = records.memory
    assert len(m) == len(raw)
    assert sorted(zip(m.ts_ns.tolist(), m.total_allocated.tolist())) == sorted((t * US, v) for t, v in raw)
    assert set(m.device.tolist()) == {-1}
    assert int(m.bytes.sum()) == int(m.total_allocated[-1])  # deltas add up to the last level
    assert set(m.addr.tolist()) == {0}


def _with_events(trace, events):
    return {**trace, "traceEvents": events}


def test_corrupt_inputs_raise(trace, tmp_path):
    with pytest.raises(TraceFormatError):
        trace_records({"no": "events"}, "x", **FLOPS)
    ops = [e for e in trace["traceEvents"] if e.get("cat") == "operator" and e["ph"] in "BE"]
    with pytest.raises(TraceFormatError, match="no MXNet operator events"):
        trace_records(_with_events(trace, [e for e in trace["traceEvents"] if e.get("cat") != "operator"]), "x",
                      **FLOPS)
    with pytest.raises(TraceFormatError, match="no end"):
        trace_records(_with_events(trace, ops[:-1]), "x", **FLOPS)
    with pytest.raises(TraceFormatError, match="no matching begin"):
        trace_records(_with_events(trace, ops[1:]), "x", **FLOPS)
    bad_ts = [dict(e) for e in ops]
    bad_ts[0]["ts"] = "soon"
    with pytest.raises(TraceFormatError):
        trace_records(_with_events(trace, bad_ts), "x", **FLOPS)
    with pytest.raises(TraceFormatError, match="schema"):
        trace_records(trace, "x", shapes={"steps": {}}, **FLOPS)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(FIXTURE.read_bytes()[:200])
    with pytest.raises(TraceFormatError):
        read_trace_file(cut)
    half = tmp_path / "half.json"
    half.write_bytes(gzip.decompress(FIXTURE.read_bytes())[:500])
    with pytest.raises(TraceFormatError):
        read_trace_file(half)


def test_nested_operator_keeps_only_its_self_time():
    ev = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "gpu/0"}},
          {"name": "Outer", "cat": "operator", "ph": "B", "ts": 100, "pid": 0, "tid": 7},
          {"name": "Outer", "cat": "operator", "ph": "E", "ts": 130, "pid": 0, "tid": 7},
          {"name": "Inner", "cat": "operator", "ph": "B", "ts": 105, "pid": 0, "tid": 7},
          {"name": "Inner", "cat": "operator", "ph": "E", "ts": 115, "pid": 0, "tid": 7}]
    r = trace_records({"traceEvents": ev}, "x", **FLOPS)
    assert dict(zip(r.kernels.name, r.kernels.dur_ns.tolist())) == {"Outer": (30 - 10) * US, "Inner": 10 * US}
    assert r.device_kind == "cuda" and set(r.kernels.device.tolist()) == {0}
    assert (r.busy_start_ns.tolist(), r.busy_end_ns.tolist()) == ([100 * US], [130 * US])
    assert any("not CUDA kernels" in n for n in r.notes)
    assert any("whole trace" in n for n in r.notes)
    assert math.isnan(r.kernels.flops[0])


def test_engine_waits_for_host_reads_are_not_operator_work():
    # WaitForVar: the engine holding a worker until an array can be read on the host (asnumpy).
    ev = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "cpu/0"}},
          {"name": "FullyConnected", "cat": "operator", "ph": "B", "ts": 100, "pid": 0, "tid": 7},
          {"name": "FullyConnected", "cat": "operator", "ph": "E", "ts": 120, "pid": 0, "tid": 7},
          {"name": "WaitForVar", "cat": "operator", "ph": "B", "ts": 120, "pid": 0, "tid": 8},
          {"name": "WaitForVar", "cat": "operator", "ph": "E", "ts": 190, "pid": 0, "tid": 8}]
    r = trace_records({"traceEvents": ev}, "x", **FLOPS)
    assert list(r.kernels.name) == ["FullyConnected"]
    assert (r.busy_start_ns.tolist(), r.busy_end_ns.tolist()) == ([100 * US], [120 * US])


def test_fixture_is_small():
    assert FIXTURE.stat().st_size < 16 * 1024
    assert json.loads(gzip.decompress(FIXTURE.read_bytes()))["traceEvents"]


def _rnn_log(mode, seq, batch, inp, hidden, layers, bidirectional, weight_grad):
    return {"op": "RNN", "mode": mode, "seq_len": seq, "batch": batch, "input_size": inp, "state_size": hidden,
            "num_layers": layers, "bidirectional": bidirectional, "projection_size": 0,
            "weight_grad": weight_grad, "input_grad": True, "dtype": "float32"}


def test_rnn_operators_take_the_cudnn_rnn_formula():
    # One step: an LSTM encoder then a GRU decoder forward, their backward in reverse order.
    names = ["RNN", "RNN", "_backward_RNN", "_backward_RNN"]
    ev = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "cpu/0"}},
          {"name": "ProfilerStep#1", "cat": "tbd", "ph": "b", "ts": 0, "pid": 1, "id": 1},
          {"name": "ProfilerStep#1", "cat": "tbd", "ph": "e", "ts": 100, "pid": 1, "id": 1}]
    for j, n in enumerate(names):
        ev += [{"name": n, "cat": "operator", "ph": ph, "ts": 10 + 20 * j + 10 * (ph == "E"), "pid": 0, "tid": 3}
               for ph in "BE"]
    lstm = _rnn_log("lstm", 5, 4, 8, 16, 2, False, True)  # T=5, B=4, I=8, H=16, 2 layers
    gru = _rnn_log("gru", 3, 4, 16, 6, 1, True, False)  # T=3, B=4, I=16, H=6, bidirectional, frozen
    r = trace_records({"traceEvents": ev}, "x", shapes={"schema": SHAPES_SCHEMA, "steps": {"1": [lstm, gru]}},
                      **FLOPS)
    got = [(n, f) for n, f in zip(r.kernels.name, r.kernels.flops.tolist())]
    # flops_rnn per step, batch element, layer and direction: GEMMs 2·G·H·(I_l + H); gate sums with
    # both biases G·H·3; cell E_f·H (LSTM 15, GRU 12). Backward: the GEMMs again for the data
    # gradient, again for weight gradients with 2·G·H bias sums when computed; cell E_b·H (24, 17).
    T, B, H = 5, 4, 16
    lstm_fwd = sum(T * B * (2 * 4 * H * (i + H) + 4 * H * 3 + 15 * H) for i in (8, H))
    lstm_bwd = sum(T * B * (2 * 2 * 4 * H * (i + H) + 2 * 4 * H + 24 * H) for i in (8, H))
    T, H = 3, 6
    gru_fwd = 2 * T * B * (2 * 3 * H * (16 + H) + 3 * H * 3 + 12 * H)
    gru_bwd = 2 * T * B * (2 * 3 * H * (16 + H) + 17 * H)
    assert got == [("RNN", lstm_fwd), ("RNN", gru_fwd), ("_backward_RNN", gru_bwd), ("_backward_RNN", lstm_bwd)]
    assert set(r.kernels.precision) == {"fp32"}
    assert any("4 of 4" in n for n in r.notes)


def test_malformed_rnn_call_raises():
    ev = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "cpu/0"}},
          {"name": "ProfilerStep#1", "cat": "tbd", "ph": "b", "ts": 0, "pid": 1, "id": 1},
          {"name": "ProfilerStep#1", "cat": "tbd", "ph": "e", "ts": 100, "pid": 1, "id": 1},
          {"name": "RNN", "cat": "operator", "ph": "B", "ts": 10, "pid": 0, "tid": 3},
          {"name": "RNN", "cat": "operator", "ph": "E", "ts": 20, "pid": 0, "tid": 3}]
    bad = {**_rnn_log("lstm", 5, 4, 8, 16, 2, False, True), "mode": "sru"}
    with pytest.raises(TraceFormatError, match="RNN"):
        trace_records({"traceEvents": ev}, "x", shapes={"schema": SHAPES_SCHEMA, "steps": {"1": [bad]}},
                      **FLOPS)


# --- tests/fixtures/mxnet_cpu_hybrid.json.gz + mxnet_cpu_hybrid_shapes.json: a hybridized block
# (static_alloc) whose graph the hook logs operator by operator, SGD momentum 0.9 with wd (fixtures
# README): x [2, 3, 8, 8] -> conv 3x3 (4, no bias) -> BatchNorm -> relu, + conv 1x1 (4) of x,
# max pool 2 -> global average pool -> Dense(10) -> softmax cross-entropy, all in one graph.
HYBRID = FIXTURES / "mxnet_cpu_hybrid.json.gz"
HYBRID_SHAPES = FIXTURES / "mxnet_cpu_hybrid_shapes.json"


@pytest.fixture(scope="module")
def hybrid():
    return trace_records(read_trace_file(HYBRID), HYBRID.name, shapes=json.loads(HYBRID_SHAPES.read_text()),
                         **FLOPS)


def test_every_operator_of_a_hybridized_graph_gets_its_formula(hybrid):
    k = hybrid.kernels
    for step in (1, 2):
        got = [(str(n), f) for n, s, f in zip(k.name, k.step.tolist(), k.flops.tolist()) if s == step]
        by = {}
        for n, f in got:
            by.setdefault(n, []).append(f)
        act = 2 * 4 * 8 * 8  # elements of the [2, 4, 8, 8] activations
        assert by["Convolution"] == [2 * 2 * 4 * 64 * 3 * 9, 2 * 2 * 4 * 64 * 3]  # 3x3, then the 1x1
        assert by["_backward_Convolution"] == [2 * 2 * 4 * 64 * 3, 2 * 2 * 4 * 64 * 3 * 9]  # weights only
        assert by["BatchNorm"] == [6 * act] and by["_backward_BatchNorm"] == [9 * act]  # training batch-norm
        assert by["relu"] == [act] and by["_backward_relu"] == [act] and by["elemwise_add"] == [act]
        # max pool 2x2 -> [2, 4, 4, 4]: 4 compares per output; global average: every input + 1 divide per output.
        assert by["Pooling"] == [2 * 4 * 16 * 4, 2 * 4 * 16 + 2 * 4]
        assert by["_backward_Pooling"] == [2 * 4 * 16, 2 * 4 * 16]  # in reverse: global average, then max
        assert by["FullyConnected"] == [2 * 2 * 10 * 4] and by["_backward_FullyConnected"] == [2 * 2 * 2 * 10 * 4]
        assert by["log_softmax"] == [5 * 20] and by["_backward_log_softmax"] == [4 * 20]
        assert by["mean"] == [2 + 2] and by["_backward_mean"] == [2]  # per-image loss [2]: sum + divide
        # SGD momentum, 7 FLOPs per element (mxnet_trace), 4 parameters per multi_* call in the
        # trainer's order: conv 108 + gamma 4 + beta 4 + 1x1 conv 12, then Dense 40 + bias 10.
        assert by["multi_sgd_mom_update"] == [7 * (108 + 4 + 4 + 12), 7 * (40 + 10)]
        assert all(f == 0 for n, f in got if n in MXNET_ZERO_FLOPS)
    assert np.isfinite(k.flops).all()
    assert any("46 of 46" in n for n in hybrid.notes)


def test_counts_that_disagree_leave_flops_unknown(hybrid, tmp_path):
    shapes = json.loads(HYBRID_SHAPES.read_text())
    for calls in shapes["steps"].values():
        calls[:] = [c for c in calls if c["op"] != "relu"][:-1]  # one relu fewer, no optimizer record
        calls.append({"op": "relu", "inputs": [[2, 4, 8, 8]], "output": [2, 4, 8, 8], "attrs": {}, "dtype": "float32"})
        calls.append({"op": "relu", "inputs": [[2, 4, 8, 8]], "output": [2, 4, 8, 8], "attrs": {}, "dtype": "float32"})
    r = trace_records(read_trace_file(HYBRID), "x", shapes=shapes, **FLOPS)
    k = r.kernels
    for name in ("relu", "_backward_relu", "multi_sgd_mom_update"):
        assert np.isnan(k.flops[k.name == name]).all()
    assert (k.flops[k.name == "BatchNorm"] == 6 * 2 * 4 * 8 * 8).all()


def test_batch_dot_backward_runs_as_two_more_batch_dots():
    # MXNet differentiates batch_dot with batch_dot itself: dA = dC Bᵀ, dB = Aᵀ dC, each of the forward's size.
    ev = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "cpu/0"}},
          {"name": "ProfilerStep#1", "cat": "tbd", "ph": "b", "ts": 0, "pid": 1, "id": 1},
          {"name": "ProfilerStep#1", "cat": "tbd", "ph": "e", "ts": 100, "pid": 1, "id": 1}]
    for j in range(3):
        ev += [{"name": "batch_dot", "cat": "operator", "ph": ph, "ts": 10 + 20 * j + 10 * (ph == "E"), "pid": 0,
                "tid": 3} for ph in "BE"]
    call = {"op": "batch_dot", "inputs": [[4, 5, 6], [4, 7, 6]], "output": [4, 5, 7],
            "attrs": {"transpose_b": "True"}, "dtype": "float32"}
    r = trace_records({"traceEvents": ev}, "x", shapes={"schema": SHAPES_SCHEMA, "steps": {"1": [call]}},
                      **FLOPS)
    assert r.kernels.flops.tolist() == [2 * 4 * 5 * 6 * 7] * 3  # 2·b·m·k·n, forward and both gradients
    two = {"schema": SHAPES_SCHEMA, "steps": {"1": [call, call]}}  # 3 events for 2 calls: pairing unknown
    assert np.isnan(trace_records({"traceEvents": ev}, "x", shapes=two, **FLOPS).kernels.flops).all()
