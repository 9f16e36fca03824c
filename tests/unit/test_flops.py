"""FLOP formulas against closed-form hand computations (analysis/flops/ops.py).

Shapes and arguments are written as Kineto records them (Input Dims, Input type, Concrete
Inputs). Every expected value is arithmetic from the formula named in analysis/flops/ops.py.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from tbd.analysis.flops.ops import FORMULA_OPS, has_formula, op_flops, precision_of
from tbd.core.records import OpShapes


def _op(name: str, *args) -> OpShapes:
    """Build an OpShapes from (dims, concrete) pairs; a tensor is a list of ints, typed "float"."""
    dims, types, concrete = [], [], []
    for arg in args:
        if isinstance(arg, list):  # a float tensor
            dims.append(arg), types.append("float"), concrete.append("")
        elif arg is None:  # an absent optional tensor
            dims.append([]), types.append(""), concrete.append("")
        else:  # a scalar given as its Concrete Inputs string
            list_like = arg.startswith("[")
            dims.append([]), types.append("ScalarList" if list_like else "Scalar"), concrete.append(arg)
    return OpShapes(name, tuple(dims), tuple(types), tuple(concrete))


def _unrecorded(name: str, *args) -> OpShapes:
    """An OpShapes as a trace without Concrete Inputs (PyTorch 1.x, early 2.x) records it: scalars and int[]
    arguments have no dims and no value; only tensors (lists of ints) and absent tensors (None) show."""
    dims = tuple(a if isinstance(a, list) else [] for a in args)
    types = tuple("float" if isinstance(a, list) else "" if a is None else "Scalar" for a in args)
    return OpShapes(name, dims, types, ("",) * len(args))


def _conv(x, w, stride, padding, dilation="[1, 1]", transposed="False", groups="1"):
    return _op("aten::convolution", x, w, None, stride, padding, dilation, transposed, "[0, 0]", groups)


# ---- convolution ---------------------------------------------------------------------------

def test_conv_stride_and_padding():
    # out = (32 + 2·1 - 1·(3-1) - 1) // 2 + 1 = 16
    op = _conv([2, 3, 32, 32], [8, 3, 3, 3], "[2, 2]", "[1, 1]")
    assert op_flops(op) == 2 * 2 * 8 * (16 * 16) * 3 * (3 * 3)


def test_conv_dilation_without_padding():
    # out = (11 + 0 - 2·(3-1) - 1) // 3 + 1 = 3
    op = _conv([1, 2, 11, 11], [4, 2, 3, 3], "[3, 3]", "[0, 0]", dilation="[2, 2]")
    assert op_flops(op) == 2 * 1 * 4 * (3 * 3) * 2 * (3 * 3)


def test_conv_groups_count_cin_per_group():
    # groups 4: each output channel sees 16 / 4 = 4 input channels (the weight's dim 1)
    op = _conv([1, 16, 8, 8], [16, 4, 3, 3], "[1, 1]", "[1, 1]", groups="4")
    assert op_flops(op) == 2 * 1 * 16 * (8 * 8) * (16 // 4) * (3 * 3)


def test_transposed_conv_counts_input_positions():
    # weight [Cin, Cout/groups, k, k]: every input position meets Cout/groups·k·k weights
    op = _conv([1, 4, 5, 5], [4, 3, 3, 3], "[2, 2]", "[1, 1]", transposed="True", groups="2")
    assert op_flops(op) == 2 * 1 * (5 * 5) * 4 * 3 * (3 * 3)


@pytest.mark.parametrize("mask, terms", [
    ("[True, False, False]", 1), ("[False, True, False]", 1), ("[False, False, True]", 0),
    ("[True, True, True]", 2), ("[False, True, True]", 1),
])
def test_conv_backward_respects_output_mask(mask, terms):
    forward = 2 * 2 * 8 * (16 * 16) * 3 * (3 * 3)  # the forward of test_conv_stride_and_padding
    op = _op("aten::convolution_backward", [2, 8, 16, 16], [2, 3, 32, 32], [8, 3, 3, 3], "[8]",
             "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", mask)
    assert op_flops(op) == terms * forward


def test_grouped_conv_backward_weight_uses_cin_per_group():
    forward = 2 * 1 * 16 * (8 * 8) * (16 // 4) * (3 * 3)
    op = _op("aten::convolution_backward", [1, 16, 8, 8], [1, 16, 8, 8], [16, 4, 3, 3], "[16]",
             "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "4", "[True, True, False]")
    assert op_flops(op) == 2 * forward


# Legacy (PyTorch <= 1.10) per-backend conv backward: the outer op has no formula, the per-gradient
# ops carry it. A 3x3 conv, 32 -> 64 channels, stride 2, on [8, 32, 56, 56]: output [8, 64, 28, 28].
_GO, _X, _W = [8, 64, 28, 28], [8, 32, 56, 56], [64, 32, 3, 3]
_CONV_FWD = 2 * 8 * 64 * 28 * 28 * 32 * 3 * 3


@pytest.mark.parametrize("name", ["aten::cudnn_convolution_backward_input", "aten::miopen_convolution_backward_input",
                                  "aten::mkldnn_convolution_backward_input"])
def test_legacy_conv_backward_input_from_tensors_alone(name):
    # self_size, padding, stride, dilation, groups unrecorded: grad_output and weight suffice
    op = _unrecorded(name, "self_size", _GO, _W, "pad", "stride", "dil", "groups", "b", "d", "tf32")
    assert op_flops(op) == _CONV_FWD
    grouped = _unrecorded(name, "self_size", _GO, [64, 16, 3, 3], "pad", "stride", "dil", "groups", "b", "d", "tf32")
    assert op_flops(grouped) == 2 * 8 * 64 * 28 * 28 * (32 // 2) * 3 * 3  # groups 2: Cin/g = weight dim 1


def test_legacy_conv_backward_weight_needs_weight_size():
    name = "aten::cudnn_convolution_backward_weight"
    op = _op(name, "[64, 32, 3, 3]", _GO, _X, "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False", "True")
    assert op_flops(op) == _CONV_FWD
    grouped = _op(name, "[64, 16, 3, 3]", _GO, _X, "[1, 1]", "[2, 2]", "[1, 1]", "2", "False", "False", "True")
    assert op_flops(grouped) == 2 * 8 * 64 * 28 * 28 * (32 // 2) * 3 * 3
    # the kernel size is only in the int[] weight_size, which a trace without Concrete Inputs lacks
    assert math.isnan(op_flops(_unrecorded(name, "ws", _GO, _X, "pad", "stride", "dil", "groups", "b", "d", "tf32")))
    mkldnn = _op("aten::mkldnn_convolution_backward_weights", "[64, 32, 3, 3]", _GO, _X, "[1, 1]", "[2, 2]",
                 "[1, 1]", "1", "False")
    assert op_flops(mkldnn) == _CONV_FWD


def test_legacy_transposed_conv_backward():
    # ConvTranspose2d(4, 8, 3, stride=2) on [2, 4, 8, 8]: output (8 - 1)·2 + 3 = 17; every input
    # position meets 8·3·3 weights
    forward = 2 * 2 * (8 * 8) * 4 * 8 * (3 * 3)
    gi = _op("aten::cudnn_convolution_transpose_backward_input", [2, 8, 17, 17], [4, 8, 3, 3],
             "[0, 0]", "[2, 2]", "[1, 1]", "1", "False", "False", "True")
    assert op_flops(gi) == forward  # grad_input spatial: (17 - 2 - 1) // 2 + 1 = 8
    gw = _op("aten::cudnn_convolution_transpose_backward_weight", "[4, 8, 3, 3]", [2, 8, 17, 17], [2, 4, 8, 8],
             "[0, 0]", "[2, 2]", "[1, 1]", "1", "False", "False", "True")
    assert op_flops(gw) == forward


@pytest.mark.parametrize("name, extra, mask, terms", [
    ("aten::thnn_conv2d_backward", ([8, 288, 784], [0]), "[True, True, False]", 2),  # 1.8: finput, fgrad_input
    ("aten::_slow_conv2d_backward", (), "[True, False, True]", 1),
    ("aten::slow_conv_dilated2d_backward", ("[1, 1]",), "[False, True, True]", 1),
])
def test_native_conv_backward_mask_is_last(name, extra, mask, terms):
    op = _op(name, _GO, _X, _W, "[3, 3]", "[2, 2]", "[1, 1]", *extra, mask)
    assert op_flops(op) == terms * _CONV_FWD
    unrecorded = _unrecorded(name, _GO, _X, _W, "k", "s", "p", *extra, "mask")
    assert math.isnan(op_flops(unrecorded))  # no default for output_mask


def test_depthwise_and_overrideable_conv_backward():
    # depthwise 3x3 on 32 channels: weight [32, 1, 3, 3], one input channel per output channel
    depthwise = _op("aten::thnn_conv_depthwise2d_backward", [8, 32, 28, 28], [8, 32, 28, 28], [32, 1, 3, 3],
                    "[3, 3]", "[1, 1]", "[1, 1]", "[1, 1]", "[True, True]")
    assert op_flops(depthwise) == 2 * (2 * 8 * 32 * 28 * 28 * 1 * 3 * 3)
    over = _op("aten::convolution_backward_overrideable", _GO, _X, _W, "[2, 2]", "[1, 1]", "[1, 1]", "False",
               "[0, 0]", "1", "[True, True, True]")
    assert op_flops(over) == 2 * _CONV_FWD


# ---- GEMM ----------------------------------------------------------------------------------

def test_linear_addmm_ignores_bias_add():
    # nn.Linear(16, 10) on 4 rows: addmm(bias [10], x [4, 16], Wᵀ [16, 10])
    op = _op("aten::addmm", [10], [4, 16], [16, 10], "1", "1")
    assert op_flops(op) == 2 * 4 * 10 * 16


def test_mm_bmm_baddbmm():
    assert op_flops(_op("aten::mm", [2, 10], [10, 16])) == 2 * 2 * 16 * 10
    assert op_flops(_op("aten::bmm", [3, 2, 5], [3, 5, 4])) == 2 * 3 * 2 * 4 * 5
    assert op_flops(_op("aten::baddbmm", [3, 2, 4], [3, 2, 5], [3, 5, 4], "1", "1")) == 2 * 3 * 2 * 4 * 5


def test_gemm_with_mismatched_inner_dims_is_nan():
    assert math.isnan(op_flops(_op("aten::mm", [2, 10], [11, 16])))


# ---- normalization -------------------------------------------------------------------------

_BN_X = [2, 8, 4, 4]
_BN_N = 2 * 8 * 4 * 4


def _bn(training: str) -> OpShapes:
    return _op("aten::native_batch_norm", _BN_X, [8], [8], [8], [8], training, "0.1", "1e-05")


def test_batch_norm_forward_training_and_inference():
    # training: mean 1 + variance 3 + folded scale-shift 2; inference: scale-shift 2
    assert op_flops(_bn("True")) == (1 + 3 + 2) * _BN_N
    assert op_flops(_bn("False")) == 2 * _BN_N
    assert op_flops(_op("aten::cudnn_batch_norm", _BN_X, [8], [8], [8], [8], "True", "0.1", "1e-05")) == 6 * _BN_N


@pytest.mark.parametrize("training, mask, per_element", [
    ("True", "[True, True, True]", 1 + 3 + 5),   # Σg, Σ(x-mean)g, grad_input
    ("True", "[True, False, False]", 1 + 3 + 5),  # grad_input alone still needs both sums
    ("True", "[False, True, True]", 1 + 3),
    ("True", "[False, False, True]", 1),
    ("False", "[True, False, False]", 1),  # inference: g·invstd·w
])
def test_batch_norm_backward(training, mask, per_element):
    op = _op("aten::native_batch_norm_backward", _BN_X, _BN_X, [8], [8], [8], [8], [8],
             training, "1e-05", mask)
    assert op_flops(op) == per_element * _BN_N


def test_cudnn_batch_norm_backward_computes_all_grads():
    op = _op("aten::cudnn_batch_norm_backward", _BN_X, _BN_X, [8], [8], [8], [8], [8], "1e-05", [0])
    assert op_flops(op) == (1 + 3 + 5) * _BN_N


def test_layer_norm_forward_and_backward():
    fwd = _op("aten::native_layer_norm", [4, 6], "[6]", [6], [6], "1e-05")
    assert op_flops(fwd) == (1 + 3 + 2 + 1 + 1) * 4 * 6
    bwd = _op("aten::native_layer_norm_backward", [4, 6], [4, 6], "[6]", [4, 1], [4, 1], [6], [6],
              "[True, True, True]")
    assert op_flops(bwd) == (2 + 2 + 1 + 8) * 4 * 6


def test_layer_norm_backward_unrecorded_mask_counts_every_gradient():
    # no Concrete Inputs: grad_input, grad_weight and grad_bias when weight and bias are passed
    affine = _unrecorded("aten::native_layer_norm_backward", [4, 6], [4, 6], "[6]", [4, 1], [4, 1], [6], [6], "mask")
    assert op_flops(affine) == (2 + 2 + 1 + 8) * 4 * 6
    # elementwise_affine=False: only grad_input (x̂ 2, the grad_input terms 7, no g·w)
    plain = _unrecorded("aten::native_layer_norm_backward", [4, 6], [4, 6], "[6]", [4, 1], [4, 1], None, None, "mask")
    assert op_flops(plain) == (2 + 7) * 4 * 6


# ---- elementwise, softmax, losses ----------------------------------------------------------

def test_relu_and_its_backward():
    assert op_flops(_op("aten::relu", [2, 3])) == 2 * 3
    assert op_flops(_op("aten::relu_", [2, 3])) == 2 * 3
    assert op_flops(_op("aten::threshold_backward", [2, 3], [2, 3], "0")) == 2 * 3


def test_add_alpha_and_broadcast():
    assert op_flops(_op("aten::add", [4], [4], "1")) == 4
    assert op_flops(_op("aten::add_", [4], [4], "-0.1")) == 2 * 4  # self + alpha·other
    assert op_flops(_op("aten::add", [4], "2", "3")) == 4  # scalar other: alpha·2 is one number
    assert op_flops(_op("aten::mul", [2, 1, 3], [4, 1])) == 2 * 4 * 3


def test_integer_arithmetic_is_zero_flops():
    op = OpShapes("aten::add_", ([], [], []), ("long int", "long int", "Scalar"), ("", "", "1"))
    assert op_flops(op) == 0.0


def test_softmax_forward_and_backward():
    # max, subtract, exp, sum, divide = 5; backward y·(g - Σg·y) = 4
    assert op_flops(_op("aten::_softmax", [4, 10], "1", "False")) == 5 * 4 * 10
    assert op_flops(_op("aten::_softmax_backward_data", [4, 10], [4, 10], "1", "6")) == 4 * 4 * 10


def test_cross_entropy_is_log_softmax_plus_nll():
    forward = [_op("aten::_log_softmax", [4, 10], "1", "False"),
               OpShapes("aten::nll_loss_forward", ([4, 10], [4], [], [], []),
                        ("float", "long int", "", "Scalar", "Scalar"), ("", "", "", "1", "-100"))]
    backward = [OpShapes("aten::nll_loss_backward", ([], [4, 10], [4], [], [], [], []),
                         ("float", "float", "long int", "", "Scalar", "Scalar", "float"),
                         ("", "", "", "", "1", "-100", "")),
                _op("aten::_log_softmax_backward_data", [4, 10], [4, 10], "1", "6")]
    assert sum(op_flops(op) for op in forward) == 5 * 4 * 10 + 4
    assert sum(op_flops(op) for op in backward) == 4 + 4 * 4 * 10


def test_mse_loss():
    assert op_flops(_op("aten::mse_loss", [2, 6], [2, 6], "1")) == 3 * 12
    assert op_flops(_op("aten::mse_loss_backward", [], [2, 6], [2, 6], "1")) == 2 * 12


def test_reductions_and_pooling():
    assert op_flops(_op("aten::sum", [2, 16, 2, 2], "[-1, -2]", "True", None)) == 2 * 16 * 2 * 2
    assert op_flops(_op("aten::mean", [2, 16, 2, 2], "[-1, -2]", "True", None)) == 2 * 16 * 4 + 2 * 16
    # max pool 3x3/2 pad 1 on 16x16 -> 8x8, one compare per window element
    op = _op("aten::max_pool2d_with_indices", [2, 8, 16, 16], "[3, 3]", "[2, 2]", "[1, 1]", "[1, 1]", "False")
    assert op_flops(op) == 2 * 8 * (8 * 8) * (3 * 3)
    # ceil_mode: (5 - 1 - 1 + 1) // 2 + 1 = 3 windows per side
    op = _op("aten::max_pool2d_with_indices", [1, 1, 5, 5], "[2, 2]", "[2, 2]", "[0, 0]", "[1, 1]", "True")
    assert op_flops(op) == (3 * 3) * (2 * 2)
    # avg pool 2x2, stride defaults to the kernel: 4x4 -> 2x2, window adds + a divide
    op = _op("aten::avg_pool2d", [2, 16, 4, 4], "[2, 2]", "[]", "[0, 0]", "False", "True", None)
    assert op_flops(op) == 2 * 16 * (2 * 2) * (2 * 2 + 1)
    assert op_flops(_op("aten::adaptive_avg_pool2d", [2, 16, 2, 2], "[1, 1]")) == 2 * 16 * 4 + 2 * 16


def test_foreach_optimizer_ops_sum_over_the_list():
    shapes = [[2, 3], [4]]
    op = OpShapes("aten::_foreach_add_", (shapes, shapes, []), ("TensorList", "TensorList", "Scalar"),
                  ("", "", "-0.1"))
    assert op_flops(op) == 2 * (6 + 4)  # p + (-lr)·buf
    op = OpShapes("aten::_foreach_mul_", (shapes, []), ("TensorList", "Scalar"), ("", "0.9"))
    assert op_flops(op) == 6 + 4
    op = OpShapes("aten::_foreach_addcmul_", (shapes, shapes, shapes, []),
                  ("TensorList",) * 3 + ("Scalar",), ("", "", "", "0.001"))
    assert op_flops(op) == 3 * (6 + 4)


def test_data_movement_is_zero_and_rng_has_no_formula():
    assert op_flops(_op("aten::copy_", [2, 3], [2, 3], "False")) == 0.0
    assert op_flops(OpShapes("aten::cat", ([[2, 3], [2, 3]], []), ("TensorList", "Scalar"), ("", "0"))) == 0.0
    assert op_flops(_op("aten::bernoulli_", [2, 3], "0.5", None)) is None


def test_sdpa_counts_its_gemms():
    q, kv = [2, 4, 8, 16], [2, 4, 10, 16]
    fwd = _op("aten::_scaled_dot_product_flash_attention", q, kv, kv, "0.", "False", "False", None)
    assert op_flops(fwd) == 2 * 2 * 4 * 8 * 10 * 16 + 2 * 2 * 4 * 8 * 10 * 16
    bwd = _op("aten::_scaled_dot_product_flash_attention_backward", q, q, kv, kv, q, [2, 4, 8])
    assert op_flops(bwd) == 2 * 2 * 4 * 8 * 10 * (3 * 16 + 2 * 16)


# b 2, h 4 query heads, kv heads 2 (grouped-query), sq 8, sk 10, d 16, dv 12
_ATTN_FWD = 2 * 2 * 4 * 8 * 10 * (16 + 12)
_ATTN_BWD = 2 * 2 * 4 * 8 * 10 * (3 * 16 + 2 * 12)


def test_attention_kernels_read_their_layout():
    bhsd = ([2, 4, 8, 16], [2, 2, 10, 16], [2, 2, 10, 12])
    bshd = ([2, 8, 4, 16], [2, 10, 2, 16], [2, 10, 2, 12])
    assert op_flops(_op("aten::_scaled_dot_product_efficient_attention", *bhsd, None, "True", "0.", "False", None)) \
        == _ATTN_FWD
    # the inner kernels take query.transpose(1, 2): [B, S, H, D]
    flash = _op("aten::_flash_attention_forward", *bshd, None, None, "8", "10", "0.", "False", "False")
    assert op_flops(flash) == _ATTN_FWD
    eff = _op("aten::_efficient_attention_forward", *bshd, None, None, None, "8", "10", "0.", "0")
    assert op_flops(eff) == _ATTN_FWD
    go_bshd = [2, 8, 4, 12]
    flash_bwd = _op("aten::_flash_attention_backward", go_bshd, *bshd, go_bshd, [2, 4, 8], None, None, "8", "10",
                    "0.", "False", [2], [0])
    assert op_flops(flash_bwd) == _ATTN_BWD
    cudnn = _op("aten::_cudnn_attention_forward", *bhsd, None, None, None, "8", "10", "True")
    assert op_flops(cudnn) == _ATTN_FWD


def test_packed_attention_counts_equal_length_batches_only():
    # PyTorch 2.0-2.1's dense flash path and nested tensors: [total, H, D], cum_seq [B + 1]
    q, k, v = [2 * 8, 4, 16], [2 * 10, 2, 16], [2 * 10, 2, 12]
    cum = ([3], [3])
    op = OpShapes("aten::_flash_attention_forward", (q, k, v, *cum, [], []) + ([],) * 3,
                  ("float",) * 3 + ("int", "int", "Scalar", "Scalar") + ("Scalar",) * 3,
                  ("",) * 5 + ("8", "10") + ("0.", "False", "False"))
    assert op_flops(op) == _ATTN_FWD
    ragged = OpShapes(op.name, op.input_dims, op.input_types, op.concrete_inputs[:5] + ("9", "11") + ("",) * 3)
    assert math.isnan(op_flops(ragged))  # lengths differ: the count needs each one
    one = OpShapes(op.name, ([16, 4, 16], [20, 2, 16], [20, 2, 12], [2], [2], [], []) + ([],) * 3,
                   op.input_types, ("",) * 10)
    assert op_flops(one) == 2 * 1 * 4 * 16 * 20 * (16 + 12)  # one sequence: max lengths not needed
    # memory-efficient varlen: [1, total, H, D] with cu_seqlens of 3 sequences
    eff = OpShapes("aten::_efficient_attention_forward", ([1, 16, 4, 16], [1, 20, 2, 16], [1, 20, 2, 12], [], [4], [4]),
                   ("float",) * 3 + ("", "int", "int"), ("",) * 6)
    assert math.isnan(op_flops(eff))


# ---- embeddings ----------------------------------------------------------------------------
# 12 indices into a [100, 16] table, 4 bags (offsets [4])


@pytest.mark.parametrize("mode, psw, flops", [
    ("0", None, 12 * 16),  # sum: one add per gathered element
    ("0", [12], 2 * 12 * 16),  # sum with per-sample weights: a multiply more
    ("1", None, 12 * 16 + 4 * 16),  # mean: and a divide per output element
    ("2", None, 12 * 16),  # max: one compare per gathered element
])
def test_embedding_bag_forward(mode, psw, flops):
    op = _op("aten::_embedding_bag", [100, 16], [12], [4], "False", mode, "False", psw, "False", "-1")
    assert op_flops(op) == flops
    assert op_flops(OpShapes("aten::embedding_bag", op.input_dims[:8], op.input_types[:8],
                             op.concrete_inputs[:8])) == flops  # the wrapper counts the same


def test_embedding_bag_forward_unrecorded_mode_is_the_schema_default_sum():
    op = OpShapes("aten::_embedding_bag", ([100, 16], [12], [5], [], [], [], [], []),
                  ("float", "long int", "long int", "Scalar", "Scalar", "Scalar", "", "Scalar"), ("",) * 8)
    assert op_flops(op) == 12 * 16


def test_embedding_bag_dense_backward_both_schemas():
    # 2.x: (grad, indices, offset2bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq, mode, psw, pad)
    new = _op("aten::_embedding_bag_dense_backward", [4, 16], [12], [12], [4], [4], "100", "False", "1", None, "-1")
    assert op_flops(new) == 2 * 12 * 16  # mean: scale by 1/bag_size, then add
    # 1.8: offsets at 2, so maximum_indices at 5 and mode at 8; max mode sends each grad element once
    old = _op("aten::_embedding_bag_dense_backward", [4, 16], [12], [4], [12], [4], [4, 16], "100", "False", "2",
              None)
    assert op_flops(old) == 4 * 16
    # mode unrecorded: a [B, D] maximum_indices means max; otherwise sum and mean cannot be told apart
    max_unrecorded = _unrecorded("aten::_embedding_bag_dense_backward", [4, 16], [12], [4], [12], [4], [4, 16],
                                 "nw", "freq", "mode", None)
    assert op_flops(max_unrecorded) == 4 * 16
    sum_or_mean = _unrecorded("aten::_embedding_bag_dense_backward", [4, 16], [12], [12], [4], [4], "nw", "freq",
                              "mode", None, "pad")
    assert math.isnan(op_flops(sum_or_mean))


def test_embedding_backward_counts_at_the_dense_or_sparse_kernel():
    assert not has_formula("aten::embedding_backward")  # calls one of these two by its sparse flag
    assert op_flops(_op("aten::embedding_dense_backward", [12, 16], [12], "100", "-1", "False")) == 12 * 16
    assert op_flops(_op("aten::embedding_sparse_backward", [12, 16], [12], "100", "-1", "False")) == 0.0


# ---- recurrent -----------------------------------------------------------------------------
# LSTM, hidden 5, gates 4·5 = 20. Per step and hidden unit: gate sums 4·(1 + 2) with biases,
# cell 15; backward cell 24, bias grads 2·4.


def test_fused_lstm_cell_forward_and_backward():
    fwd = _op("aten::_thnn_fused_lstm_cell", [3, 20], [3, 20], [3, 5], [20], [20])
    assert op_flops(fwd) == 3 * 5 * (4 * (1 + 2) + 15)
    bwd = _op("aten::_thnn_fused_lstm_cell_backward_impl", [3, 5], [3, 5], [3, 5], [3, 5], [3, 20], "True")
    assert op_flops(bwd) == 3 * 5 * (23 + 4)


def _lstm_weights(input_size: int) -> list[list[int]]:
    """One (layer, direction)'s weights: w_ih, w_hh, b_ih, b_hh."""
    return [[20, input_size], [20, 5], [20], [20]]


