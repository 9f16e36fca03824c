"""FLOP formulas for per-element work: elementwise ops, _foreach optimizer ops, reductions,
softmax, losses, batch/layer normalization, pooling, and the zero-FLOP data-movement ops.

Every count here is an integer multiple of an element count: per-channel, per-row or per-call
scalar work is left out (see the conventions in `analysis.flops.ops`). Each block's comment derives
its per-element costs and cites the ATen kernel it follows.
"""

from __future__ import annotations

from typing import Callable

from tbd.analysis.flops.args import (
    concrete,
    elementwise_numel,
    has_tensor,
    input_shape,
    input_shape_list,
    int_list,
    is_one,
    numel,
    output_mask,
    require,
)
from tbd.core.records import OpShapes

# Elementwise ops: FLOPs per output element (the broadcast of the tensor inputs). Derivations:
#   add/sub: 1, plus 1 when alpha != 1 scales a tensor operand (self + alpha·other).
#   sigmoid 1/(1+exp(-x)): exp, add, divide = 3.  sigmoid_backward g·y·(1-y): 3.
#   tanh_backward g·(1-y²): 3.  relu/clamp_min/threshold(_backward): one compare-select = 1.
#   hardtanh = clamp(min, max): 2 compares; its backward: 2.  leaky_relu x·(x<0 ? a : 1): 2.
#   gelu, erf form 0.5·x·(1+erf(x/√2)): 5; tanh form 0.5·x·(1+tanh(c(x+0.044715x³))): 9.
#   gelu_backward, erf form g·(Φ(x) + x·φ(x)): x/√2, erf, +1, ·0.5, x², ·(-0.5), exp, ·1/√(2π),
#     ·x, add, ·g = 11; tanh form: 18 (tanh argument 6, 1-t² 2, du/dx 3, product 3, 0.5(1+t) 2,
#     add 1, ·g 1).
#   silu x·sigmoid(x): 4; silu_backward g·s·(1 + x·(1-s)): sigmoid 3 + 5 = 8.
#   hardswish x·clamp(x+3, 0, 6)/6: 5.  addcmul/addcdiv self + v·(a∘b): 2, +1 when v != 1.
#   lerp a + w·(b-a): 3.  dropout (native_dropout, training) x·mask·(1/(1-p)): 2; its backward
#   g·mask·scale: 2; mask generation is random-number generation (not counted).
#   Elementary functions (exp, log, sqrt, rsqrt, tanh, erf, pow, sin, cos) and neg/abs: 1.


def _alpha_cost(op: OpShapes) -> int:
    scalar_other = len(op.input_types) > 1 and op.input_types[1] in ("Scalar", "ScalarList")
    return 1 if scalar_other or is_one(op, 2) else 2


def _addc_cost(op: OpShapes) -> int:
    return 2 if is_one(op, 3) else 3


def _clamp_cost(op: OpShapes) -> int:
    bounds = sum(1 for i in (1, 2) if i < len(op.input_types) and op.input_types[i] != "")
    require(bounds > 0, f"{op.name}: no bound recorded")
    return bounds


def _gelu_cost(op: OpShapes) -> int:
    return 9 if concrete(op, 1, "none") == "tanh" else 5


def _gelu_backward_cost(op: OpShapes) -> int:
    return 18 if concrete(op, 2, "none") == "tanh" else 11


def _dropout_cost(op: OpShapes) -> int:
    return 0 if concrete(op, 2, True) is False else 2  # train=None means training (schema)


