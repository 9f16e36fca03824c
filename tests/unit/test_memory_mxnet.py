"""MXNet memory categories from hand-built hook records and storage-counter events (no mxnet)."""

from __future__ import annotations

import numpy as np
import pytest

from tbd.analysis.memory_mxnet import RECORDS_SCHEMA, memory_breakdown
from tbd.errors import ResultFormatError
from tbd.records import KernelTable, MemoryEvents, OpTable, TraceRecords


def _records(**over):
    its = [{"step": 1, "weights_bytes": 4000, "gradients_bytes": 3000, "optimizer_state_bytes": 3000,
            "input_bytes": 500},
           {"step": 2, "weights_bytes": 4000, "gradients_bytes": 3000, "optimizer_state_bytes": 3200,
            "input_bytes": 500}]
    return {"schema": RECORDS_SCHEMA, "device_index": -1, "iterations": its, "reasons": {}, **over}


def _trace(ts, totals, device=-1, window=(100, 200)):
    n = len(ts)
    empty = np.array([], dtype=object)
    mem = MemoryEvents(np.array(ts, dtype=np.int64), np.zeros(n, dtype=np.uint64),
                       np.diff(np.array([0, *totals], dtype=np.int64)), np.array(totals, dtype=np.int64),
                       np.full(n, device, dtype=np.int64))
    ops = OpTable(empty, np.array([], dtype=np.int64), np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    return TraceRecords("t", "cpu", KernelTable.empty(), np.array([], dtype=np.int64), np.array([], dtype=np.int64),
                        (), window[0], window[1], ops, mem)


def test_exact_categories_and_split_at_peak():
    # Counter: 64 B live at the window start (left over), rises to 964 inside, 5000 after the window.
    m = memory_breakdown(_records(), _trace([50, 120, 150, 180, 250], [64, 564, 964, 64, 5000]))
    assert (m.weights, m.gradients) == (4000, 3000)
    assert m.dynamic == 3200 + 500  # optimizer state (max over iterations) + inputs
    assert m.feature_maps is None and m.workspace is None
    assert "without addresses" in m.reasons["feature_maps"] and "without addresses" in m.reasons["workspace"]
    assert m.allocator_peak == (4000 + 3000 + 3700) + (964 - 64)
    assert m.at_peak == {"weights": 4000, "gradients": 3000, "feature_maps": None, "workspace": None,
                         "dynamic": 3700, "unattributed": 964 - 64}
    assert sum(v for v in m.at_peak.values() if v is not None) == m.allocator_peak
    assert "64 B" in m.reasons["at_peak"]


def test_other_devices_counters_are_ignored():
    rec = _records(device_index=0)
    t = _trace([120, 150], [100, 300], device=0)
    assert memory_breakdown(rec, t).at_peak["unattributed"] == 300
    assert memory_breakdown(rec, _trace([120], [999], device=-1)).allocator_peak is None


def test_no_trace_or_no_counters_give_reasons():
    m = memory_breakdown(_records(), None)
    assert m.weights == 4000 and m.allocator_peak is None and m.reasons["allocator_peak"] == "no trace"
    assert all(v is None for v in m.at_peak.values())
    m = memory_breakdown(_records(), _trace([10], [5]))  # counter only before the window
    assert m.allocator_peak is None and "in the trace window" in m.reasons["at_peak"]


def test_without_records_only_reasons():
    m = memory_breakdown(None, _trace([120], [100]))
    assert (m.weights, m.gradients, m.dynamic, m.allocator_peak) == (None, None, None, None)
    for cat in ("weights", "gradients", "feature_maps", "workspace", "dynamic", "at_peak"):
        assert m.reasons[cat]


def test_missing_optimizer_is_left_out_of_dynamic_with_reason():
    rec = _records(reasons={"optimizer_state": "no gluon.Trainer given"})
    for it in rec["iterations"]:
        it["optimizer_state_bytes"] = None
    m = memory_breakdown(rec, None)
    assert m.dynamic == 500
    assert "no gluon.Trainer given" in m.reasons["dynamic"]


def test_malformed_records_raise():
    with pytest.raises(ResultFormatError):
        memory_breakdown({"schema": "other"}, None)
    with pytest.raises(ResultFormatError):
        memory_breakdown(_records(iterations=[{"step": 1, "weights_bytes": -5}]), None)
    with pytest.raises(ResultFormatError):
        memory_breakdown(_records(iterations="no"), None)


def test_hook_snapshot_counts_exact_array_bytes():
    """Runs only where mxnet imports (.venv-mxnet): the hook's byte counts on a tiny Dense net."""
    mx = pytest.importorskip("mxnet")
    from mxnet import autograd, gluon

    from tbd.profilers.mxnet import memory_snapshot

    net = gluon.nn.Dense(3, in_units=5)
    net.initialize(ctx=mx.cpu())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    x = mx.nd.ones((2, 5))
    with autograd.record():
        loss = net(x).sum()
    loss.backward()
    trainer.step(2)
    snap = memory_snapshot(net, trainer, lambda: [x])
    params = 3 * 5 + 3  # weight [3, 5] + bias [3], float32
    assert snap == {"weights_bytes": params * 4, "gradients_bytes": params * 4,
                    "optimizer_state_bytes": params * 4, "input_bytes": 2 * 5 * 4}  # momentum per parameter


def test_hook_caveat_on_static_alloc_is_passed_on():
    rec = _records(reasons={"at_peak": "1 hybridized block(s) use static_alloc: ..."})
    m = memory_breakdown(rec, _trace([120], [100]))
    assert m.allocator_peak == 4000 + 3000 + 3700 + 100
    assert "static_alloc" in m.reasons["at_peak"] and "static_alloc" in m.reasons["allocator_peak"]
