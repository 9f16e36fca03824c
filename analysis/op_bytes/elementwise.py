"""Byte formulas for per-element work: elementwise and _foreach ops, dropout, reductions, softmax,
losses.

Each formula is bytes read plus bytes written at the minimum (`analysis.op_bytes.ops`); argument
positions follow the FLOP formulas' schemas (`analysis.flops.elementwise`).
"""

from __future__ import annotations

from typing import Callable

from tbd.analysis.flops.args import concrete, input_shape, numel, require
from tbd.analysis.op_bytes.args import (
    DEFAULT_INT,
    FLOAT,
    broadcast_numel,
    category,
    dtype_arg,
    elements,
    is_tensor,
    itemsize,
    list_elements,
    list_length,
    present,
    promoted,
    reads,
    tensor_bytes,
)
from tbd.core.records import OpShapes

# ---- elementwise ---------------------------------------------------------------------------
# Operands: the leading arguments that are tensors or numbers combined per element (add's self and
# other, not its alpha); a tensor after them is an out= argument, whose shape is the result's and
# which is written, not read. Each tensor operand is read once in its own shape (a broadcast
# operand is not re-read); the result, the broadcast of the operands, is written once: in the
# promoted dtype, bool for comparisons and logical ops, the default float for an integer operand of
# a floating function (exp, sqrt, true division), and in place (`op_`) into self.
_BINARY = ("add sub rsub mul div pow maximum minimum clamp_min clamp_max lt le gt ge eq ne logical_and logical_or "
           "logical_xor threshold_backward sigmoid_backward tanh_backward hardtanh_backward leaky_relu_backward "
           "silu_backward gelu_backward native_dropout_backward").split()
_TERNARY = "clamp addcmul addcdiv lerp".split()
_UNARY = ("neg abs reciprocal sqrt rsqrt exp log log1p expm1 erf sin cos tanh sigmoid relu threshold hardtanh "
          "leaky_relu silu gelu hardswish logical_not").split()
#: Elementwise op name (without "aten::", without the in-place "_") -> number of operands.
ARITY: dict[str, int] = {**{n: 1 for n in _UNARY}, **{n: 2 for n in _BINARY}, **{n: 3 for n in _TERNARY}}
_BOOL_RESULT = frozenset("lt le gt ge eq ne logical_and logical_or logical_xor logical_not".split())
_FLOAT_RESULT = frozenset("reciprocal sqrt rsqrt exp log log1p expm1 erf sin cos tanh sigmoid div".split())


def _result_size(op: OpShapes, name: str, operands: range) -> int:
    if name in _BOOL_RESULT:
        return 1
    size, cat = promoted(op, operands)
    if name in _FLOAT_RESULT and cat < FLOAT:
        # div(int, int) is true division unless a rounding_mode is passed, whose value traces do
        # not record (div.Tensor_mode has a third argument)
        require(name != "div" or len(op.input_dims) <= 2, f"{op.name}: rounding_mode unknown")
        return 4
    return size


def elementwise(name: str, inplace: bool) -> Callable[[OpShapes], int]:
    operands = range(ARITY[name])

    def f(op: OpShapes) -> int:
        tensors = [i for i in operands if is_tensor(op, i)]
        require(bool(tensors), f"{op.name}: no tensor operand")
        reads = sum(tensor_bytes(op, i) for i in tensors)
        if inplace:
            return reads + tensor_bytes(op, 0)
        return reads + broadcast_numel(op, tensors) * _result_size(op, name, operands)

    return f


def native_dropout(op: OpShapes) -> int:
    """native_dropout(input, p, train) -> (output, mask): the output in the input's dtype and a bool
    mask (1 byte) per element; in eval too (a clone and a ones mask)."""
    return tensor_bytes(op, 0) + tensor_bytes(op, 0) + elements(op, 0)


# _foreach ops: the same per tensor of the TensorList at input 0. A TensorList's dtype is not
# recorded, so these formulas return (bytes of typed tensors, elements of TensorList tensors).
#: _foreach op name -> number of operands (self, other / tensor1, tensor2, scalars / end, weight).
FOREACH_ARITY: dict[str, int] = {
    **{n: 2 for n in "add sub mul div maximum minimum clamp_min clamp_max".split()},
    "addcmul": 4, "addcdiv": 4, "lerp": 3, **{n: 1 for n in "sqrt neg reciprocal exp abs".split()},
}


def foreach(arity: int) -> Callable[[OpShapes], tuple[int, int]]:
    def f(op: OpShapes) -> tuple[int, int]:
        listed, typed = list_elements(op, 0), 0
        for i in range(1, arity):
            if is_tensor(op, i):
                typed += tensor_bytes(op, i)  # e.g. the .Tensor overload's other, addcmul's scalars
            elif i < len(op.input_types) and op.input_types[i] == "TensorList":
                listed += list_elements(op, i)
        return typed, listed + list_elements(op, 0)

    return f