INPLACE_ELEMENTWISE = {  # these also exist as in-place "name_"
    "add": _alpha_cost, "sub": _alpha_cost, "rsub": _alpha_cost, "mul": 1, "div": 1, "neg": 1,
    "abs": 1, "reciprocal": 1, "sqrt": 1, "rsqrt": 1, "exp": 1, "log": 1, "log1p": 1, "expm1": 1,
    "erf": 1, "pow": 1, "sin": 1, "cos": 1, "tanh": 1, "sigmoid": 3, "relu": 1, "clamp_min": 1,
    "clamp_max": 1, "threshold": 1, "maximum": 1, "minimum": 1, "clamp": _clamp_cost,
    "hardtanh": 2, "leaky_relu": 2, "silu": 4, "gelu": _gelu_cost, "hardswish": 5,
    "addcmul": _addc_cost, "addcdiv": _addc_cost, "lerp": 3,
    # Comparisons and logical ops: one compare per element (on bool/int operands: 0, the int rule).
    "lt": 1, "le": 1, "gt": 1, "ge": 1, "eq": 1, "ne": 1,
    "logical_and": 1, "logical_or": 1, "logical_xor": 1, "logical_not": 1,
}
ELEMENTWISE = {
    "threshold_backward": 1, "sigmoid_backward": 3, "tanh_backward": 3, "hardtanh_backward": 2,
    "leaky_relu_backward": 2, "silu_backward": 8, "gelu_backward": _gelu_backward_cost,
    "native_dropout": _dropout_cost, "native_dropout_backward": 2,
}


def elementwise(cost) -> Callable[[OpShapes], float]:
    def f(op: OpShapes) -> float:
        per = cost(op) if callable(cost) else cost
        return per * elementwise_numel(op)

    return f


# Multi-tensor optimizer ops: the same per-element costs summed over the TensorList at input 0.
def _foreach_alpha(op: OpShapes) -> int:
    scalar_other = len(op.input_types) > 1 and op.input_types[1] in ("Scalar", "ScalarList")
    return 1 if scalar_other or is_one(op, 2) else 2


def _foreach_addc(op: OpShapes) -> int:
    scalar_value = len(op.input_types) > 3 and op.input_types[3] == "Scalar"
    return 2 if scalar_value and is_one(op, 3) else 3


FOREACH = {  # also in-place "name_" except norm
    "add": _foreach_alpha, "sub": _foreach_alpha, "mul": 1, "div": 1, "addcmul": _foreach_addc,
    "addcdiv": _foreach_addc, "lerp": 3, "sqrt": 1, "neg": 1, "reciprocal": 1, "exp": 1, "abs": 1,
    "maximum": 1, "minimum": 1, "clamp_min": 1, "clamp_max": 1,
}


def foreach(cost) -> Callable[[OpShapes], float]:
    def f(op: OpShapes) -> float:
        per = cost(op) if callable(cost) else cost
        return per * sum(numel(s) for s in input_shape_list(op, 0))

    return f


# Reductions. sum: one add per input element (ATen accumulates into a zero-filled output, the
# fill_ child in traces). mean: sum plus one divide per output element. vector 2-norm: square+add.
def reduce_sum(op: OpShapes) -> float:
    return numel(input_shape(op, 0))


def reduce_mean(op: OpShapes) -> float:
    x = input_shape(op, 0)
    if len(op.input_types) > 1 and op.input_types[1] == "ScalarList":  # mean.dim(self, dim, ...)
        dims = concrete(op, 1)
        reduced = {d % len(x) for d in dims} if dims and x else set(range(len(x)))
        out = numel(n for i, n in enumerate(x) if i not in reduced)
    else:  # mean(self, dtype): everything
        out = 1
    return numel(x) + out


def per_element(cost: int, i: int = 0) -> Callable[[OpShapes], float]:
    """`cost` FLOPs per element of input i."""
    return lambda op: cost * numel(input_shape(op, i))


# Softmax over a row of n: max (1), subtract (1), exp (1), sum (1), divide (1) = 5 per element;
# log_softmax: max, subtract, exp, sum, subtract log-sum = 5 (the per-row log is not counted).
# Backward: softmax g' = y·(g - Σg·y): mul, add, sub, mul = 4; log_softmax g' = g - exp(y)·Σg:
# add, exp, mul, sub = 4.


# Losses. nll_loss picks one log-probability per target element: accumulate it (1), plus weight
# multiply and total-weight accumulation (2) when a class weight is given; the final divide for
# reduction='mean' is per call (not counted). Backward writes -g·w/total into one place per target:
# 1, +1 with weights. mse_loss: subtract, square, accumulate = 3 per element (2 with
# reduction='none'); backward 2·(x-t)·g/n with the scalar folded: subtract, multiply = 2 (3 with
# reduction='none', where g is per element).
def nll_loss_forward(op: OpShapes) -> float:
    return numel(input_shape(op, 1)) * (3 if has_tensor(op, 2) else 1)


