"""FLOP formulas for dense linear algebra: GEMMs, matrix-vector products, convolution, attention.

Counts match ``torch.utils.flop_counter.FlopCounterMode`` (2 FLOPs per multiply-add; bias adds not
counted), except convolution's grad_weight for groups > 1, counted with Cin/groups (see the
conventions in `analysis.flops.ops`), and the inner flash/memory-efficient attention kernels, whose
[B, S, H, D] layout FlopCounterMode reads as [B, H, S, D] (see `attention`). Scaled-dot-product
attention counts only its batched GEMMs.

Argument positions follow native_functions.yaml: torch 2.13's schemas for current ops, PyTorch
1.8's (aten/src/ATen/native/native_functions.yaml, checked against the 1.9/1.10 generated
operator registrations) for the per-backend convolution backward ops removed in 1.11.
"""

from __future__ import annotations

from typing import Callable

from tbd.analysis.flops.args import concrete, input_shape, int_list, numel, output_mask, require
from tbd.core.records import OpShapes


# GEMMs: torch/utils/flop_counter.py mm_flop/addmm_flop/bmm_flop/baddbmm_flop (2·m·n·k).
def gemm(a: int, b: int) -> Callable[[OpShapes], float]:
    """mm-like: matrices at inputs a [m, k] and b [k, n] -> 2·m·n·k."""

    def f(op: OpShapes) -> float:
        (m, k), (k2, n) = input_shape(op, a), input_shape(op, b)
        require(k == k2, f"{op.name}: inner dims {k} != {k2}")
        return 2 * m * n * k

    return f


def batched_gemm(a: int, b: int) -> Callable[[OpShapes], float]:
    """bmm-like: batches at inputs a [B, m, k] and b [B, k, n] -> 2·B·m·n·k."""

    def f(op: OpShapes) -> float:
        (nb, m, k), (nb2, k2, n) = input_shape(op, a), input_shape(op, b)
        require(nb == nb2 and k == k2, f"{op.name}: shapes do not multiply")
        return 2 * nb * m * n * k

    return f


def mv(a: int, b: int) -> Callable[[OpShapes], float]:
    """Matrix [m, n] at input a times vector [n] at input b -> 2·m·n."""

    def f(op: OpShapes) -> float:
        (m, n), (n2,) = input_shape(op, a), input_shape(op, b)
        require(n == n2, f"{op.name}: inner dims {n} != {n2}")
        return 2 * m * n

    return f


# ---- convolution ---------------------------------------------------------------------------
# MACs as flop_counter.conv_flop_count: N · prod(spatial) · prod(weight), where spatial is the
# output's (regular conv, weight [Cout, Cin/g, k...]) or the input's (transposed conv, weight
# [Cin, Cout/g, k...]). Each backward gradient (grad_input, grad_weight) costs as many MACs as
# the forward (flop_counter.conv_backward_flop); grad_bias is not counted (as there).


