"""A real run of `tbd profile resnet50 --size full --batch 64` on a lent NVIDIA H100 (2026-11-27), its trace cut to
one traced iteration (tests/fixtures/README.md, "h100/"), checked against the stdlib recompute of the GPU check
(tools/gpu_results.py), which shares no code with tbd.

What it proves on real data (issue 27):
- GPU busy of a run is the kernels' busy time per traced iteration over the untraced iteration time: 96.6 %
  beside NVML's 94.2 % on the same run, where the traced step's own wall time (the tracer stretches it) gives 21 %;
- cuDNN's layout and set-up kernels (nchwToNhwcKernel, nhwcToNchwKernel, ...) carry none of the convolution's
  FLOPs, which go to its GEMMs (TF32 on Hopper) and add up to the same total;
- the FLOP headline's terms: the seconds at each precision's peak add up to the utilization x busy time.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from testpaths import FIXTURES, load_tool

from tbd.analysis.data_movement import does_arithmetic
from tbd.analysis.flops.ops import op_flops, precision_of
from tbd.analysis.precision import kernel_precisions
from tbd.cli.run_analysis import profile_from_run_dir
from tbd.profilers.kineto.reader import read_trace_file, trace_records

RUN = FIXTURES / "h100" / "resnet50-b64"
TRACE = RUN / "trace.pt.trace.json.gz"


def _recompute() -> dict:
    """Busy time of the traced step recomputed with the stdlib by tools/gpu_results.py (the GPU check's own
    recompute, no tbd code), and NVML's mean from raw/nvml.json."""
    again = load_tool("gpu_results").recompute_busy(RUN)
    nvml = json.loads((RUN / "raw" / "nvml.json").read_text())["utilization_pct"]
    return {"busy_ms": again["busy_ms_per_step"], "window_ms": again["window_ms"], "iteration_ms": again["iteration_ms"],
            "nvml_pct": sum(nvml) / len(nvml)}


@pytest.fixture(scope="module")
def profile():
    return profile_from_run_dir(RUN)


def test_gpu_busy_is_kernel_time_per_traced_iteration_over_the_untraced_iteration(profile):
    want = _recompute()
    busy = profile.metrics.gpu_busy_pct.value
    assert busy == pytest.approx(100 * want["busy_ms"] / want["iteration_ms"], rel=1e-6)  # 96.6 %
    assert profile.metrics.gpu_busy_traced_pct.value == pytest.approx(100 * want["busy_ms"] / want["window_ms"],
                                                                      rel=1e-6)
    # Against the driver's own figure on the same run: within 3 points; the traced wall time is far off.
    assert abs(busy - want["nvml_pct"]) < 3 and profile.metrics.gpu_busy_traced_pct.value < 30


def test_layout_and_set_up_kernels_carry_none_of_the_convolutions_flops():
    trace = read_trace_file(TRACE)
    kw = dict(flops_of=op_flops, precision_of=precision_of, kernel_precisions=kernel_precisions)
    by_time = trace_records(trace, "h100", **kw)
    by_work = trace_records(trace, "h100", does_arithmetic=does_arithmetic, **kw)
    names = by_work.kernels.name
    layout = np.array(["nchwToNhwc" in n or "nhwcToNchw" in n for n in names])
    assert layout.sum() > 0 and float(np.nansum(by_time.kernels.flops[layout])) > 1e9  # shared by time before
    assert float(np.nansum(by_work.kernels.flops[layout])) == 0.0
    # Every FLOP still counted, now on the kernels that do the arithmetic.
    assert float(np.nansum(by_work.kernels.flops)) == pytest.approx(float(np.nansum(by_time.kernels.flops)), rel=1e-12)


def test_the_flop_headline_can_be_redone_from_its_terms(profile):
    fu = profile.metrics.flop_util_pct
    at_peak = sum(w.seconds_at_peak for w in fu.by_precision if w.seconds_at_peak is not None)
    assert fu.value == pytest.approx(100 * at_peak / fu.busy_s, rel=1e-9)
    assert sum(w.flops for w in fu.by_precision) == pytest.approx(fu.flops, rel=1e-12)
    tf32 = next(w for w in fu.by_precision if w.precision == "tf32")
    assert tf32.peak_flops == 494.7e12 and tf32.share_pct > 95  # the convolutions' GEMMs, on TF32 tensor cores
    # The kernel groups' FLOPs add up to the headline's.
    assert sum(r.flops or 0.0 for r in profile.kernels) + fu.flops_unlisted == pytest.approx(fu.flops, rel=1e-9)


def test_traced_iterations_stretched_by_the_tracer_get_one_note_not_a_warning_each(profile):
    # 68.5-166.4 ms traced against 37.6 ms untraced, kernels 36.3 ms per iteration: the host's stretch only
    stretch = [n for n in profile.notes if "the tracer's work on the host" in n]
    assert len(stretch) == 1 and "68.5-166.4 ms against the timing window's 37.6 ms" in stretch[0]
    assert "ran 36.3 ms per iteration" in stretch[0]
    assert not [n for n in profile.notes if n.startswith("traced iteration ")]
