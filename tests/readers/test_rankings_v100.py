"""The rankings on a real PyTorch 1.9 ResNet-50 trace from a V100 (issue 27, items 4 and 5).

The aten::div of mean's backward (MeanBackward1: the 32x2048x1x1 gradient expanded to 32x2048x7x7,
then divided by 49) is recomputed here from the raw JSON with plain loops, sharing no code with
tbd: its kernel found by correlation id, the op open around the launch, its bytes from the shapes
the trace records (each tensor input read once in its own shape, the output written once).

Worked example: inputs 32x2048x7x7 float and the Scalar 49 (not a tensor: no traffic); output
32x2048x7x7 float. Bytes = 4 x 3,211,264 read + 4 x 3,211,264 written = 25,690,112. The kernel ran
24 us: 25,690,112 / 24e-6 = 1.07e12 B/s, 118.9 % of the V100's 900 GB/s. The input is an expanded
view of 65,536 distinct elements, which DRAM serves once each: 4 x (65,536 + 3,211,264) =
13,107,200 B, 60.7 %. The trace records no strides, so the count cannot know; the row says why.

The trace is not committed: found in tests/fixtures/gpu, else in the shared traces; skipped without.
"""

from __future__ import annotations

import gzip
import json

import pytest
from testpaths import real_trace

from tbd.cli.run_analysis import profile_from_trace

NAME = "pt19_resnet50_v100.json.gz"
TRACE = real_trace(f"gpu/{NAME}")
pytestmark = pytest.mark.skipif(not TRACE.exists(), reason="real GPU traces not fetched (tests/fixtures/README.md)")

V100_BANDWIDTH = 900e9  # B/s, HBM2, NVIDIA V100 datasheet
FLOAT = 4


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


@pytest.fixture(scope="module")
def profile():
    return profile_from_trace(TRACE)


def _div_recompute() -> tuple[str, float, float, int]:
    """(kernel name, bytes by the recorded shapes, its duration in s, distinct elements of the expanded input)."""
    with gzip.open(TRACE, "rt") as f:
        events = json.load(f)["traceEvents"]
    ops = [e for e in events if e.get("cat") == "Operator" and e.get("ph") == "X"]
    divs = [op for op in ops if op["name"] == "aten::div" and op["args"]["Input Dims"][0] == [32, 2048, 7, 7]]
    outer = min(divs, key=lambda op: op["ts"])  # the div with the Scalar; the inner one repeats it
    launches = [e for e in events if e.get("cat") == "Runtime" and e["name"] == "cudaLaunchKernel"
                and outer["ts"] <= e["ts"] <= outer["ts"] + outer["dur"]]
    assert len(launches) == 1
    kernel = next(e for e in events if e.get("cat") == "Kernel"
                  and e["args"].get("correlation") == launches[0]["args"]["correlation"])
    dims, types = outer["args"]["Input Dims"], outer["args"]["Input type"]
    tensors = [d for d, t in zip(dims, types) if t == "float"]  # "Int": the Scalar 49, a kernel argument
    nbytes = sum(FLOAT * _prod(d) for d in tensors) + FLOAT * _prod(dims[0])
    mean_backward = next(op for op in ops if op["name"] == "MeanBackward1"
                         and op["ts"] <= outer["ts"] and outer["ts"] + outer["dur"] <= op["ts"] + op["dur"])
    return kernel["name"], nbytes, kernel["dur"] * 1e-6, _prod(mean_backward["args"]["Input Dims"][0])


def test_the_broadcast_div_reads_each_recorded_input_once_and_says_why_it_beats_the_bandwidth(profile):
    name, nbytes, seconds, distinct = _div_recompute()
    assert nbytes == 2 * FLOAT * 32 * 2048 * 7 * 7 == 25_690_112
    row = next(r for r in profile.kernels if r.name == name)
    assert row.bytes == nbytes
    assert row.bandwidth_util_pct == pytest.approx(100 * nbytes / seconds / V100_BANDWIDTH)  # 118.9 %
    assert row.bandwidth_util_pct > 100 and "above the memory bandwidth" in row.roofline_note
    # Read once per distinct element, the traffic fits the bandwidth: the note's explanation holds.
    assert distinct == 32 * 2048
    assert 100 * FLOAT * (distinct + 32 * 2048 * 49) / seconds / V100_BANDWIDTH == pytest.approx(60.7, abs=0.05)
    assert name not in [r.name for r in profile.low_bandwidth_kernels]  # a misestimate is not ranked


def test_every_share_above_100_carries_a_note(profile):
    over = [r for r in profile.kernels if (r.roofline_pct or 0) > 100 or (r.bandwidth_util_pct or 0) > 100]
    # 11 above the FP32 peak (Winograd, sgemm under cuDNN's convolutions), the div; generateWinogradTilesKernel,
    # 131 % before, sets up indices and carries none of the convolution's FLOPs (analysis/data_movement.py)
    assert len(over) == 12
    assert all(r.roofline_note for r in over)


def test_no_group_with_its_bound_unknown_is_ranked_and_each_is_listed_apart_with_why(profile):
    assert all(r.bound == "compute" for r in profile.low_util_kernels)
    assert all(r.bound == "memory" for r in profile.low_bandwidth_kernels)
    unknown = [r for r in profile.kernels if r.bound is None]
    assert [r.name for r in profile.bound_unknown_kernels] == [r.name for r in unknown]  # longest first, all
    assert all(r.roofline_note for r in unknown)
    # What used to head the compute ranking (issue 27 item 4): sum's reduction and nll_loss, whose bytes the
    # 1.9 trace cannot give (no "Concrete Inputs": sum's dims, nll_loss's reduction unrecorded).
    why = {r.name.split("<")[0].split("(")[0]: r.roofline_note for r in profile.bound_unknown_kernels}
    assert why["void cunn_ClassNLLCriterion_updateOutput_kernel"] == (
        "bytes not derivable: aten::nll_loss_forward's recorded arguments do not give them")
    assert profile.low_util_kernels == []  # every compute-bound group is above the 40.3 % average
