"""Byte formulas against hand computations (analysis/op_bytes/ops.py).

Shapes and arguments are written as Kineto records them (Input Dims, Input type, Concrete
Inputs). Every expected value is arithmetic written out here: elements x element size, reads
first, then writes.
"""

from __future__ import annotations

import gzip
import json
import math

import pytest
import torch
from testpaths import FIXTURES
from torch import nn
from torch.profiler import ProfilerActivity, profile

from tbd.analysis.flops.ops import FORMULA_OPS, has_formula
from tbd.analysis.op_bytes.args import DTYPE_CODES, DTYPE_SIZES, SCALAR_TYPES
from tbd.analysis.op_bytes.ops import _PREPARED, BYTES_OPS, MAX_BYTES, NO_BYTES, has_bytes_formula, op_bytes
from tbd.core.records import OpShapes


def _op(name: str, *args, t: str = "float") -> OpShapes:
    """(dims, concrete) per argument: a list is a tensor typed `t`, a (list, type) pair a tensor of
    that type, None an absent optional tensor, a string a scalar's Concrete Inputs text."""
    dims, types, concrete = [], [], []
    for arg in args:
        if isinstance(arg, list):
            dims.append(arg), types.append(t), concrete.append("")
        elif isinstance(arg, tuple):
            dims.append(arg[0]), types.append(arg[1]), concrete.append("")
        elif arg is None:
            dims.append([]), types.append(""), concrete.append("")
        else:
            dims.append([]), types.append("ScalarList" if arg.startswith("[") else "Scalar"), concrete.append(arg)
    return OpShapes(name, tuple(dims), tuple(types), tuple(concrete))


def _unrecorded(op: OpShapes) -> OpShapes:
    """The same call as a trace without Concrete Inputs records it."""
    return OpShapes(op.name, op.input_dims, op.input_types, ("",) * len(op.input_dims))


F = 4  # float
H = 2  # c10::Half
L = 8  # long int


# ---- element sizes -----------------------------------------------------------------------------

@pytest.mark.parametrize("spelling, size", [
    ("float", 4), ("double", 8), ("c10::Half", 2), ("c10::BFloat16", 2), ("long int", 8), ("int64_t", 8),
    ("long", 8), ("__int64", 8), ("int", 4), ("short int", 2), ("signed char", 1), ("unsigned char", 1),
    ("bool", 1), ("c10::Float8_e4m3fn", 1), ("c10::Float8_e5m2", 1), ("c10::Float8_e4m3fnuz", 1),
    ("c10::complex<float>", 8), ("c10::complex<double>", 16), ("long unsigned int", 8),
])
def test_element_sizes(spelling, size):
    # zero_ writes its 3 elements and reads nothing
    assert op_bytes(_op("aten::zero_", [3], t=spelling)) == 3 * size


def test_unknown_or_missing_types_are_nan():
    assert math.isnan(op_bytes(_op("aten::zero_", [3], t="c10::quint4x2")))  # packed sub-byte type
    assert math.isnan(op_bytes(_op("aten::zero_", [3], t="")))  # dims but no dtype
    assert math.isnan(op_bytes(OpShapes("aten::zero_", ((3,),), (), ())))  # no "Input type" at all
    assert math.isnan(op_bytes(OpShapes("aten::zero_", ((3,),), (["float"],), ())))  # not a string


def test_dtype_tables_match_what_torch_records(tmp_path):
    # "Input type" of a tensor of each dtype, and the number aten::to records for that dtype
    dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.int16,
              torch.int8, torch.uint8, torch.bool, torch.complex64, torch.float8_e4m3fn]
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for d in dtypes:
            torch.zeros(2).to(d).clone()
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    events = sorted((e for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"]
                     if e.get("name") in ("aten::clone", "aten::to")), key=lambda e: e["ts"])
    clones = [e["args"]["Input type"][0] for e in events if e["name"] == "aten::clone"]
    codes = [int(e["args"]["Concrete Inputs"][1]) for e in events if e["name"] == "aten::to"]
    assert len(clones) == len(codes) == len(dtypes)
    for d, spelling, number in zip(dtypes, clones, codes):
        assert DTYPE_SIZES[spelling] == d.itemsize
        assert DTYPE_CODES[spelling] == number and SCALAR_TYPES[number][0] == d.itemsize


# ---- GEMMs -------------------------------------------------------------------------------------

