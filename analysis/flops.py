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
    for i, dims in enumerate(op.input_dims):
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


# @@FORMULAS@@

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
