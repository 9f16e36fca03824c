"""Kernel names for table cells (reports/kernels/short_names.py): real names, their short forms, the rules.

Every name below is copied from a real trace: the committed fixtures, the public GPU traces of
tests/fixtures/gpu (PyTorch 1.8 to 2.x on V100, A100, H100, B200, MI250, MI300) or the issue
that asked for this module. The expected forms were read by eye; the property tests then hold
any name to the promises: never longer than asked, never cut inside a word, printable, stable.
"""

from __future__ import annotations

import gzip
import json
import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from testpaths import FIXTURES, TRACE_FOLDERS

from tbd.core.errors import UsageError
from tbd.reports.kernels.short_names import CUT_AFTER, ELLIPSIS, cut_name, kernel_name_forms, short_kernel_name
from tbd.reports.printable import printable

CLAMP = ('void at::native::vectorized_elementwise_kernel<4, '
         'at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, '
         'c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const'
         '::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, '
         'at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, '
         'c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const'
         '::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)')
CUTLASS_KERNEL2 = ('void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>(cutlass_80_tenso'
                   'rop_s1688gemm_128x128_16x4_nn_align4::Params)')
CUTLASS_BF16 = ('void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>(cu'
                'tlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8::Params)')
SGEMM = 'ampere_sgemm_128x64_nn'
SCUDNN = 'volta_scudnn_128x64_relu_interior_nn_v1'
BN_FW = ('void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1, '
         'true>(cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float const*, '
         'float const*, float, float, float*, float*, float*, float*, float, float)')
XMMA = ('sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_wa'
        'rpsize2x2x1_g1_tensor16x8x8_kernel_trt')
TRITON = 'triton_poi_fused_add_relu_0'
TRITON_RED = 'triton_red_fused__unsafe_view_add_mean_mul_pow_rsqrt_1'
TENSILE = ('Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM'
           '1_ASEM1_CLR1_CADS0_DTLA0_DTLB0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSUAMBSK_GLS0_ISA9'
           '42_IU1_K1_LDSTI0_LBSPPA512_LBSPPB512_LBSPPM0_LPA16_LPB16_LPM0_LRVW8_LWPMn1_MIAV0_MIWT4_12_MO'
           '40_NTn1_NTA0_NTB0_NTC0_NTD4_NTM0_NEPBS16_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO0_SRVW'
           '0_SSO0_SVW4_SK0_SKFTR0_SKXCCM0_TLDS1_ULSGRO0_USL1_UIOFGRO0_USFGROn1_VSn1_VWA4_VWB4_WSGRA0_WS'
           'GRB0_WS64_WG64_4_1')
BN_BACKWARD_OP = 'aten::native_batch_norm_backward'
CONV_BACKWARD_OP = 'aten::convolution_backward'
FILL = ('void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, '
        'at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, '
        '1>)')
MEAN = ('void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, '
        'at::native::MeanOps<float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, '
        'at::native::MeanOps<float, float>, unsigned int, float, 4>)')
SUM = ('void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, '
       'at::native::func_wrapper_t<float, at::native::sum_functor<float, float, '
       'float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, '
       '4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, '
       'at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float'
       ', float)#1}>, unsigned int, float, 4>)')
SPLITK = ('void cutlass_cudnn_train::Kernel<cutlass_cudnn_train::reduction::kernel::ReduceSplitK<cutlas'
          's_cudnn_train::MatrixShape<4, 128>, cutlass_cudnn_train::epilogue::thread::LinearCombination'
          '<float, 4, float, float, (cutlass_cudnn_train::epilogue::thread::ScaleType::Kind)0, '
          '(cutlass_cudnn_train::FloatRoundStyle)2>, cutlass_cudnn_train::reduction::thread::ReduceAdd<'
          'float, float, 4>, 4> >(cutlass_cudnn_train::reduction::kernel::ReduceSplitK<cutlass_cudnn_tr'
          'ain::MatrixShape<4, 128>, cutlass_cudnn_train::epilogue::thread::LinearCombination<float, '
          '4, float, float, (cutlass_cudnn_train::epilogue::thread::ScaleType::Kind)0, '
          '(cutlass_cudnn_train::FloatRoundStyle)2>, cutlass_cudnn_train::reduction::thread::ReduceAdd<'
          'float, float, 4>, 4>::Params)')