def test_gemms():
    assert op_bytes(_op("aten::mm", [8, 16], [16, 32])) == (8 * 16 + 16 * 32 + 8 * 32) * F
    assert op_bytes(_op("aten::addmm", [32], [8, 16], [16, 32], "1", "1")) == (32 + 8 * 16 + 16 * 32 + 8 * 32) * F
    assert op_bytes(_op("aten::bmm", [3, 8, 16], [3, 16, 32], t="c10::Half")) \
        == (3 * 8 * 16 + 3 * 16 * 32 + 3 * 8 * 32) * H
    assert op_bytes(_op("aten::baddbmm", [3, 8, 32], [3, 8, 16], [3, 16, 32], "1", "1")) \
        == (3 * 8 * 32 + 3 * 8 * 16 + 3 * 16 * 32 + 3 * 8 * 32) * F
    # addbmm sums the batch into one [m, n]
    assert op_bytes(_op("aten::addbmm", [8, 32], [3, 8, 16], [3, 16, 32], "1", "1")) \
        == (8 * 32 + 3 * 8 * 16 + 3 * 16 * 32 + 8 * 32) * F
    assert op_bytes(_op("aten::mv", [8, 16], [16])) == (8 * 16 + 16 + 8) * F
    assert op_bytes(_op("aten::dot", [16], [16])) == (16 + 16 + 1) * F
    assert math.isnan(op_bytes(_op("aten::mm", [8, 16], [15, 32])))  # inner dims differ


def test_mm_out_argument_is_the_output_not_a_read():
    assert op_bytes(_op("aten::mm", [8, 16], [16, 32], [8, 32])) == op_bytes(_op("aten::mm", [8, 16], [16, 32]))


def test_scaled_mm_writes_in_out_dtype():
    # fp8 [16, 32] x [32, 64], float scales (0-d), bf16 out (ScalarType 15)
    e4m3 = "c10::Float8_e4m3fn"
    op = _op("aten::_scaled_mm", ([16, 32], e4m3), ([32, 64], e4m3), ([], "float"), ([], "float"), None, None, "15",
             "False")
    assert op_bytes(op) == 16 * 32 * 1 + 32 * 64 * 1 + 4 + 4 + 16 * 64 * 2


# ---- convolution ---------------------------------------------------------------------------------

def test_conv_forward_output_from_the_flop_formulas_size():
    # out = (32 + 2·1 - 1·(3-1) - 1) // 2 + 1 = 16
    op = _op("aten::convolution", [2, 3, 32, 32], [8, 3, 3, 3], [8], "[2, 2]", "[1, 1]", "[1, 1]", "False",
             "[0, 0]", "1")
    reads = (2 * 3 * 32 * 32 + 8 * 3 * 3 * 3 + 8) * F
    assert op_bytes(op) == reads + 2 * 8 * 16 * 16 * F


def test_transposed_conv_forward():
    # ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2): weight [4, 3, 3, 3],
    # out = (5-1)·2 - 2·1 + 1·(3-1) + 1 + 1 = 10, channels 3·2 = 6 (torch gives [1, 6, 10, 10])
    op = _op("aten::convolution", [1, 4, 5, 5], [4, 3, 3, 3], None, "[2, 2]", "[1, 1]", "[1, 1]", "True",
             "[1, 1]", "2")
    assert op_bytes(op) == (4 * 5 * 5 + 4 * 3 * 3 * 3) * F + 6 * 10 * 10 * F
    assert math.isnan(op_bytes(_unrecorded(op)))


_GO, _X, _W = [2, 8, 16, 16], [2, 3, 32, 32], [8, 3, 3, 3]
_GO_B, _X_B, _W_B = 2 * 8 * 16 * 16 * F, 2 * 3 * 32 * 32 * F, 8 * 3 * 3 * 3 * F


@pytest.mark.parametrize("mask, expected", [
    ("[True, True, True]", (_GO_B + _W_B + _X_B) + (_X_B + _W_B + 8 * F)),
    ("[False, True, False]", (_GO_B + _X_B) + _W_B),  # grad_weight needs the input, not the weight
    ("[True, False, False]", (_GO_B + _W_B) + _X_B),  # grad_input needs the weight, not the input
    ("[False, False, True]", _GO_B + 8 * F),  # grad_bias: one value per output channel
    ("[False, False, False]", 0),
])
def test_conv_backward_follows_output_mask(mask, expected):
    op = _op("aten::convolution_backward", _GO, _X, _W, "[8]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]",
             "1", mask)
    assert op_bytes(op) == expected
    assert math.isnan(op_bytes(_unrecorded(op)))  # which gradients were made is unknown