_WEIGHTS = _lstm_weights(6) * 2 + _lstm_weights(10) * 2  # 2 layers x 2 directions; layer 1 sees 2·5


def _cudnn_rnn_args(mode: str, weights, layers: str, bidirectional: str):
    # input [T=7, B=3, 6]; hx/cx [layers·dirs, 3, 5]
    dims = ([7, 3, 6], weights, [], [], [4, 3, 5], [4, 3, 5])
    types = ("float", "TensorList", "Scalar", "", "float", "float")
    scalars = (mode, "5", "0", layers, "False", "0.", "True", bidirectional, "[]")
    return dims, types, scalars


def test_cudnn_lstm_per_step_layer_direction():
    dims, types, scalars = _cudnn_rnn_args("2", _WEIGHTS, "2", "True")
    op = OpShapes("aten::_cudnn_rnn", dims + ([],) * 10, types + ("Scalar",) * 9 + ("",),
                  ("",) * 6 + scalars + ("",))
    per_step = (2 * (20 * 6 + 20 * 5) + 20 * 3 + 15 * 5) * 2 + (2 * (20 * 10 + 20 * 5) + 20 * 3 + 15 * 5) * 2
    assert op_flops(op) == 7 * 3 * per_step


def test_cudnn_lstm_backward_with_weight_grads():
    dims, types, scalars = _cudnn_rnn_args("2", _WEIGHTS, "2", "True")
    grads = ([7, 3, 10], [7, 3, 10], [4, 3, 5], [4, 3, 5])  # output, grad_output, grad_hy, grad_cy
    op = OpShapes("aten::_cudnn_rnn_backward", dims + grads + ([],) * 12,
                  types + ("float",) * 4 + ("Scalar",) * 9 + ("", "float", "ScalarList"),
                  ("",) * 10 + scalars + ("", "", "[True, True, True, True]"))

    def layer(input_size: int) -> int:  # data + weight GEMMs, bias grads, cell backward
        return 2 * 2 * (20 * input_size + 20 * 5) + 2 * 20 + 24 * 5

    assert op_flops(op) == 7 * 3 * 2 * (layer(6) + layer(10))