CK_TILE = ('_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePassINS_27Rmsnorm2dFwdP'
           'ipelineProblemIDF16bDF16bfDF16bDF16bDF16bffNS_19Generic2dBlockShapeINS_8sequenceIJLi1ELi3072'
           'EEEENS5_IJLi1ELi128EEEENS5_IJLi1ELi8EEEEEENS_18Rmsnorm2dFwdTraitsILb1ELb0ELb0ELb0ELNS_21Rmsn'
           'orm2dFusedAddEnumE0ELNS_23Rmsnorm2dFusedQuantEnumE0ELNS_22Rmsnorm2dSensitiveEnumE0EEEEENS_33'
           'Rmsnorm2dFwdPipelineDefaultPolicyEEENS_17Default2DEpilogueINS_24Default2DEpilogueProblemIfDF'
           '16bLb0ELb1ELb0EEEvEEEEJNSM_5KargsEEEEvDpT1_')
ENABLE_IF = ('std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, '
             'void>::type vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, '
             'c10::BFloat16*, c10::BFloat16 const*, float, int, int)')
SOFTMAX = ('void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, '
           'false>(float*, float const*, int, int, int, bool const*, int, bool)')
ONESWEEP = ('void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, '
            'int>::Policy800, false, long, int, int, int>(int*, int*, int*, int const*, long*, '
            'long const*, int*, int const*, int, int, int)')
WINOGRAD = ('void cudnn::winograd_nonfused::winogradForwardFilter4x4<float, '
            'float>(cudnn::winograd_nonfused::WinogradFilterParams<float, float>)')
NCCL = 'ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)'
COPY = ('void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorI'
        'teratorBase&)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(l'
        'ong)#1}, at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned int>, '
        'TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, '
        'at::native::memory::StoreWithCast<1> >(int, '
        'at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() con'
        'st::{lambda()#4}::operator()() const::{lambda(long)#1}, at::detail::Array<char*, 2>, '
        'TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, '
        'at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>)')
FMHA = ('fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvSlidingOrChunkedCausalP16VarSeqQ128Kv128Persisten'
        'tContext')
ROUTING = ('void moe::dev::routing::routingRenormalize::routingIndicesHistogramScoresKernel<moe::dev::ro'
           'uting::routingRenormalize::KernelParams<__nv_bfloat16, __nv_bfloat16, 128, false, true, '
           'true> >(moe::dev::routing::routingRenormalize::KernelParams<__nv_bfloat16, __nv_bfloat16, '
           '128, false, true, true>)')
MULTI_TENSOR = ('void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous nam'
                'espace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<'
                'float, 2, 2, 0>, std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetad'
                'ata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, '
                'std::plus<float>, float)')
MEMCPY = 'Memcpy HtoD (Pageable -> Device)'
TF_OP = 'functional_1/lstm_1/while/lstm_cell_1/Tanh:Tanh'

# The longest name in the GPU fixtures (5,123 characters), rebuilt from the parts it repeats.
_UNIFORM = ("at::native::templates::cuda::uniform_kernel<at::CUDAGeneratorImpl*>(at::TensorIteratorBase&, double, "
            "double, at::CUDAGeneratorImpl*)::{lambda()#1}::operator()() const::{lambda()#2}::operator()() const::"
            "{lambda(float)#1}")
_TRANSFORM = ("at::native::templates::cuda::uniform_and_transform<float, float, 4ul, at::CUDAGeneratorImpl*, "
              f"{_UNIFORM}>")
_STATE = (f"{_TRANSFORM}(at::TensorIteratorBase&, at::CUDAGeneratorImpl*, {_UNIFORM})"
          "::{lambda(curandStatePhilox4_32_10*)#2}")
_NULLARY = (f"at::native::(anonymous namespace)::distribution_nullary_kernel<float, float, 4, at::CUDAGeneratorImpl*, "
            f"{_STATE}, {_UNIFORM}>(at::TensorIteratorBase&, at::CUDAGeneratorImpl*, {_STATE} const&, {_UNIFORM})"
            "::{lambda(int, float)#1}")
DISTRIBUTION = (f"void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, "
                f"{_STATE}, {_NULLARY}>(int, at::PhiloxCudaState, {_STATE}, {_NULLARY})")

