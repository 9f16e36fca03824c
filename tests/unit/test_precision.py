"""Op and kernel precision: Kineto input types, and kernel names of each library family.

Kernel names are real ones, copied from public nsys / ncu / torch.profiler output found by code
search (the repositories' notes and test files quote them); where a listing truncated a name the
test uses the truncated form it printed. Op arguments are Kineto "Input type"/"Input Dims" pairs
as PyTorch writes them (torch/csrc/profiler/collection.cpp).
"""

from __future__ import annotations

import numpy as np
import pytest

from tbd.analysis import precision
from tbd.analysis.precision import KERNEL_FAMILIES, kernel_precision, kernel_precisions, op_precision
from tbd.core.errors import TraceFormatError

# --------------------------------------------------------------------------------------------
# op_precision
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("types, expected", [
    (["float", "float"], "fp32"),
    (["double", "double"], "fp64"),
    (["c10::Half", "c10::Half", ""], "fp16"),
    (["c10::BFloat16", "ScalarList", "ScalarList", "Scalar"], "bf16"),  # aten::as_strided, sglang trace notes
    (["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float"], "fp8"),  # aten::_scaled_mm
    (["c10::Float8_e5m2fnuz"], "fp8"),
])
def test_first_floating_input_decides(types, expected):
    assert op_precision(types) == expected


def test_a_zero_dim_double_first_does_not_make_a_float_op_fp64():
    # aten::add(Tensor self, Tensor other) with self a wrapped Python float: dims [] come first.
    types, dims = ["double", "float"], [[], [64, 128]]
    assert op_precision(types, dims) == "fp32"
    # Without dims nothing tells the wrapped scalar apart: the first floating input decides.
    assert op_precision(types) == "fp64"


def test_zero_dim_inputs_of_any_float_type_yield_to_dimensioned_ones():
    # A 0-d FP32 tensor (a loss scale) times an FP16 activation is FP16 work (type promotion).
    assert op_precision(["float", "c10::Half"], [[], [8, 8]]) == "fp16"
    assert op_precision(["c10::Half", "double"], [[8, 8], []]) == "fp16"


def test_zero_dim_float_decides_when_no_dimensioned_float_exists():
    assert op_precision(["double", "double"], [[], []]) == "fp64"  # scalar arithmetic stays double
    assert op_precision(["float", "Scalar"], [[], []]) == "fp32"  # a 0-d step counter
    # A wrapped Python float with an integer tensor promotes it to the default dtype, float32.
    assert op_precision(["long int", "double"], [[1024], []]) == "fp32"


@pytest.mark.parametrize("types", [
    ["long int", "ScalarList", "ScalarList", "Scalar"],  # GCC build (Linux wheels)
    ["long", "long"],  # clang build
    ["__int64"],  # MSVC build
    ["int", "ScalarList", "", ""],  # aten::pad on int32, sglang trace notes
    ["bool", "long int"],
    ["unsigned char"], ["signed char"], ["short int"], ["long long int"], ["unsigned long"],
    ["long unsigned int"], ["c10::qint8"], ["c10::quint8", "Scalar"],
])
def test_integer_only_calls_are_int(types):
    assert op_precision(types) == "int"


@pytest.mark.parametrize("types", [
    None, [], [""], ["Scalar"], ["TensorList", "Scalar"],
    ["ScalarList", "ScalarList", "Scalar", "Scalar", "", "Scalar"],  # aten::empty_strided
    ["long int", "c10::Float4_e2m1fn_x2"],  # a dtype the table does not know: not "all integer"
])
def test_nothing_tells(types):
    assert op_precision(types) == ""


def test_no_pytorch_release_writes_a_bare_half():
    # TypeMeta names carry the c10 namespace; a bare "Half" is not a dtype Kineto writes.
    assert op_precision(["Half"]) == ""


# --------------------------------------------------------------------------------------------
# kernel_precision, one family at a time
# --------------------------------------------------------------------------------------------


