"""The kernel-name families that tell which precision a GPU kernel ran in (`analysis.precision`).

Each row: a pattern on the lower-cased kernel name, a rule giving the precision from the match,
the launching op's precision and the GPU's compute capability, the math unit, the family's name
and the source it relies on. The first matching row decides.

Naming conventions read (sources cited again at the rows that use them):

* cuBLAS / cuDNN legacy kernels: ``<arch>_[<C type>_]<accumulator><MMA shape>{gemm,cudnn}[_<A type>]``,
  e.g. ``ampere_fp16_s16816gemm_fp16_64x64_...``: accumulator letter s=FP32, h=FP16, d=FP64,
  i=INT32; the MMA shape MNK is the tensor-core instruction, which fixes the operand types (PTX ISA,
  "Matrix shape" of mma: m8n8k4 f16 (Volta; d884 f64), m16n8k8 f16/bf16/tf32, m16n8k4 tf32,
  m16n8k16 f16/bf16). With no type suffix the operands are the accumulator's type (FP32): on an
  8x8 or 16x8x8 shape that is TF32 from Ampere on and FP16 before it (down-converting tensor-op
  math); on m16n8k16 it is a 16-bit type the name does not name.
* CUTLASS 2 (and the copies inside cuBLAS, ``cutlass_80_tensorop_...``): the same core name, see
  CUTLASS python/cutlass_library/gemm_operation.py (core_name, extended_name): ``[<C>_]<acc><shape>
  [<MMA input type>]gemm[_<A>]``; NVIDIA/cutlass#1025, #520, #999.
* CUTLASS 3: ``cutlass3x_sm90_tensorop_[<MMA input>]gemm_<A>_<B>_<acc>_<C>_<D>_...`` (CUTLASS
  docs, profiler.md "CUTLASS 3.0 GEMM procedural names").
* cuBLASLt / cuDNN xmma: ``sm90_xmma_gemm_<A><B>_<MMA input><acc>_<scale>_...`` (e.g.
  ``e4m3bf16_e4m3f32_f32``: A/B FP8, C/D BF16; NVIDIA/TransformerEngine#1391).
"""

from __future__ import annotations

import functools
import re
from typing import Callable, NamedTuple

# --------------------------------------------------------------------------------------------
# Type tokens inside kernel names
# --------------------------------------------------------------------------------------------

_TOKEN = {
    "tf32": "tf32", "bf16": "bf16", "fp16": "fp16", "f16": "fp16", "half": "fp16",
    "fp32": "fp32", "f32": "fp32", "fp64": "fp64", "f64": "fp64",
    "e4m3": "fp8", "e5m2": "fp8", "fp8": "fp8",
    "int8": "int", "i8": "int", "s8": "int", "u8": "int", "i32": "int", "s32": "int", "s4": "int", "u4": "int",
}
# Longest first, so "tf32" is not read as "f32" nor "bf16" as "f16".
_TOKENS = re.compile("|".join(sorted(_TOKEN, key=len, reverse=True)))
_TYPES = f"(?:{_TOKENS.pattern})"
# Element types spelled in C++ template arguments of attention and cuDNN kernels.
_TEMPLATE_TYPE = re.compile(
    r"cutlass::half_t|cutlass::bfloat16_t|__nv_bfloat16|__half|c10::half|c10::bfloat16|float_e4m3_t|"
    r"float_e5m2_t|(?<![a-z0-9])(?:bf16|fp16|f16|e4m3|e5m2|fp8)(?![a-z0-9])")
_TEMPLATE_PRECISION = {"cutlass::half_t": "fp16", "__half": "fp16", "c10::half": "fp16",
                       "cutlass::bfloat16_t": "bf16", "__nv_bfloat16": "bf16", "c10::bfloat16": "bf16",
                       "float_e4m3_t": "fp8", "float_e5m2_t": "fp8"}