def test_cudnn_gru_single_layer():
    weights = [[15, 6], [15, 5], [15], [15]]
    dims, types, scalars = _cudnn_rnn_args("3", weights, "1", "False")
    op = OpShapes("aten::_cudnn_rnn", dims + ([],) * 10, types + ("Scalar",) * 9 + ("",),
                  ("",) * 6 + scalars + ("",))
    assert op_flops(op) == 7 * 3 * (2 * (15 * 6 + 15 * 5) + 15 * 3 + 12 * 5)


def test_mkldnn_lstm_layer():
    op = _op("aten::mkldnn_rnn_layer", [7, 3, 6], [20, 6], [20, 5], [20], [20], [3, 5], [3, 5],
             "False", "[]", "2", "5", "1", "True", "False", "False", "True")
    assert op_flops(op) == 7 * 3 * (2 * (20 * 6 + 20 * 5) + 20 * 3 + 15 * 5)


# ---- contract --------------------------------------------------------------------------------

def test_precision_of():
    assert precision_of(["float", "double"]) == "fp32"  # a wrapped Python scalar is "double"
    assert precision_of(["c10::Half", "c10::Half"]) == "fp16"
    assert precision_of(["long int", "c10::BFloat16"]) == "bf16"
    assert precision_of(["double"]) == "fp64"
    assert precision_of(["long int", "Scalar"]) == "int"
    assert precision_of(["TensorList", "Scalar"]) == ""
    assert precision_of([]) == ""


