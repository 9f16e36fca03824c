"""Analytic FLOP formulas for framework ops, keyed by ATen op name and argument shapes.

Ops read from PyTorch/Kineto traces (and TensorFlow/MXNet ops mapped onto the same names) get
their FLOPs here, forward and backward. Shapes and scalar arguments come as Kineto records them:
``args["Input Dims"]``, ``args["Input type"]``, ``args["Concrete Inputs"]``, one entry per
argument in schema order (keyword-only arguments included; see native_functions.yaml).

Conventions (every formula below follows them):

* A FLOP is one floating-point arithmetic operation. A multiply-add counts 2, as
  ``torch.utils.flop_counter.FlopCounterMode`` does; a comparison (max, relu, clamp) counts 1; an
  elementary function (exp, log, tanh, erf, sqrt, rsqrt, pow) counts 1.
* GEMM and convolution match FlopCounterMode exactly: ``mm/addmm`` = 2·m·n·k, ``bmm/baddbmm`` =
  2·b·m·n·k, conv = 2·N·Cout·prod(out spatial)·(Cin/groups)·prod(kernel); bias adds (addmm's
  ``self``, conv bias, conv grad_bias) are not counted. Convolution backward counts grad_input and
  grad_weight, each only when its ``output_mask`` entry is set, each as many MACs as the forward.
  One deliberate divergence: for groups > 1 FlopCounterMode's grad_weight term uses the full Cin
  (``conv_backward_flop`` transposes the whole input), overcounting by ``groups``; we count
  Cin/groups. Scaled-dot-product attention counts its two (forward) or five (backward) batched
  GEMMs, as FlopCounterMode's ``sdpa_flop_count``/``sdpa_backward_flop_count``; the softmax inside
  the fused kernel is not counted.
* Every other formula counts per-element work only: per-channel, per-row or per-call scalar work
  (batch-norm's rsqrt per channel, softmax's log per row, a loss's final divide) is O(1/elements)
  of the total and is left out, so every count is an integer multiple of an element count.
* Pure data movement (copies, fills, views, concatenation, gathers, dtype casts) is 0 FLOPs with
  a formula (a known zero, not an unknown), see ``_ZERO_OPS``. Random-number generation
  (bernoulli_, normal_, uniform_) has no formula: its arithmetic depends on the generator.
* Ops whose tensor inputs are all integer or bool do integer arithmetic: 0 floating-point FLOPs.
* A scalar argument that the trace did not record takes its schema default when it has one
  (alpha = 1, reduction = mean, approximate = 'none'); one without a default (conv stride, pooling
  kernel, a training flag, an output_mask) makes the count NaN.
* Each computation carries a formula at exactly one nesting level of a PyTorch call stack, since
  the reader takes FLOPs from the outermost op with a formula and skips its descendants:
  conv on ``aten::convolution`` (not conv2d/_convolution/mkldnn_/cudnn_convolution), GEMMs on
  mm/addmm/bmm/baddbmm (not linear/matmul/einsum, which decompose into them), batch-norm on
  native_/cudnn_/miopen_batch_norm (not batch_norm/_batch_norm_impl_index), softmax on _softmax,
  cross-entropy on its parts (_log_softmax, nll_loss_forward), LSTM on the layer kernels
  (mkldnn_rnn_layer on CPU, _cudnn_rnn on CUDA) or, where aten::lstm/lstm_cell decompose into
  visible linear/sigmoid/tanh/mul ops (CPU without oneDNN, nn.LSTMCell), on those ops; aten::lstm
  itself has no formula. Wrappers that contain the same computation (relu > clamp_min, mean > sum +
  div_, max_pool2d > max_pool2d_with_indices, _foreach_add_ > add_) carry equal formulas, so
  either level gives the same count.

Names are exact Kineto names with their ``aten::`` prefix.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class OpShapes:
    """One op call as a trace records it: name, per-argument dims, dtypes and scalar values."""

    name: str  # e.g. "aten::addmm", "aten::convolution_backward"
    input_dims: tuple  # Kineto "Input Dims": a list per input, [] for scalars/None
    input_types: tuple  # Kineto "Input type": "float", "c10::Half", "Scalar", "ScalarList", ""
    concrete_inputs: tuple  # Kineto "Concrete Inputs": strings, "" when not recorded


class _Unparseable(ValueError):
    """Shapes or scalar arguments a formula needs are missing or malformed (caught: NaN)."""


_FLOAT_TYPES = {
    "float": "fp32", "double": "fp64", "c10::Half": "fp16", "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8",
    "c10::Float8_e4m3fnuz": "fp8", "c10::Float8_e5m2fnuz": "fp8",
}
_INT_TYPES = {
    "bool", "unsigned char", "signed char", "short int", "int", "long int", "long long int",
    "c10::qint8", "c10::quint8", "c10::qint32",
}


def precision_of(input_types) -> str:
    """Precision of an op call from its Kineto input types.

    The first floating-point input decides ("float" -> "fp32", "c10::Half" -> "fp16",
    "c10::BFloat16" -> "bf16", "double" -> "fp64", float8 -> "fp8"): later inputs are often
    wrapped Python scalars recorded as "double". "int" when every typed input is integer or bool;
    "" when nothing tells (no types, only "Scalar"/"TensorList"/"").
    """
    types = list(input_types or ())
    for t in types:
        if t in _FLOAT_TYPES:
            return _FLOAT_TYPES[t]
    return "int" if any(t in _INT_TYPES for t in types) else ""


# ---- argument access -----------------------------------------------------------------------


def _shape(op: OpShapes, i: int) -> tuple[int, ...]:
    """Dims of input i as ints; raises _Unparseable when absent or not a flat int list."""
    try:
        dims = op.input_dims[i]
    except (IndexError, TypeError):
        raise _Unparseable(f"{op.name}: no dims for input {i}") from None
    if not isinstance(dims, (list, tuple)) or not all(isinstance(d, int) for d in dims):
        raise _Unparseable(f"{op.name}: dims of input {i} are {dims!r}")
    return tuple(dims)


def _shapes_list(op: OpShapes, i: int) -> list[tuple[int, ...]]:
    """Dims of a TensorList input i: one shape per tensor."""
    try:
        dims = op.input_dims[i]
    except (IndexError, TypeError):
        raise _Unparseable(f"{op.name}: no dims for input {i}") from None
    if not isinstance(dims, (list, tuple)) or not all(isinstance(d, (list, tuple)) for d in dims):
        raise _Unparseable(f"{op.name}: input {i} is not a TensorList: {dims!r}")
    return [tuple(d) for d in dims]


def _numel(shape) -> int:
    return math.prod(shape)


def _has_tensor(op: OpShapes, i: int) -> bool:
    """Whether optional tensor input i is present (a typed, non-empty shape)."""
    try:
        return bool(op.input_dims[i]) and op.input_types[i] not in ("", "Scalar", "ScalarList")
    except (IndexError, TypeError):
        return False


_MISSING = object()


def _concrete(op: OpShapes, i: int, default=_MISSING):
    """Value of scalar argument i parsed from its Concrete Inputs string; `default` if unrecorded."""
    try:
        text = op.concrete_inputs[i]
    except (IndexError, TypeError):
        text = ""
    if text == "" or text is None:
        if default is _MISSING:
            raise _Unparseable(f"{op.name}: argument {i} not recorded")
        return default
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a bare word such as "tanh"


def _is_one(op: OpShapes, i: int) -> bool:
    """Whether a Scalar multiplier (alpha, value) is 1; unrecorded means the schema default 1."""
    value = _concrete(op, i, 1)
    return isinstance(value, (int, float)) and float(value) == 1.0


def _broadcast(shapes) -> tuple[int, ...]:
    """NumPy broadcast of shapes; raises _Unparseable when they do not broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for k, d in enumerate(s, start=ndim - len(s)):
            if d != 1 and out[k] not in (1, d):
                raise _Unparseable(f"shapes {shapes} do not broadcast")
            out[k] = d if d != 1 else out[k]
    return tuple(out)


