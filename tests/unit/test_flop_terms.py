"""The FLOP headline's terms (issue 27, items 1-3 and 9), on hand-built kernel tables with hand-computed figures."""

from __future__ import annotations

import numpy as np
import pytest

from tbd.analysis import utilization
from tbd.analysis.data_movement import does_arithmetic
from tbd.analysis.flop_terms import above_peak_terms, work_by_precision
from tbd.analysis.precision import kernel_precision
from tbd.analysis.ranking import group_kernels
from tbd.core.records import KernelTable
from tbd.profilers.kineto.tree import split_flops


def _table(names, durs, flops, precisions) -> KernelTable:
    n = len(names)
    obj = lambda xs: np.array(xs, dtype=object)  # noqa: E731
    return KernelTable(obj(names), np.arange(n, dtype=np.int64) * 1000, np.array(durs, dtype=np.int64),
                       np.zeros(n, np.int64), np.zeros(n, np.int64), obj([""] * n), np.array(flops, dtype=float),
                       obj(["analytic"] * n), obj(precisions), np.zeros(n, np.int64))


PEAKS = {"fp32": 10e12, "tf32": 100e12}


def test_work_per_precision_adds_up_to_the_utilization():
    # 2 GFLOP fp32 (0.2 ms at 10 TFLOP/s), 8 GFLOP tf32 (0.08 ms at 100 TFLOP/s), 1 MFLOP of unknown precision
    k = _table(["s", "t", "u"], [300_000, 200_000, 10_000], [2e9, 8e9, 1e6], ["fp32", "tf32", ""])
    work = work_by_precision(k, PEAKS)
    assert [(w.precision, w.flops, w.peak_flops) for w in work] == [("tf32", 8e9, 100e12), ("fp32", 2e9, 10e12),
                                                                      ("", 1e6, None)]
    assert [w.seconds_at_peak for w in work] == [pytest.approx(8e-5), pytest.approx(2e-4), None]
    assert sum(w.share_pct for w in work) == pytest.approx(100)
    busy_ns = 510_000
    assert utilization.flop_util_pct(k, busy_ns, PEAKS) == pytest.approx(100 * (8e-5 + 2e-4) / 510e-6)


def test_groups_above_their_peak_give_their_share_and_the_figure_capped():
    # "w" (Winograd) does 3 GFLOP in 0.2 ms at a 10 TFLOP/s peak: 150 %, 0.3 ms at peak; "g" 1 GFLOP in 0.2 ms: 50 %.
    k = _table(["w", "g"], [200_000, 200_000], [3e9, 1e9], ["fp32", "fp32"])
    groups = group_kernels(k, utilization.kernel_util_pct(k, PEAKS))
    busy_ns = 400_000
    value = utilization.flop_util_pct(k, busy_ns, PEAKS)
    assert value == pytest.approx(100.0)  # (0.3 + 0.1) ms at peak / 0.4 ms
    share, capped = above_peak_terms(groups, 4e9, busy_ns, value)
    assert share == pytest.approx(75.0)  # 3 of 4 GFLOP
    assert capped == pytest.approx(75.0)  # (0.2 + 0.1) ms / 0.4 ms: "w" held at 100 % of its 0.2 ms
    assert above_peak_terms(group_kernels(k, np.array([50.0, 50.0])), 4e9, busy_ns, 50.0) == (None, None)


def test_layout_and_set_up_kernels_get_none_of_their_ops_flops():
    names = np.array(["void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true>",
                      "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32",
                      "void cudnn::engines_precompiled::nhwcToNchwKernel<float, float, float, true, false>",
                      "cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)",
                      "volta_sgemm_128x64_nn"], dtype=object)
    assert does_arithmetic(names).tolist() == [False, True, False, False, True]
    # op 0 has 90 FLOPs over a layout kernel (30 ns) and a GEMM (60 ns): all 90 to the GEMM. Op 1 launched only a
    # layout kernel: its FLOPs stay on it (never lost). Op 2: two carriers of 0 ns share equally.
    flops = split_flops(np.array([90.0, 12.0, 8.0]), np.array([0, 0, 1, 2, 2]), np.array([30, 60, 5, 0, 0]),
                        np.array([False, True, False, False, True]))
    assert flops.tolist() == [0.0, 90.0, 12.0, 0.0, 8.0]


@pytest.mark.parametrize(("name", "want"), [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, at::detail::Array<char*, 3> >",
     "fp32"),
    ("void cudnn::winograd_nonfused::winogradForwardOutput4x4<float, float>(cudnn::winograd_nonfused::Wino)", "fp32"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::Half, at::native::func_wrapper_t>>", "fp16"),
    ("void at::native::elementwise_kernel<128, 2, at::native::FillFunctor<long>>", ""),
])
def test_a_kernel_whose_op_types_were_not_recorded_takes_its_name_s_template_type(name, want):
    """PyTorch 1.8 traces record no input types for many ops: the kernel's template says float (item 9)."""
    assert kernel_precision(name, "")[0] == want


def test_a_fill_group_with_some_zero_length_calls_is_0_percent_not_no_time():
    """Issue 27, item 9: a 978-call FillFunctor group read "no time" because some calls lasted 0 ns (µs-rounded
    traces) and one NaN utilization made the group's NaN. Its calls with time give it 0 %."""
    n = 978
    k = _table(["FillFunctor"] * n, [0 if i % 3 == 0 else 1000 for i in range(n)], [0.0] * n, [""] * n)
    g = group_kernels(k, utilization.kernel_util_pct(k, PEAKS))[0]
    assert g.calls == n and g.util_pct == 0.0 and g.flops == 0.0