def _token(text: str | None) -> str:
    """Precision of the first type token in `text` ("" if none)."""
    found = _TOKENS.search(text or "")
    return _TOKEN[found.group(0)] if found else ""


# --------------------------------------------------------------------------------------------
# Precision rules: (match on the lower-cased name, op precision, compute capability) -> precision
# --------------------------------------------------------------------------------------------

Cc = tuple[int, int] | None
Rule = Callable[[re.Match, str, Cc], str]
_LETTER = {"s": "fp32", "d": "fp64", "h": "fp16", "c": "fp32", "z": "fp64", "i": "int"}


def _fixed(precision: str) -> Rule:
    """A family that always runs in one precision."""
    return lambda m, op, cc: precision


def _letter(m: re.Match, op: str, cc: Cc) -> str:
    """BLAS type letter (group "t"): s fp32, d fp64, h fp16, c/z complex single/double."""
    return _LETTER[m.group("t")]


def _template_or_op(m: re.Match, op: str, cc: Cc) -> str:
    """The C++ element type of a templated CUDA-core kernel (`<float, ...>`), else the op's."""
    return {"float": "fp32", "double": "fp64", "__half": "fp16", "c10::half": "fp16"}.get(m.group("t") or "", op)


def _simt(m: re.Match, op: str, cc: Cc) -> str:
    """CUDA-core BLAS/cuDNN kernel: the A-type suffix (`maxwell_fp16_sgemm_fp16_`), else the letter."""
    return _token(m.group("a")) or _LETTER[m.group("t")]


def _mma(arch: Cc, m: re.Match, op: str, cc: Cc) -> str:
    """Tensor-op kernel named `[<C>_]<acc><MMA shape>[<MMA input>]<kind>[_<A>]`.

    The MMA input or A type, when spelled, decides. Otherwise the accumulator letter and the MMA
    shape do (PTX ISA mma shapes): h -> fp16, d -> fp64, i -> int; s with m8n8k4 -> fp16 (Volta
    HMMA has only f16 operands, so FP32 inputs under tensor-op math are down-converted); s with
    k4/k8 shapes and FP32 (or unknown) inputs -> tf32 from Ampere on, fp16 before; s with k16
    shapes takes 16-bit operands the name does not spell: the op's fp16/bf16, else "" (unknown).
    """
    named = _token(m.group("mid")) or _token(m.group("a"))
    if named:
        return named
    acc, shape = m.group("acc"), m.group("shape")
    if acc != "s":
        return _LETTER[acc]
    if shape == "884":
        return "fp16"
    if op in ("fp16", "bf16"):
        return op
    if shape.endswith(("84", "88")):
        arch = arch or _arch(m) or cc
        return "fp16" if arch is not None and arch < (8, 0) else "tf32"
    c_type = _token(m.group("c"))  # a 16-bit C type hints at 16-bit operands
    return c_type if c_type in ("fp16", "bf16") else ""


def _arch(m: re.Match) -> Cc:
    """Compute capability from an `arch` group such as "80" or "90", else None."""
    digits = m.groupdict().get("arch")
    return (int(digits[:-1]), int(digits[-1])) if digits else None


def _cutlass3(m: re.Match, op: str, cc: Cc) -> str:
    """CUTLASS 3: the MMA input type if spelled, else operand A (block-scaled `ue8m0xe4m3`: after x)."""
    return _token(m.group("mid")) or _token(m.group("a").split("x")[-1])


def _xmma(m: re.Match, op: str, cc: Cc) -> str:
    """cuBLASLt/cuDNN xmma: first type of the second token (MMA input), else of the first (A/B)."""
    return _token(m.group("t2")) or _token(m.group("t1"))


def _traits(m: re.Match, op: str, cc: Cc) -> str:
    """xmma traits `<Arch>_<unit>mma_<type>_traits`: hmma_fp32 is FP16 in, FP32 accumulate."""
    unit, t = m.group("unit"), m.group("t") or ""
    if unit in ("i", "spi"):
        return "int"
    if unit == "q":
        return "fp8"
    if unit == "d":
        return "fp64"
    return {"tf32": "tf32", "bf16": "bf16"}.get(t, "fp16")