# name, at 40 characters, at 60 characters
EXPECTED = [
    (CLAMP, "vectorized_…<launch_clamp_scalar>", "vectorized_elementwise_kernel<launch_clamp_scalar>"),
    (CUTLASS_KERNEL2, "cutlass_80_tensorop_s1688gemm_…_align4",
     "cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4"),
    (CUTLASS_BF16, "cutlass_80_tensorop_bf16_…_align8",
     "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_…_align8"),
    (SGEMM, "ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"),
    (SCUDNN, "volta_scudnn_128x64_relu_interior_nn_v1", "volta_scudnn_128x64_relu_interior_nn_v1"),
    (BN_FW, "cudnn::bn_fw_tr_1C11_kernel_NCHW<…>", "cudnn::bn_fw_tr_1C11_kernel_NCHW<…>"),
    (XMMA, "sm80_xmma_fprop_implicit_gemm_…_trt", "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_…_trt"),
    (DISTRIBUTION, "distribution_…<uniform_kernel>", "distribution_elementwise_grid_stride_kernel<uniform_kernel>"),
    (TRITON, "triton_poi_fused_add_relu_0", "triton_poi_fused_add_relu_0"),
    (TRITON_RED, "triton_red_fused__unsafe_view_add_…_1", "triton_red_fused__unsafe_view_add_mean_mul_pow_rsqrt_1"),
    (TENSILE, "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_…_1", "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_…_1"),
    (BN_BACKWARD_OP, "aten::native_batch_norm_backward", "aten::native_batch_norm_backward"),
    (CONV_BACKWARD_OP, "aten::convolution_backward", "aten::convolution_backward"),
    (FILL, "vectorized_elementwise_…<FillFunctor>", "vectorized_elementwise_kernel<FillFunctor<float>>"),
    (MEAN, "reduce_kernel<MeanOps>", "reduce_kernel<ReduceOp<MeanOps<float, float>>>"),
    (SUM, "reduce_kernel<sum_functor>", "reduce_kernel<ReduceOp<func_wrapper_t<sum_functor<…>>>>"),
    (SPLITK, "ReduceSplitK<…>", "cutlass_cudnn_train::Kernel<ReduceSplitK<…>>"),
    (CK_TILE, "ck_tile::kentry<Rmsnorm2dFwd<…>>", "ck_tile::kentry<Rmsnorm2dFwd<…>>"),
    (ENABLE_IF, "fused_add_rms_norm_kernel<…>", "vllm::fused_add_rms_norm_kernel<BFloat16, 8>"),
    (SOFTMAX, "softmax_warp_forward<…>", "softmax_warp_forward<float, float, float, 10, true, false>"),
    (ONESWEEP, "cub::DeviceRadixSortOnesweepKernel<…>", "cub::DeviceRadixSortOnesweepKernel<…>"),
    (WINOGRAD, "winogradForwardFilter4x4<…>", "winogradForwardFilter4x4<…>"),
    (NCCL, "ncclKernel_AllReduce_RING_LL_Sum_float", "ncclKernel_AllReduce_RING_LL_Sum_float"),
    (COPY, "unrolled_…<direct_copy_kernel_cuda>", "unrolled_elementwise_kernel<direct_copy_kernel_cuda>"),
    (FMHA, "fmhaSm100aKernel_QkvE4m3OBfloat16H64…", "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvSlidingOrChunked…"),
    (ROUTING, "routingIndicesHistogramScoresKernel<…>", "routingIndicesHistogramScoresKernel<…>"),
    (MULTI_TENSOR, "multi_tensor_…<BinaryOpListAlphaFunctor>", "multi_tensor_apply_kernel<BinaryOpListAlphaFunctor>"),
    (MEMCPY, "Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pageable -> Device)"),
    (TF_OP, "functional_1/lstm_1/while/lstm_…:Tanh", "functional_1/lstm_1/while/lstm_cell_1/Tanh:Tanh"),
]
NAMES = [row[0] for row in EXPECTED]


@pytest.mark.parametrize("name, at_40, at_60", EXPECTED, ids=[n[:48] for n in NAMES])
def test_real_names_at_40_and_60_characters(name, at_40, at_60):
    assert short_kernel_name(name, 40) == at_40
    assert short_kernel_name(name, 60) == at_60


def test_the_three_forms_of_an_elementwise_kernel():
    forms = kernel_name_forms(FILL)
    # full: no `void`, no parameters, no at::native:: / at::detail::, no space in "> >"
    assert forms.full == "vectorized_elementwise_kernel<4, FillFunctor<float>, Array<char*, 1>>"
    # compact: a launch template keeps what it launches, with its short scalar arguments
    assert forms.compact == "vectorized_elementwise_kernel<FillFunctor<float>>"
    assert forms.terse == "vectorized_elementwise_kernel<FillFunctor>"
    assert forms.core == "FillFunctor"
    assert short_kernel_name(FILL, 80) == forms.full


