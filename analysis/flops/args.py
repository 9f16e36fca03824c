"""Argument access shared by the FLOP formulas: parsing helpers over the op-call record.

`OpShapes` (tbd.core.records) is one op call as a Kineto trace records it; the helpers read an input's
dims, a TensorList's shapes or a scalar argument's value (falling back to a schema default where
the formula allows one) and raise `Unparseable` when what a formula needs is missing or malformed,
which `analysis.flops.ops.op_flops` turns into NaN. Argument positions follow each op's schema in
aten/src/ATen/native/native_functions.yaml (checked against torch 2.13's `._schema`).
"""

from __future__ import annotations

import ast
import math

from tbd.core.records import OpShapes


class Unparseable(ValueError):
    """Shapes or scalar arguments a formula needs are missing or malformed (caught: NaN)."""


# ---- argument access -----------------------------------------------------------------------


def input_shape(op: OpShapes, i: int) -> tuple[int, ...]:
    """Dims of input i as ints; raises Unparseable when absent or not a flat int list."""
    try:
        dims = op.input_dims[i]
    except (IndexError, TypeError):
        raise Unparseable(f"{op.name}: no dims for input {i}") from None
    if not isinstance(dims, (list, tuple)) or not all(isinstance(d, int) and d >= 0 for d in dims):
        raise Unparseable(f"{op.name}: dims of input {i} are not sizes")
    return tuple(dims)


def input_shape_list(op: OpShapes, i: int) -> list[tuple[int, ...]]:
    """Dims of a TensorList input i: one shape per tensor."""
    try:
        dims = op.input_dims[i]
    except (IndexError, TypeError):
        raise Unparseable(f"{op.name}: no dims for input {i}") from None
    if not isinstance(dims, (list, tuple)) or not all(
            isinstance(d, (list, tuple)) and all(isinstance(x, int) and x >= 0 for x in d) for d in dims):
        raise Unparseable(f"{op.name}: input {i} is not a TensorList of sizes")
    return [tuple(d) for d in dims]


def numel(shape) -> int:
    return math.prod(shape)


def has_tensor(op: OpShapes, i: int) -> bool:
    """Whether optional tensor input i is present (a typed, non-empty shape)."""
    try:
        return bool(op.input_dims[i]) and op.input_types[i] not in ("", "Scalar", "ScalarList")
    except (IndexError, TypeError):
        return False


_MISSING = object()
#: Longest Concrete Inputs text parsed: a scalar or an int[] of a few entries is far shorter.
MAX_CONCRETE_CHARS = 4096


def concrete(op: OpShapes, i: int, default=_MISSING):
    """Value of scalar argument i parsed from its Concrete Inputs string; `default` if unrecorded."""
    try:
        text = op.concrete_inputs[i]
    except (IndexError, TypeError):
        text = ""
    if text == "" or text is None:
        if default is _MISSING:
            raise Unparseable(f"{op.name}: argument {i} not recorded")
        return default
    if not isinstance(text, str) or len(text) > MAX_CONCRETE_CHARS:
        raise Unparseable(f"{op.name}: argument {i} is not a recorded value")
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError):  # the last two: nesting the parser refuses
        return text  # a bare word such as "tanh"


def is_one(op: OpShapes, i: int) -> bool:
    """Whether a Scalar multiplier (alpha, value) is 1; unrecorded means the schema default 1."""
    value = concrete(op, i, 1)
    return isinstance(value, (int, float)) and float(value) == 1.0


def broadcast_shapes(shapes) -> tuple[int, ...]:
    """NumPy broadcast of shapes; raises Unparseable when they do not broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for k, d in enumerate(s, start=ndim - len(s)):
            if d != 1 and out[k] not in (1, d):
                raise Unparseable(f"shapes {shapes} do not broadcast")
            out[k] = d if d != 1 else out[k]
    return tuple(out)


def elementwise_numel(op: OpShapes) -> int:
    """Elements of an elementwise op's output: the broadcast of all flat tensor inputs."""
    if not op.input_dims:
        raise Unparseable(f"{op.name}: no input dims recorded")
    shapes = []
    for dims in op.input_dims:
        if isinstance(dims, (list, tuple)) and all(isinstance(d, int) for d in dims):
            if any(d < 0 for d in dims):
                raise Unparseable(f"{op.name}: negative dims")
            shapes.append(tuple(dims))
    if not shapes:
        raise Unparseable(f"{op.name}: no tensor input")
    return numel(broadcast_shapes(shapes))


def output_mask(op: OpShapes, i: int, n: int) -> list[bool]:
    """An output_mask argument (bool[n]); raises when unrecorded (which grads were made is unknown)."""
    mask = concrete(op, i)
    if not isinstance(mask, (list, tuple)) or len(mask) != n:
        raise Unparseable(f"{op.name}: output_mask {mask!r}")
    return [bool(m) for m in mask]


def int_list(value, n: int, name: str) -> list[int]:
    """An int[] argument expanded to n entries (a single entry repeats, as ATen's expand_param)."""
    if isinstance(value, int):
        value = [value]
    if not isinstance(value, (list, tuple)) or len(value) not in (1, n):
        raise Unparseable(f"{name}: expected {n} values, got {value!r}")
    return [int(v) for v in value] * (n if len(value) == 1 else 1)


def require(cond: bool, what: str) -> None:
    if not cond:
        raise Unparseable(what)