def nll_loss_backward(op: OpShapes) -> float:
    return numel(input_shape(op, 2)) * (2 if has_tensor(op, 3) else 1)


def mse_loss(op: OpShapes) -> float:
    return numel(input_shape(op, 0)) * (2 if concrete(op, 2, 1) == 0 else 3)


def mse_loss_backward(op: OpShapes) -> float:
    return numel(input_shape(op, 1)) * (3 if concrete(op, 3, 1) == 0 else 2)


# Batch-norm, as ATen's CPU kernels (aten/src/ATen/native/Normalization.cpp) and cuDNN compute it.
# Forward, training: mean (1 add/element), variance (subtract, square, add = 3), then the
# normalize-scale-shift folded per channel into y = x·α + β (α = w·invstd, β = b - mean·α): 2.
# Total 6 per element. Inference uses the running statistics: only y = x·α + β, 2 per element.
# Backward (batch_norm_backward_cpu_template): per-channel Σg (1/element) and Σ(x-mean)·g (3),
# then grad_input = (g - Σg/M - (x-mean)·k)·invstd·w: subtract, multiply, subtract, subtract,
# multiply = 5. Σg feeds grad_bias and grad_input, the dot product grad_weight and grad_input;
# each is counted only when an output that needs it is requested. Inference backward:
# grad_input = g·(invstd·w): 1. Per-channel scalar work is not counted (module docstring).
def batch_norm_forward(training_at: int | None, fixed: bool | None = None) -> Callable[[OpShapes], float]:
    def f(op: OpShapes) -> float:
        training = fixed if training_at is None else concrete(op, training_at)
        require(isinstance(training, bool), f"{op.name}: training flag {training!r}")
        return (6 if training else 2) * numel(input_shape(op, 0))

    return f


def batch_norm_legit(op: OpShapes) -> float:
    """_native_batch_norm_legit: training flag at 5, or at 3 in the .no_stats overload (6 args)."""
    return batch_norm_forward(3 if len(op.input_dims) == 6 else 5)(op)


def _bn_backward_cost(training: bool, mask: list[bool]) -> int:
    if training:
        return (mask[0] or mask[2]) * 1 + (mask[0] or mask[1]) * 3 + mask[0] * 5
    return mask[2] * 1 + mask[1] * 3 + mask[0] * 1


def batch_norm_backward(op: OpShapes) -> float:
    """native_batch_norm_backward / batch_norm_backward: train (update) at 7, output_mask at 9."""
    training = concrete(op, 7)
    require(isinstance(training, bool), f"{op.name}: train flag {training!r}")
    return _bn_backward_cost(training, output_mask(op, 9, 3)) * numel(input_shape(op, 0))


def cudnn_batch_norm_backward(op: OpShapes) -> float:
    """cudnn/miopen_batch_norm_backward(input, grad_output, ...): training, all three grads."""
    return _bn_backward_cost(True, [True, True, True]) * numel(input_shape(op, 0))


# Layer-norm (aten/src/ATen/native/layer_norm.cpp): mean 1, variance 3, (x-mean)·rstd 2, then
# ·w 1 and +b 1 when given: 6-8 per element. Backward: x̂ = (x-mean)·rstd 2 (for grad_input or
# grad_weight), grad_weight Σg·x̂ 2, grad_bias Σg 1, grad_input with gw = g·w (1 if w):
# Σgw 1, Σgw·x̂ 2, (gw - mean(gw) - x̂·mean(gw·x̂))·rstd 4 = 7 (+1).
def layer_norm(op: OpShapes) -> float:
    per = 6 + has_tensor(op, 2) + has_tensor(op, 3)
    return per * numel(input_shape(op, 0))


def layer_norm_backward(op: OpShapes) -> float:
    """native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask).

    Traces without Concrete Inputs (PyTorch 1.x, early 2.x) never record output_mask; then every
    gradient the call can give is counted: grad_input, plus grad_weight/grad_bias where weight/bias
    are passed, which is what autograd requests for a LayerNorm whose input and affine parameters
    require grad (nn.LayerNorm anywhere but on a network's raw input).
    """
    if concrete(op, 7, None) is None:
        m = [True, has_tensor(op, 5), has_tensor(op, 6)]
    else:
        m = output_mask(op, 7, 3)
    per = 2 * (m[0] or m[1]) + 2 * m[1] + m[2] + m[0] * (7 + has_tensor(op, 5))
    return per * numel(input_shape(op, 0))


