"""Tensor access for the byte formulas: element sizes, tensor bytes, type promotion, dtype arguments.

A byte formula needs, per tensor, its element count (from "Input Dims", as the FLOP formulas read
it: `analysis.flops.args.input_shape`) and its element size, which Kineto writes in "Input type"
as the TypeMeta name of the dtype (see `analysis.precision` for the spellings per compiler). An
input typed "", "Scalar" or "ScalarList" is not a tensor (an absent optional tensor, a number, an
int[]); a "TensorList" carries no dtype at all. A ScalarType argument (to's dtype, sum's dtype)
is recorded as its enum number in "Concrete Inputs". What cannot be read raises `Unparseable`,
which `analysis.op_bytes.ops.op_bytes` turns into NaN.
"""

from __future__ import annotations

from tbd.analysis.flops.args import Unparseable, broadcast_shapes, concrete, input_shape, numel, require
from tbd.core.records import OpShapes

# c10::ScalarType numbers (c10/core/ScalarType.h, checked against torch 2.13: `x.to(dtype)` records
# its dtype argument as this number) -> (element size in bytes, category). Categories order type
# promotion: bool 0 < integer 1 < floating 2 < complex 3. Quantized types count as integers; the
# sub-byte packed types (quint4x2, quint2x4, bits*, int1-7, uint1-7) have no whole-byte size and
# are left out (unknown).
BOOL, INT, FLOAT, COMPLEX = 0, 1, 2, 3
SCALAR_TYPES: dict[int, tuple[int, int]] = {
    0: (1, INT), 1: (1, INT), 2: (2, INT), 3: (4, INT), 4: (8, INT),  # uint8 int8 int16 int32 int64
    5: (2, FLOAT), 6: (4, FLOAT), 7: (8, FLOAT),  # half float double
    8: (4, COMPLEX), 9: (8, COMPLEX), 10: (16, COMPLEX),  # complex32 complex64 complex128
    11: (1, BOOL), 12: (1, INT), 13: (1, INT), 14: (4, INT),  # bool qint8 quint8 qint32
    15: (2, FLOAT),  # bfloat16
    23: (1, FLOAT), 24: (1, FLOAT), 25: (1, FLOAT), 26: (1, FLOAT),  # float8 e5m2 e4m3fn e5m2fnuz e4m3fnuz
    27: (2, INT), 28: (4, INT), 29: (8, INT),  # uint16 uint32 uint64
    44: (1, FLOAT), 45: (1, FLOAT),  # float8_e8m0fnu, float4_e2m1fn_x2 (two values per 1-byte element)
}

# Kineto's "Input type" spelling -> ScalarType number. GCC spellings as torch 2.13 records them
# (`torch.zeros(2, dtype=d)` for every dtype), clang's ("long", "short", "long long" for int64_t
# on macOS) and MSVC's ("__int64"), as `analysis.precision` lists them; "int64_t" as some tools
# write it.
DTYPE_CODES: dict[str, int] = {
    "unsigned char": 0, "signed char": 1, "char": 1, "short int": 2, "short": 2, "int": 3,
    "long int": 4, "long": 4, "long long int": 4, "long long": 4, "__int64": 4, "int64_t": 4,
    "c10::Half": 5, "float": 6, "double": 7,
    "c10::complex<c10::Half>": 8, "c10::complex<float>": 9, "c10::complex<double>": 10, "bool": 11,
    "c10::qint8": 12, "c10::quint8": 13, "c10::qint32": 14, "c10::BFloat16": 15,
    "c10::Float8_e5m2": 23, "c10::Float8_e4m3fn": 24, "c10::Float8_e5m2fnuz": 25, "c10::Float8_e4m3fnuz": 26,
    "short unsigned int": 27, "unsigned short": 27, "unsigned short int": 27,
    "unsigned int": 28, "long unsigned int": 29, "unsigned long": 29, "unsigned long int": 29,
    "long long unsigned int": 29, "unsigned long long": 29, "unsigned __int64": 29,
    "c10::Float8_e8m0fnu": 44, "c10::Float4_e2m1fn_x2": 45,
}

#: Element size in bytes per "Input type" spelling.
DTYPE_SIZES: dict[str, int] = {name: SCALAR_TYPES[code][0] for name, code in DTYPE_CODES.items()}

