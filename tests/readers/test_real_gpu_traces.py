"""Real public GPU traces from PyTorch 1.8 to 2.9 (V100, A100, H100, B200, MI250, MI300), read by tbd
and checked against an independent recompute (tests/fixtures/gpu/recompute.py: a short stdlib
script over the raw JSON, no tbd code) stored in tests/fixtures/gpu/expected.json.

The traces are not in the repository (fetched public data is not committed here); make them with
the commands in tests/fixtures/README.md ("gpu/"). Each test skips, saying so, for a trace that is
absent. The layouts they exercise are also covered, by hand-written copies, in test_trace_eras.py.
"""

from __future__ import annotations

import json

import pytest
from testpaths import FIXTURES, real_trace

from tbd.analysis.flops.ops import op_flops, precision_of
from tbd.analysis.precision import kernel_precisions
from tbd.analysis.utilization import device_busy_ns
from tbd.cli.run_analysis import profile_from_trace
from tbd.profilers.kineto.reader import read_trace_file, trace_records

GPU = FIXTURES / "gpu"
EXPECTED = json.loads((GPU / "expected.json").read_text())


def _present(name: str):
    path = real_trace(f"gpu/{name}")
    if not path.exists():
        pytest.skip(f"{name} not fetched (see tests/fixtures/README.md, 'gpu/')")
    return path


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_busy_time_window_and_kernels_equal_the_independent_recompute(name):
    path, e = _present(name), EXPECTED[name]
    rec = trace_records(read_trace_file(path), name, flops_of=op_flops, precision_of=precision_of,
                        kernel_precisions=kernel_precisions)
    assert (rec.window_start_ns, rec.window_end_ns) == (e["window_start_ns"], e["window_end_ns"])
    assert device_busy_ns(rec) == e["busy_ns"]
    assert len(rec.kernels) == e["kernels_in_window"]
    assert [s.number for s in rec.steps] == e["profiler_steps"]


def test_v100_trace_gets_its_flop_utilization_with_no_flag():
    profile = profile_from_trace(_present("pt19_resnet50_v100.json.gz"))
    fu = profile.metrics.flop_util_pct
    assert fu.value is not None and fu.peak_source == "gpu_table" and "V100" in fu.peak_formula


def test_a100_tf32_gemms_never_sit_above_peak_unflagged():
    profile = profile_from_trace(_present("pt2x_a100_tf32_nccl16_cudagraph.json.gz"))
    assert not [k.name for k in profile.kernels if k.util_pct and k.util_pct > 100 and not k.util_note]
    tf32 = [k for k in profile.kernels if "s1688gemm" in k.name]
    assert tf32 and {k.precision for k in tf32} == {"tf32"}
    sgemm = [k for k in profile.kernels if k.name.startswith("ampere_sgemm")]
    assert sgemm and {k.precision for k in sgemm} == {"fp32"}


def test_nccl_time_is_communication_with_its_overlap():
    profile = profile_from_trace(_present("pt2x_a100_nccl2_fractional.json.gz"))
    gaps = profile.metrics.no_flop_formula
    assert gaps.causes[0].cause == "communication" and gaps.communication_overlap_pct is not None


def test_mi250_is_not_looked_up_as_hopper():
    """ROCm names this MI250 GCD "AMD Radeon Graphics" with a CUDA-style 9.0 (a Hopper's number): its peaks are
    gfx90a's with 104 CUs (an MI210 or one MI250 GCD, 22.6 TFLOP/s FP32 on both datasheets), never an H100's."""
    fu = profile_from_trace(_present("pt2x_mi250_rocm62.json.gz")).metrics.flop_util_pct
    assert fu.peak_flops == 22.6e12 and "104 CUs" in fu.peak_formula and "H100" not in fu.peak_formula


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_kernel_groups_flops_add_up_to_the_headlines(name):
    """Issue 27, item 1: a group partly counted (the same kernel launched by an op with shapes and by one the
    trace does not link) keeps its counted calls' FLOPs, so the table and the headline agree on every trace
    (the V100 CUDA-graph trace had 26.4 GFLOP in the headline and 75 MFLOP in its groups)."""
    profile = profile_from_trace(_present(name))
    fu = profile.metrics.flop_util_pct
    listed = sum(r.flops or 0.0 for r in profile.kernels)
    assert listed + fu.flops_unlisted == pytest.approx(fu.flops or 0.0, rel=1e-9, abs=1e-6)
    for r in profile.kernels:
        if r.uncounted_calls:  # a partly counted group says so, and how many of its calls are counted
            assert f"{r.calls - r.uncounted_calls} of {r.calls} calls counted" in r.util_note


def test_the_v100_headline_says_how_much_is_above_peak_and_the_figure_capped():
    """Issue 27, item 3: Winograd/FFT groups above the FP32 peak, summed by hand from the groups."""
    profile = profile_from_trace(_present("pt19_resnet50_v100.json.gz"))
    fu = profile.metrics.flop_util_pct
    above = [r for r in profile.kernels if r.util_pct is not None and r.util_pct > 100]
    assert above and fu.above_peak_flops_pct == pytest.approx(100 * sum(r.flops for r in above) / fu.flops)
    excess_s = sum((r.util_pct / 100 - 1) * (r.time_s - r.uncounted_time_s) for r in above)
    assert fu.value_capped_pct == pytest.approx(fu.value - 100 * excess_s / fu.busy_s)
    assert fu.value_capped_pct < 45 < fu.value  # 50.5 % counted, 44.9 % capped