def test_native_conv_backward_and_legacy_per_gradient_ops():
    slow = _op("aten::_slow_conv2d_backward", _GO, _X, _W, "[3, 3]", "[2, 2]", "[1, 1]", "[True, True, False]")
    assert op_bytes(slow) == (_GO_B + _W_B + _X_B) + (_X_B + _W_B)
    # PyTorch 1.8-1.10: cudnn_convolution_backward_input(self_size, grad_output, weight, ...)
    gi = _op("aten::cudnn_convolution_backward_input", "[2, 3, 32, 32]", _GO, _W, "[1, 1]", "[2, 2]", "[1, 1]",
             "1", "False", "False", "True")
    assert op_bytes(gi) == _GO_B + _W_B + _X_B
    assert math.isnan(op_bytes(_unrecorded(gi)))  # self_size unrecorded in traces of that era
    gw = _op("aten::cudnn_convolution_backward_weight", "[8, 3, 3, 3]", _GO, _X, "[1, 1]", "[2, 2]", "[1, 1]",
             "1", "False", "False", "True")
    assert op_bytes(gw) == _GO_B + _X_B + _W_B
    # transposed (weight [Cin 4, Cout/groups 3, 3, 3], groups 2): grad_input is a regular conv of
    # grad_output [1, 6, 10, 10] with the weight: (10 + 2·1 - 2 - 1) // 2 + 1 = 5 -> [1, 4, 5, 5]
    tgi = _op("aten::cudnn_convolution_transpose_backward_input", [1, 6, 10, 10], [4, 3, 3, 3], "[1, 1]", "[2, 2]",
              "[1, 1]", "2", "False", "False", "True")
    assert op_bytes(tgi) == (6 * 10 * 10 + 4 * 3 * 3 * 3) * F + 4 * 5 * 5 * F


def test_convolution_backward_of_the_synthetic_fixture():
    # tests/fixtures/kineto_cuda_synthetic.json: grad_out [20,50,20,20], input [20,10,20,20], weight
    # [50,10,1,1], output_mask [F,T,F]: grad_output and input read, grad_weight written
    op = _op("aten::convolution_backward", [20, 50, 20, 20], [20, 10, 20, 20], [50, 10, 1, 1], "[50]", "[1, 1]",
             "[0, 0]", "[1, 1]", "False", "[0, 0]", "1", "[False, True, False]")
    assert op_bytes(op) == (20 * 50 * 20 * 20 + 20 * 10 * 20 * 20) * F + 50 * 10 * F == 1_922_000


# ---- attention -----------------------------------------------------------------------------------
# b 2, h 4, sq 8, sk 10, d = dv 16, half: q 1024 elements, k and v 1280; out 2·4·8 rows of 16;
# logsumexp one float32 per row
_Q, _KV, _ROWS = 2 * 4 * 8 * 16, 2 * 4 * 10 * 16, 2 * 4 * 8
_ATTN_FWD = (_Q + 2 * _KV) * H + _ROWS * 16 * H + _ROWS * 4


def test_attention_forward_in_every_layout():
    bhsd = ([2, 4, 8, 16], [2, 4, 10, 16], [2, 4, 10, 16])
    bshd = ([2, 8, 4, 16], [2, 10, 4, 16], [2, 10, 4, 16])
    outer = _op("aten::_scaled_dot_product_flash_attention", *bhsd, "0.", "False", "False", None, t="c10::Half")
    assert op_bytes(outer) == _ATTN_FWD
    inner = _op("aten::_flash_attention_forward", *bshd, None, None, "8", "10", "0.", "False", "False",
                t="c10::Half")
    assert op_bytes(inner) == _ATTN_FWD  # the inner kernel counts what its outer op counts
    packed = _op("aten::_flash_attention_forward", [2 * 8, 4, 16], [2 * 10, 4, 16], [2 * 10, 4, 16],
                 ([3], "int"), ([3], "int"), "9", "11", "0.", "False", "False", t="c10::Half")
    assert op_bytes(packed) == _ATTN_FWD + 2 * 3 * 4  # plus the two cum_seq int32 [3]: exact even if ragged
    no_lse = _op("aten::_scaled_dot_product_efficient_attention", *bhsd, None, "False", "0.", "False", None,
                 t="c10::Half")
    assert op_bytes(no_lse) == _ATTN_FWD - _ROWS * 4
    assert math.isnan(op_bytes(_unrecorded(no_lse)))  # compute_log_sumexp has no default


def test_attention_backward():
    q, kv = [2, 4, 8, 16], [2, 4, 10, 16]
    op = _op("aten::_scaled_dot_product_flash_attention_backward", q, q, kv, kv, q, ([2, 4, 8], "float"), None,
             None, "8", "10", "0.", "False", None, None, None, t="c10::Half")
    reads = (_Q + _Q + 2 * _KV + _Q) * H + _ROWS * 4  # grad_out, q, k, v, out; logsumexp
    assert op_bytes(op) == reads + (_Q + 2 * _KV) * H
    bias = [2, 4, 8, 10]
    eff = _op("aten::_scaled_dot_product_efficient_attention_backward", q, q, kv, kv, bias, q,
              ([2, 4, 8], "float"), None, None, "0.", "[True, True, True, True]", "False", None, t="c10::Half")
    assert op_bytes(eff) == reads + 2 * 4 * 8 * 10 * H + (_Q + 2 * _KV) * H + 2 * 4 * 8 * 10 * H


