"""Shapes recovered from other records of the same call (profilers/kineto/completion.py).

A PyTorch 1.9-style trace built here: a forward convolution chain recorded without stride or
padding values, its autograd node (same "Sequence number") holding the output gradient's shape,
and the per-gradient backward ops whose size argument is unrecorded, under their parent
`aten::cudnn_convolution_backward(self, grad_output, weight, ...)`. Every count is written out.
"""

from __future__ import annotations

import numpy as np
import pytest

from tbd.analysis.flops.ops import op_flops, precision_of
from tbd.analysis.op_bytes.ops import op_bytes
from tbd.profilers.kineto.reader import trace_records

X, W, OUT = [2, 3, 8, 8], [4, 3, 3, 3], [2, 4, 6, 6]  # a 3x3 conv, stride 1, no padding
# 2 * N*Cout*OH*OW * Cin*kh*kw = 2 * 288 * 27; bytes: (input + weight + output) * 4
CONV_FLOPS, CONV_BYTES = 2 * 288 * 27, 4 * (384 + 108 + 288)
SCALARS = [[], [], [], [], [], [], []]


def _op(name, ts, dur, tid, dims, seq=None, types=None):
    args = {"Input Dims": dims, "Input type": types or ["float" if d else "" for d in dims]}
    if seq is not None:
        args["Sequence number"] = seq
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": args}


def _launch(ts, tid, corr, kernel_ts, name):
    return [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 1, "pid": 1, "tid": tid,
             "args": {"correlation": corr}},
            {"ph": "X", "cat": "kernel", "name": name, "ts": kernel_ts, "dur": 10, "pid": 0, "tid": 7,
             "args": {"correlation": corr, "device": 0, "stream": 7}}]


def _trace(forward_tid_of_copy=None, node="CudnnConvolutionBackward", x=X, w=W, out=OUT):
    events = [{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "ts": 0, "dur": 1000, "pid": 1, "tid": 1,
               "args": {}},
              _op("aten::conv2d", 10, 50, 1, [x, w, []] + SCALARS[:4], seq=7),
              _op("aten::convolution", 11, 48, 1, [x, w, []] + SCALARS[:6], seq=7),
              _op("aten::cudnn_convolution", 12, 46, 1, [x, w] + SCALARS, seq=7),
              *_launch(13, 1, 1, 100, "fwd_kernel"),
              _op(node, 200, 100, 2, [out], seq=7),
              _op("aten::cudnn_convolution_backward", 201, 98, 2, [x, out, w] + SCALARS),
              _op("aten::cudnn_convolution_backward_input", 202, 40, 2, [[], out, w] + SCALARS),
              *_launch(203, 2, 2, 300, "dgrad_kernel"),
              _op("aten::cudnn_convolution_backward_weight", 250, 40, 2, [[], out, x] + SCALARS),
              *_launch(251, 2, 3, 400, "wgrad_kernel")]
    if forward_tid_of_copy is not None:  # the same sequence number on another forward thread
        events.append(_op("aten::convolution", 500, 10, forward_tid_of_copy, [x, w, []] + SCALARS[:6], seq=7))
    return {"traceEvents": events}


def _rows(trace) -> dict:
    records = trace_records(trace, "t", flops_of=op_flops, precision_of=precision_of, bytes_of=op_bytes)
    k = records.kernels
    return {str(n): (f, b, s) for n, f, b, s in zip(k.name, k.flops, k.bytes, k.op_shapes)}, records


def test_forward_output_from_the_autograd_node_and_backward_sizes_from_the_parent():
    rows, records = _rows(_trace())
    assert rows["fwd_kernel"][:2] == (CONV_FLOPS, CONV_BYTES)
    # grad_input: 2 * numel(grad_output) * Cin*kh*kw, the same MACs; reads grad_output and weight,
    # writes grad_input (the input's shape, from the parent's "self")
    assert rows["dgrad_kernel"][:2] == (2 * 288 * 27, 4 * (288 + 108 + 384))
    # grad_weight: weight_size from the parent's weight; reads grad_output and input, writes the weight
    assert rows["wgrad_kernel"][:2] == (2 * 288 * 27, 4 * (288 + 384 + 108))
    assert ("shapes this trace did not record, recovered: 2 convolution backward ops' size argument from their "
            "parent op; 1 forward convolutions' output shape from their autograd node") in records.notes


def test_without_the_node_nothing_is_made_up():
    trace = _trace()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e["name"] != "CudnnConvolutionBackward"]
    rows, records = _rows(trace)
    assert np.isnan(rows["fwd_kernel"][0]) and np.isnan(rows["fwd_kernel"][1])
    assert not any(n.startswith("shapes this trace did not record") and "forward" in n for n in records.notes)


def test_a_sequence_number_on_two_forward_threads_is_ambiguous():
    rows, _ = _rows(_trace(forward_tid_of_copy=3))
    assert np.isnan(rows["fwd_kernel"][0])
    assert rows["dgrad_kernel"][0] == 2 * 288 * 27  # the parent's shapes do not depend on it


def test_a_transposed_convolution_is_told_by_its_channels():
    # ConvTranspose2d(8, 4, 3, stride=2): weight [Cin=8, Cout=4, 3, 3], 5x5 -> 11x11. The output's
    # 4 channels are not weight[0] = 8, the input's 8 are: transposed, counted over the input's
    # positions: 2 * N*5*5 * 8*4*3*3 = 2 * 50 * 288.
    x, w, out = [2, 8, 5, 5], [8, 4, 3, 3], [2, 4, 11, 11]
    rows, _ = _rows(_trace(node="ConvolutionBackward0", x=x, w=w, out=out))
    assert rows["fwd_kernel"][:2] == (2 * 50 * 288, 4 * (400 + 288 + 968))


@pytest.mark.parametrize("out", [[2, 5, 6, 6], [3, 4, 6, 6], [2, 4, 6]])
def test_an_output_that_does_not_fit_the_call_leaves_the_count_unknown(out):
    rows, _ = _rows(_trace(out=out))
    assert np.isnan(rows["fwd_kernel"][0])