def _check(cases):
    for name, op, expected, family in cases:
        assert kernel_precision(name, op) == (expected, family), name


def test_volta():
    _check([
        # cuBLAS on V100 (ncu listing of a tensor-op-math GEMM; nsys summaries of fp16 LLM inference)
        ("volta_h884gemm_128x128_ldg8_nn", "fp16", "fp16", "Volta cuBLAS/cuDNN tensor op"),
        ("volta_fp16_s884gemm_fp16_128x64_ldg8_f2f_nn", "fp16", "fp16", "Volta cuBLAS/cuDNN tensor op"),
        ("volta_s884gemm_fp16_128x64_ldg8_tn", "fp16", "fp16", "Volta cuBLAS/cuDNN tensor op"),
        # FP32 inputs under tensor-op math: Volta's HMMA.884 takes f16 only, so the math was FP16.
        ("volta_s884gemm_128x128_ldg8_f2f_nn", "fp32", "fp16", "Volta cuBLAS/cuDNN tensor op"),
        # cuDNN convolutions (TensorRT tactic log; apex/amp docs quoting nvprof under autocast)
        ("volta_h884cudnn_256x128_ldg8_relu_exp_small_nhwc_tn_v1", "fp16", "fp16", "Volta cuBLAS/cuDNN tensor op"),
        ("volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc2nchw_tn_v1", "fp32", "fp16",
         "Volta cuBLAS/cuDNN tensor op"),
        ("Volta_hmma_implicit_gemm_fprop_fp32_nhwc_128x128x64x1_1x3x3x0x1", "fp32", "fp16", "cuDNN xmma traits"),
        # FP32 CUDA-core GEMM (tbd's own synthetic fixture uses this family)
        ("volta_sgemm_128x64_nn", "fp32", "fp32", "cuBLAS/cuDNN SIMT"),
        ("volta_scudnn_128x64_relu_interior_nn_v1", "fp32", "fp32", "cuBLAS/cuDNN SIMT"),
    ])


def test_turing():
    _check([
        ("turing_s1688gemm_fp16_256x128_ldg8_tn", "fp16", "fp16", "Turing cuBLAS/cuDNN tensor op"),
        ("turing_h1688gemm_256x128_ldg8_nn", "fp16", "fp16", "Turing cuBLAS/cuDNN tensor op"),
        ("turing_fp16_s1688cudnn_fp16_256x128_ldg8_relu_f2f_exp_medium_nhwc_tn_v1", "fp16", "fp16",
         "Turing cuBLAS/cuDNN tensor op"),
        # No type suffix, FP32 accumulate, 16x8x8: Turing has no TF32, so FP16 (label quoted as is).
        ("cutlass::Kernel2<turing_s1688gemm>", "fp32", "fp16", "Turing cuBLAS/cuDNN tensor op"),
    ])


