"""MXNet dumps, MXNet shape logs and TensorFlow traces with one hostile change each: one TraceFormatError line.

Each test is a finding of the mutation corpus (tests/fuzz/mutate.py) on the committed fixtures;
the comment says what escaped before. Both readers need no framework: this runs in .venv.
"""

from __future__ import annotations

import copy
import json
from decimal import Decimal

import numpy as np
import pytest
from testpaths import FIXTURES

from tbd.analysis.flops.ops import op_flops, precision_of
from tbd.analysis.memory.mxnet import memory_breakdown
from tbd.core.errors import TraceFormatError
from tbd.profilers.mxnet import trace as mxnet_trace
from tbd.profilers.mxnet.ops import MXNET_TO_ATEN
from tbd.profilers.tensorflow import trace as tensorflow_trace
from tbd.profilers.traces.names import MAX_NAME_CHARS

FLOPS = {"flops_of": op_flops, "precision_of": precision_of}


@pytest.fixture(scope="module")
def mxnet():
    return mxnet_trace.read_trace_file(FIXTURES / "mxnet_cpu_hybrid.json.gz")


@pytest.fixture(scope="module")
def shapes():
    return json.loads((FIXTURES / "mxnet_cpu_hybrid_shapes.json").read_text())


@pytest.fixture(scope="module")
def tf():
    return tensorflow_trace.read_trace_file(FIXTURES / "tensorflow_cpu_small.json.gz")


def _first(trace: dict, **match) -> dict:
    return next(e for e in trace["traceEvents"] if all(e.get(k) == v for k, v in match.items()))


def _one_line(exc: pytest.ExceptionInfo) -> str:
    line = exc.value.one_line()
    assert "\n" not in line and line.isprintable() and len(line) < 1000, line[:300]
    return line


def test_mxnet_shape_log_call_that_is_not_an_object(mxnet, shapes):
    # Before: AttributeError ('float' object has no attribute 'get').
    log = copy.deepcopy(shapes)
    log["steps"]["1"][0] = 1.5
    with pytest.raises(TraceFormatError) as err:
        mxnet_trace.trace_records(mxnet, "t", shapes=log, **FLOPS)
    assert "shape log holds a call that is not an object (1.5)" in _one_line(err)


@pytest.mark.parametrize("inputs", [1.5, "abc"])
def test_mxnet_shape_log_inputs_of_the_wrong_type(mxnet, shapes, inputs):
    # Before: TypeError ("argument of type 'float' is not iterable").
    log = copy.deepcopy(shapes)
    for call in log["steps"]["1"]:
        call["inputs"] = inputs
    mxnet_trace.trace_records(mxnet, "t", shapes=log, **FLOPS)  # those calls' FLOPs unknown: no error


def test_mxnet_shape_log_rnn_layers_are_bounded():
    # Before: num_layers 10**18 looped for ever building the weight list.
    call = {"op": "RNN", "mode": "lstm", "state_size": 4, "input_size": 4, "num_layers": 10**18,
            "bidirectional": False, "seq_len": 2, "batch": 2, "dtype": "float32"}
    with pytest.raises(ValueError, match="num_layers"):
        MXNET_TO_ATEN["RNN"][1](call)


def test_mxnet_counter_with_a_huge_exponent_is_one_line(mxnet):
    # Before: int(Decimal("1E+999999999")) (how json reads 1e999999999 with parse_float=Decimal) ran for hours.
    trace = copy.deepcopy(mxnet)
    counter = _first(trace, cat="Device Storage")
    counter["args"][counter["name"]] = Decimal("1E+999999999")
    with pytest.raises(TraceFormatError) as err:
        mxnet_trace.trace_records(trace, "t", **FLOPS)
    assert "malformed Device Storage counter 'Memory: cpu/0'" in _one_line(err)


@pytest.mark.parametrize("text", ['{"traceEvents": [' + "1" * 5000 + "]}", "[" * 100_000 + "]" * 100_000])
def test_json_python_refuses_is_one_line(tmp_path, text):
    # Before: ValueError (5,000-digit int) and RecursionError escaped json.loads.
    path = tmp_path / "dump.json"
    path.write_text(text)
    with pytest.raises(TraceFormatError) as err:
        mxnet_trace.read_trace_file(path)
    _one_line(err)