def test_pure_wrapper_gives_way_to_what_it_wraps_and_a_lambda_is_named_by_its_function():
    assert kernel_name_forms(CUTLASS_KERNEL2).compact == \
        "cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>"
    assert kernel_name_forms(CUTLASS_KERNEL2).terse == "cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4"
    # {lambda(float)#1} inside launch_clamp_scalar(...)::{lambda()#1}::operator()() const::...
    assert kernel_name_forms(CLAMP).terse == "vectorized_elementwise_kernel<launch_clamp_scalar>"
    # a chain of adaptors collapses to its end in the terse form
    assert kernel_name_forms(SUM).terse == "reduce_kernel<sum_functor>"


def test_return_type_parameters_and_pytorch_scopes_go_first():
    assert kernel_name_forms(BN_FW).full == "cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1, true>"
    assert kernel_name_forms(SOFTMAX).full == "softmax_warp_forward<float, float, float, 10, true, false>"
    assert kernel_name_forms(NCCL).full == "ncclKernel_AllReduce_RING_LL_Sum_float"
    # SFINAE return type, with a `>` that is a comparison inside it
    assert kernel_name_forms(ENABLE_IF).full == "vllm::fused_add_rms_norm_kernel<BFloat16, 8>"
    # the library namespace stays until the terse form
    assert kernel_name_forms(WINOGRAD).compact == "cudnn::winograd_nonfused::winogradForwardFilter4x4<float, float>"
    assert kernel_name_forms(WINOGRAD).terse == "winogradForwardFilter4x4<…>"


def test_mangled_names_are_sketched_as_cpp():
    assert kernel_name_forms(CK_TILE).full.startswith("ck_tile::kentry<1, Rmsnorm2dFwd<Rmsnorm2dFwdPipelineOnePass<")
    assert kernel_name_forms(CK_TILE).terse == "Rmsnorm2dFwd<…>"
    # what the sketch cannot read is left as it is
    assert short_kernel_name("_Zfoo", 40) == "_Zfoo"
    assert short_kernel_name("_Z3fooPf", 40) == "foo"


@pytest.mark.parametrize("name, width, expected", [
    # the direction word survives a cut when it fits in half the room
    (BN_BACKWARD_OP, 24, "native_batch_…_backward"),
    (BN_BACKWARD_OP, 20, "native_…_backward"),
    (BN_BACKWARD_OP, 16, "native_batch_…"),
    # below its full width the op namespace goes before anything is cut
    (BN_BACKWARD_OP, 31, "native_batch_norm_backward"),
    # any other last word in a third of the room: the triton kernel's index
    (TRITON, 16, "triton_poi_…_0"),
    # too narrow for `vectorized_…<FillFunctor>`: what it launches, alone
    (FILL, 16, "FillFunctor"),
    (MEAN, 16, "MeanOps"),
    # a separator that keeps half the room wins; else a camelCase hump (or letters then digits) is a boundary
    (FMHA, 20, "fmhaSm100aKernel_…"),
    (FMHA, 36, "fmhaSm100aKernel_QkvE4m3OBfloat16…"),
    (CUTLASS_KERNEL2, 16, "cutlass_80_…"),
])
def test_narrow_cells(name, width, expected):
    assert short_kernel_name(name, width) == expected


def test_cut_name_rules():
    # head at a word boundary, never inside a word; `::` is never split
    assert cut_name("aaaa_bbbb_cccc_dddd", 12) == "aaaa_bbbb_…"
    assert cut_name("ns::inner::leaf_function_name", 14) == "ns::inner::…"
    # the last word in at most a third of the room
    assert cut_name("alpha_beta_gamma_delta_eps", 16) == "alpha_beta_…_eps"
    assert cut_name("alpha_beta_gamma_delta_epsilon", 16) == "alpha_beta_…"
    # a closing template argument list, if the head keeps its first word
    assert cut_name("wrapper_name_is_long<Payload>", 22) == "wrapper_…<Payload>"
    # camelCase humps when the last separator is too early
    assert cut_name("abc_someVeryLongCamelCaseIdentifier", 20) == "abc_someVeryLong…"
    # no boundary at all: a hard cut is the only way to fit
    assert cut_name("x" * 50, 10) == "x" * 9 + ELLIPSIS
    assert cut_name("short", 5) == "short"
    assert cut_name("abcdef", 1) == ELLIPSIS


def test_non_cpp_names_pass_unchanged():
    for name in ("Memset (Device)", "nn.Module: Linear_22", "## forward:pos_w ##", "ProfilerStep#3",
                 "<built-in method copy_ of Tensor object at 0x7f1736f58870>", "torch/_ops.py(1244): __call__",
                 "autograd::engine::evaluate_function: ConvolutionBackward0",
                 "adam/Add_6/ReadVariableOp:ReadVariableOp",
                 "Torch-Compiled Region: 0/0", "aten::add_"):
        assert short_kernel_name(name, 80) == name


