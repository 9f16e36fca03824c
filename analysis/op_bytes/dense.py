"""Byte formulas for dense linear algebra and recurrent layers: GEMMs, convolution, attention, RNNs.

Each formula is bytes read plus bytes written at the minimum (`analysis.op_bytes.ops`): the operands
once, the result once. A convolution's output size is the FLOP formulas' own
(`analysis.flops.dense.conv_out`, imported, not restated); argument positions follow the same
schemas (torch 2.13's native_functions.yaml, PyTorch 1.8's for the per-gradient convolution
backward ops removed in 1.11).
"""

from __future__ import annotations

from typing import Callable

from tbd.analysis.flops.args import concrete, input_shape, int_list, numel, output_mask, require
from tbd.analysis.flops.dense import conv_out, recorded_output
from tbd.analysis.op_bytes.args import dtype_arg, itemsize, list_elements, optional_bytes, present, reads, tensor_bytes
from tbd.core.records import OpShapes


# ---- GEMMs: the operands (and addmm's bias `self`) read, the [m, n] result written --------------
def gemm(a: int, b: int, bias: int | None = None) -> Callable[[OpShapes], int]:
    """mm-like: [m, k] at a times [k, n] at b, plus an optional added tensor at `bias`."""

    def f(op: OpShapes) -> int:
        (m, k), (k2, n) = input_shape(op, a), input_shape(op, b)
        require(k == k2, f"{op.name}: inner dims {k} != {k2}")
        return reads(op, (a, b), () if bias is None else (bias,)) + m * n * itemsize(op, a)

    return f


def batched_gemm(a: int, b: int, bias: int | None = None, summed: bool = False) -> Callable[[OpShapes], int]:
    """bmm-like: [B, m, k] at a times [B, k, n] at b; `summed`: addbmm's [m, n] sum over the batch."""

    def f(op: OpShapes) -> int:
        (nb, m, k), (nb2, k2, n) = input_shape(op, a), input_shape(op, b)
        require(nb == nb2 and k == k2, f"{op.name}: shapes do not multiply")
        out = m * n * (1 if summed else nb)
        return reads(op, (a, b), () if bias is None else (bias,)) + out * itemsize(op, a)

    return f


def mv(a: int, b: int, bias: int | None = None) -> Callable[[OpShapes], int]:
    """[m, n] at a times [n] at b -> [m]."""

    def f(op: OpShapes) -> int:
        (m, n), (n2,) = input_shape(op, a), input_shape(op, b)
        require(n == n2, f"{op.name}: inner dims {n} != {n2}")
        return reads(op, (a, b), () if bias is None else (bias,)) + m * itemsize(op, a)

    return f


def dot(op: OpShapes) -> int:
    """dot(self [n], tensor [n]) -> a 0-d result."""
    (n,), (n2,) = input_shape(op, 0), input_shape(op, 1)
    require(n == n2, f"{op.name}: lengths {n} != {n2}")
    return reads(op, (0, 1)) + itemsize(op, 0)


def scaled_mm(op: OpShapes) -> int:
    """_scaled_mm(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum): FP8
    operands and their scales read, the result written in out_dtype (None: self's dtype)."""
    (m, k), (k2, n) = input_shape(op, 0), input_shape(op, 1)
    require(k == k2, f"{op.name}: inner dims {k} != {k2}")
    return reads(op, (0, 1, 2, 3), (4, 5)) + m * n * dtype_arg(op, 6, itemsize(op, 0))