# Pooling. Output sizes as ATen's pooling_output_shape (aten/src/ATen/native/Pool.h).
# max pool: one compare per window element per output; its backward adds each grad_output into
# one input (1 per grad_output element). avg pool: window adds + 1 divide per output; backward:
# divide + scatter-add into the window, (window + 1) per grad_output element. adaptive average
# pool: every input element added once (windows tile the input) + 1 divide per output; backward
# one divide per input element (as MeanBackward's div).
def _pool_out(x: tuple, k: list, s: list, p: list, d: list, ceil: bool) -> list[int]:
    out = []
    for i, kk, ss, pp, dd in zip(x, k, s, p, d):
        o = (i + 2 * pp - dd * (kk - 1) - 1 + (ss - 1 if ceil else 0)) // ss + 1
        if ceil and (o - 1) * ss >= i + pp:
            o -= 1
        out.append(o)
    return out


def pool_window(op: OpShapes, nsp: int, dilation_at: int | None, ceil_at: int):
    """(x shape, kernel, output spatial sizes) for a pooling op with kernel/stride/padding at 1-3."""
    x = input_shape(op, 0)
    k = int_list(concrete(op, 1), nsp, op.name)
    stride = concrete(op, 2)
    s = k if stride in ([], ()) else int_list(stride, nsp, op.name)
    p = int_list(concrete(op, 3), nsp, op.name)
    d = [1] * nsp if dilation_at is None else int_list(concrete(op, dilation_at), nsp, op.name)
    require(len(x) > nsp, f"{op.name}: input {x}")
    return x, k, _pool_out(x[-nsp:], k, s, p, d, bool(concrete(op, ceil_at, False)))


def max_pool(nsp: int) -> Callable[[OpShapes], float]:
    def f(op: OpShapes) -> float:
        x, k, out = pool_window(op, nsp, 4, 5)
        return numel(x[:-nsp]) * numel(out) * numel(k)

    return f


def avg_pool(nsp: int) -> Callable[[OpShapes], float]:
    def f(op: OpShapes) -> float:
        x, k, out = pool_window(op, nsp, None, 4)
        return numel(x[:-nsp]) * numel(out) * (numel(k) + 1)

    return f


def avg_pool_backward(nsp: int) -> Callable[[OpShapes], float]:
    """avg_poolNd_backward(grad_output, self, kernel, ...): kernel at 2."""
    return lambda op: numel(input_shape(op, 0)) * (numel(int_list(concrete(op, 2), nsp, op.name)) + 1)


def adaptive_avg_pool(nsp: int) -> Callable[[OpShapes], float]:
    def f(op: OpShapes) -> float:
        x = input_shape(op, 0)
        out = int_list(concrete(op, 1), nsp, op.name)
        require(len(x) > nsp, f"{op.name}: input {x}")
        return numel(x) + numel(x[:-nsp]) * numel(out)

    return f


# RoI Align (torchvision's roi_align_forward_kernel_impl; MXNet's ROIAlign computes the same): per
# output element, sampling_ratio² bilinear samples of 4 weighted loads (4 mul + 3 add) accumulated
# (1) = 8 each, then one divide by the sample count. The bilinear weights are computed once per bin
# and sample for all channels (per-bin work, left out). Backward: per gradient element one divide,
# then per sample 4 weighted adds into the input gradient (4 mul + 4 add) = 8. An adaptive
# sampling_ratio (<= 0) depends on each RoI's size, which the shapes do not tell: NaN.
def _roi_samples(op: OpShapes, at: int) -> int:
    ratio = concrete(op, at)
    require(isinstance(ratio, int) and ratio > 0, f"{op.name}: sampling_ratio {ratio!r} (adaptive)")
    return ratio * ratio


def roi_align(op: OpShapes) -> float:
    """roi_align(input [N, C, H, W], rois [R, 5], spatial_scale, pooled_h, pooled_w, sampling_ratio, aligned)."""
    x, rois = input_shape(op, 0), input_shape(op, 1)
    ph, pw = concrete(op, 3), concrete(op, 4)
    return rois[0] * x[1] * ph * pw * (8 * _roi_samples(op, 5) + 1)