def test_control_characters_are_escaped_before_shortening():
    out = short_kernel_name("void evil\x1b[2J_kernel<float>(int)", 40)
    assert "\x1b" not in out and out == printable(out)


def test_width_below_one_is_a_usage_error():
    with pytest.raises(UsageError):
        short_kernel_name("x", 0)
    with pytest.raises(UsageError):
        cut_name("x", -1)


# --- the promises, on every real name we have -----------------------------------------------------

def _hump(before: str, after: str) -> bool:
    return ((before.islower() or before.isdigit()) and after.isupper()) or (before.islower() and after.isdigit())


def assert_cut_at_boundaries(name: str, out: str) -> None:
    """Every "…" in `out` follows a boundary character, or a camelCase hump of the shortened name."""
    forms = kernel_name_forms(name)
    for i, ch in enumerate(out):
        if ch != ELLIPSIS:
            continue
        assert i > 0, out
        if out[i - 1] in CUT_AFTER:
            continue
        head = out[:i]
        assert any(f.startswith(head) and len(f) > i and _hump(f[i - 1], f[i]) for f in forms), (name, out)


def _fixture_kernel_names() -> list[str]:
    names: set[str] = set()
    for path in sorted(FIXTURES.glob("*.json*")) + sorted(p for base in TRACE_FOLDERS for p in (base / "gpu").glob("*.json.gz")):
        opener = gzip.open if path.suffix == ".gz" else open
        try:
            with opener(path, "rt", encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):  # not a JSON trace: another kind of fixture
            continue
        events = data.get("traceEvents", []) if isinstance(data, dict) else data
        names.update(e["name"] for e in events if isinstance(e, dict) and str(e.get("cat", "")).lower() == "kernel"
                     and isinstance(e.get("name"), str))
    return sorted(names)


ALL_NAMES = NAMES + _fixture_kernel_names()


@pytest.mark.parametrize("width", [16, 24, 40, 60, 80, 120])
def test_every_real_name_fits_is_cut_at_boundaries_and_is_stable(width):
    for name in ALL_NAMES:
        out = short_kernel_name(name, width)
        assert len(out) <= width, (name, out)
        assert_cut_at_boundaries(name, out)
        assert short_kernel_name(out, width) == out, (name, out)
        assert printable(out) == out


# --- properties on names no trace has held yet ----------------------------------------------------

_ident = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,14}", fullmatch=True)
_scalar = st.sampled_from(["float", "int", "long", "bool", "c10::BFloat16", "4", "128", "true", "1ul", "char*"])


@st.composite
def _cpp_names(draw, depth: int = 2) -> str:
    """A C++-shaped kernel name: return type, namespaces, a template with nested arguments, parameters."""
    scope = "::".join(draw(st.lists(_ident, min_size=0, max_size=3)) + [draw(_ident)])
    text = scope
    if draw(st.booleans()):
        inner = st.one_of(_scalar, _ident, _cpp_names(depth - 1)) if depth > 0 else st.one_of(_scalar, _ident)
        text += "<" + ", ".join(draw(st.lists(inner, min_size=1, max_size=4))) + ">"
    if depth == 2:
        text = draw(st.sampled_from(["", "void "])) + text
        if draw(st.booleans()):
            text += "(" + ", ".join(draw(st.lists(_scalar, max_size=3))) + ")"
    return text


@settings(max_examples=300, deadline=None)
@given(name=_cpp_names(), width=st.integers(1, 120))
def test_cpp_shaped_names(name, width):
    out = short_kernel_name(name, width)
    assert len(out) <= width
    assert short_kernel_name(out, width) == out
    if width >= 16:
        assert_cut_at_boundaries(name, out)


_hostile = st.text(alphabet=st.sampled_from(list(string.printable) + ["…", "é", "\x1b", "\u202e", "<", ">", ":"]),
                   max_size=300)


@settings(max_examples=400, deadline=None)
@given(name=st.one_of(_hostile, _hostile.map(lambda t: "_Z" + t), _hostile.map(lambda t: "_ZN" + t),
                      st.text(max_size=200)),
       width=st.integers(1, 200))
def test_any_text_gives_a_short_printable_name(name, width):
    out = short_kernel_name(name, width)
    assert len(out) <= width
    assert printable(out) == out


def test_ellipsis_marks_every_elision():
    """Nothing is dropped silently from inside the angle brackets of the terse form."""
    for name in NAMES:
        terse = kernel_name_forms(name).terse
        assert not re.search(r"<\s*>", terse), terse