def _nvjet(m: re.Match, op: str, cc: Cc) -> str:
    """cuBLAS nvjet: the first letter of the type code is the A/B type (h fp16, t bf16, q fp8...)."""
    if m.group("tf32"):
        return "tf32"
    return {"h": "fp16", "t": "bf16", "q": "fp8", "d": "fp64", "s": "fp32"}.get(m.group("code")[0], "") or op


def _tensor_core_or_tf32(m: re.Match, op: str, cc: Cc) -> str:
    """Tensor-core-only family: a spelled type, else the op's; FP32 operands can only be TF32."""
    named = _TEMPLATE_TYPE.search(m.string)
    if named:
        return _TEMPLATE_PRECISION.get(named.group(0)) or _TOKEN[named.group(0)]
    return "tf32" if op == "fp32" else op


_CUTLASS_TYPE = re.compile(r"tfloat32_t|bfloat16_t|half_t|float_e4m3_t|float_e5m2_t")
_CUTLASS_PRECISION = {"tfloat32_t": "tf32", "bfloat16_t": "bf16", "half_t": "fp16", "float_e4m3_t": "fp8",
                      "float_e5m2_t": "fp8"}


def _cutlass_template(m: re.Match, op: str, cc: Cc) -> str:
    """CUTLASS tensor-op template: the first CUTLASS number type in the name, else the op's (FP32 as TF32)."""
    named = _CUTLASS_TYPE.search(m.string)
    if named:
        return _CUTLASS_PRECISION[named.group(0)]
    return "tf32" if op == "fp32" else op


def _op_on_tensor_cores(m: re.Match, op: str, cc: Cc) -> str:
    """Tensor-core kernel whose name does not reliably spell its type: the op's, FP32 as TF32."""
    return "tf32" if op == "fp32" else op


def _mem_efficient(m: re.Match, op: str, cc: Cc) -> str:
    """xFormers / PyTorch memory-efficient attention: FP32 runs 3xTF32 on tensor cores from sm80.

    PyTorch aten/src/ATen/native/transformers/cuda/mem_eff_attention/gemm_kernel_utils.h,
    DefaultGemmType<ArchTag, float> for kMinComputeCapability >= 80: OpClassTensorOp, 16x8x8,
    OpMultiplyAddFastF32 (three TF32 MMAs per product); below sm80 float runs on OpClassSimt.
    The `_smNN` suffix is the kernel's minimum architecture.
    """
    t = {"float": "fp32", **_TEMPLATE_PRECISION, **_TOKEN}.get(m.group("t"), "")
    if t != "fp32":
        return t or op
    arch = _arch(m) or cc
    return "tf32" if arch is not None and arch >= (8, 0) else "fp32"


def _legacy(prefix: str) -> str:
    """cuBLAS/cuDNN tensor-op kernel names of one architecture prefix (see `_mma`)."""
    return (rf"(?<![a-z0-9]){prefix}_(?:(?P<c>fp16|bf16|tf32|fp32|int8)_)?(?P<acc>[hsdi])(?P<shape>\d{{3,6}})"
            rf"(?P<mid>tf32|bf16|f16)?(?:gemm|cudnn)(?:_(?P<a>fp16|bf16|tf32|fp32|int8|i8))?")


class KernelFamily(NamedTuple):
    """One row of the kernel-name table."""

    pattern: re.Pattern  # searched in the lower-cased kernel name
    precision: Rule  # (match, op precision, compute capability or None) -> precision, "" unknown
    unit: str  # "tensor core" or "CUDA core"
    family: str  # the name `kernel_precision` reports
    source: str  # where the naming convention and real names come from


def _row(pattern: str, precision: Rule, unit: str, family: str, source: str) -> KernelFamily:
    return KernelFamily(re.compile(pattern), precision, unit, family, source)


