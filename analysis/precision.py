"""The precision each GPU kernel ran in, from its launching op's input types and its own name.

A kernel is measured against the peak of the precision it actually ran in. The op's input types
say what the framework handed over; the kernel's name often says more: with FP32 inputs an A100
runs `cutlass_80_tensorop_s1688gemm_*` on TF32 tensor cores, and a V100 with tensor-op math runs
`volta_s884gemm_*` on FP16 tensor cores. Precisions are "fp64", "fp32", "tf32", "fp16", "bf16",
"fp8", "int", or "" when nothing tells.

Three steps, each a pure function:

* `op_precision(input_types, input_dims)`: the op's precision from Kineto's "Input type" (and
  "Input Dims"); rules in its docstring.
* `kernel_precision(name, op_precision, compute_capability)`: the first row of `KERNEL_FAMILIES`
  whose pattern matches the lower-cased kernel name decides, given the op's precision; a name no
  row knows runs in the op's precision. Why the name wins: the library picks the math mode inside
  the call (cuBLAS TF32 / tensor-op math, cuDNN TF32), the op's types cannot show it, and the
  families below only claim a precision their name or their instruction shape fixes.
* `kernel_precisions(names, op_precisions)`: the same over a kernel column, once per distinct
  (name, op precision) pair.

The kernel-name table and the naming conventions it reads: `analysis.kernel_families`.
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from tbd.analysis.kernel_families import KERNEL_FAMILIES, Cc
from tbd.core.errors import TraceFormatError

# --------------------------------------------------------------------------------------------
# Op precision from Kineto's "Input type"
# --------------------------------------------------------------------------------------------

# Kineto writes a tensor's dtype as `scalarTypeToTypeMeta(dtype).name()`, a Scalar as "Scalar",
# a tensor list as "TensorList" and anything else as "" (torch/csrc/profiler/collection.cpp,
# InputOutputEncoder::getNextShapesAndDtypes; newer releases also write "ScalarList"). TypeMeta
# names come from the compiler's pretty function name (c10/util/TypeIndex.h), so integer names
# differ by compiler: GCC "long int", "short int", "long unsigned int"; clang "long", "short",
# "unsigned long"; MSVC "__int64". Half, BFloat16 and the float8 types are c10 classes and are
# spelled with their namespace everywhere. No PyTorch release writes a bare "Half"/"BFloat16".
FLOAT_TYPES = {
    "double": "fp64", "float": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8", "c10::Float8_e8m0fnu": "fp8",
    # complex numbers count in their component type
    "c10::complex<double>": "fp64", "c10::complex<float>": "fp32", "c10::complex<c10::Half>": "fp16",
}
INT_TYPES = frozenset({
    "bool", "signed char", "unsigned char", "char",
    "short int", "short", "short unsigned int", "unsigned short", "unsigned short int",
    "int", "unsigned int",
    "long int", "long", "long unsigned int", "unsigned long", "unsigned long int",
    "long long int", "long long", "long long unsigned int", "unsigned long long",
    "__int64", "unsigned __int64",
    "c10::qint8", "c10::quint8", "c10::qint32", "c10::quint4x2", "c10::quint2x4",
})


def op_precision(input_types, input_dims=None) -> str:
    """Precision of one op call from its Kineto "Input type" list (and "Input Dims", if given).

    Rules, in order:

    1. The first floating-point tensor input that has dimensions decides ("float" -> "fp32",
       "double" -> "fp64", "c10::Half" -> "fp16", "c10::BFloat16" -> "bf16", float8 -> "fp8").
    2. A 0-dimensional floating input (dims == []) decides only when no dimensioned floating
       input exists anywhere in the call. PyTorch's type promotion lets dimensioned operands set
       the result type over 0-d ones of the same category (docs, "Type promotion"), and a Python
       float passed to a tensor op is wrapped as a 0-d "double": `x.mul(0.5)` with x float is
       FP32 work, not FP64.
    3. With no dimensioned floating input, a 0-d "double" next to dimensioned integer tensors is
       a wrapped Python float promoting them to the default dtype: "fp32". Otherwise the first
       0-d floating input decides (all-scalar arithmetic, e.g. optimizer step counters).
    4. "int" when every typed input is an integer or bool type (any compiler's spelling).
    5. "" when nothing tells: no types, only "Scalar"/"ScalarList"/"TensorList"/"", or a dtype
       this table does not know.

    Without `input_dims` every input counts as dimensioned (rule 1 alone).

    Args:
        input_types: Kineto's "Input type" list, one string per argument; None or empty allowed.
        input_dims: Kineto's "Input Dims" list, parallel to `input_types`, or None.
    Returns:
        "fp64", "fp32", "fp16", "bf16", "fp8", "int" or "".
    """
    # A type that is not a string (a corrupt trace's list or number) tells nothing, as "" does.
    types = [t if isinstance(t, str) else "" for t in input_types or ()]
    dims = list(input_dims) if input_dims is not None else None
    first_scalar = ""
    has_int_tensor = False
    only_int = bool(types)
    for i, t in enumerate(types):
        if t in FLOAT_TYPES:
            only_int = False
            if not _zero_dim(dims, i):
                return FLOAT_TYPES[t]
            first_scalar = first_scalar or t
        elif t in INT_TYPES:
            has_int_tensor = has_int_tensor or not _zero_dim(dims, i)
        elif t not in ("", "Scalar", "ScalarList", "TensorList", "GenericList"):
            only_int = False  # a dtype this table does not know
    if first_scalar:
        return "fp32" if first_scalar == "double" and has_int_tensor else FLOAT_TYPES[first_scalar]
    return "int" if only_int and any(t in INT_TYPES for t in types) else ""


def _zero_dim(dims: list | None, i: int) -> bool:
    """True when input i was recorded with dims [] (a 0-d tensor or a wrapped Python number)."""
    if dims is None or i >= len(dims):
        return False
    d = dims[i]
    return isinstance(d, (list, tuple)) and len(d) == 0




def kernel_precision(kernel_name: str, op_precision: str, compute_capability: Cc = None) -> tuple[str, str]:
    """Precision one kernel ran in, and how that was decided.

    The first `KERNEL_FAMILIES` row whose pattern matches the lower-cased name decides, given the
    launching op's precision: a name that spells its math type ("tf32", "h884", "bf16", an MMA
    shape) wins over the op's input types, because the library chose the math mode inside the
    call and the types cannot show it (FP32 inputs on a TF32 kernel ran TF32; FP32 inputs on an
    FP16 tensor-op kernel were down-converted and ran FP16). A row returns the op's precision
    where its name does not tell, and "" where the name shows the op's types are not what ran
    but does not say what did. A name no row matches runs in the op's precision.

    Args:
        kernel_name: the kernel's name as the trace records it (demangled or not).
        op_precision: the launching op's precision (`op_precision`), "" when unknown.
        compute_capability: (major, minor) of the GPU, used only when the name does not carry its
            architecture; None when unknown.
    Returns:
        (precision, how): precision as `op_precision` returns it or "tf32"; how is the matched
        family's name or "launching op's input types".
    """
    return _kernel_precision(str(kernel_name or ""), str(op_precision or ""), _cc(compute_capability))


def _cc(compute_capability) -> Cc:
    """(major, minor) as ints, or None."""
    return None if compute_capability is None else (int(compute_capability[0]), int(compute_capability[1]))


# The element type a templated elementwise or reduction kernel spells first (ATen's `AddFunctor<float>`,
# `reduce_kernel<512, 1, ReduceOp<float, ...>>`): what the op's types would have said, for traces that did not
# record them (PyTorch 1.8-1.9 wrote no "Input type" for many ops).
_TEMPLATE_TYPE = re.compile(r"<\s*(double|float|c10::half|c10::bfloat16|half|__half|__nv_bfloat16)\b")
_TEMPLATE_PRECISION = {"double": "fp64", "float": "fp32", "c10::half": "fp16", "half": "fp16", "__half": "fp16",
                       "c10::bfloat16": "bf16", "__nv_bfloat16": "bf16"}


def _kernel_precision(name: str, op: str, cc: Cc) -> tuple[str, str]:
    """`kernel_precision` on clean arguments: the first matching row decides, else the op, else the first
    floating-point template argument of the name."""
    lowered = name.lower()
    decided = next(((row.precision(found, op, cc), row.family) for row in KERNEL_FAMILIES
                    if (found := row.pattern.search(lowered))), (op, "launching op's input types"))
    if not decided[0] and not op:
        typed = _TEMPLATE_TYPE.search(lowered)
        if typed:
            return _TEMPLATE_PRECISION[typed.group(1)], "the kernel name's first floating-point template argument"
    return decided


def kernel_precisions(names, op_precisions, compute_capability: Cc = None) -> np.ndarray:
    """`kernel_precision` over a kernel column, evaluated once per distinct (name, op precision).

    A trace has 100k+ kernel rows but few distinct names, so the rows are folded into a dict of
    distinct pairs first; the table is searched once per pair.

    Args:
        names: kernel names, one per row (object array or sequence of str; None counts as "").
        op_precisions: the launching op's precision per row, same length ("" when unknown).
        compute_capability: (major, minor) of the GPU that ran them, or None.
    Returns:
        Object array of precisions, one per row.
    Raises:
        TraceFormatError: the two columns differ in length.
    """
    names = np.asarray(names, dtype=object).ravel()
    ops = np.asarray(op_precisions, dtype=object).ravel()
    if names.shape != ops.shape:
        raise TraceFormatError(f"{len(names)} kernel names but {len(ops)} op precisions")
    cc = _cc(compute_capability)
    # A dict that numbers a pair it lacks on lookup (its default is its own length): one C-level
    # lookup per row, no Python frame per row.
    pair_code: defaultdict = defaultdict(None)
    pair_code.default_factory = pair_code.__len__
    codes = np.fromiter(map(pair_code.__getitem__, zip(names.tolist(), ops.tolist())), dtype=np.int64,
                        count=len(names))
    decided = np.empty(len(pair_code), dtype=object)
    for (name, op), code in pair_code.items():
        decided[code] = _kernel_precision(name if isinstance(name, str) else "", op if isinstance(op, str) else "",
                                          cc)[0]
    return decided[codes]