# ---- recurrent -------------------------------------------------------------------------------------

def test_mkldnn_rnn_layer():
    # input [7,3,6], w_ih [20,6], w_hh [20,5], biases [20], hx/cx [3,5]; output [7,3,5], hy, cy
    op = _op("aten::mkldnn_rnn_layer", [7, 3, 6], [20, 6], [20, 5], [20], [20], [3, 5], [3, 5], "False", "[]",
             "2", "5", "1", "True", "False", "False", "True")
    assert op_bytes(op) == (126 + 120 + 100 + 20 + 20 + 15 + 15) * F + (7 * 3 * 5 + 15 + 15) * F


def test_cudnn_lstm_reads_the_weight_list_in_the_inputs_dtype():
    weights = [[20, 6], [20, 5], [20], [20]]  # one layer, one direction
    dims = ([7, 3, 6], weights, [], [], [1, 3, 5], [1, 3, 5]) + ([],) * 10
    types = ("float", "TensorList", "Scalar", "", "float", "float") + ("Scalar",) * 9 + ("",)
    scalars = ("",) * 6 + ("2", "5", "0", "1", "False", "0.", "True", "False", "[]", "")
    op = OpShapes("aten::_cudnn_rnn", dims, types, scalars)
    assert op_bytes(op) == (126 + 120 + 100 + 20 + 20 + 15 + 15) * F + (7 * 3 * 5 + 15 + 15) * F


def test_fused_lstm_cell_forward_and_backward():
    fwd = _op("aten::_thnn_fused_lstm_cell", [3, 20], [3, 20], [3, 5], [20], [20])
    assert op_bytes(fwd) == (60 + 60 + 15 + 20 + 20) * F + (15 + 15 + 60) * F  # hy, cy, workspace
    bwd = _op("aten::_thnn_fused_lstm_cell_backward_impl", [3, 5], [3, 5], [3, 5], [3, 5], [3, 20], "True")
    assert op_bytes(bwd) == (15 * 4 + 60) * F + (60 + 15 + 20) * F  # grad_gates, grad_cx, grad_bias


# ---- normalization -----------------------------------------------------------------------------
# input [4, 8, 5, 5] = 800 elements, 8 channels

def test_batch_norm_forward_training_and_inference():
    train = _op("aten::native_batch_norm", [4, 8, 5, 5], [8], [8], [8], [8], "True", "0.1", "1e-05")
    reads = (800 + 4 * 8) * F
    # output, save_mean and save_invstd, the updated running mean and var
    assert op_bytes(train) == reads + 800 * F + 2 * 8 * F + 2 * 8 * F
    infer = _op("aten::_native_batch_norm_legit_no_training", [4, 8, 5, 5], [8], [8], [8], [8], "0.1", "1e-05")
    assert op_bytes(infer) == reads + 800 * F
    assert math.isnan(op_bytes(_unrecorded(train)))  # the training flag has no default


def test_batch_norm_backward():
    args = ([4, 8, 5, 5], [4, 8, 5, 5], [8], [8], [8], [8], [8], "True", "1e-05")
    reads = (800 + 800 + 5 * 8) * F
    assert op_bytes(_op("aten::native_batch_norm_backward", *args, "[True, True, True]")) \
        == reads + 800 * F + 2 * 8 * F
    assert op_bytes(_op("aten::native_batch_norm_backward", *args, "[True, False, False]")) == reads + 800 * F
    # the out= overload's outputs are not reads; batch_norm_backward's reserve (here 16 bytes) is
    out = _op("aten::native_batch_norm_backward", *args, "[True, True, True]", [4, 8, 5, 5], [8], [8])
    assert op_bytes(out) == reads + 800 * F + 2 * 8 * F
    reserve = _op("aten::batch_norm_backward", *args, "[True, True, True]", ([16], "unsigned char"))
    assert op_bytes(reserve) == reads + 16 + 800 * F + 2 * 8 * F


def test_layer_norm_forward_and_backward():
    # [2, 5, 16] over the last dim: 10 rows
    fwd = _op("aten::native_layer_norm", [2, 5, 16], "[16]", [16], [16], "1e-05")
    assert op_bytes(fwd) == (160 + 16 + 16) * F + 160 * F + 2 * 10 * F  # out, mean, rstd
    assert op_bytes(_unrecorded(fwd)) == op_bytes(fwd)  # normalized_shape is the weight's shape
    bwd = _op("aten::native_layer_norm_backward", [2, 5, 16], [2, 5, 16], "[16]", [2, 5, 1], [2, 5, 1], [16], [16],
              "[True, True, True]")
    # grad_out, input, mean, rstd, weight read (bias is passed for its shape); three gradients written
    assert op_bytes(bwd) == (160 + 160 + 10 + 10 + 16) * F + (160 + 16 + 16) * F
    assert op_bytes(_unrecorded(bwd)) == op_bytes(bwd)  # unrecorded mask: every gradient it can give
    half = _op("aten::native_layer_norm", [2, 5, 16], "[16]", None, None, "1e-05", t="c10::BFloat16")
    assert op_bytes(half) == 160 * 2 + 160 * 2 + 2 * 10 * 4  # statistics in float32