def foreach_norm(op: OpShapes) -> tuple[int, int]:
    """_foreach_norm(self, ord, dtype): one 0-d norm per tensor, in dtype (None: the list's)."""
    n = list_length(op, 0)
    if len(op.input_types) > 2 and op.input_types[2] not in ("", None):
        return n * dtype_arg(op, 2, None), list_elements(op, 0)
    return 0, list_elements(op, 0) + n


# ---- reductions ------------------------------------------------------------------------------
def _reduced(op: OpShapes, x: tuple, dim_at: int | None) -> int:
    """Elements left after reducing x over the dim argument at dim_at (None, [] or absent: all)."""
    if dim_at is None or dim_at >= len(op.input_types) or op.input_types[dim_at] in ("", None):
        return 1
    dims = concrete(op, dim_at)
    dims = [dims] if isinstance(dims, int) else dims
    n = max(len(x), 1)  # a 0-d tensor takes dim 0 or -1
    require(isinstance(dims, (list, tuple)) and all(isinstance(d, int) and -n <= d < n for d in dims),
            f"{op.name}: dims {dims!r} of {x}")
    if not dims:
        return 1
    gone = {d % len(x) for d in dims} if x else set()
    return numel(size for i, size in enumerate(x) if i not in gone)


def reduction(dim_at: int | None, dtype_at: int | None, integer_sum: bool = False) -> Callable[[OpShapes], int]:
    """Input read once, the reduced result written once, in dtype (None: the input's; sum makes
    int64 of integer and bool inputs)."""

    def f(op: OpShapes) -> int:
        x = input_shape(op, 0)
        default = itemsize(op, 0)
        if integer_sum and category(op, 0) < FLOAT:
            default = DEFAULT_INT
        size = default if dtype_at is None else dtype_arg(op, dtype_at, default)
        return tensor_bytes(op, 0) + _reduced(op, x, dim_at) * size

    return f


def sum_or_mean(integer_sum: bool) -> Callable[[OpShapes], int]:
    """sum/mean: (self, dtype) with everything reduced, or (self, dim, keepdim, dtype) by dims."""
    by_dims, everything = reduction(1, 3, integer_sum), reduction(None, 1, integer_sum)
    return lambda op: (by_dims if len(op.input_dims) >= 4 else everything)(op)


# ---- softmax ---------------------------------------------------------------------------------
def softmax(op: OpShapes) -> int:
    """_softmax/_log_softmax(self, dim, half_to_float): the result in float when half_to_float
    (which only a half or bfloat16 input can ask)."""
    size = itemsize(op, 0)
    if size == 2 and concrete(op, 2):
        size = 4
    return tensor_bytes(op, 0) + elements(op, 0) * size


def softmax_backward(op: OpShapes) -> int:
    """_(log_)softmax_backward_data(grad_output, output, dim, input_dtype): grad_input in
    input_dtype; PyTorch <= 1.10 passed the input tensor itself there (only its dtype is used).
    Unrecorded input_dtype: a half or bfloat16 grad_output can only come from an input of its own
    dtype (half_to_float makes float outputs), so only a float grad_output leaves it unknown."""
    if is_tensor(op, 3):
        size = itemsize(op, 3)
    elif concrete(op, 3, None) is None and itemsize(op, 0) != 4:
        size = itemsize(op, 0)
    else:
        size = dtype_arg(op, 3, None)
    return reads(op, (0, 1)) + elements(op, 0) * size


# ---- losses ----------------------------------------------------------------------------------
# nll_loss reads one log-probability (and one class weight) per target element, not the whole
# [N, C] input: a gather. Its backward writes the whole grad_input (zero-filled, then one value
# per target scattered); self is passed for its shape only and not read.
def nll_loss_forward(op: OpShapes) -> int:
    """nll_loss(2d)_forward(self, target, weight, reduction, ignore_index) -> (output, total_weight)."""
    picked = elements(op, 1)
    weight = picked * itemsize(op, 2) if present(op, 2) else 0
    size = itemsize(op, 0)
    out = picked if concrete(op, 3) == 0 else 1  # reduction 'none': one loss per target
    return tensor_bytes(op, 1) + picked * size + weight + (out + 1) * size


def nll_loss_backward(op: OpShapes) -> int:
    """nll_loss(2d)_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)."""
    picked = elements(op, 2)
    weight = picked * itemsize(op, 3) if present(op, 3) else 0
    return reads(op, (0, 2, 6)) + weight + tensor_bytes(op, 1)


def mse_loss(op: OpShapes) -> int:
    """mse_loss(self, target, reduction=1): one value, or one per element with reduction 'none' (0)."""
    out = elements(op, 0) if concrete(op, 2, 1) == 0 else 1
    return reads(op, (0, 1)) + out * itemsize(op, 0)


def mse_loss_backward(op: OpShapes) -> int:
    """mse_loss_backward(grad_output, self, target, reduction): grad_input in self's shape."""
    return reads(op, (0, 1, 2)) + tensor_bytes(op, 1)
