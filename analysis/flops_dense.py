"""FLOP formulas for dense linear algebra: GEMMs, matrix-vector products, convolution, attention.

Counts match ``torch.utils.flop_counter.FlopCounterMode`` (2 FLOPs per multiply-add; bias adds not
counted), except convolution's grad_weight for groups > 1, counted with Cin/groups (see the
conventions in `analysis.flops`). Scaled-dot-product attention counts only its batched GEMMs.
"""

from __future__ import annotations

from typing import Callable

from tbd.analysis.flops_args import concrete, input_shape, int_list, numel, output_mask, require
from tbd.records import OpShapes


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


def _conv_out(x: tuple, k: tuple, stride, padding, dilation) -> list[int]:
    """Output spatial sizes of a convolution: floor((i + 2p - d(k-1) - 1) / s) + 1 (torch.nn.Conv2d docs)."""
    n = len(k)
    s, p, d = (int_list(v, n, "conv") for v in (stride, padding, dilation))
    return [(x[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(n)]


def _conv_macs(x: tuple, w: tuple, spatial) -> int:
    # flop_counter.conv_flop_count: N · prod(spatial) · prod(kernel) · w[0] · w[1], where
    # spatial is the output's (regular conv, w = [Cout, Cin/g, k...]) or the input's (transposed
    # conv, w = [Cin, Cout/g, k...]); either way N · prod(spatial) · prod(w).
    return x[0] * numel(spatial) * numel(w)


def convolution(op: OpShapes) -> float:
    """convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)."""
    x, w = input_shape(op, 0), input_shape(op, 1)
    require(len(x) == len(w) >= 3, f"{op.name}: input {x} weight {w}")
    if concrete(op, 6):  # transposed: flop_counter counts over the input's spatial positions
        return 2 * _conv_macs(x, w, x[2:])
    out = _conv_out(x[2:], w[2:], concrete(op, 3), concrete(op, 4), concrete(op, 5))
    return 2 * _conv_macs(x, w, out)


def convolution_backward(op: OpShapes) -> float:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask): grad_input and grad_weight each cost the
    forward's MACs (flop_counter.conv_backward_flop); grad_bias is not counted (as there)."""
    go, x, w = input_shape(op, 0), input_shape(op, 1), input_shape(op, 2)
    require(len(go) == len(x) == len(w) >= 3, f"{op.name}: shapes {go} {x} {w}")
    spatial = x[2:] if concrete(op, 7) else go[2:]
    mask = output_mask(op, 10, 3)
    return 2 * _conv_macs(x, w, spatial) * (int(mask[0]) + int(mask[1]))


# Scaled-dot-product attention: flop_counter.sdpa_flop_count / sdpa_backward_flop_count.
# q [b, h, sq, d], k [b, hkv, sk, d], v [b, hkv, sk, dv]; forward Q·Kᵀ and P·V; backward
# recomputes Q·Kᵀ and forms dP, dV, dQ, dK: 2·b·h·sq·sk·(3d + 2dv).
def sdpa(q_at: int, backward: bool) -> Callable[[OpShapes], float]:
    def f(op: OpShapes) -> float:
        (b, h, sq, d), (b2, hkv, sk, d2) = input_shape(op, q_at), input_shape(op, q_at + 1)
        (b3, hv, sk2, dv) = input_shape(op, q_at + 2)
        require(b == b2 == b3 and hkv == hv and d == d2 and sk == sk2 and h % hkv == 0,
                f"{op.name}: q/k/v shapes do not match")
        return 2 * b * h * sq * sk * ((3 * d + 2 * dv) if backward else (d + dv))

    return f