def conv_out(x: tuple, k: tuple, stride, padding, dilation) -> list[int]:
    """Output spatial sizes of a convolution: floor((i + 2p - d(k-1) - 1) / s) + 1 (torch.nn.Conv2d docs)."""
    n = len(k)
    s, p, d = (int_list(v, n, "conv") for v in (stride, padding, dilation))
    return [(x[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(n)]


def _conv_macs(x: tuple, w: tuple, spatial) -> int:
    # flop_counter.conv_flop_count: N · prod(spatial) · prod(kernel) · w[0] · w[1], where
    # spatial is the output's (regular conv, w = [Cout, Cin/g, k...]) or the input's (transposed
    # conv, w = [Cin, Cout/g, k...]); either way N · prod(spatial) · prod(w).
    return x[0] * numel(spatial) * numel(w)


def _macs_over(a: tuple, w: tuple) -> int:
    """The same MACs from the tensor whose positions are counted: grad_output [N, Cout, ...] of a
    regular conv, or the input [N, Cin, ...] of a transposed one. a[1] == w[0], so N · prod(spatial)
    · prod(w) = numel(a) · prod(w[1:]) and groups need not be known (w[1] is already Cin/g or Cout/g)."""
    require(len(a) >= 3 and len(w) >= 2 and a[1] == w[0], f"conv: {a} does not match weight {w}")
    return numel(a) * numel(w[1:])


def recorded_output(op: OpShapes, x: tuple, w: tuple) -> tuple[bool, tuple] | None:
    """(transposed, output shape) of a convolution whose output shape another record gave
    (`OpShapes.output_dims`) while its scalar arguments are unrecorded; None otherwise.

    Without the `transposed` flag the channels tell: a regular conv's output has weight[0]
    channels, a transposed conv's input has. When both hold (Cin = Cout), a larger output than
    input means transposed; equal sizes give the same count either way.
    """
    if concrete(op, 6, None) is not None or not op.output_dims:
        return None
    out = op.output_dims[0]
    require(isinstance(out, tuple) and len(out) == len(x) and all(type(d) is int and d >= 0 for d in out)
            and out[0] == x[0], f"{op.name}: output {out!r} for input {x}")
    regular, transposed = out[1] == w[0], x[1] == w[0]
    require(regular or transposed, f"{op.name}: output {out} matches neither input {x} nor weight {w}")
    if regular and transposed:
        transposed = numel(out[2:]) > numel(x[2:])
    return transposed, out


def convolution(op: OpShapes) -> float:
    """convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)."""
    x, w = input_shape(op, 0), input_shape(op, 1)
    require(len(x) == len(w) >= 3, f"{op.name}: input {x} weight {w}")
    known = recorded_output(op, x, w)
    if known is not None:  # the positions counted: the input's (transposed) or the output's
        return 2 * _conv_macs(x, w, x[2:] if known[0] else known[1][2:])
    if concrete(op, 6):  # transposed: flop_counter counts over the input's spatial positions
        return 2 * _conv_macs(x, w, x[2:])
    out = conv_out(x[2:], w[2:], concrete(op, 3), concrete(op, 4), concrete(op, 5))
    return 2 * _conv_macs(x, w, out)


def _masked_backward(transposed_at: int, mask_at: int) -> Callable[[OpShapes], float]:
    def f(op: OpShapes) -> float:
        go, x, w = input_shape(op, 0), input_shape(op, 1), input_shape(op, 2)
        require(len(go) == len(x) == len(w) >= 3, f"{op.name}: shapes {go} {x} {w}")
        spatial = x[2:] if concrete(op, transposed_at) else go[2:]
        mask = output_mask(op, mask_at, 3)
        return 2 * _conv_macs(x, w, spatial) * (int(mask[0]) + int(mask[1]))

    return f


#: convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
#: transposed, output_padding, groups, output_mask): grad_input and grad_weight, each when masked.
convolution_backward = _masked_backward(7, 10)
#: convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation,
#: transposed, output_padding, groups, output_mask): the out-of-tree backends' form, the same count.
convolution_backward_overrideable = _masked_backward(6, 9)


def slow_conv_backward(transposed: bool) -> Callable[[OpShapes], float]:
    """The native (non-cuDNN) kernels' backward, (grad_output, self, weight, kernel_size, ...,
    output_mask) with the bool[2] or bool[3] mask last in every era: thnn_conv2d_backward (1.8,
    also finput/fgrad_input), (_)slow_conv2d_backward (its later names), slow_conv3d_backward,
    slow_conv_dilated2d/3d_backward, thnn_conv_depthwise2d_backward, conv_depthwise3d_backward,
    slow_conv_transpose2d/3d_backward."""

    def f(op: OpShapes) -> float:
        go, x, w = input_shape(op, 0), input_shape(op, 1), input_shape(op, 2)
        mask = concrete(op, len(op.input_dims) - 1)
        require(isinstance(mask, (list, tuple)) and len(mask) in (2, 3), f"{op.name}: output_mask {mask!r}")
        return 2 * _macs_over(x if transposed else go, w) * (bool(mask[0]) + bool(mask[1]))

    return f


# Per-gradient ops of PyTorch <= 1.10's per-backend backward (1.8 native_functions.yaml): the
# outer cudnn_/miopen_(depthwise_)/mkldnn_convolution(_transpose)_backward(self, grad_output,
# weight, ..., output_mask) calls one op per requested gradient (cudnn/ConvShared.cpp,
# miopen/Conv_miopen.cpp, mkldnn/Conv.cpp), so these carry the FLOPs and the outer op has no
# formula: their presence is the mask, which traces of that era never record (the profiler
# records "Concrete Inputs" only since 2023, pytorch#100593).
def conv_backward_input(op: OpShapes) -> float:
    """*_convolution_backward_input(self_size, grad_output, weight, padding, stride, dilation,
    groups, ...): grad_input of a regular conv from the two tensors alone."""
    return 2 * _macs_over(input_shape(op, 1), input_shape(op, 2))


def conv_backward_weight(transposed: bool) -> Callable[[OpShapes], float]:
    """*_convolution(_transpose)_backward_weight(weight_size, grad_output, self, padding, stride,
    dilation, groups, ...): the kernel size is only in the int[] weight_size (NaN when unrecorded)."""

    def f(op: OpShapes) -> float:
        ws, go, x = concrete(op, 0), input_shape(op, 1), input_shape(op, 2)
        require(isinstance(ws, (list, tuple)) and len(ws) == len(go) == len(x) and go[0] == x[0],
                f"{op.name}: weight_size {ws!r}, grad_output {go}, input {x}")
        ws = tuple(int(v) for v in ws)
        per_group = go[1] if transposed else x[1]  # channels split into groups: ws[1] of them each
        require(ws[1] > 0 and per_group % ws[1] == 0, f"{op.name}: {per_group} channels, weight {ws}")
        return 2 * _macs_over(x if transposed else go, ws)

    return f


def conv_transpose_backward_input(op: OpShapes) -> float:
    """*_convolution_transpose_backward_input(grad_output, weight, padding, stride, dilation,
    groups, ...): a regular conv of grad_output with the weight; its output is grad_input, whose
    spatial size needs padding/stride/dilation."""
    go, w = input_shape(op, 0), input_shape(op, 1)
    require(len(go) == len(w) >= 3 and w[1] > 0 and go[1] % w[1] == 0, f"{op.name}: {go} {w}")
    out = conv_out(go[2:], w[2:], concrete(op, 3), concrete(op, 2), concrete(op, 4))
    return 2 * _conv_macs(go, w, out)


# ---- scaled-dot-product attention ------------------------------------------------------------
# flop_counter.sdpa_flop_count / sdpa_backward_flop_count, with b batches, h query heads, sq
# queries, sk keys, head dims d (query/key) and dv (value): forward Q·Kᵀ and P·V,
# 2·b·h·sq·sk·(d + dv); backward recomputes Q·Kᵀ and forms dP, dV, dQ, dK: 2·b·h·sq·sk·(3d + 2dv).
# Key/value may have fewer heads (grouped-query attention), a divisor of h.
#
# Layouts (attention.cu, attention_backward.cu): the _scaled_dot_product_* ops and the cuDNN
# kernels take [B, H, S, D]; the inner _flash_attention_* and _efficient_attention_* kernels take
# [B, S, H, D] (the outer op passes query.transpose(1, 2)). Variable-length (nested) calls pack
# the batch: flash and cuDNN as [total, H, D] with cum_seq_q/k [B+1] and max_q/max_k (so did the
# dense flash path in PyTorch 2.0-2.1), memory-efficient as [1, total, H, D] with cu_seqlens. A
# batch of one sequence, or of sequences all of length max_q/max_k, is exact; other ragged
# batches are NaN: their FLOPs depend on each length, which a trace does not record.
# FlopCounterMode counts the inner flash/efficient kernels as if [B, S, H, D] were [B, H, S, D];
# this table reads the layout each kernel takes, so an inner op counts what its outer op counts.
def _attention_flops(b: int, h: int, sq: int, sk: int, d: int, dv: int, backward: bool) -> int:
    return 2 * b * h * sq * sk * ((3 * d + 2 * dv) if backward else (d + dv))


def _qkv(op: OpShapes, q_at: int, ndim: int) -> tuple[tuple, tuple, tuple]:
    q, k, v = input_shape(op, q_at), input_shape(op, q_at + 1), input_shape(op, q_at + 2)
    require(len(q) == len(k) == len(v) == ndim, f"{op.name}: q/k/v {q} {k} {v}")
    return q, k, v


def _check(op: OpShapes, h: int, hkv: int, hv: int, d: int, d2: int, sk: int, sk2: int) -> None:
    require(hkv == hv and d == d2 and sk == sk2 and hkv > 0 and h % hkv == 0, f"{op.name}: q/k/v shapes do not match")


def _dense(op: OpShapes, q_at: int, heads_first: bool) -> tuple[int, ...]:
    q, k, v = _qkv(op, q_at, 4)
    if heads_first:
        (b, h, sq, d), (b2, hkv, sk, d2), (b3, hv, sk2, dv) = q, k, v
    else:
        (b, sq, h, d), (b2, sk, hkv, d2), (b3, sk2, hv, dv) = q, k, v
    require(b == b2 == b3, f"{op.name}: batch sizes differ")
    _check(op, h, hkv, hv, d, d2, sk, sk2)
    return b, h, sq, sk, d, dv


def _packed(op: OpShapes, q_at: int, cum_at: int, max_at: int) -> tuple[int, ...]:
    (tq, h, d), (tk, hkv, d2), (tk2, hv, dv) = _qkv(op, q_at, 3)
    _check(op, h, hkv, hv, d, d2, tk, tk2)
    (n,) = input_shape(op, cum_at)
    b = n - 1
    if b == 1:
        return 1, h, tq, tk, d, dv
    sq, sk = concrete(op, max_at), concrete(op, max_at + 1)
    require(b > 0 and tq == b * sq and tk == b * sk, f"{op.name}: ragged batch")
    return b, h, sq, sk, d, dv


def _one_sequence(op: OpShapes, positions: tuple[int, ...]) -> None:
    """Raise unless every cu_seqlens-like input (integer, 1-D) there describes at most one sequence."""
    for i in positions:
        dims = op.input_dims[i] if i < len(op.input_dims) else []
        kind = op.input_types[i] if i < len(op.input_types) else ""
        require(not (kind in ("int", "long int") and len(dims) == 1 and dims[0] > 2), f"{op.name}: ragged batch")


def attention(q_at: int, heads_first: bool, backward: bool, packed_at: tuple[int, int] | None = None,
              seqlens_at: tuple[int, ...] = ()) -> Callable[[OpShapes], float]:
    """Attention GEMMs with query/key/value at q_at..q_at+2; packed_at = (cum_seq_q, max_q)
    positions for ops that take packed [total, H, D] inputs; seqlens_at: cu_seqlens positions of
    the memory-efficient kernels."""

    def f(op: OpShapes) -> float:
        if packed_at is not None and len(input_shape(op, q_at)) == 3:
            dims = _packed(op, q_at, *packed_at)
        else:
            _one_sequence(op, seqlens_at)
            dims = _dense(op, q_at, heads_first)
        return _attention_flops(*dims, backward)

    return f


# ---- dispatch: op name (without "aten::") -> formula ---------------------------------------
SLOW_CONV = ("thnn_conv2d_backward", "slow_conv2d_backward", "_slow_conv2d_backward", "slow_conv3d_backward",
              "slow_conv_dilated2d_backward", "slow_conv_dilated3d_backward", "thnn_conv_depthwise2d_backward",
              "conv_depthwise3d_backward")

#: Convolution backward ops besides convolution_backward (one level per computation: see `analysis.flops.ops`).
CONV_BACKWARD: dict[str, Callable[[OpShapes], float]] = {
    "convolution_backward_overrideable": convolution_backward_overrideable,
    **{name: slow_conv_backward(False) for name in SLOW_CONV},
    "slow_conv_transpose2d_backward": slow_conv_backward(True),
    "slow_conv_transpose3d_backward": slow_conv_backward(True),
    **{f"{kind}_convolution_backward_input": conv_backward_input
       for kind in ("cudnn", "miopen", "miopen_depthwise", "mkldnn")},
    **{f"{kind}_convolution_backward_weight": conv_backward_weight(False)
       for kind in ("cudnn", "miopen", "miopen_depthwise")},
    "mkldnn_convolution_backward_weights": conv_backward_weight(False),
    **{f"{kind}_convolution_transpose_backward_input": conv_transpose_backward_input for kind in ("cudnn", "miopen")},
    **{f"{kind}_convolution_transpose_backward_weight": conv_backward_weight(True) for kind in ("cudnn", "miopen")},
}

#: Fused attention kernels, outer (_scaled_dot_product_*) and inner, forward and backward.
ATTENTION: dict[str, Callable[[OpShapes], float]] = {
    **{f"_scaled_dot_product_{kind}": attention(0, True, False)
       for kind in ("flash_attention", "efficient_attention", "cudnn_attention", "flash_attention_for_cpu",
                    "fused_attention_overrideable", "attention_math_for_mps")},
    **{f"_scaled_dot_product_{kind}_backward": attention(1, True, True)
       for kind in ("flash_attention", "efficient_attention", "cudnn_attention", "flash_attention_for_cpu",
                    "fused_attention_overrideable")},
    "_flash_attention_forward": attention(0, False, False, packed_at=(3, 5)),
    "_flash_attention_backward": attention(1, False, True, packed_at=(6, 8)),
    "_efficient_attention_forward": attention(0, False, False, seqlens_at=(3, 4, 5)),
    "_efficient_attention_backward": attention(1, False, True, seqlens_at=(6, 7)),
    "_cudnn_attention_forward": attention(0, True, False, packed_at=(4, 6)),
    "_cudnn_attention_backward": attention(1, True, True, packed_at=(9, 11)),
}