def _elementwise_numel(op: OpShapes) -> int:
    """Elements of an elementwise op's output: the broadcast of all flat tensor inputs."""
    if not op.input_dims:
        raise _Unparseable(f"{op.name}: no input dims recorded")
    shapes = []
    for dims in op.input_dims:
        if isinstance(dims, (list, tuple)) and all(isinstance(d, int) for d in dims):
            shapes.append(tuple(dims))
    if not shapes:
        raise _Unparseable(f"{op.name}: no tensor input")
    return _numel(_broadcast(shapes))


def _pick_mask(op: OpShapes, i: int, n: int) -> list[bool]:
    """An output_mask argument (bool[n]); raises when unrecorded (which grads were made is unknown)."""
    mask = _concrete(op, i)
    if not isinstance(mask, (list, tuple)) or len(mask) != n:
        raise _Unparseable(f"{op.name}: output_mask {mask!r}")
    return [bool(m) for m in mask]


def _int_list(value, n: int, name: str) -> list[int]:
    """An int[] argument expanded to n entries (a single entry repeats, as ATen's expand_param)."""
    if isinstance(value, int):
        value = [value]
    if not isinstance(value, (list, tuple)) or len(value) not in (1, n):
        raise _Unparseable(f"{name}: expected {n} values, got {value!r}")
    return [int(v) for v in value] * (n if len(value) == 1 else 1)