_CUBLAS_NAMES = ("cuBLAS/cuDNN kernel names in public nsys/torch.profiler output; naming: NVIDIA/cutlass#1025, "
                 "PTX ISA mma shapes")
_SIMT_ARCH = "maxwell|pascal|volta|turing|ampere|ada|hopper"
_ATTN_TYPE = r"(?P<t>f16|bf16|f32|cutlass::half_t|cutlass::bfloat16_t|float)"

KERNEL_FAMILIES: tuple[KernelFamily, ...] = (
    # --- attention: run in the input precision on tensor cores ---------------------------------
    # fmha_cutlassF_f16_aligned_64x64_rf_sm80, fmha_cutlassB_f32_aligned_64x64_k64_sm80 (torch.profiler
    # tables in public repos); AttentionKernel<float, cutlass::arch::Sm80, ...> (xFormers template).
    _row(r"fmha_cutlass[fb]_(?P<t>f16|bf16|f32)_\w*?(?:_sm(?P<arch>\d{2,3}))?(?![a-z0-9_])", _mem_efficient,
         "tensor core (3xTF32 for f32 on sm80+; CUDA core below sm80)", "memory-efficient attention",
         "PyTorch mem_eff_attention/gemm_kernel_utils.h"),
    _row(rf"attention(?:backward)?kernel<{_ATTN_TYPE}, cutlass::arch::sm(?P<arch>\d{{2,3}})", _mem_efficient,
         "tensor core (3xTF32 for float on sm80+)", "memory-efficient attention", "xFormers kernel_forward.h"),
    # cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0: cuDNN
    # emits the same "f16" name for BF16 inputs (torch.profiler of SDPA on bf16 in public notes), so the op decides.
    _row(r"cudnn_generated_\w*?sdpa", _op_on_tensor_cores, "tensor core", "cuDNN SDPA",
         "cuDNN SDPA kernel names under bf16 and fp16 SDPA in public profiles"),
    # flash_fwd_kernel<Flash_fwd_kernel_traits<..., cutlass::bfloat16_t, ...>>, pytorch_flash::flash_bwd_*,
    # flash::FlashAttnFwdSm90<...>.
    # "flashinfer" kernels (norms, sampling) are not attention and stay out.
    _row(r"(?<![a-z])flash(?:_fwd|_bwd|_attn|attn|::|_fprop|_bprop)", _tensor_core_or_tf32, "tensor core",
         "flash attention", "FlashAttention 2/3 kernel names in public traces"),
    # --- cuBLASLt / cuDNN xmma, all architectures ---------------------------------------------
    # sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize..., sm80_xmma_gemm_f32f32_f32f32_f32_..._ffma_... (FP32
    # CUDA core), sm90_xmma_gemm_bf16bf16_bf16f32_f32_..., sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_...,
    # sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_...
    # sm80_xmma_fprop_implicit_gemm_indexed_wo_smem_tf32f32_tf32f32_f32_nhwckrsc_nhwc_... (cuDNN 9 on an H200).
    _row(rf"xmma_[a-z_]*?(?:gemm|fprop|dgrad|wgrad)(?:_indexed)?(?:_wo_smem)?_(?P<t1>{_TYPES}+)(?:_(?P<t2>{_TYPES}+))?",
         _xmma, "tensor core (CUDA core when the MMA input is f32: ffma)", "cuBLASLt/cuDNN xmma",
         "NVIDIA/TransformerEngine#1391; nsys/ncu listings in public repos"),
    # xmma_new::gemm::kernel<...Ampere_hmma_tf32_traits<unsigned int, float>...> (TF trace), Volta_hmma_
    # implicit_gemm_fprop_fp32_nhwc_* (cuDNN under autocast), Turing_hmma_fp32_traits = half in, float out.
    _row(r"(?:volta|turing|ampere|ada|hopper)_(?P<unit>h|i|q|d|sph|spi)mma_(?:(?P<t>fp16|fp32|bf16|tf32|int8)"
         r"|implicit_gemm)", _traits, "tensor core", "cuDNN xmma traits", "xmma traits structs (cuDNN/TensorRT)"),
    # --- cuBLAS nvjet (CUDA 12.8+, Hopper/Blackwell) -------------------------------------------
    # nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NNT (fp16), nvjet_tst_128x64_TNT (bf16), nvjet_tss_* (bf16 in,
    # fp32 out), nvjet_qqtst_128x256_128x6_2x1_2cta_v_bz_TNT (fp8 _scaled_mm), nvjet_sss_tf32_128x256_TNT.
    _row(r"nvjet_(?:sm\d{2,3}_)?(?P<code>[a-z]{3,5})_(?P<tf32>tf32_)?", _nvjet, "tensor core", "cuBLAS nvjet",
         "no public naming doc; type codes read from public profiles (fp16, bf16, fp8, TF32 workloads)"),
    # --- CUTLASS 3 ---------------------------------------------------------------------------
    # cutlass3x_sm90_tensorop_gemm_f16_f16_f32_f16_f16_128x128x64_..., cutlass3x_sm90_tensorop_tf32gemm_f32_...
    _row(r"cutlass3x_sm(?P<arch>\d{2,3})a?_(?:bs|sp|bssp)?tensorop_(?:[hsdi]\d+x\d+x\d+)?(?P<mid>tf32|bf16|f16|"
         r"e4m3|e5m2)?(?:gemm|fprop|dgrad|wgrad)(?:_grouped|_array)?_(?P<a>[a-z0-9]+)_", _cutlass3, "tensor core",
         "CUTLASS 3", "CUTLASS docs profiler.md, 'CUTLASS 3.0 GEMM procedural names'"),
    # --- CUTLASS 2 (open source and cuBLAS's cutlass_80_* copies) ------------------------------
    # cutlass_80_tensorop_s1688gemm_256x128_16x3_nn_align4 (cuBLAS, FP32 inputs, TF32 on), cutlass_80_tensorop_
    # f16_s16816gemm_relu_f16_*, cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_*, cutlass_70_tensorop_f16_s884gemm_*,
    # cutlass_tensorop_s1688tf32gemm_* (1xTF32), cutlass_tensorop_s1688gemm_* (f32 in: 3xTF32 in the library).
    _row(r"cutlass_(?:(?P<arch>\d{2,3})_)?(?:wmma_)?tensorop_(?:(?P<c>f16|bf16|tf32|f32|f64|s8|u8|s32)_)?"
         r"(?P<acc>[hsdi])(?P<shape>\d{3,6})(?P<mid>tf32|bf16|f16|e4m3|e5m2)?(?:xor|and|fastaccum)?"
         r"(?:gemm|fprop|dgrad|wgrad)\w*?(?:_(?:analytic|optimized|fixed_channels|few_channels))?"
         r"(?:_(?P<a>f16|bf16|tf32|f32|f64|s8|u8|s4|u4|e4m3|e5m2))?(?![a-z])",
         functools.partial(_mma, None), "tensor core", "CUTLASS 2",
         "CUTLASS python/cutlass_library/gemm_operation.py; examples/27_ampere_3xtf32_fast_accurate_tensorop_gemm"),
    _row(r"cutlass_(?:\d{2,3}_)?simt_(?P<t>[sdhcz])(?:gemm|fprop|dgrad|wgrad)", _letter, "CUDA core",
         "CUTLASS 2 SIMT", "CUTLASS gemm_operation.py (opcode class simt)"),
    # CUTLASS templates named by their C++ type, demangled or not, as cuDNN 9 ships them on an H200:
    # _ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemmConvolution...NS_10tfloat32_tE...MmaTensorOp...
    # The operand element type is the first CUTLASS number type spelled; a tensor-op MMA on float is TF32.
    _row(r"cutlass\w*?(?:::|\d+)(?:device_)?kernel.*?(?:mmatensorop|tensorop)", _cutlass_template, "tensor core",
         "CUTLASS template (tensor op)", "CUTLASS include/cutlass/numeric_types.h (tfloat32_t, half_t, "
         "bfloat16_t, float_e4m3_t); cuDNN 9 kernel names in tbd's H200 fixture"),
    # --- cuBLAS/cuDNN per-architecture kernels -------------------------------------------------
    # volta_h884gemm_128x128_ldg8_nn, volta_fp16_s884gemm_fp16_128x64_ldg8_f2f_nn, volta_s884gemm_128x128_ldg8_f2f_nn,
    # volta_h884cudnn_256x128_ldg8_relu_exp_small_nhwc_tn_v1, volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_*
    _row(_legacy("volta"), functools.partial(_mma, (7, 0)), "tensor core", "Volta cuBLAS/cuDNN tensor op",
         _CUBLAS_NAMES),
    # turing_h1688gemm_*, turing_s1688gemm_fp16_256x128_ldg8_tn, turing_fp16_s1688cudnn_fp16_256x128_ldg8_*
    _row(_legacy("turing"), functools.partial(_mma, (7, 5)), "tensor core", "Turing cuBLAS/cuDNN tensor op",
         _CUBLAS_NAMES),
    # ampere_s16816gemm_bf16_64x64_sliced1x2_ldg8_stages_64x6_nn, ampere_fp16_s16816gemm_fp16_128x64_ldg8_f2f_*,
    # ampere_h16816gemm_128x128_*, ampere_s1688gemm_fp16_128x128_ldg8_stages_32x1_nn, ampere_s1688gemm_bf16_128x128_*
    _row(_legacy("ampere"), functools.partial(_mma, (8, 0)), "tensor core", "Ampere cuBLAS/cuDNN tensor op",
         _CUBLAS_NAMES),
    _row(_legacy("(?:ada|hopper)"), functools.partial(_mma, (8, 9)), "tensor core",
         "Ada/Hopper cuBLAS/cuDNN tensor op", _CUBLAS_NAMES),
    # ampere_sgemm_128x64_nn, volta_sgemm_64x32_sliced1x4_tn, maxwell_fp16_sgemm_fp16_128x64_nn, volta_scudnn_128x64_
    # relu_interior_nn_v1, ampere_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1, volta_dgemm_*
    _row(rf"(?<![a-z0-9])(?:{_SIMT_ARCH})_(?:(?:fp16|bf16|fp32)_)?(?P<t>[sdhcz])(?:gemm|cudnn)"
         r"(?:_(?P<a>fp16|bf16|fp32))?(?![0-9])", _simt, "CUDA core", "cuBLAS/cuDNN SIMT", _CUBLAS_NAMES),
    # void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(...), cudnn::detail::
    # implicit_convolve_sgemm<float, float, ...>, dgrad_engine<float, ...>, fft2d_r2c_32x32<float, ...>
    _row(r"(?:wgrad_alg\d_engine|dgrad_engine|dgrad2d_alg\w*|implicit_convolve_[sh]gemm|precomputed_convolve_[sh]gemm|"
         r"explicit_convolve_[sh]gemm|conv2d_grouped_direct_kernel|fft2d_[rc]2[rc]\w*|winograd\w*)"
         r"(?:<(?P<t>float|double|__half|c10::half))?", _template_or_op, "CUDA core", "cuDNN legacy engine",
         "cuDNN kernel names in public TF/PyTorch traces"),
    # Hopper warpgroup MMA kernels not named above (wgmma supports f16, bf16, tf32, fp8, int8 operands)
    _row(r"(?<![a-z0-9])w?gmma(?![a-z0-9])", _tensor_core_or_tf32, "tensor core", "Hopper (w)gmma",
         "PTX ISA wgmma.mma_async operand types"),
    # Any other kernel that says tf32 ran TF32 math (tbd's rule before this table).
    _row(r"tf32", _fixed("tf32"), "tensor core", "tf32 in name", "kernel name"),
)
