"""Kernel time without FLOPs, split by cause (analysis/flop_gaps.py), on a hand-built kernel table."""

from __future__ import annotations

import numpy as np
import pytest

from tbd.analysis.flop_gaps import no_flop_formula, row_causes
from tbd.analysis.intervals import overlap_length_ns
from tbd.core.records import KernelTable


def table(rows):
    """rows: (name, op, start, dur, flops, flop_gap)."""
    obj = lambda i: np.array([r[i] for r in rows], dtype=object)  # noqa: E731
    n = len(rows)
    return KernelTable(name=obj(0), start_ns=np.array([r[2] for r in rows], dtype=np.int64),
                       dur_ns=np.array([r[3] for r in rows], dtype=np.int64), device=np.zeros(n, np.int64),
                       stream=np.zeros(n, np.int64), op=obj(1), flops=np.array([r[4] for r in rows], dtype=float),
                       flop_source=obj(4), precision=np.array(["fp32"] * n, dtype=object),
                       step=np.zeros(n, np.int64), flop_gap=obj(5))


NAN = float("nan")
ROWS = [
    ("ampere_sgemm_128x64_nn", "aten::mm", 0, 100, 1e6, ""),  # counted
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "record_param_comms", 50, 100, NAN, "no_formula"),  # 50-150
    ("triton_poi_fused_add_0", "CompiledFunction", 200, 40, NAN, "no_formula"),
    ("void cudnn::bn_fw_tr", "aten::cudnn_batch_norm", 300, 30, NAN, "shapes_not_recorded"),
    ("void at::native::index_kernel", "aten::index", 400, 20, NAN, "no_formula"),
    ("void at::native::fill_kernel", "", 500, 10, NAN, "no_launch_op"),
]


def test_each_row_gets_its_cause():
    assert row_causes(table(ROWS)).tolist() == ["", "communication", "compiled_region", "shapes_not_recorded",
                                                 "no_formula", "no_launch_op"]


def test_shares_of_summed_kernel_time_and_the_overlap_of_communication():
    gaps = no_flop_formula(table(ROWS))
    total = 100 + 100 + 40 + 30 + 20 + 10  # 300 ns of kernel time
    got = {g.cause: g.pct for g in gaps.causes}
    assert got == pytest.approx({"communication": 100 * 100 / total, "compiled_region": 100 * 40 / total,
                                 "shapes_not_recorded": 100 * 30 / total, "no_launch_op": 100 * 10 / total,
                                 "no_formula": 100 * 20 / total})
    assert gaps.pct == pytest.approx(100 * (total - 100) / total)
    # NCCL 50-150 overlaps the GEMM 0-100 for 50 of its 100 ns
    assert gaps.communication_overlap_pct == pytest.approx(50.0)
    no_formula = next(g for g in gaps.causes if g.cause == "no_formula")
    assert no_formula.ops == [{"name": "aten::index", "pct": pytest.approx(100 * 20 / total)}]


def test_a_reader_that_does_not_tell_counts_as_no_formula():
    k = table(ROWS)
    k = KernelTable(**{**k.__dict__, "flop_gap": None})
    assert row_causes(k).tolist()[3:] == ["no_formula", "no_formula", "no_formula"]


def test_overlap_of_two_interval_sets():
    # A = [0,10) ∪ [20,30); B = [5,25): overlap [5,10) + [20,25) = 10
    assert overlap_length_ns(np.array([0, 20]), np.array([10, 30]), np.array([5]), np.array([25])) == 5 + 5