def roi_align_backward(op: OpShapes) -> float:
    """_roi_align_backward(grad [R, C, ph, pw], rois, spatial_scale, pooled_h, pooled_w, N, C, H, W, sampling_ratio, aligned)."""
    return numel(input_shape(op, 0)) * (8 * _roi_samples(op, 9) + 1)


# Embeddings (aten/src/ATen/native/Embedding.cpp, EmbeddingBag.cpp and their CUDA kernels). The
# plain lookup is a gather (data movement, ZERO_OPS). Its backward adds each gradient row into the
# row of grad_weight its index names: 1 per grad_output element (embedding_dense_backward); the
# sparse form only repackages grad_output as a sparse tensor (embedding_sparse_backward, ZERO_OPS).
# embedding_backward, which calls one of the two by its `sparse` flag, has no formula.
# Bags of n indices into a [V, D] table, B bags: the forward gathers n·D elements and reduces
# each into its bag, one add (sum, mean) or compare (max) per gathered element, one multiply more
# with per-sample weights (sum only), and mean divides each of the B·D outputs. Backward (dense):
# sum/mean add each gathered element's gradient into grad_weight (1), after scaling it by the
# per-sample weight or 1/bag_size (+1); max sends each of the B·D gradient elements to its argmax
# row (1). The frequency scaling of scale_grad_by_freq is not counted (nor in embedding_dense_backward).
# Mode 0 = sum, 1 = mean, 2 = max (EmbeddingBag.h).
def embedding_bag(op: OpShapes) -> float:
    """embedding_bag / _embedding_bag / _embedding_bag_forward_only(weight, indices, offsets,
    scale_grad_by_freq, mode=0, sparse, per_sample_weights, include_last_offset=False, ...)."""
    w, idx, offsets = input_shape(op, 0), input_shape(op, 1), input_shape(op, 2)
    require(len(w) == 2 and len(offsets) == 1, f"{op.name}: weight {w}, offsets {offsets}")
    gathered = numel(idx) * w[1]
    if concrete(op, 4, 0) == 1:
        bags = offsets[0] - bool(concrete(op, 7, False))
        return gathered + bags * w[1]
    return gathered * (2 if has_tensor(op, 6) else 1)


def embedding_bag_dense_backward(op: OpShapes) -> float:
    """_embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices,
    num_weights, scale_grad_by_freq, mode, per_sample_weights, padding_idx); PyTorch 1.8 had
    offsets at 2, so everything from offset2bag on one later (told apart by a tensor at 5).

    An unrecorded mode is max when maximum_indices is [B, D] (only max mode fills it per
    element), else unknown: sum and mean differ.
    """
    old = bool(op.input_dims[5]) if len(op.input_dims) > 5 else False
    grad, idx, max_indices = input_shape(op, 0), input_shape(op, 1), input_shape(op, 5 if old else 4)
    require(len(grad) == 2, f"{op.name}: grad {grad}")
    mode = concrete(op, 8 if old else 7, 2 if len(max_indices) == 2 else None)
    require(mode in (0, 1, 2), f"{op.name}: mode {mode!r}")
    if mode == 2:
        return numel(grad)
    scaled = mode == 1 or has_tensor(op, 9 if old else 8)
    return numel(idx) * grad[1] * (2 if scaled else 1)


# Pure data movement: copies, fills, allocation, views, concatenation, gathers, casts: 0 FLOPs.
ZERO_OPS = (
    "copy_ fill_ zero_ zeros zeros_like ones ones_like full full_like empty empty_like "
    "empty_strided new_zeros new_empty new_ones clone contiguous cat stack to _to_copy "
    "index_select embedding embedding_sparse_backward view reshape _reshape_alias _unsafe_view t "
    "transpose permute expand flatten squeeze unsqueeze select slice narrow as_strided detach split chunk unbind "
    "unsafe_split unsafe_chunk resize_ where masked_fill_ constant_pad_nd item "
    "_local_scalar_dense lift_fresh alias broadcast_tensors detach_"
).split()