#: Size of the default floating dtype (torch.get_default_dtype() is float32 unless a script changes
#: it, which a trace does not record): what a factory without dtype, or a Python float, makes.
DEFAULT_FLOAT = 4
#: Size of the default integer dtype (int64): what a Python int promotes a bool tensor to.
DEFAULT_INT = 8


def _type(op: OpShapes, i: int):
    try:
        return op.input_types[i]
    except (IndexError, TypeError):
        return None


def is_tensor(op: OpShapes, i: int) -> bool:
    """Whether input i is a tensor of a known dtype (0-d included: dims [] with a dtype)."""
    t = _type(op, i)
    return isinstance(t, str) and t in DTYPE_CODES


def code(op: OpShapes, i: int) -> int:
    """ScalarType number of tensor input i; raises Unparseable when it is not a tensor of known dtype."""
    t = _type(op, i)
    require(isinstance(t, str) and t in DTYPE_CODES, f"{op.name}: input {i} is not a tensor of a known dtype ({t!r})")
    return DTYPE_CODES[t]


def itemsize(op: OpShapes, i: int) -> int:
    """Element size of tensor input i."""
    return SCALAR_TYPES[code(op, i)][0]


def category(op: OpShapes, i: int) -> int:
    return SCALAR_TYPES[code(op, i)][1]


def elements(op: OpShapes, i: int) -> int:
    """Element count of tensor input i (1 for a 0-d tensor)."""
    code(op, i)
    return numel(input_shape(op, i))


def tensor_bytes(op: OpShapes, i: int) -> int:
    """Bytes of tensor input i, which must be present."""
    return elements(op, i) * itemsize(op, i)


def present(op: OpShapes, i: int) -> bool:
    """Whether optional tensor input i was passed; raises when it is typed but its dtype is unknown.

    Absent: beyond the recorded arguments, or typed ""/"Scalar"/"ScalarList" (None, a number, an
    int[]). A "" type with dims is not absent: a tensor whose dtype the trace did not write.
    """
    t = _type(op, i)
    if t is None or (t in ("", "Scalar", "ScalarList") and not _dims(op, i)):
        return False
    code(op, i)
    return True


def _dims(op: OpShapes, i: int):
    try:
        return op.input_dims[i]
    except (IndexError, TypeError):
        return ()


def optional_bytes(op: OpShapes, i: int) -> int:
    """Bytes of optional tensor input i; 0 when absent."""
    return tensor_bytes(op, i) if present(op, i) else 0


def reads(op: OpShapes, required, optional=()) -> int:
    """Bytes of the tensors at these positions, each read once: the required ones must be tensors
    of a known dtype, the optional ones count when present."""
    return sum(tensor_bytes(op, i) for i in required) + sum(optional_bytes(op, i) for i in optional)


def broadcast_numel(op: OpShapes, positions) -> int:
    """Elements of the broadcast of the tensors at these positions (`analysis.flops.args.broadcast_shapes`)."""
    shapes = [input_shape(op, i) for i in positions if is_tensor(op, i)]
    require(bool(shapes), f"{op.name}: no tensor operand")
    return numel(broadcast_shapes(shapes))


def dtype_arg(op: OpShapes, i: int, default: int | None) -> int:
    """Element size named by the ScalarType? argument at i: `default` when it is None (typed "",
    or not recorded as an argument at all); raises when the argument was passed but its value not
    recorded, or names a dtype without a whole-byte size."""
    t = _type(op, i)
    if t is None or t == "":
        require(default is not None, f"{op.name}: no dtype at argument {i}")
        return default
    value = concrete(op, i)
    require(isinstance(value, int) and not isinstance(value, bool) and value in SCALAR_TYPES,
            f"{op.name}: dtype argument {value!r}")
    return SCALAR_TYPES[value][0]


def dtype_arg_code(op: OpShapes, i: int) -> int | None:
    """ScalarType number of the ScalarType? argument at i, None when it is None; raises when unrecorded."""
    t = _type(op, i)
    if t is None or t == "":
        return None
    value = concrete(op, i)
    require(isinstance(value, int) and not isinstance(value, bool) and value in SCALAR_TYPES,
            f"{op.name}: dtype argument {value!r}")
    return value