# ---- elementwise -------------------------------------------------------------------------------

def test_broadcasting_reads_each_operand_once_and_writes_the_broadcast():
    # [4, 1, 8] + [3, 1] -> [4, 3, 8] = 96 elements
    assert op_bytes(_op("aten::add", [4, 1, 8], [3, 1], "1")) == (32 + 3) * F + 96 * F
    out = _op("aten::add", [4, 1, 8], [3, 1], "1", [4, 3, 8])
    assert op_bytes(out) == (32 + 3) * F + 96 * F  # add.out: the out tensor is the write


def test_a_broadcast_div_reads_each_input_in_its_own_shape_not_the_outputs():
    # The issue-27 case (mean's backward divides by the count): 32x2048x1x1 over 32x2048x7x7 reads
    # 65,536 + 3,211,264 elements and writes 3,211,264, never 2 x 3,211,264 reads.
    small, full = 32 * 2048, 32 * 2048 * 7 * 7
    assert op_bytes(_op("aten::div", [32, 2048, 1, 1], [32, 2048, 7, 7])) == (small + full) * F + full * F
    # As PyTorch 1.9 records it: the expanded view in the output's shape, the Scalar 49 typed "Int" with no
    # value (a kernel argument, no traffic), or wrapped as a 0-d int64 tensor (one element read).
    assert op_bytes(OpShapes("aten::div", ([32, 2048, 7, 7], []), ("float", "Int"), ("", ""))) == 2 * full * F
    assert op_bytes(OpShapes("aten::div", ([32, 2048, 7, 7], []), ("float", "long int"), ("", ""))) == \
        full * F + 8 + full * F


def test_inplace_writes_self():
    assert op_bytes(_op("aten::add_", [4, 3, 8], [3, 1], "1")) == (96 + 3) * F + 96 * F
    assert op_bytes(_op("aten::relu_", [4, 8])) == 32 * F + 32 * F
    assert op_bytes(_op("aten::masked_fill_", [4, 8], ([4, 8], "bool"), "1.")) == (32 * F + 32) + 32 * F


def test_result_dtypes():
    assert op_bytes(_op("aten::gt", [4, 8], "0")) == 32 * F + 32 * 1  # comparisons write bool
    # half times a 0-d float tensor: dimensioned operands decide -> half
    assert op_bytes(_op("aten::mul", ([4, 8], "c10::Half"), ([], "float"))) == 32 * H + F + 32 * H
    # int32 + Python float (a wrapped 0-d double): float32
    assert op_bytes(_op("aten::add", ([4, 8], "int"), ([], "double"), "1")) == 32 * 4 + 8 + 32 * F
    assert op_bytes(_op("aten::exp", ([4, 8], "long int"))) == 32 * L + 32 * F  # a floating function
    assert op_bytes(_op("aten::add", ([4, 8], "long int"), "2", "1")) == 32 * L + 32 * L
    assert math.isnan(op_bytes(_unrecorded(_op("aten::add", ([4, 8], "long int"), "2", "1"))))  # int or float?


def test_unary_binary_and_dropout():
    assert op_bytes(_op("aten::relu", [8, 32])) == 256 * F + 256 * F
    assert op_bytes(_op("aten::sigmoid_backward", [8, 32], [8, 32])) == 2 * 256 * F + 256 * F
    # output and a bool mask
    assert op_bytes(_op("aten::native_dropout", [4, 8], "0.5", "True")) == 32 * F + 32 * F + 32
    assert op_bytes(_op("aten::relu", [8, 32])) == op_bytes(_op("aten::clamp_min", [8, 32], "0"))  # wrapper = inner


def test_foreach_ops_count_list_elements_at_the_given_size():
    two = [[4, 8], [4, 8]]  # 64 elements
    op = OpShapes("aten::_foreach_add_", (two, two, []), ("TensorList", "TensorList", "Scalar"), ("", "", "0.1"))
    assert op_bytes(op, list_itemsize=4) == (64 + 64 + 64) * 4  # self, other read; self written
    assert math.isnan(op_bytes(op))  # a TensorList's dtype is not recorded
    long_list = OpShapes("aten::_foreach_add_", ([], [], []), ("TensorList", "TensorList", "Scalar"), ("", "", "1"))
    assert math.isnan(op_bytes(long_list, list_itemsize=4))  # torch records no shapes past 30 tensors
    norm = OpShapes("aten::_foreach_norm", (two, [], []), ("TensorList", "Scalar", ""), ("", "2", ""))
    assert op_bytes(norm, list_itemsize=2) == (64 + 2) * 2  # one 0-d norm per tensor