def test_missing_shapes_give_nan_unknown_op_gives_none():
    assert math.isnan(op_flops(OpShapes("aten::addmm", (), (), ())))
    unrecorded_stride = _conv([2, 3, 32, 32], [8, 3, 3, 3], "[2, 2]", "[1, 1]")
    unrecorded_stride = OpShapes(unrecorded_stride.name, unrecorded_stride.input_dims,
                                 unrecorded_stride.input_types, ("",) * 9)
    assert math.isnan(op_flops(unrecorded_stride))
    assert math.isnan(op_flops(_bn("")))  # training flag unknown
    assert op_flops(_op("aten::not_an_op", [2])) is None
    assert not has_formula("aten::not_an_op")


def test_one_level_per_computation():
    for wrapper in ("aten::conv2d", "aten::_convolution", "aten::mkldnn_convolution", "aten::cudnn_convolution",
                    "aten::linear", "aten::matmul", "aten::lstm", "aten::batch_norm", "aten::cross_entropy_loss",
                    "aten::cudnn_convolution_backward", "aten::cudnn_convolution_transpose_backward",
                    "aten::miopen_convolution_backward", "aten::mkldnn_convolution_backward",
                    "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_attention_math",
                    "aten::embedding_backward", "aten::_embedding_bag_backward"):
        assert wrapper not in FORMULA_OPS
    for op in ("aten::convolution", "aten::addmm", "aten::native_batch_norm", "aten::_cudnn_rnn",
               "aten::cudnn_convolution_backward_input", "aten::cudnn_convolution_backward_weight",
               "aten::_flash_attention_forward", "aten::_embedding_bag_dense_backward"):
        assert has_formula(op)


