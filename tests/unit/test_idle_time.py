"""GPU idle time by cause (analysis.idle_time) on hand-built traces, each figure written as arithmetic."""

import numpy as np
import pytest

from tbd.analysis import idle_time
from tbd.core.records import KernelTable, OpTable, StepSpan, TraceRecords


def trace_of(starts, durs, launches, window, copies=None, syncs=None):
    n = len(starts)
    obj = lambda xs: np.array(xs, dtype=object)  # noqa: E731
    k = KernelTable(name=obj(["k"] * n), start_ns=np.array(starts, np.int64), dur_ns=np.array(durs, np.int64),
                    device=np.zeros(n, np.int64), stream=np.zeros(n, np.int64), op=obj([""] * n),
                    flops=np.full(n, np.nan), flop_source=obj([""] * n), precision=obj([""] * n),
                    step=np.zeros(n, np.int64), launch_ns=np.array(launches, np.int64))
    empty = OpTable(np.array([], object), np.array([], np.int64), np.array([], np.int64), np.array([], np.int64))
    return TraceRecords(source="t", device_kind="cuda", kernels=k, busy_start_ns=k.start_ns,
                        busy_end_ns=k.start_ns + k.dur_ns, steps=(StepSpan(1, window[0], window[1], window[1]),),
                        window_start_ns=window[0], window_end_ns=window[1], ops=empty, memory=None,
                        copies=_spans(copies), syncs=_spans(syncs))


def _spans(pairs):
    return None if pairs is None else (np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64))


def test_each_cause_on_a_hand_built_window():
    # window [0, 100); kernels [10,20) launched at 5; [20,30) launched at 2 (touching: no gap);
    # [40,50) launched at 25, before the GPU went idle at 30, gap 10 >= threshold 10: other;
    # [52,60) launched at 45 (queued at 50), gap 2 < 10: launch gap; [70,80) launched at 65, after 60: host bound;
    # tail [80,100): nothing left on the GPU while the host runs: host bound.
    t = trace_of([10, 20, 40, 52, 70], [10, 10, 10, 8, 10], [5, 2, 25, 45, 65], (0, 100))
    g = idle_time.gpu_idle(t, launch_gap_ns=10)
    assert g.idle_s * 1e9 == pytest.approx(10 + 10 + 2 + 10 + 20)
    assert g.gaps == 5
    assert g.idle_pct == pytest.approx(100 * 52 / 100)
    assert g.seconds["host_bound"] * 1e9 == pytest.approx(10 + 10 + 20)  # [0,10) launched at 5 > 0, [60,70), tail
    assert g.seconds["launch_gap"] * 1e9 == pytest.approx(2)
    assert g.seconds["other"] * 1e9 == pytest.approx(10)
    assert g.share_pct["host_bound"] == pytest.approx(100 * 40 / 52)
    assert g.seconds["memcpy"] is None and g.seconds["synchronisation"] is None
    assert "memcpy" in g.reasons["memcpy"] and g.reasons["synchronisation"]


def test_overlapping_streams_and_a_kernel_without_its_launch_call():
    # [0,50) and [20,60) on two streams overlap: one busy span; the kernel at 70 has no launching call (-1):
    # its gap [60,70) cannot be host bound as far as the trace tells, so it is other; [80,90) window tail.
    t = trace_of([0, 20, 70], [50, 40, 10], [0, 1, -1], (0, 90))
    g = idle_time.gpu_idle(t)
    assert g.idle_s * 1e9 == pytest.approx(10 + 10)
    assert g.seconds["other"] * 1e9 == pytest.approx(10)
    assert g.seconds["host_bound"] * 1e9 == pytest.approx(10)


def test_several_kernels_start_where_a_gap_ends_the_earliest_launch_decides():
    # gap [10,30); two kernels start at 30, launched at 20 (after 10) and at 5 (queued before 10):
    # one was queued, so the GPU did not wait on the host: other.
    t = trace_of([0, 30, 30], [10, 5, 5], [0, 20, 5], (0, 35))
    g = idle_time.gpu_idle(t, launch_gap_ns=10)
    assert g.seconds["other"] * 1e9 == pytest.approx(20)
    assert g.seconds["host_bound"] == 0.0


def test_never_idle_has_no_shares():
    g = idle_time.gpu_idle(trace_of([0], [100], [0], (0, 100)))
    assert g.idle_s == 0.0 and g.share_pct["host_bound"] is None and g.reasons["share_pct"]


def test_copies_and_synchronisation_calls():
    # window [0, 100); kernels [10,20) launched at 5, [50,60) launched at 45, [80,90) launched at 30.
    # [0,10): launched after 0: host bound 10. [20,50): launched at 45 > 20, but the host sat in a synchronisation
    # call [15,48) when the GPU went idle at 20: synchronisation 30. [60,80): queued at 30, 20 >= 10: a copy
    # [62,70) covers 8 (memcpy), other 12. Tail [90,100): the copy [95,105) covers 5 (memcpy), host bound 5.
    t = trace_of([10, 50, 80], [10, 10, 10], [5, 45, 30], (0, 100), copies=[(62, 70), (95, 105)], syncs=[(15, 48)])
    g = idle_time.gpu_idle(t, launch_gap_ns=10)
    assert g.idle_s * 1e9 == pytest.approx(10 + 30 + 20 + 10)
    want = {"host_bound": 10 + 5, "synchronisation": 30, "memcpy": 8 + 5, "launch_gap": 0, "other": 12}
    assert {k: round(v * 1e9) for k, v in g.seconds.items()} == want
    assert g.share_pct["memcpy"] == pytest.approx(100 * 13 / 70)
    assert not g.reasons


def test_empty_copy_and_sync_tables_are_read_as_none_happened():
    t = trace_of([10], [10], [5], (0, 40), copies=[], syncs=[])
    g = idle_time.gpu_idle(t)
    assert g.seconds["memcpy"] == 0.0 and g.seconds["synchronisation"] == 0.0
    assert g.seconds["host_bound"] * 1e9 == pytest.approx(10 + 20)
