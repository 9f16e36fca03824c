"""On the CPU, ops that do no arithmetic take no FLOPs and are never compute-ranked (issue 28).

A CPU trace's rows are ops, each its self time; an op with a FLOP formula (aten::addmm) shared its FLOPs among
the ops under it by their self time, so the allocation, views and conjugation checks inside it (aten::expand,
aten::as_strided, aten::resolve_conj) got a share and a FLOP utilization, and so did aten::empty and detach
elsewhere. They do none of the arithmetic: the op's FLOPs stay with the ops that do it, and autograd's nodes
(ReluBackward0, AccumulateGrad) and its engine's evaluate_function do none in their own time either; their work
is counted where their ATen ops are.

Hand count for tests/fixtures/kineto_cpu_small.json.gz: two ProfilerSteps, each with two aten::addmm: [8, 16] x
[16, 32] and [8, 32] x [32, 4], bias adds not counted (FlopCounterMode's rule): 2 x (2x8x16x32 + 2x8x32x4) =
2 x (8,192 + 2,048) = 20,480 FLOPs, now all aten::addmm's (16,026 before: its children took the rest).
"""

from __future__ import annotations

import pytest
from testpaths import FIXTURES

from tbd.cli.run_analysis import profile_from_trace

TRACE = FIXTURES / "kineto_cpu_small.json.gz"
#: Ops of the fixture that do no arithmetic of their own: data movement, views, allocation, autograd.
NO_ARITHMETIC = ("aten::empty", "aten::empty_like", "aten::empty_strided", "aten::detach", "detach",
                 "aten::as_strided", "aten::expand", "aten::resolve_conj", "aten::t", "aten::transpose", "aten::view",
                 "ReluBackward0", "AddmmBackward0", "TBackward0", "MseLossBackward0", "torch::autograd::AccumulateGrad",
                 "autograd::engine::evaluate_function: ReluBackward0",
                 "autograd::engine::evaluate_function: AddmmBackward0")


@pytest.fixture(scope="module")
def profile():
    # A peak and a bandwidth, so that every op with FLOPs gets a utilization and a bound.
    return profile_from_trace(TRACE, peak_flops=100e9, memory_bandwidth=20e9)


def test_the_gemm_keeps_all_its_flops(profile):
    addmm = next(r for r in profile.kernels if r.name == "aten::addmm")
    assert addmm.flops == 2 * (2 * 8 * 16 * 32 + 2 * 8 * 32 * 4) == 20_480


def test_ops_that_do_no_arithmetic_get_no_flops_and_are_never_compute_ranked(profile):
    rows = {r.name: r for r in profile.kernels}
    assert set(NO_ARITHMETIC) <= set(rows)
    for name in NO_ARITHMETIC:
        assert rows[name].flops == 0, name
        assert rows[name].bound != "compute", name
    ranked = {r.name for r in profile.low_util_kernels} | {
        r.name for r in profile.recoverable_kernels if r.bound == "compute"}
    assert not ranked & set(NO_ARITHMETIC)


def test_the_flops_add_up_to_the_headline(profile):
    assert sum(r.flops or 0 for r in profile.kernels) == pytest.approx(profile.metrics.flop_util_pct.flops)