def test_ampere_fp32_inputs_on_tf32_tensor_cores():
    _check([
        # cuBLAS with allow_tf32: "FP32 GEMM TF32=ON | cutlass_80_tensorop_s1688gemm | Tensor Cores"
        ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_256x128_16x3_nn_align4>"
         "(cutlass_80_tensorop_s1688gemm_256x128_16x3_nn_align4::Params)", "fp32", "tf32", "CUTLASS 2"),
        ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x64_16x6_tn_align4>"
         "(cutlass_80_tensorop_s1688gemm_128x64_16x6_tn_align4::Params)", "fp32", "tf32", "CUTLASS 2"),
        ("sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_kernel",
         "fp32", "tf32", "cuBLASLt/cuDNN xmma"),
        ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_w",
         "fp32", "tf32", "cuBLASLt/cuDNN xmma"),
        ("sm86_xmma_fprop_implicit_gemm_indexed_tf32f32", "fp32", "tf32", "cuBLASLt/cuDNN xmma"),
        # No type suffix: FP32 operands on a 16x8x8 Ampere MMA are TF32 (name as a run log printed it)
        ("ampere_s1688gemm_128x128", "fp32", "tf32", "Ampere cuBLAS/cuDNN tensor op"),
        # TensorFlow trace: cuDNN wgrad on TF32 traits
        ("void xmma_new::gemm::kernel<xmma_new::implicit_gemm::wgrad_indexed::Kernel_traits<"
         "xmma_new::Ampere_hmma_tf32_traits<unsigned int, float>, xmma_new::Cta_tile<xmma_new::Ampere, 128, 128, 16, "
         "2, 2, 1, 1, 1>>>", "fp32", "tf32", "cuDNN xmma traits"),
        # CUTLASS library names (example 27: s1688tf32gemm 1xTF32, s1688gemm_tf32 TF32 in, s1688gemm 3xTF32)
        ("cutlass_tensorop_s1688tf32gemm_256x128_16x3_nn_align4", "fp32", "tf32", "CUTLASS 2"),
        ("cutlass_tensorop_tf32_s1688gemm_tf32_256x128_16x3_nn_align4", "fp32", "tf32", "CUTLASS 2"),
        ("cutlass_tensorop_s1688gemm_64x64_16x6_tn_align4", "fp32", "tf32", "CUTLASS 2"),
        ("cutlass_tensorop_s1688fprop_optimized_tf32_64x64_16x10_nhwc_align4", "fp32", "tf32", "CUTLASS 2"),
    ])


def test_ampere_16_bit_and_fp32_cuda_core():
    _check([
        # TF2 mixed-precision trace (Conv2DBackpropFilter), BF16 LLM nsys tables, torch.profiler listings
        ("ampere_s16816gemm_fp16_128x64_ldg8_stages_64x4_nt", "fp16", "fp16", "Ampere cuBLAS/cuDNN tensor op"),
        ("ampere_s16816gemm_bf16_64x64_sliced1x2_ldg8_stages_64x6_nn", "bf16", "bf16",
         "Ampere cuBLAS/cuDNN tensor op"),
        ("ampere_fp16_s16816gemm_fp16_64x64_sliced1x2_ldg8_f2f_stages_64x5_tn", "fp16", "fp16",
         "Ampere cuBLAS/cuDNN tensor op"),
        ("ampere_h16816gemm_128x128_ldg8_stages_32x5_nn", "fp16", "fp16", "Ampere cuBLAS/cuDNN tensor op"),
        ("ampere_s1688gemm_fp16_128x128_ldg8_stages_32x1_nn", "fp16", "fp16", "Ampere cuBLAS/cuDNN tensor op"),
        ("ampere_s1688gemm_bf16_128x128", "bf16", "bf16", "Ampere cuBLAS/cuDNN tensor op"),
        ("cutlass_80_tensorop_f16_s16816gemm_relu_f16_128x128_32x4_tn_align8", "fp16", "fp16", "CUTLASS 2"),
        ("cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8", "bf16", "bf16", "CUTLASS 2"),
        ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x64x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_"
         "execute_kernel__5x_cublas", "fp32", "fp32", "cuBLASLt/cuDNN xmma"),
        ("ampere_sgemm_32x32_sliced1x4_tn", "fp32", "fp32", "cuBLAS/cuDNN SIMT"),
        ("ampere_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1", "fp32", "fp32", "cuBLAS/cuDNN SIMT"),
    ])


def test_ampere_sgemm_stays_fp32():
    assert kernel_precision("ampere_sgemm_128x64_nn", "fp32", (8, 0)) == ("fp32", "cuBLAS/cuDNN SIMT")


def test_a_bare_k16_shape_with_fp32_inputs_is_unknown_not_tf32():
    # m16n8k16 has no TF32 form (PTX ISA): the operands were 16-bit, but the name does not say which.
    assert kernel_precision("ampere_s16816gemm_128x128_ldg8_nn", "fp32") == ("", "Ampere cuBLAS/cuDNN tensor op")
    assert kernel_precision("ampere_s16816gemm_128x128_ldg8_nn", "bf16") == ("bf16", "Ampere cuBLAS/cuDNN tensor op")