# ---- formulas --------------------------------------------------------------------------------
# Each formula takes an OpShapes and returns FLOPs; argument positions follow the op's schema in
# aten/src/ATen/native/native_functions.yaml (checked against torch 2.13's `._schema`).


def _require(cond: bool, what: str) -> None:
    if not cond:
        raise _Unparseable(what)


# GEMMs: torch/utils/flop_counter.py mm_flop/addmm_flop/bmm_flop/baddbmm_flop (2·m·n·k).
def _gemm(a: int, b: int) -> Callable[[OpShapes], float]:
    """mm-like: matrices at inputs a [m, k] and b [k, n] -> 2·m·n·k."""

    def f(op: OpShapes) -> float:
        (m, k), (k2, n) = _shape(op, a), _shape(op, b)
        _require(k == k2, f"{op.name}: inner dims {k} != {k2}")
        return 2 * m * n * k

    return f


def _batched_gemm(a: int, b: int) -> Callable[[OpShapes], float]:
    """bmm-like: batches at inputs a [B, m, k] and b [B, k, n] -> 2·B·m·n·k."""

    def f(op: OpShapes) -> float:
        (nb, m, k), (nb2, k2, n) = _shape(op, a), _shape(op, b)
        _require(nb == nb2 and k == k2, f"{op.name}: shapes do not multiply")
        return 2 * nb * m * n * k

    return f


def _mv(a: int, b: int) -> Callable[[OpShapes], float]:
    """Matrix [m, n] at input a times vector [n] at input b -> 2·m·n."""

    def f(op: OpShapes) -> float:
        (m, n), (n2,) = _shape(op, a), _shape(op, b)
        _require(n == n2, f"{op.name}: inner dims {n} != {n2}")
        return 2 * m * n

    return f