# ---- reductions, softmax, losses ---------------------------------------------------------------

def test_reductions():
    assert op_bytes(_op("aten::sum", [4, 8], "[1]", "False", None)) == 32 * F + 4 * F
    assert op_bytes(_op("aten::sum", [4, 8], "[-1, -2]", "True", None)) == 32 * F + 1 * F
    assert op_bytes(_op("aten::sum", ([4, 8], "int"), None)) == 32 * 4 + 8  # integer sums are int64
    assert op_bytes(_op("aten::mean", [4, 8], "[0]", "False", "7")) == 32 * F + 8 * 8  # dtype=double
    assert op_bytes(_op("aten::linalg_vector_norm", [4, 8], "2", "[1]", "False", None)) == 32 * F + 4 * F
    assert math.isnan(op_bytes(_unrecorded(_op("aten::sum", [4, 8], "[1]", "False", None))))  # dims unknown
    amax = _PREPARED["aten::amax"]  # waits for a FLOP formula
    assert amax(_op("aten::amax", [4, 8], "[1]", "False")) == 32 * F + 4 * F


def test_softmax_forward_and_backward():
    assert op_bytes(_op("aten::_softmax", [4, 8], "1", "False")) == 32 * F + 32 * F
    assert op_bytes(_op("aten::_softmax", [4, 8], "1", "True", t="c10::Half")) == 32 * H + 32 * F  # half_to_float
    bwd = _op("aten::_softmax_backward_data", [4, 8], [4, 8], "1", "5")  # float grads of a half input
    assert op_bytes(bwd) == 2 * 32 * F + 32 * H
    assert math.isnan(op_bytes(_unrecorded(bwd)))  # float grads: the input could be half or float
    half = _op("aten::_softmax_backward_data", [4, 8], [4, 8], "1", "5", t="c10::Half")
    assert op_bytes(_unrecorded(half)) == 3 * 32 * H  # half grads: a half input


def test_losses():
    # nll_loss picks one log-probability (and class weight) per target: a gather, not the [4, 8] input
    op = _op("aten::nll_loss_forward", [4, 8], ([4], "long int"), [8], "1", "-100")
    assert op_bytes(op) == 4 * L + 4 * F + 4 * F + (1 + 1) * F  # output and total_weight
    none = _op("aten::nll_loss_forward", [4, 8], ([4], "long int"), None, "0", "-100")
    assert op_bytes(none) == 4 * L + 4 * F + (4 + 1) * F
    bwd = _op("aten::nll_loss_backward", [], [4, 8], ([4], "long int"), None, "1", "-100", [])
    assert op_bytes(bwd) == (F + 4 * L + F) + 32 * F  # grad_input written whole; self not read
    assert op_bytes(_op("aten::mse_loss", [8, 4], [8, 4], "1")) == 2 * 32 * F + F
    assert op_bytes(_op("aten::mse_loss_backward", [], [8, 4], [8, 4], "1")) == (1 + 32 + 32) * F + 32 * F


# ---- embeddings and pooling ----------------------------------------------------------------------

def test_embeddings_gather_rows():
    # [50, 16] table, [2, 5] indices: 10 rows of 16 read and written
    assert op_bytes(_op("aten::embedding", [50, 16], ([2, 5], "long int"), "-1", "False", "False")) \
        == 10 * L + 2 * 10 * 16 * F
    bwd = _op("aten::embedding_dense_backward", [2, 5, 16], ([2, 5], "long int"), "50", "-1", "False")
    assert op_bytes(bwd) == (160 * F + 10 * L) + 50 * 16 * F  # grad_weight written whole
    assert op_bytes(_op("aten::embedding_sparse_backward", [3, 8], ([3], "long int"), "10", "-1", "False")) == 0.0
    # bag, mode mean: 12 indices, offsets [4] -> 4 bags of 16; offset2bag [12], bag_size [4] int64
    bag = _op("aten::_embedding_bag", [100, 16], ([12], "long int"), ([4], "long int"), "False", "1", "False", None,
              "False", "-1")
    assert op_bytes(bag) == (12 * L + 4 * L + 12 * 16 * F) + (4 * 16 * F + (12 + 4) * L)
    assert op_bytes(OpShapes("aten::embedding_bag", bag.input_dims[:8], bag.input_types[:8],
                             bag.concrete_inputs[:8])) == op_bytes(bag)  # the wrapper counts the same


