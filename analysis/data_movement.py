"""Kernels a library launches around an op's arithmetic that do none of it: layout transforms, index and offset
set-up, workspace initialisation.

An op's analytic FLOPs are shared among the kernels launched under it in proportion to their time
(profilers/kineto/reader.py). cuDNN runs a convolution as a layout transform, set-up kernels and the GEMM;
shared by time, the transform got the GEMM's FLOPs: on an H200, cuDNN 9's `nchwToNhwcKernel` read 170 % of
the FP32 peak while the TF32 GEMMs beside it were short of theirs (docs/results/gpu-check-h200.md). These
kernels get no share of the FLOPs when their op has another kernel to carry them.

Names as real traces spell them (cuDNN 7-9 on V100, A100, H100, H200): `nchwToNhwcKernel`,
`nhwcToNchwKernel` (with or without the `cudnn::engines_precompiled::` namespace), `im2col4d_kernel`,
`cask_cudnn::computeOffsetsKernel` and its `computeWgradBOffsetsKernel`/`computeBOffsetsKernel`/
`computeWgradSplitKOffsetsKernel` kin, `cudnn::winograd::generateWinogradTilesKernel`, xmma's
`init_device_workspace_kernel`, and the split-K reductions `cudnn::cnn::reduce_wgrad_nchw_helper` and
CUTLASS's `ReduceSplitK`.
"""

from __future__ import annotations

import re

import numpy as np

from tbd.analysis.flops.ops import does_no_arithmetic

_NO_ARITHMETIC = re.compile(
    r"nchwtonhwc|nhwctonchw|im2col|compute\w*offsetskernel|generatewinogradtileskernel|init_device_workspace"
    # split-K reductions: they add up the GEMM's partial sums, a vanishing share of the op's multiply-adds
    r"|reduce_wgrad|reducesplitk",
)


def does_arithmetic(names: np.ndarray) -> np.ndarray:
    """Per kernel name: False for a layout, set-up or workspace kernel (module docstring), else True; per CPU op
    name (a CPU trace's rows are ops), False for data movement and autograd's bookkeeping
    (`flops.ops.does_no_arithmetic`)."""
    distinct = {n: not (_NO_ARITHMETIC.search(str(n).lower()) or does_no_arithmetic(str(n)))
                for n in set(names.tolist())}
    return np.fromiter((distinct[n] for n in names.tolist()), dtype=bool, count=len(names))
