"""The roofline position of a kernel group, by hand: Williams et al. (CACM 2009) with a V100's
FP32 peak (15.7 TFLOP/s) and HBM2 bandwidth (900 GB/s): ridge at 15.7e12 / 900e9 = 17.44 FLOP/B."""

from __future__ import annotations

import pytest

from tbd.analysis.roofline import COMPUTE, MEMORY, roofline_point

PEAK, BW = 15.7e12, 900e9


def test_a_gemm_right_of_the_ridge_is_compute_bound_against_the_peak():
    # 2*1024^3 FLOPs over 3 * 1024*1024*4 bytes: intensity 2*1024/12 = 170.67 FLOP/B > 17.44
    flops, nbytes, seconds = 2 * 1024**3, 3 * 1024 * 1024 * 4, 200e-6
    p = roofline_point(flops, nbytes, seconds, PEAK, BW)
    assert p.intensity == pytest.approx(2 * 1024 / 12)
    assert p.bound == COMPUTE and p.attainable_flops_per_s == PEAK
    assert p.flops_per_s == pytest.approx(flops / seconds)  # 10.74 TFLOP/s
    assert p.roofline_pct == pytest.approx(100 * flops / seconds / PEAK)  # 68.4 %
    assert p.bandwidth_util_pct == pytest.approx(100 * nbytes / seconds / BW)


def test_an_elementwise_add_left_of_the_ridge_is_memory_bound_against_intensity_x_bandwidth():
    # c = a + b over 1M floats: 1M FLOPs, 12 MB moved: intensity 1/12 FLOP/B
    flops, nbytes, seconds = 1 << 20, 12 << 20, 20e-6
    p = roofline_point(flops, nbytes, seconds, PEAK, BW)
    assert p.bound == MEMORY
    assert p.attainable_flops_per_s == pytest.approx(BW / 12)  # 75 GFLOP/s
    assert p.roofline_pct == pytest.approx(100 * (flops / seconds) / (BW / 12))
    assert p.roofline_pct == pytest.approx(p.bandwidth_util_pct)  # on the slope the two shares agree


def test_data_movement_is_judged_by_bandwidth_alone():
    p = roofline_point(0.0, 8e6, 10e-6, PEAK, BW)
    assert p.bound == MEMORY and p.flops_per_s == 0.0
    assert p.bandwidth_util_pct == pytest.approx(100 * 8e6 / 10e-6 / BW)  # 88.9 %
    assert p.roofline_pct == p.bandwidth_util_pct and p.reason is None


@pytest.mark.parametrize("flops, nbytes, peak, bw, missing", [
    (float("nan"), 1e6, PEAK, BW, "FLOPs"),
    (1e6, float("nan"), PEAK, BW, "bytes"),
    (1e6, 1e6, None, BW, "the precision's peak"),
    (1e6, 1e6, PEAK, None, "memory bandwidth"),
])
def test_an_unknown_input_leaves_the_bound_null_with_the_reason(flops, nbytes, peak, bw, missing):
    p = roofline_point(flops, nbytes, 1e-3, peak, bw)
    assert p.bound is None and p.roofline_pct is None and missing in p.reason


def test_no_time_gives_nothing():
    assert roofline_point(1e6, 1e6, 0.0, PEAK, BW).reason == "no time"