def test_mxnet_unhashable_pid_and_odd_metadata(mxnet):
    # Before: TypeError (unhashable type: 'list') and AttributeError on a process_name's args list.
    trace = copy.deepcopy(mxnet)
    for event in trace["traceEvents"]:
        if event.get("cat") == "operator":
            event["pid"] = [0]
        if event.get("name") == "process_name":
            event["args"] = ["cpu/0"]
    records = mxnet_trace.trace_records(trace, "t", **FLOPS)
    assert len(records.kernels)


def test_mxnet_names_are_capped_and_made_encodable(mxnet):
    trace = copy.deepcopy(mxnet)
    for event in trace["traceEvents"]:
        if event.get("name") == "Flatten":
            event["name"] = "Flatten\ud800" + "x" * 10_000
        if event.get("cat") == "Device Storage":
            event["name"] = "Memory: cpu_pinned\ud83d/0"
    records = mxnet_trace.trace_records(trace, "t", **FLOPS)
    for name in set(records.kernels.name.tolist()):
        assert len(name) <= MAX_NAME_CHARS
        name.encode("utf-8")
    "; ".join(records.notes).encode("utf-8")  # before: the storage name's lone surrogate


def test_mxnet_gpu_ordinal_of_any_size_picks_a_device_without_a_huge_array(mxnet):
    # Before: np.bincount over "gpu/99999999999" tried to allocate 800 GB.
    trace = copy.deepcopy(mxnet)
    for event in trace["traceEvents"]:
        if event.get("cat") == "Device Storage":
            event["name"] = "Memory: gpu/999999999"
            event["args"] = {"Memory: gpu/999999999": 4096}
    records = mxnet_trace.trace_records(trace, "t", **FLOPS)
    assert memory_breakdown(None, records).allocator_peak is None


def test_mxnet_negative_storage_counter_nulls_memory_with_the_reason(mxnet, shapes):
    trace = copy.deepcopy(mxnet)
    for event in trace["traceEvents"]:
        if event.get("cat") == "Device Storage":
            event["args"] = {event["name"]: -(10**12)}
    memory = memory_breakdown(None, mxnet_trace.trace_records(trace, "t", shapes=shapes, **FLOPS))
    assert memory.allocator_peak is None and "goes negative" in memory.reasons["allocator_peak"]


@pytest.mark.parametrize("field, value", [("ts_ps", 10**25), ("ts_ps", -(10**25)), ("dur_ps", 10**25),
                                          ("dur_ps", -5)])
def test_tensorflow_times_out_of_range_are_one_line(tf, field, value):
    # Before: OverflowError building the int64 columns.
    trace = copy.deepcopy(tf)
    _first(trace, cat="tf_op")["args"][field] = value
    with pytest.raises(TraceFormatError) as err:
        tensorflow_trace.trace_records(trace, "t", **FLOPS)
    assert f"has no integer {field} in range" in _one_line(err)


def test_tensorflow_unhashable_thread_ids(tf):
    # Before: TypeError (unhashable type: 'list').
    trace = copy.deepcopy(tf)
    for event in trace["traceEvents"]:
        event["tid"] = [1, 2]
    assert len(tensorflow_trace.trace_records(trace, "t", **FLOPS).kernels)


@pytest.mark.parametrize("node", [Decimal("1.5"), [1, 2], {"type": "Conv2D", "inputs": Decimal(3)},
                                  {"type": ["x"], "inputs": [[1]]}, {"type": "MatMul", "input_ops": [7]}])
def test_tensorflow_malformed_shape_nodes_are_one_line_or_unknown(tf, node):
    # Before: TypeError ('decimal.Decimal' object is not iterable; unhashable type: 'list').
    trace = copy.deepcopy(tf)
    for key in trace["tfOpShapes"]:
        trace["tfOpShapes"][key] = copy.deepcopy(node)
    try:
        records = tensorflow_trace.trace_records(trace, "t", **FLOPS)
    except TraceFormatError as exc:
        assert "malformed shape record" in exc.one_line()
    else:
        assert np.isnan(records.kernels.flops[records.kernels.flops != 0]).all()