def test_hopper_and_later():
    _check([
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_"
         "kernel__5x_cublas", "bf16", "bf16", "cuBLASLt/cuDNN xmma"),
        # TransformerEngine#1391: e4m3bf16 = A/B FP8, C/D BF16; the op (a BF16 linear) says otherwise.
        ("sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x128_warpgroupsize1x1x1_execute_segment_k_off_"
         "kernel__5x_cublas", "bf16", "fp8", "cuBLASLt/cuDNN xmma"),
        ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_"
         "kernel__5x_cublas", "fp32", "tf32", "cuBLASLt/cuDNN xmma"),
        ("nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NNT", "fp16", "fp16", "cuBLAS nvjet"),
        ("nvjet_tst_128x64_64x8_1x2_h_bz_coopA_NNT", "bf16", "bf16", "cuBLAS nvjet"),
        ("nvjet_tss_256x128_64x4_1x2_h_bz_coopA_TNT", "bf16", "bf16", "cuBLAS nvjet"),
        ("nvjet_sm100_tst_64x32_64x16_2x1_2cta_v_bz_TNN", "bf16", "bf16", "cuBLAS nvjet"),
        ("nvjet_qqtst_128x256_128x6_2x1_2cta_v_bz_TNT", "fp8", "fp8", "cuBLAS nvjet"),
        ("nvjet_sss_tf32_128x256_TNT", "fp32", "tf32", "cuBLAS nvjet"),
        # CUTLASS 3 (profiler docs; torch.compile max-autotune winner; cutlass_profiler filters)
        ("cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x128x64_2x1x1_0_tnt_align8_warpspecialized_"
         "cooperative_epi_tma", "bf16", "bf16", "CUTLASS 3"),
        ("cutlass3x_sm90_tensorop_gemm_f16_f16_f32_f16_f32_128x128x64_2x1x1_0_ntn_align8", "fp16", "fp16", "CUTLASS 3"),
        ("cutlass3x_sm90_tensorop_tf32gemm_f32_f32_f32_f32_f32_128x128x32_2x1x1_0_tnn_align4", "fp32", "tf32",
         "CUTLASS 3"),
        ("cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_f16_f16_128x128x128_1x1x1_0_tnn_align16", "fp8", "fp8",
         "CUTLASS 3"),
    ])


def test_cudnn_cuda_core_convolutions():
    _check([
        ("void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, int, int, float const*, "
         "int, float*, float const*, kernel_grad_params, unsigned long long, int, float, int, int, int, int)",
         "fp32", "fp32", "cuDNN legacy engine"),
        ("void cudnn::detail::wgrad_alg0_engine<float, int=512, int=6, int=5, int=3, int=3, int=3, bool=1, int=512>"
         "(int, int, int, float const *, int, cudnn::detail::wgrad_alg0_engine<float, int=51", "fp32", "fp32",
         "cuDNN legacy engine"),
        ("implicit_convolve_sgemm", "fp32", "fp32", "cuDNN legacy engine"),
    ])


def test_attention_runs_in_its_input_precision_on_tensor_cores():
    _check([
        ("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
         "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, "
         "true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)", "bf16", "bf16",
         "flash attention"),
        ("void flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<64, 128, 128, 8, 2, 4, 2, false, "
         "false, cutlass::half_t, Flash_kernel_traits<64, 128, 128, 8, cutlass::half_t> >, true, false>"
         "(Flash_bwd_params)", "fp16", "fp16", "flash attention"),
        ("fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::half_t, "
         "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)", "fp16", "fp16", "memory-efficient attention"),
        ("fmha_cutlassB_bf16_aligned_128x128_k128_sm80", "bf16", "bf16", "memory-efficient attention"),
        # cuDNN writes "f16" for BF16 inputs too, so the op's type decides.
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0",
         "bf16", "bf16", "cuDNN SDPA"),
    ])