def _conv_out(x: tuple, k: tuple, stride, padding, dilation) -> list[int]:
    """Output spatial sizes of a convolution: floor((i + 2p - d(k-1) - 1) / s) + 1 (torch.nn.Conv2d docs)."""
    n = len(k)
    s, p, d = (_int_list(v, n, "conv") for v in (stride, padding, dilation))
    return [(x[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(n)]


def _conv_macs(x: tuple, w: tuple, spatial) -> int:
    # flop_counter.conv_flop_count: N · prod(spatial) · prod(kernel) · w[0] · w[1], where
    # spatial is the output's (regular conv, w = [Cout, Cin/g, k...]) or the input's (transposed
    # conv, w = [Cin, Cout/g, k...]); either way N · prod(spatial) · prod(w).
    return x[0] * _numel(spatial) * _numel(w)


def _convolution(op: OpShapes) -> float:
    """convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)."""
    x, w = _shape(op, 0), _shape(op, 1)
    _require(len(x) == len(w) >= 3, f"{op.name}: input {x} weight {w}")
    if _concrete(op, 6):  # transposed: flop_counter counts over the input's spatial positions
        return 2 * _conv_macs(x, w, x[2:])
    out = _conv_out(x[2:], w[2:], _concrete(op, 3), _concrete(op, 4), _concrete(op, 5))
    return 2 * _conv_macs(x, w, out)


def _convolution_backward(op: OpShapes) -> float:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask): grad_input and grad_weight each cost the
    forward's MACs (flop_counter.conv_backward_flop); grad_bias is not counted (as there)."""
    go, x, w = _shape(op, 0), _shape(op, 1), _shape(op, 2)
    _require(len(go) == len(x) == len(w) >= 3, f"{op.name}: shapes {go} {x} {w}")
    spatial = x[2:] if _concrete(op, 7) else go[2:]
    mask = _pick_mask(op, 10, 3)
    return 2 * _conv_macs(x, w, spatial) * (int(mask[0]) + int(mask[1]))


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
    return 1 if scalar_other or _is_one(op, 2) else 2


def _addc_cost(op: OpShapes) -> int:
    return 2 if _is_one(op, 3) else 3


def _clamp_cost(op: OpShapes) -> int:
    bounds = sum(1 for i in (1, 2) if i < len(op.input_types) and op.input_types[i] != "")
    _require(bounds > 0, f"{op.name}: no bound recorded")
    return bounds


def _gelu_cost(op: OpShapes) -> int:
    return 9 if _concrete(op, 1, "none") == "tanh" else 5


def _gelu_backward_cost(op: OpShapes) -> int:
    return 18 if _concrete(op, 2, "none") == "tanh" else 11


def _dropout_cost(op: OpShapes) -> int:
    return 0 if _concrete(op, 2, True) is False else 2  # train=None means training (schema)


_INPLACE_ELEMENTWISE = {  # these also exist as in-place "name_"
    "add": _alpha_cost, "sub": _alpha_cost, "rsub": _alpha_cost, "mul": 1, "div": 1, "neg": 1,
    "abs": 1, "reciprocal": 1, "sqrt": 1, "rsqrt": 1, "exp": 1, "log": 1, "log1p": 1, "expm1": 1,
    "erf": 1, "pow": 1, "sin": 1, "cos": 1, "tanh": 1, "sigmoid": 3, "relu": 1, "clamp_min": 1,
    "clamp_max": 1, "threshold": 1, "maximum": 1, "minimum": 1, "clamp": _clamp_cost,
    "hardtanh": 2, "leaky_relu": 2, "silu": 4, "gelu": _gelu_cost, "hardswish": 5,
    "addcmul": _addc_cost, "addcdiv": _addc_cost, "lerp": 3,
}
_ELEMENTWISE = {
    "threshold_backward": 1, "sigmoid_backward": 3, "tanh_backward": 3, "hardtanh_backward": 2,
    "leaky_relu_backward": 2, "silu_backward": 8, "gelu_backward": _gelu_backward_cost,
    "native_dropout": _dropout_cost, "native_dropout_backward": 2,
}


def _elementwise(cost) -> Callable[[OpShapes], float]:
    def f(op: OpShapes) -> float:
        per = cost(op) if callable(cost) else cost
        return per * _elementwise_numel(op)

    return f


# Multi-tensor optimizer ops: the same per-element costs summed over the TensorList at input 0.
def _foreach_alpha(op: OpShapes) -> int:
    scalar_other = len(op.input_types) > 1 and op.input_types[1] in ("Scalar", "ScalarList")
    return 1 if scalar_other or _is_one(op, 2) else 2


def _foreach_addc(op: OpShapes) -> int:
    scalar_value = len(op.input_types) > 3 and op.input_types[3] == "Scalar"
    return 2 if scalar_value and _is_one(op, 3) else 3


_FOREACH = {  # also in-place "name_" except norm
    "add": _foreach_alpha, "sub": _foreach_alpha, "mul": 1, "div": 1, "addcmul": _foreach_addc,
    "addcdiv": _foreach_addc, "lerp": 3, "sqrt": 1, "neg": 1, "reciprocal": 1, "exp": 1, "abs": 1,
    "maximum": 1, "minimum": 1, "clamp_min": 1, "clamp_max": 1,
}


def _foreach(cost) -> Callable[[OpShapes], float]:
    def f(op: OpShapes) -> float:
        per = cost(op) if callable(cost) else cost
        return per * sum(_numel(s) for s in _shapes_list(op, 0))

    return f


# Reductions. sum: one add per input element (ATen accumulates into a zero-filled output, the
# fill_ child in traces). mean: sum plus one divide per output element. vector 2-norm: square+add.
def _sum(op: OpShapes) -> float:
    return _numel(_shape(op, 0))


def _mean(op: OpShapes) -> float:
    x = _shape(op, 0)
    if len(op.input_types) > 1 and op.input_types[1] == "ScalarList":  # mean.dim(self, dim, ...)
        dims = _concrete(op, 1)
        reduced = {d % len(x) for d in dims} if dims and x else set(range(len(x)))
        out = _numel(n for i, n in enumerate(x) if i not in reduced)
    else:  # mean(self, dtype): everything
        out = 1
    return _numel(x) + out


def _per_element(cost: int, i: int = 0) -> Callable[[OpShapes], float]:
    """`cost` FLOPs per element of input i."""
    return lambda op: cost * _numel(_shape(op, i))


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
def _nll_forward(op: OpShapes) -> float:
    return _numel(_shape(op, 1)) * (3 if _has_tensor(op, 2) else 1)


def _nll_backward(op: OpShapes) -> float:
    return _numel(_shape(op, 2)) * (2 if _has_tensor(op, 3) else 1)


def _mse(op: OpShapes) -> float:
    return _numel(_shape(op, 0)) * (2 if _concrete(op, 2, 1) == 0 else 3)


def _mse_backward(op: OpShapes) -> float:
    return _numel(_shape(op, 1)) * (3 if _concrete(op, 3, 1) == 0 else 2)


# Batch-norm, as ATen's CPU kernels (aten/src/ATen/native/Normalization.cpp) and cuDNN compute it.
# Forward, training: mean (1 add/element), variance (subtract, square, add = 3), then the
# normalize-scale-shift folded per channel into y = x·α + β (α = w·invstd, β = b - mean·α): 2.
# Total 6 per element. Inference uses the running statistics: only y = x·α + β, 2 per element.
# Backward (batch_norm_backward_cpu_template): per-channel Σg (1/element) and Σ(x-mean)·g (3),
# then grad_input = (g - Σg/M - (x-mean)·k)·invstd·w: subtract, multiply, subtract, subtract,
# multiply = 5. Σg feeds grad_bias and grad_input, the dot product grad_weight and grad_input;
# each is counted only when an output that needs it is requested. Inference backward:
# grad_input = g·(invstd·w): 1. Per-channel scalar work is not counted (module docstring).
def _bn_forward(training_at: int | None, fixed: bool | None = None) -> Callable[[OpShapes], float]:
    def f(op: OpShapes) -> float:
        training = fixed if training_at is None else _concrete(op, training_at)
        _require(isinstance(training, bool), f"{op.name}: training flag {training!r}")
        return (6 if training else 2) * _numel(_shape(op, 0))

    return f


def _bn_legit(op: OpShapes) -> float:
    """_native_batch_norm_legit: training flag at 5, or at 3 in the .no_stats overload (6 args)."""
    return _bn_forward(3 if len(op.input_dims) == 6 else 5)(op)


def _bn_backward_cost(training: bool, mask: list[bool]) -> int:
    if training:
        return (mask[0] or mask[2]) * 1 + (mask[0] or mask[1]) * 3 + mask[0] * 5
    return mask[2] * 1 + mask[1] * 3 + mask[0] * 1


def _bn_backward(op: OpShapes) -> float:
    """native_batch_norm_backward / batch_norm_backward: train (update) at 7, output_mask at 9."""
    training = _concrete(op, 7)
    _require(isinstance(training, bool), f"{op.name}: train flag {training!r}")
    return _bn_backward_cost(training, _pick_mask(op, 9, 3)) * _numel(_shape(op, 0))


def _cudnn_bn_backward(op: OpShapes) -> float:
    """cudnn/miopen_batch_norm_backward(input, grad_output, ...): training, all three grads."""
    return _bn_backward_cost(True, [True, True, True]) * _numel(_shape(op, 0))


# Layer-norm (aten/src/ATen/native/layer_norm.cpp): mean 1, variance 3, (x-mean)·rstd 2, then
# ·w 1 and +b 1 when given: 6-8 per element. Backward: x̂ = (x-mean)·rstd 2 (for grad_input or
# grad_weight), grad_weight Σg·x̂ 2, grad_bias Σg 1, grad_input with gw = g·w (1 if w):
# Σgw 1, Σgw·x̂ 2, (gw - mean(gw) - x̂·mean(gw·x̂))·rstd 4 = 7 (+1).
def _layer_norm(op: OpShapes) -> float:
    per = 6 + _has_tensor(op, 2) + _has_tensor(op, 3)
    return per * _numel(_shape(op, 0))


def _layer_norm_backward(op: OpShapes) -> float:
    m = _pick_mask(op, 7, 3)
    per = 2 * (m[0] or m[1]) + 2 * m[1] + m[2] + m[0] * (7 + _has_tensor(op, 5))
    return per * _numel(_shape(op, 0))


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


def _window(op: OpShapes, nsp: int, dilation_at: int | None, ceil_at: int):
    """(x shape, kernel, output spatial sizes) for a pooling op with kernel/stride/padding at 1-3."""
    x = _shape(op, 0)
    k = _int_list(_concrete(op, 1), nsp, op.name)
    stride = _concrete(op, 2)
    s = k if stride in ([], ()) else _int_list(stride, nsp, op.name)
    p = _int_list(_concrete(op, 3), nsp, op.name)
    d = [1] * nsp if dilation_at is None else _int_list(_concrete(op, dilation_at), nsp, op.name)
    _require(len(x) > nsp, f"{op.name}: input {x}")
    return x, k, _pool_out(x[-nsp:], k, s, p, d, bool(_concrete(op, ceil_at, False)))


def _max_pool(nsp: int) -> Callable[[OpShapes], float]:
    def f(op: OpShapes) -> float:
        x, k, out = _window(op, nsp, 4, 5)
        return _numel(x[:-nsp]) * _numel(out) * _numel(k)

    return f


def _avg_pool(nsp: int) -> Callable[[OpShapes], float]:
    def f(op: OpShapes) -> float:
        x, k, out = _window(op, nsp, None, 4)
        return _numel(x[:-nsp]) * _numel(out) * (_numel(k) + 1)

    return f


def _avg_pool_backward(nsp: int) -> Callable[[OpShapes], float]:
    """avg_poolNd_backward(grad_output, self, kernel, ...): kernel at 2."""
    return lambda op: _numel(_shape(op, 0)) * (_numel(_int_list(_concrete(op, 2), nsp, op.name)) + 1)


def _adaptive_avg_pool(nsp: int) -> Callable[[OpShapes], float]:
    def f(op: OpShapes) -> float:
        x = _shape(op, 0)
        out = _int_list(_concrete(op, 1), nsp, op.name)
        _require(len(x) > nsp, f"{op.name}: input {x}")
        return _numel(x) + _numel(x[:-nsp]) * _numel(out)

    return f


# Scaled-dot-product attention: flop_counter.sdpa_flop_count / sdpa_backward_flop_count.
# q [b, h, sq, d], k [b, hkv, sk, d], v [b, hkv, sk, dv]; forward Q·Kᵀ and P·V; backward
# recomputes Q·Kᵀ and forms dP, dV, dQ, dK: 2·b·h·sq·sk·(3d + 2dv).
def _sdpa(q_at: int, backward: bool) -> Callable[[OpShapes], float]:
    def f(op: OpShapes) -> float:
        (b, h, sq, d), (b2, hkv, sk, d2) = _shape(op, q_at), _shape(op, q_at + 1)
        (b3, hv, sk2, dv) = _shape(op, q_at + 2)
        _require(b == b2 == b3 and hkv == hv and d == d2 and sk == sk2 and h % hkv == 0,
                 f"{op.name}: q/k/v shapes do not match")
        return 2 * b * h * sq * sk * ((3 * d + 2 * dv) if backward else (d + dv))

    return f


# Recurrent layers. Mode numbers are cuDNN's cudnnRNNMode_t as ATen passes them (RNN.h):
# 0 RNN_RELU, 1 RNN_TANH, 2 LSTM, 3 GRU, with G = 1, 1, 4, 3 gates. Per time step, batch element,
# layer and direction: the input and recurrent GEMMs 2·(|W_ih| + |W_hh| (+ |W_hr|, projection)),
# plus per hidden unit the cell arithmetic E_f:
#   gate pre-activations x·W_ihᵀ + h·W_hhᵀ + b_ih + b_hh: G·(1 + 2·bias) adds;
#   LSTM: 3 sigmoids (9), tanh(g) 1, c' = f·c + i·g 3, h' = o·tanh(c') 2 -> +15;
#   GRU (torch.nn.GRU equations): r·(W_hn h + b_hn) 1, 2 sigmoids 6, tanh 1,
#     h' = (1-z)·n + z·h 4 -> +12;  RNN_TANH/RELU: the activation, +1.
# Backward per hidden unit, E_b: LSTM 24 (the fused-cell backward below, 23, plus adding the
# recurrent dh), GRU 17 (dz 5, dn 2, tanh' 3, r-path 5, dh·z 1, recurrent add 1), RNN_TANH 4,
# RNN_RELU 2; backward-data GEMMs equal the forward's; weight gradients (output_mask[3]) as many
# again, plus 2·G·H bias-gradient accumulations when biases exist. cuDNN always computes the full
# backward-data pass (cudnnRNNBackwardData), so output_mask[0..2] do not change the count.
_RNN_GATES = {0: 1, 1: 1, 2: 4, 3: 3}
_RNN_CELL = {0: 1, 1: 1, 2: 15, 3: 12}
_RNN_CELL_BACKWARD = {0: 2, 1: 4, 2: 24, 3: 17}


def _rnn_mode(op: OpShapes, at: int) -> int:
    mode = _concrete(op, at)
    _require(mode in _RNN_GATES, f"{op.name}: RNN mode {mode!r}")
    return mode


def _rnn_layer_flops(steps: int, hidden: int, weights: list, mode: int, bias: bool,
                     backward: bool, weight_grads: bool) -> int:
    gemm = 2 * sum(_numel(w) for w in weights)
    gates = _RNN_GATES[mode] * hidden
    if not backward:
        return steps * (gemm + gates * (1 + 2 * bias) + _RNN_CELL[mode] * hidden)
    grads = gemm * (1 + weight_grads) + 2 * gates * (bias and weight_grads)
    return steps * (grads + _RNN_CELL_BACKWARD[mode] * hidden)


def _cudnn_rnn(backward: bool) -> Callable[[OpShapes], float]:
    """_cudnn_rnn(input, weight[], stride0, weight_buf, hx, cx, mode@6, hidden@7, proj@8,
    num_layers@9, batch_first, dropout, train, bidirectional@13, ...); the backward's scalars sit
    4 later (output, grad_output, grad_hy, grad_cy come first) and output_mask is at 21."""

    def f(op: OpShapes) -> float:
        o = 4 if backward else 0
        mode, hidden, proj = _rnn_mode(op, 6 + o), _concrete(op, 7 + o), _concrete(op, 8 + o)
        groups = _concrete(op, 9 + o) * (2 if _concrete(op, 13 + o) else 1)
        weights = _shapes_list(op, 1)
        per = len(weights) // groups
        _require(per * groups == len(weights) and per in (2, 3, 4, 5), f"{op.name}: weights")
        bias = per - 2 - (proj > 0) == 2
        weight_grads = _pick_mask(op, 21, 4)[3] if backward else False
        steps = _numel(_shape(op, 0)[:-1])  # T·B, or the packed sum of batch sizes
        total = 0
        for g in range(groups):
            mats = [weights[g * per], weights[g * per + 1]] + ([weights[g * per + per - 1]] if proj else [])
            total += _rnn_layer_flops(steps, hidden, mats, mode, bias, backward, weight_grads)
        return total

    return f


def _mkldnn_rnn_layer(backward: bool) -> Callable[[OpShapes], float]:
    """One layer and direction: (input, w_ih, w_hh, b_ih, b_hh, ...); forward mode@9 hidden@10
    has_biases@12; backward mode@14 hidden@15 has_biases@17 (weight grads always computed)."""

    def f(op: OpShapes) -> float:
        mode_at = 14 if backward else 9
        mode, hidden = _rnn_mode(op, mode_at), _concrete(op, mode_at + 1)
        bias = bool(_concrete(op, mode_at + 3))
        steps = _numel(_shape(op, 0)[:-1])
        return _rnn_layer_flops(steps, hidden, [_shape(op, 1), _shape(op, 2)], mode, bias,
                                backward, True)

    return f


# Fused LSTM cell (CUDA, nn.LSTMCell): the GEMMs run before it as separate addmm/mm ops.
# Forward: gate sums with biases 4·(1 + 2·bias) + cell 15 per hidden unit (as E_f above).
# Backward (_thnn_fused_lstm_cell_backward_impl): do = gh·tanh(c')·o(1-o) 5, dc' = gh·o·(1-tanh²)
# + gc 5, di, df, dg 4 each, dc = dc'·f 1 -> 23; bias gradient Σ over the batch: +4 per unit.
def _fused_lstm_cell(op: OpShapes) -> float:
    b, h = _shape(op, 2)
    return b * h * (4 * (1 + 2 * _has_tensor(op, 3)) + _RNN_CELL[2])


def _fused_lstm_cell_backward(op: OpShapes) -> float:
    b, h = _shape(op, 2)
    return b * h * (23 + 4 * bool(_concrete(op, 5)))


# Pure data movement: copies, fills, allocation, views, concatenation, gathers, casts: 0 FLOPs.
_ZERO_OPS = (
    "copy_ fill_ zero_ zeros zeros_like ones ones_like full full_like empty empty_like "
    "empty_strided new_zeros new_empty new_ones clone contiguous cat stack to _to_copy "
    "index_select embedding view reshape _reshape_alias _unsafe_view t transpose permute expand "
    "flatten squeeze unsqueeze select slice narrow as_strided detach split chunk unbind "
    "unsafe_split unsafe_chunk resize_ where masked_fill_ constant_pad_nd item "
    "_local_scalar_dense lift_fresh alias broadcast_tensors detach_"
).split()


def _build_table() -> dict[str, Callable[[OpShapes], float]]:
    """Op name -> formula; one level per computation (module docstring)."""
    t: dict[str, Callable[[OpShapes], float]] = {}
    t.update({"aten::mm": _gemm(0, 1), "aten::addmm": _gemm(1, 2), "aten::_addmm_activation": _gemm(1, 2),
              "aten::_scaled_mm": _gemm(0, 1), "aten::bmm": _batched_gemm(0, 1),
              "aten::baddbmm": _batched_gemm(1, 2), "aten::addbmm": _batched_gemm(1, 2),
              "aten::mv": _mv(0, 1), "aten::addmv": _mv(1, 2),
              "aten::dot": lambda op: 2 * _numel(_shape(op, 0)),
              "aten::convolution": _convolution, "aten::convolution_backward": _convolution_backward})
    for name, cost in _INPLACE_ELEMENTWISE.items():
        t[f"aten::{name}"] = t[f"aten::{name}_"] = _elementwise(cost)
    for name, cost in _ELEMENTWISE.items():
        t[f"aten::{name}"] = _elementwise(cost)
    for name, cost in _FOREACH.items():
        t[f"aten::_foreach_{name}"] = t[f"aten::_foreach_{name}_"] = _foreach(cost)
    t["aten::_foreach_norm"] = _foreach(2)
    t.update({"aten::sum": _sum, "aten::mean": _mean, "aten::linalg_vector_norm": _per_element(2),
              "aten::_softmax": _per_element(5), "aten::_log_softmax": _per_element(5),
              "aten::_softmax_backward_data": _per_element(4),
              "aten::_log_softmax_backward_data": _per_element(4),
              "aten::nll_loss_forward": _nll_forward, "aten::nll_loss2d_forward": _nll_forward,
              "aten::nll_loss_backward": _nll_backward, "aten::nll_loss2d_backward": _nll_backward,
              "aten::mse_loss": _mse, "aten::mse_loss_backward": _mse_backward,
              "aten::embedding_dense_backward": _per_element(1)})
    t.update({"aten::native_batch_norm": _bn_forward(5), "aten::cudnn_batch_norm": _bn_forward(5),
              "aten::miopen_batch_norm": _bn_forward(5), "aten::_native_batch_norm_legit": _bn_legit,
              "aten::_native_batch_norm_legit_no_training": _bn_forward(None, False),
              "aten::_batch_norm_with_update": _bn_forward(None, True),
              "aten::_batch_norm_no_update": _bn_forward(None, False),
              "aten::native_batch_norm_backward": _bn_backward, "aten::batch_norm_backward": _bn_backward,
              "aten::cudnn_batch_norm_backward": _cudnn_bn_backward,
              "aten::miopen_batch_norm_backward": _cudnn_bn_backward,
              "aten::native_layer_norm": _layer_norm, "aten::native_layer_norm_backward": _layer_norm_backward})
    for nsp in (1, 2, 3):
        t[f"aten::max_pool{nsp}d_with_indices"] = _max_pool(nsp)
    t.update({"aten::max_pool2d": _max_pool(2), "aten::max_pool3d": _max_pool(3),
              "aten::max_pool2d_with_indices_backward": _per_element(1),
              "aten::max_pool3d_with_indices_backward": _per_element(1),
              "aten::avg_pool2d": _avg_pool(2), "aten::avg_pool3d": _avg_pool(3),
              "aten::avg_pool2d_backward": _avg_pool_backward(2),
              "aten::avg_pool3d_backward": _avg_pool_backward(3),
              "aten::adaptive_avg_pool2d": _adaptive_avg_pool(2),
              "aten::_adaptive_avg_pool2d": _adaptive_avg_pool(2),
              "aten::_adaptive_avg_pool2d_backward": _per_element(1, 1)})
    for kind in ("flash_attention", "efficient_attention", "cudnn_attention", "flash_attention_for_cpu"):
        t[f"aten::_scaled_dot_product_{kind}"] = _sdpa(0, backward=False)
        t[f"aten::_scaled_dot_product_{kind}_backward"] = _sdpa(1, backward=True)
    t.update({"aten::_cudnn_rnn": _cudnn_rnn(False), "aten::_cudnn_rnn_backward": _cudnn_rnn(True),
              "aten::mkldnn_rnn_layer": _mkldnn_rnn_layer(False),
              "aten::mkldnn_rnn_layer_backward": _mkldnn_rnn_layer(True),
              "aten::_thnn_fused_lstm_cell": _fused_lstm_cell,
              "aten::_thnn_fused_lstm_cell_backward_impl": _fused_lstm_cell_backward,
              "aten::_thnn_fused_lstm_cell_backward": _fused_lstm_cell_backward})
    for name in _ZERO_OPS:
        t[f"aten::{name}"] = lambda op: 0.0
    return t


_TABLE: dict[str, Callable[[OpShapes], float]] = _build_table()

#: Names of the ops that have a formula.
FORMULA_OPS: frozenset[str] = frozenset(_TABLE)


def has_formula(name: str) -> bool:
    """Whether `name` (an exact Kineto op name, e.g. "aten::addmm") has a FLOP formula."""
    return name in _TABLE


def op_flops(op: OpShapes) -> float | None:
    """FLOPs of one call; None when the op has no formula.

    Raises nothing on odd shapes: for a formula op whose shapes or scalar arguments are missing or
    unparseable returns math.nan. Integer-only calls (precision "int") return 0.0.
    """
    formula = _TABLE.get(op.name)
    if formula is None:
        return None
    if precision_of(op.input_types) == "int":
        return 0.0
    try:
        return float(formula(op))
    except (_Unparseable, IndexError, KeyError, TypeError, ValueError, ZeroDivisionError):
        return math.nan