# ---- convolution ---------------------------------------------------------------------------
def _transposed_out(x: tuple, k: tuple, stride, padding, dilation, output_padding) -> list[int]:
    """Output spatial sizes of a transposed convolution (torch.nn.ConvTranspose2d docs):
    (i - 1)·s - 2p + d(k - 1) + output_padding + 1."""
    n = len(k)
    s, p, d, op_ = (int_list(v, n, "conv_transpose") for v in (stride, padding, dilation, output_padding))
    return [(x[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op_[i] + 1 for i in range(n)]


def convolution(op: OpShapes) -> int:
    """convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    input, weight and bias read; the output [N, Cout, out spatial] written in the input's dtype."""
    x, w = input_shape(op, 0), input_shape(op, 1)
    require(len(x) == len(w) >= 3, f"{op.name}: input {x} weight {w}")
    known = recorded_output(op, x, w)
    if known is not None:
        return reads(op, (0, 1), (2,)) + numel(known[1]) * itemsize(op, 0)
    stride, padding, dilation = concrete(op, 3), concrete(op, 4), concrete(op, 5)
    if concrete(op, 6):  # transposed: weight [Cin, Cout/groups, k...]
        groups = concrete(op, 8)
        require(isinstance(groups, int) and groups > 0, f"{op.name}: groups {groups!r}")
        spatial = _transposed_out(x[2:], w[2:], stride, padding, dilation, concrete(op, 7))
        channels = w[1] * groups
    else:
        spatial = conv_out(x[2:], w[2:], stride, padding, dilation)
        channels = w[0]
    require(min(spatial) >= 0, f"{op.name}: output size {spatial}")
    return reads(op, (0, 1), (2,)) + x[0] * channels * numel(spatial) * itemsize(op, 0)


def _grads(op: OpShapes, go: int, x: int, w: int, mask) -> int:
    """Bytes of a convolution backward given its gradient mask [input, weight(, bias)]: grad_output
    read for any gradient, the weight for grad_input, the input for grad_weight; grad_input has the
    input's shape and dtype, grad_weight the weight's, grad_bias one grad_output element per channel."""
    go_shape = input_shape(op, go)
    require(len(go_shape) == len(input_shape(op, x)) == len(input_shape(op, w)) >= 3, f"{op.name}: shapes")
    grad_input, grad_weight = bool(mask[0]), bool(mask[1])
    grad_bias = len(mask) > 2 and bool(mask[2])
    read = (tensor_bytes(op, go) if grad_input or grad_weight or grad_bias else 0) \
        + (tensor_bytes(op, w) if grad_input else 0) + (tensor_bytes(op, x) if grad_weight else 0)
    written = grad_input * tensor_bytes(op, x) + grad_weight * tensor_bytes(op, w) \
        + grad_bias * go_shape[1] * itemsize(op, go)
    return read + written


def conv_backward(mask_at: int) -> Callable[[OpShapes], int]:
    """convolution_backward(grad_output, input, weight, ..., output_mask@10) and the overrideable
    form (output_mask@9)."""
    return lambda op: _grads(op, 0, 1, 2, output_mask(op, mask_at, 3))


def slow_conv_backward(op: OpShapes) -> int:
    """The native kernels' backward (grad_output, self, weight, ..., output_mask last, bool[2] or bool[3])."""
    mask = concrete(op, len(op.input_dims) - 1)
    require(isinstance(mask, (list, tuple)) and len(mask) in (2, 3), f"{op.name}: output_mask {mask!r}")
    return _grads(op, 0, 1, 2, mask)


def _sizes(op: OpShapes, i: int) -> int:
    """Elements of a tensor whose shape is the int[] argument at i (self_size, weight_size)."""
    sizes = concrete(op, i)
    require(isinstance(sizes, (list, tuple)) and all(isinstance(s, int) and s >= 0 for s in sizes),
            f"{op.name}: sizes {sizes!r}")
    return numel(sizes)


# Per-gradient ops of PyTorch <= 1.10 (see analysis.flops.ops): the gradient's shape is an int[]
# argument, which traces of that era record without its value (then NaN, as the FLOP formula of
# *_backward_weight).
def conv_backward_input(op: OpShapes) -> int:
    """*_convolution_backward_input(self_size, grad_output, weight, ...): grad_input [self_size]."""
    return reads(op, (1, 2)) + _sizes(op, 0) * itemsize(op, 1)


def conv_backward_weight(with_bias_at: int | None = None) -> Callable[[OpShapes], int]:
    """*_convolution(_transpose)_backward_weight(weight_size, grad_output, self, ...): grad_weight
    [weight_size]; mkldnn's _backward_weights also grad_bias when bias_defined (at `with_bias_at`)."""

    def f(op: OpShapes) -> int:
        bias = 0
        if with_bias_at is not None and concrete(op, with_bias_at):
            bias = input_shape(op, 1)[1] * itemsize(op, 1)
        return reads(op, (1, 2)) + _sizes(op, 0) * itemsize(op, 1) + bias

    return f


def conv_transpose_backward_input(op: OpShapes) -> int:
    """*_convolution_transpose_backward_input(grad_output, weight, padding, stride, dilation, ...):
    grad_input [N, weight[0], spatial of a regular conv of grad_output]."""
    go, w = input_shape(op, 0), input_shape(op, 1)
    require(len(go) == len(w) >= 3, f"{op.name}: {go} {w}")
    spatial = conv_out(go[2:], w[2:], concrete(op, 3), concrete(op, 2), concrete(op, 4))
    require(min(spatial) >= 0, f"{op.name}: output size {spatial}")
    return reads(op, (0, 1)) + go[0] * w[0] * numel(spatial) * itemsize(op, 0)


# ---- scaled-dot-product attention ------------------------------------------------------------
# Every tensor argument is read once (query, key, value, the bias or mask, and in the backward
# grad_out, out, logsumexp, the RNG state and sequence offsets). The forward writes the output,
# one row of dv per query row and head, and, where the kernel computes it, the logsumexp, one
# float32 per query row and head; the backward writes grad_query/key/value in their shapes, and
# the bias's gradient where requested. Query rows x heads = numel(query) / head dim in every layout
# ([B, H, S, D], [B, S, H, D], packed [total, H, D]), so no layout needs reading and ragged
# batches are exact. The memory-efficient kernel pads logsumexp to a multiple of 32 query rows
# and the debug attention mask (return_debug_mask, a testing aid) is written only on request:
# neither is counted.
_LSE_SIZE = 4


def _query_rows(op: OpShapes, q_at: int) -> int:
    q, k, v = input_shape(op, q_at), input_shape(op, q_at + 1), input_shape(op, q_at + 2)
    require(len(q) == len(k) == len(v) >= 3 and q[-1] == k[-1] and q[-1] > 0, f"{op.name}: q/k/v {q} {k} {v}")
    return numel(q) // q[-1]


def _attention_reads(op: OpShapes, q_at: int) -> int:
    """query, key and value, and every other tensor argument that is present."""
    qkv = (q_at, q_at + 1, q_at + 2)
    return reads(op, qkv, tuple(i for i in range(len(op.input_dims)) if i not in qkv))


def attention_forward(q_at: int, lse_at: int | None, lse_default: bool | None = None) -> Callable[[OpShapes], int]:
    """lse_at: the compute_log_sumexp flag's position (None: the kernel always computes it)."""

    def f(op: OpShapes) -> int:
        rows = _query_rows(op, q_at)
        dv = input_shape(op, q_at + 2)[-1]
        if lse_at is None:
            lse = True
        else:
            lse = concrete(op, lse_at) if lse_default is None else concrete(op, lse_at, lse_default)
        return _attention_reads(op, q_at) + rows * dv * itemsize(op, q_at) + bool(lse) * rows * _LSE_SIZE

    return f


def attention_backward(q_at: int, bias_at: int | None = None, mask_at: int | None = None,
                       flag_at: int | None = None) -> Callable[[OpShapes], int]:
    """Gradients of query/key/value (at q_at..q_at+2); the bias gradient when a bias is passed at
    bias_at and requested by grad_input_mask[3] (at mask_at) or bias_requires_grad (at flag_at)."""

    def f(op: OpShapes) -> int:
        _query_rows(op, q_at)
        grads = sum(tensor_bytes(op, q_at + j) for j in range(3))
        if bias_at is not None and present(op, bias_at):
            wanted = output_mask(op, mask_at, 4)[3] if mask_at is not None else concrete(op, flag_at)
            grads += tensor_bytes(op, bias_at) if wanted else 0
        return _attention_reads(op, q_at) + grads

    return f


#: Fused attention kernels, outer (_scaled_dot_product_*) and inner, forward and backward; the MPS
#: math kernel returns the attention weights too, in a shape its arguments do not fix: not counted.
ATTENTION: dict[str, Callable[[OpShapes], int]] = {
    "_scaled_dot_product_flash_attention": attention_forward(0, None),
    "_scaled_dot_product_flash_attention_for_cpu": attention_forward(0, None),
    "_scaled_dot_product_fused_attention_overrideable": attention_forward(0, None),
    "_scaled_dot_product_efficient_attention": attention_forward(0, 4),
    "_scaled_dot_product_cudnn_attention": attention_forward(0, 4),
    "_flash_attention_forward": attention_forward(0, None),
    "_efficient_attention_forward": attention_forward(0, 10, False),
    "_cudnn_attention_forward": attention_forward(0, 8),
    "_scaled_dot_product_flash_attention_backward": attention_backward(1),
    "_scaled_dot_product_flash_attention_for_cpu_backward": attention_backward(1),
    "_scaled_dot_product_cudnn_attention_backward": attention_backward(1),
    "_scaled_dot_product_efficient_attention_backward": attention_backward(1, bias_at=4, mask_at=10),
    "_scaled_dot_product_fused_attention_overrideable_backward": attention_backward(1, bias_at=4, mask_at=5),
    "_flash_attention_backward": attention_backward(1),
    "_efficient_attention_backward": attention_backward(1, bias_at=4, flag_at=15),
    "_cudnn_attention_backward": attention_backward(1),
}


# ---- recurrent layers ----------------------------------------------------------------------
# The inputs, weights and states read once; the output sequence and final states written once.
# cuDNN's weights arrive twice, as the Tensor[] list and as the flat weight_buf they are views of:
# counted once, from the list, in the input's dtype (cuDNN requires one dtype; a TensorList
# records none). Not counted: the reserve space a training forward writes (its size is cuDNN's,
# not in the arguments; the backward reads it, recorded with its shape, and that is counted) and
# the dropout state. Activations passed between stacked layers inside one _cudnn_rnn call are
# internal and not counted either.
def cudnn_rnn(backward: bool) -> Callable[[OpShapes], int]:
    """_cudnn_rnn(input, weight[], stride0, weight_buf, hx, cx, mode, hidden@7, proj@8, layers,
    batch_first, dropout, train, bidirectional@13, ...); the backward adds output, grad_output,
    grad_hy, grad_cy at 6-9, shifts the scalars by 4, reads reserve@20; output_mask@21."""

    def f(op: OpShapes) -> int:
        size = itemsize(op, 0)
        x = input_shape(op, 0)
        weights = list_elements(op, 1) * size
        states = optional_bytes(op, 4) + optional_bytes(op, 5)
        if backward:
            # cuDNN runs the whole backward-data pass (grad_input, grad_hx, grad_cx); weights on request
            read = tensor_bytes(op, 0) + weights + states + reads(op, (6,), (7, 8, 9, 20))
            return read + tensor_bytes(op, 0) + states + weights * output_mask(op, 21, 4)[3]
        hidden, proj = concrete(op, 7), concrete(op, 8)
        dirs = 2 if concrete(op, 13) else 1
        require(isinstance(hidden, int) and isinstance(proj, int) and len(x) >= 2, f"{op.name}: sizes")
        out = numel(x[:-1]) * dirs * (proj or hidden) * size
        return tensor_bytes(op, 0) + weights + states + out + states

    return f


def mkldnn_rnn_layer(op: OpShapes) -> int:
    """mkldnn_rnn_layer(input, w_ih, w_hh, b_ih, b_hh, hx, cx, ...): one layer and direction; the
    output [T, B, H] (H = hx's last dim), hy and cy written; the training workspace not counted."""
    x, hx = input_shape(op, 0), input_shape(op, 5)
    require(len(x) >= 2 and len(hx) >= 1, f"{op.name}: input {x}, hx {hx}")
    return reads(op, range(7)) + numel(x[:-1]) * hx[-1] * itemsize(op, 0) + tensor_bytes(op, 5) \
        + tensor_bytes(op, 6)


def mkldnn_rnn_layer_backward(op: OpShapes) -> int:
    """mkldnn_rnn_layer_backward(input, w1..w4, hx, cx, output, hy, cy, grad_output, grad_hy,
    grad_cy, ..., workspace@22): gradients of input, the four weights, hx and cx."""
    return reads(op, tuple(range(10)) + (22,), (10, 11, 12)) + sum(tensor_bytes(op, i) for i in range(7))


def fused_lstm_cell(op: OpShapes) -> int:
    """_thnn_fused_lstm_cell(input_gates [B, 4H], hidden_gates, cx [B, H], input_bias, hidden_bias):
    hy, cy [B, H] and the workspace [B, 4H] the backward reads."""
    return reads(op, (0, 1, 2), (3, 4)) + 2 * tensor_bytes(op, 2) + tensor_bytes(op, 0)


def fused_lstm_cell_backward(op: OpShapes) -> int:
    """_thnn_fused_lstm_cell_backward(_impl)(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    grad_gates (the workspace's shape), grad_cx, and grad_bias [4H] when has_bias. The outer op
    returns grad_gates twice, one tensor: the same bytes."""
    bias = input_shape(op, 4)[-1] * itemsize(op, 4) if concrete(op, 5) else 0
    return reads(op, (2, 3, 4), (0, 1)) + tensor_bytes(op, 4) + tensor_bytes(op, 2) + bias