def test_fp32_memory_efficient_attention_is_3xtf32_from_sm80():
    # gemm_kernel_utils.h: float on sm80+ uses OpMultiplyAddFastF32 tensor-op MMAs; below, SIMT.
    f32_sm80 = ("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, "
                "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)")
    assert kernel_precision(f32_sm80, "fp32") == ("tf32", "memory-efficient attention")
    assert kernel_precision("fmha_cutlassF_f32_aligned_64x64_rf_sm75", "fp32") == ("fp32", "memory-efficient attention")
    assert kernel_precision("fmha_cutlassB_f32_aligned_64x64_k64_sm80", "fp32")[0] == "tf32"
    # A name cut before its _smNN suffix: the GPU's compute capability decides.
    assert kernel_precision("fmha_cutlassF_f32_aligned_64x64", "fp32", (8, 0))[0] == "tf32"
    assert kernel_precision("fmha_cutlassF_f32_aligned_64x64", "fp32", (7, 5))[0] == "fp32"


def test_other_kernels_run_in_the_op_precision():
    name = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")
    assert kernel_precision(name, "fp32") == ("fp32", "launching op's input types")
    # flashinfer's norm is not attention (no "flash_" family match), and neither is a GEMV.
    assert kernel_precision("void flashinfer::norm::RMSNormKernel<8u, __half>(...)", "fp16")[1] == \
        "launching op's input types"
    assert kernel_precision("gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>",
                            "fp32") == ("fp32", "launching op's input types")
    assert kernel_precision("Kernel2", "") == ("", "launching op's input types")


def test_any_other_name_saying_tf32_is_tf32():
    assert kernel_precision("ampere_tf32_s1688gemm_tf32_256x128", "fp32")[0] == "tf32"
    assert kernel_precision("my_tf32_kernel", "fp32") == ("tf32", "tf32 in name")


def test_every_row_names_its_unit_family_and_source():
    for row in KERNEL_FAMILIES:
        # Patterns search the lower-cased name, so an upper-case literal could never match.
        literal = row.pattern.pattern.replace("(?P<", "")
        assert literal == literal.lower(), row.family
        assert "core" in row.unit and row.family and row.source


# --------------------------------------------------------------------------------------------
# kernel_precisions
# --------------------------------------------------------------------------------------------


def test_kernel_precisions_decides_each_distinct_pair_once(monkeypatch):
    calls = []
    real = precision._kernel_precision

    def counting(name, op, cc):
        calls.append((name, op, cc))
        return real(name, op, cc)

    monkeypatch.setattr(precision, "_kernel_precision", counting)
    names = np.array(["cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4", "ampere_sgemm_128x64_nn",
                      "cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4"] * 1000, dtype=object)
    ops = np.array(["fp32", "fp32", "fp32"] * 1000, dtype=object)
    ops[-1] = "fp16"  # one more distinct pair: (s1688, fp16)
    out = kernel_precisions(names, ops, (8, 0))
    assert len(calls) == 3
    assert out.dtype == object and out.shape == (3000,)
    assert list(out[:3]) == ["tf32", "fp32", "tf32"]
    assert out[-1] == "fp16"
    assert all(cc == (8, 0) for _, _, cc in calls)


def test_kernel_precisions_treats_missing_values_as_empty():
    out = kernel_precisions(np.array([None, "volta_sgemm_128x64_nn"], dtype=object),
                            np.array(["fp32", None], dtype=object))
    assert list(out) == ["fp32", "fp32"]
    assert kernel_precisions(np.array([], dtype=object), np.array([], dtype=object)).shape == (0,)


def test_kernel_precisions_rejects_columns_of_different_length():
    with pytest.raises(TraceFormatError):
        kernel_precisions(np.array(["a", "b"], dtype=object), np.array(["fp32"], dtype=object))
