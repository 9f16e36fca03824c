"""Kernel precision on the real kernel names of tbd's H200 ResNet-50 fixture and the shared public traces.

tests/fixtures/h200/resnet50_b64_profile.json.gz is a real H200 run (cuDNN 9, cuBLAS 13, FP32 inputs with
TF32 allowed): every convolution and GEMM kernel there is a TF32 tensor-core kernel except cuBLAS's FFMA
ones (`_ffma_` in the xmma name, `sgemm_largek`). Measured against the FP32 peak (67 TF) instead of TF32's
(494.7 TF), their utilization reads 7.4 times too high. The shared traces (tests/fixtures/README.md, "gpu/")
add cuBLAS's A100 names; a test skips, saying so, without them.
"""

from __future__ import annotations

import gzip
import json

import pytest
from testpaths import FIXTURES, real_trace

from tbd.analysis.precision import kernel_precision

H200_PROFILE = FIXTURES / "h200" / "resnet50_b64_profile.json.gz"


def _h200_kernel_names() -> list[str]:
    return [k["name"] for k in json.loads(gzip.decompress(H200_PROFILE.read_bytes()))["kernels"]]


def _expected(name: str) -> str | None:
    """What the name itself says, read by hand-written rules kept apart from tbd's table."""
    low = name.lower()
    if "_ffma_" in low or low.startswith("void sgemm_") or "ampere_sgemm" in low:
        return "fp32"  # CUDA-core FMA GEMMs
    if "xmma" in low and ("tf32f32_" in low) and "init_device_workspace" not in low:
        return "tf32"  # MMA input type tf32 (second type token of the xmma name)
    if "tensorop_s1688gemm" in low:
        return "tf32"  # 16x8x8 MMA, FP32 accumulate, no 16-bit type spelled: TF32 from Ampere on
    if low.startswith("_zn") and "cutlass" in low and "tfloat32_t" in low and "mmatensorop" in low:
        return "tf32"  # cuDNN's CUTLASS wgrad convolution, mangled: tfloat32_t operands on a tensor-op MMA
    return None


def test_h200_fixture_tensor_core_kernels_are_tf32():
    names = _h200_kernel_names()
    judged = [(n, _expected(n)) for n in names if _expected(n)]
    assert sum(e == "tf32" for _, e in judged) >= 30 and sum(e == "fp32" for _, e in judged) >= 3
    for name, expected in judged:
        assert kernel_precision(name, "fp32", (9, 0))[0] == expected, name


@pytest.mark.parametrize("name, family", [
    ("sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_warpgroupsize1x1x1_g1_"
     "execute_segment_k_off_kernel__5x_cudnn", "cuBLASLt/cuDNN xmma"),
    ("sm90_xmma_wgrad_indexed_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_warpgroupsize1x1x1_"
     "g1_execute_split_k_kernel__5x_cudnn", "cuBLASLt/cuDNN xmma"),
    ("sm90_xmma_dgrad_implicit_gemm_indexed_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize256x64x32_warpgroupsize1x1x1_"
     "g1_strided_execute_kernel__5x_cudnn", "cuBLASLt/cuDNN xmma"),
    ("sm80_xmma_fprop_implicit_gemm_indexed_wo_smem_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x32x16_stage1_"
     "warpsize4x1x1_g1_tensor16x8x8_aligna4_alignc8_execute_kernel__5x_cudnn", "cuBLASLt/cuDNN xmma"),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize256x128x32_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_"
     "cublas", "cuBLASLt/cuDNN xmma"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(cutlass_80_tensorop_s1688gemm_"
     "128x128_32x3_nn_align4::Params)", "CUTLASS 2"),
])
def test_h200_tf32_names_and_their_family(name, family):
    assert name in _h200_kernel_names()
    assert kernel_precision(name, "fp32", (9, 0)) == ("tf32", family)


def test_mangled_cutlass_convolution_is_tf32_not_fp32():
    name = next(n for n in _h200_kernel_names() if n.startswith("_ZN17cutlass__5x_cudnn6Kernel"))
    assert "ImplicitGemmConvolution" in name and "tfloat32_t" in name
    assert kernel_precision(name, "fp32", (9, 0)) == ("tf32", "CUTLASS template (tensor op)")
    # The same template on half_t operands ran FP16; one naming no CUTLASS number type keeps the op's (FP32: TF32).
    assert kernel_precision("void cutlass::Kernel<cutlass::gemm::kernel::Gemm<cutlass::half_t, "
                            "cutlass::gemm::warp::MmaTensorOp<>>>", "fp16")[0] == "fp16"
    assert kernel_precision("void cutlass::device_kernel<GemmUniversal<cutlass::arch::OpClassTensorOp>>",
                            "fp32")[0] == "tf32"


def test_non_mma_cudnn_helpers_keep_the_op_precision():
    for name in _h200_kernel_names():
        if "init_device_workspace_kernel" in name or "ReduceSplitK" in name or "nchwToNhwcKernel" in name:
            assert kernel_precision(name, "fp32", (9, 0)) == ("fp32", "launching op's input types"), name


def _shared_kernel_names(trace: str) -> set[str]:
    path = real_trace(f"gpu/{trace}")
    if path.exists():
        doc = json.loads(gzip.decompress(path.read_bytes()))
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        return {e["name"] for e in events if e.get("cat") in ("kernel", "Kernel")}
    pytest.skip(f"{trace} not fetched (see tests/fixtures/README.md, 'gpu/')")


def test_shared_a100_tf32_trace_cublas_kernels():
    names = _shared_kernel_names("pt2x_a100_tf32_nccl16_cudagraph.json.gz")
    tensorop = [n for n in names if "cutlass_80_tensorop_s1688gemm" in n]
    assert tensorop and all(kernel_precision(n, "fp32", (8, 0))[0] == "tf32" for n in tensorop)
    assert kernel_precision("ampere_sgemm_128x64_nn", "fp32", (8, 0))[0] == "fp32"
    assert "ampere_sgemm_128x64_nn" in names


def test_shared_v100_trace_fp32_kernels_stay_fp32():
    names = _shared_kernel_names("pt19_resnet50_v100.json.gz")
    simt = [n for n in names if n.startswith(("volta_sgemm", "volta_scudnn"))]
    assert simt and all(kernel_precision(n, "fp32", (7, 0))[0] == "fp32" for n in simt)