def test_pooling():
    # [1, 2, 8, 8] max-pooled 2x2 -> [1, 2, 4, 4] = 32 values and 32 int64 indices
    args = ("[2, 2]", "[]", "[0, 0]", "[1, 1]", "False")
    fwd = _op("aten::max_pool2d_with_indices", [1, 2, 8, 8], *args)
    assert op_bytes(fwd) == 128 * F + 32 * (F + L)
    assert op_bytes(_op("aten::max_pool2d", [1, 2, 8, 8], *args)) == op_bytes(fwd)
    bwd = _op("aten::max_pool2d_with_indices_backward", [1, 2, 4, 4], [1, 2, 8, 8], *args, ([1, 2, 4, 4], "long int"))
    assert op_bytes(bwd) == (32 * F + 32 * L) + 128 * F  # self passed for its shape
    avg = _op("aten::avg_pool2d", [2, 3, 8, 8], "[2, 2]", "[]", "[0, 0]", "False", "True", None)
    assert op_bytes(avg) == 384 * F + 96 * F
    assert op_bytes(_op("aten::adaptive_avg_pool2d", [2, 4, 8, 8], "[1, 1]")) == 512 * F + 8 * F


# ---- data movement -------------------------------------------------------------------------------

def test_copies_and_casts():
    assert op_bytes(_op("aten::copy_", ([], "float"), ([], "long int"), "False")) == L + F  # src read, self written
    assert op_bytes(_op("aten::copy_", [4, 8], [8], "False")) == 8 * F + 32 * F  # a broadcast src read once
    assert op_bytes(_op("aten::clone", [4, 8], None)) == 2 * 32 * F
    assert op_bytes(_op("aten::contiguous", [8, 4], "0")) == 2 * 32 * F
    assert op_bytes(_op("aten::to", [4, 8], "5", "False", "False", None)) == 32 * F + 32 * H  # to(half)
    assert op_bytes(_op("aten::_to_copy", [4, 8], "5", None, None, None, "False", None)) == 32 * F + 32 * H


def test_to_without_a_cast_moves_nothing_unless_it_copies():
    assert op_bytes(_op("aten::to", [4, 8], "6", "False", "False", None)) == 0.0  # returns self
    # .dtype_layout as x.to("cpu") records it: dtype filled in, device not recorded
    assert op_bytes(_op("aten::to", [4, 8], "6", "0", None, None, "False", "False", None)) == 0.0
    assert op_bytes(_op("aten::to", [4, 8], "6", "False", "True", None)) == 2 * 32 * F  # copy=True
    assert math.isnan(op_bytes(_unrecorded(_op("aten::to", [4, 8], "6", "False", "False", None))))


def test_fills_and_factories_only_write():
    assert op_bytes(_op("aten::fill_", [4, 8], "2.")) == 32 * F
    assert op_bytes(_op("aten::zeros", "[4, 2]", "4", None, None, "False")) == 8 * L
    assert op_bytes(_op("aten::zeros", "[3, 4]", None, None, None, "False")) == 12 * F  # default float
    assert op_bytes(_op("aten::full", "[3]", "7", None, None, None, None)) == 3 * L  # an int fill makes int64
    assert op_bytes(_op("aten::zeros_like", [8, 4], None, None, None, None, "0")) == 32 * F  # self not read
    assert op_bytes(_op("aten::new_zeros", [4, 8], "[3]", None, None, None, "False")) == 3 * F
    assert op_bytes(_op("aten::empty", "[4, 8]", "6", "0", None, None, "0")) == 0.0  # allocation only
    assert op_bytes(_op("aten::transpose", [4, 8], "0", "1")) == 0.0  # a view


def test_cat_gathers_where_and_padding():
    cat = OpShapes("aten::cat", ([[4, 8], [2, 8]], []), ("TensorList", "Scalar"), ("", "0"))
    assert op_bytes(cat, list_itemsize=2) == (48 + 48) * 2
    assert math.isnan(op_bytes(cat))
    # index_select rows 2 of [4, 8]: index and 2 rows of 8 read, 2 rows written
    assert op_bytes(_op("aten::index_select", [4, 8], "0", ([2], "long int"))) == 2 * L + 2 * 2 * 8 * F
    gather = _PREPARED["aten::gather"]  # waits for a FLOP formula
    assert gather(_op("aten::gather", [4, 8], "1", ([4, 2], "long int"), "False")) == 8 * L + 2 * 8 * F
    where = _op("aten::where", ([4, 8], "bool"), [4, 8], ([], "float"))
    assert op_bytes(where) == (32 + 32 * F + F) + 32 * F
    assert op_bytes(_op("aten::constant_pad_nd", [4, 8], "[1, 1]", "0.")) == 32 * F + 4 * 10 * F
    assert op_bytes(_op("aten::constant_pad_nd", [4, 8], "[-1, 2]", "0.")) == 4 * 7 * F + 4 * 9 * F  # crop left
    assert math.isnan(op_bytes(_op("aten::reshape", [5, 2, 16], "[10, 16]")))  # view or copy: strides unknown