# ---- real traces: each computation counted once ---------------------------------------------

def _trace_flops_under(fn, tmp_path, ancestor: str | None = None) -> float:
    """Σ FLOPs of the outermost formula ops in a CPU trace of fn() (optionally only below `ancestor`)."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    events = sorted((e for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"]
                     if e.get("cat") == "cpu_op"), key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    total, stack = 0.0, []
    for e in events:
        while stack and (stack[-1]["tid"] != e["tid"] or stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]):
            stack.pop()
        names = [s["name"] for s in stack]
        if has_formula(e["name"]) and not any(has_formula(n) for n in names):
            if ancestor is None or ancestor in names:
                a = e["args"]
                total += op_flops(OpShapes(e["name"], tuple(a["Input Dims"]), tuple(a["Input type"]),
                                           tuple(a["Concrete Inputs"])))
        stack.append(e)
    return total


def test_cross_entropy_trace_counts_each_part_once(tmp_path):
    logits = torch.randn(4, 10, requires_grad=True)
    labels = torch.tensor([1, 2, 3, 4])
    total = _trace_flops_under(lambda: nn.functional.cross_entropy(logits, labels).backward(), tmp_path)
    assert total == (5 * 4 * 10 + 4) + (4 + 4 * 4 * 10)


def test_cpu_lstm_counted_once_below_aten_lstm(tmp_path):
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch build runs LSTM without oneDNN")
    torch.manual_seed(0)
    lstm = nn.LSTM(6, 5, num_layers=2, bidirectional=True)
    x = torch.randn(7, 3, 6)
    with torch.no_grad():
        total = _trace_flops_under(lambda: lstm(x), tmp_path, ancestor="aten::lstm")
    per_step = (2 * (20 * 6 + 20 * 5) + 20 * 3 + 15 * 5) * 2 + (2 * (20 * 10 + 20 * 5) + 20 * 3 + 15 * 5) * 2
    assert total == 7 * 3 * per_step


def test_roi_align_forward_and_backward():
    # 3 RoIs over a [1, 4, 16, 16] map, 7x7 bins, 2x2 samples: per output element 4 samples of
    # (4 mul + 3 add + accumulate) + 1 divide = 33; the backward the same per gradient element.
    fwd = OpShapes("torchvision::roi_align", ([1, 4, 16, 16], [3, 5], [], [], [], [], []),
                   ("float", "float", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"),
                   ("", "", "0.0625", "7", "7", "2", "True"))
    assert op_flops(fwd) == 3 * 4 * 7 * 7 * (8 * 2 * 2 + 1)
    bwd = OpShapes("torchvision::_roi_align_backward", ([3, 4, 7, 7], [3, 5]) + ([],) * 9,
                   ("float", "float") + ("Scalar",) * 9, ("", "", "0.0625", "7", "7", "1", "4", "16", "16", "2", "True"))
    assert op_flops(bwd) == 3 * 4 * 7 * 7 * (8 * 2 * 2 + 1)
    adaptive = OpShapes(fwd.name, fwd.input_dims, fwd.input_types, fwd.concrete_inputs[:5] + ("-1", "True"))
    assert math.isnan(op_flops(adaptive))  # samples depend on each RoI's size


def test_embedding_bag_trace_counts_forward_and_backward_once(tmp_path):
    # nn.EmbeddingBag(mode="mean"): embedding_bag > _embedding_bag carry equal counts, and
    # _embedding_bag_backward > _embedding_bag_dense_backward counts at the inner op
    torch.manual_seed(0)
    bag = nn.EmbeddingBag(100, 16, mode="mean")
    indices, offsets = torch.randint(0, 100, (12,)), torch.tensor([0, 3, 7, 9])
    total = _trace_flops_under(lambda: bag(indices, offsets).sum().backward(), tmp_path)
    forward, backward = 12 * 16 + 4 * 16, 2 * 12 * 16
    assert total == forward + 4 * 16 + backward  # 4 * 16: the sum() that makes a scalar loss