def acc_size(op: OpShapes, i: int) -> int:
    """Size of the accumulate type of tensor input i, which per-row and per-channel statistics
    (batch-norm's save_mean, layer-norm's mean and rstd) are kept in: 8 for double, else 4."""
    return 8 if code(op, i) == DTYPE_CODES["double"] else 4


def list_elements(op: OpShapes, i: int) -> int:
    """Total elements of the TensorList at input i (its dtype is not recorded). A list recorded
    without shapes is unknown, not empty: torch 2.13 records [] for a list of more than 30
    tensors (an optimizer's parameters, a long cat)."""
    dims = _dims(op, i)
    require(_type(op, i) == "TensorList" and isinstance(dims, (list, tuple)) and len(dims) > 0,
            f"{op.name}: input {i} is not a TensorList with recorded shapes")
    total = 0
    for d in dims:
        require(isinstance(d, (list, tuple)) and all(isinstance(x, int) and x >= 0 for x in d),
                f"{op.name}: TensorList {i} holds no shapes")
        total += numel(d)
    return total


def list_length(op: OpShapes, i: int) -> int:
    list_elements(op, i)
    return len(_dims(op, i))


# ---- type promotion (PyTorch docs, "Type promotion") ------------------------------------------

def _scalar_category(op: OpShapes, i: int) -> int | None:
    """Category of a Scalar argument from its recorded value; None when it was not recorded."""
    value = concrete(op, i, None)
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    if isinstance(value, float) or value in ("inf", "-inf", "nan"):
        return FLOAT
    if isinstance(value, complex):
        return COMPLEX
    return None


_DEFAULT_OF = {BOOL: 1, INT: DEFAULT_INT, FLOAT: DEFAULT_FLOAT, COMPLEX: 2 * DEFAULT_FLOAT}


def promoted(op: OpShapes, positions) -> tuple[int, int]:
    """(element size, category) of PyTorch's type promotion over the operands at these positions.

    Dimensioned tensors decide within their category; a 0-d tensor or a Scalar decides only when its
    category is higher. A 0-d "double" next to dimensioned tensors is a wrapped Python float, as
    `analysis.precision` reads it (Kineto cannot tell it from a 0-d double tensor): the default
    float. Half with BFloat16 promotes to float. Raises when a Scalar's category could decide but
    its value was not recorded.
    """
    dimmed: dict[int, list[int]] = {}
    zero: dict[int, list[int]] = {}
    scalar_cats: list[int | None] = []
    for i in positions:
        if is_tensor(op, i):
            group = dimmed if input_shape(op, i) else zero
            group.setdefault(category(op, i), []).append(code(op, i))
        elif _type(op, i) == "Scalar":
            scalar_cats.append(_scalar_category(op, i))
    require(bool(dimmed or zero), f"{op.name}: no tensor operand")
    top, ztop = max(dimmed, default=-1), max(zero, default=-1)
    if top >= ztop:
        size = _largest(dimmed[top])
    elif top >= 0 and ztop == FLOAT and set(zero[ztop]) == {DTYPE_CODES["double"]}:
        size = DEFAULT_FLOAT  # a wrapped Python float
    else:
        size = _largest(zero[ztop])
    best = max(top, ztop)
    for cat in scalar_cats:
        require(cat is not None or best >= FLOAT, f"{op.name}: a Scalar operand's value is not recorded")
        if cat is not None and cat > best:
            best, size = cat, _DEFAULT_OF[cat]
    return size, best


def promoted_size(op: OpShapes, positions) -> int:
    """Element size of the promoted result type (`promoted`)."""
    return promoted(op, positions)[0]


def _largest(codes: list[int]) -> int:
    if {5, 15} <= set(codes):  # Half with BFloat16 -> float
        return 4
    return max(SCALAR_TYPES[c][0] for c in codes)


__all__ = ["Unparseable", "DTYPE_SIZES", "DTYPE_CODES", "SCALAR_TYPES", "DEFAULT_FLOAT", "DEFAULT_INT",
           "BOOL", "INT", "FLOAT", "COMPLEX", "is_tensor", "code", "itemsize", "category", "elements",
           "tensor_bytes", "present", "optional_bytes", "reads", "broadcast_numel", "dtype_arg", "dtype_arg_code",
           "acc_size", "list_elements", "list_length", "promoted", "promoted_size"]