# ---- a real trace ----------------------------------------------------------------------------------

def test_signatures_of_the_committed_cpu_trace():
    # tests/fixtures/kineto_cpu_small.json.gz (torch 2.13, Linear(16, 32) on a batch of 8)
    addmm = OpShapes("aten::addmm", ((32,), (8, 16), (16, 32), (), ()), ("float", "float", "float", "Scalar", "Scalar"),
                     ("", "", "", "1", "1"))
    relu_grad = OpShapes("aten::threshold_backward", ((8, 32), (8, 32), ()), ("float", "float", "Scalar"),
                         ("", "", "0"))
    with gzip.open(FIXTURES / "kineto_cpu_small.json.gz") as fh:
        events = json.load(fh)["traceEvents"]
    recorded = {(e["name"], json.dumps(e["args"]["Input Dims"]), json.dumps(e["args"]["Input type"]),
                 json.dumps(e["args"]["Concrete Inputs"])) for e in events if "Input Dims" in e.get("args", {})}
    for op in (addmm, relu_grad):
        assert (op.name, json.dumps([list(d) for d in op.input_dims]), json.dumps(list(op.input_types)),
                json.dumps(list(op.concrete_inputs))) in recorded
    # bias [32], x [8, 16], weight.T [16, 32] read; [8, 32] written
    assert op_bytes(addmm) == (32 + 8 * 16 + 16 * 32) * 4 + 8 * 32 * 4 == 3712
    # grad_output and the ReLU output read, grad_input written
    assert op_bytes(relu_grad) == (256 + 256) * 4 + 256 * 4 == 3072


def test_every_formula_root_of_a_training_step_has_bytes(tmp_path):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(4 * 4 * 4, 10), nn.LayerNorm(10))
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([1, 2])
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        nn.functional.cross_entropy(net(x), y).backward()
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    events = sorted((e for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"]
                     if e.get("cat") == "cpu_op"), key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    unknown, stack = set(), []
    for e in events:
        while stack and (stack[-1]["tid"] != e["tid"] or stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]):
            stack.pop()
        if has_formula(e["name"]) and not any(has_formula(s["name"]) for s in stack):
            a = e["args"]
            op = OpShapes(e["name"], tuple(tuple(d) for d in a["Input Dims"]), tuple(a["Input type"]),
                          tuple(a["Concrete Inputs"]))
            if not math.isfinite(op_bytes(op)):
                unknown.add(e["name"])
        stack.append(e)
    assert unknown <= {"aten::flatten", "aten::reshape"}  # view or copy: the strides are not recorded


# ---- contract ------------------------------------------------------------------------------------

def test_bytes_hang_from_the_flop_formulas_ops():
    assert BYTES_OPS <= FORMULA_OPS  # a kernel takes its bytes from the op it takes its FLOPs from
    missing = FORMULA_OPS - BYTES_OPS - set(NO_BYTES)
    assert not missing, f"FLOP-formula ops without a byte formula (add one, or list the reason in NO_BYTES): {missing}"
    assert not has_bytes_formula("aten::amax") or has_formula("aten::amax")
    assert not has_bytes_formula("aten::not_an_op") and math.isnan(op_bytes(_op("aten::not_an_op", [2])))


@pytest.mark.parametrize("op", [
    OpShapes("aten::mm", ((-8, 16), (16, 32)), ("float", "float"), ()),  # negative dims
    OpShapes("aten::mm", ((10**200, 10**200), (10**200, 10**200)), ("float", "float"), ()),  # beyond MAX_BYTES
    OpShapes("aten::addmm", (), (), ()),  # nothing recorded
    OpShapes("aten::convolution", ((1, 3, 8, 8), (4, 3, 3, 3)) + ((),) * 7, ("float",) * 2,
             ("", "", "", "(" * 300, "[1, 1]", "[1, 1]", "False", "[0, 0]", "1")),  # hostile Concrete Inputs
    OpShapes("aten::relu", ("x",), (None,), None),
])
def test_malformed_calls_give_nan_never_an_exception(op):
    assert math.isnan(op_bytes(op))


def test_count_is_capped():
    big = 2**31
    op = _op("aten::zero_", [big, big, 4], t="c10::complex<double>")  # 2^64 elements x 16 bytes
    assert math.isnan(op_bytes(op))
    assert op_bytes(_op("aten::zero_", [2**20, 2**20])) == 2**40 * 4 <= MAX_BYTES
