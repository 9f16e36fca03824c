"""Memory by category: the PyTorch tracker (profilers/pytorch/memory.py) and its analysis (analysis/memory/pytorch.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from tbd.analysis.memory import pytorch as am
from tbd.core.errors import ResultFormatError, TbdError
from tbd.core.profile_result import Memory
from tbd.core.records import KernelTable, MemoryEvents, OpTable, StepSpan, TraceRecords
from tbd.profilers.pytorch.memory import RECORDS_SCHEMA, MemoryTracker, torch_memory_cross_check

F32 = 4  # bytes per float32


def _step(model, opt, x, loss_fn):
    if opt is not None:
        opt.zero_grad()
    loss_fn(model(x)).backward()
    if opt is not None:
        opt.step()


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


class _ConvNet(torch.nn.Module):
    """conv + bn + linear, with the last two linears sharing one weight (tied)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 2, 3)  # weight 2*1*3*3, bias 2
        self.bn = torch.nn.BatchNorm2d(2)  # weight 2, bias 2
        self.fc = torch.nn.Linear(2, 3)  # weight 2*3, bias 3
        self.head = torch.nn.Linear(3, 3, bias=False)  # weight 3*3
        self.head2 = torch.nn.Linear(3, 3, bias=False)
        self.head2.weight = self.head.weight  # tied: one storage

    def forward(self, x):
        h = self.bn(self.conv(x)).relu().mean(dim=(2, 3))
        return self.head2(self.head(self.fc(h)))


def test_weights_and_gradients_exact_with_tied_and_frozen_params():
    model = _ConvNet()
    model.bn.weight.requires_grad_(False)  # frozen: weights, but no gradient
    x = torch.randn(2, 1, 5, 5)
    tracker = MemoryTracker(model, None, lambda: [x])
    with tracker.iteration(0):
        _step(model, None, x, lambda y: y.sum())
    rec = tracker.records()
    assert rec["weights_bytes"] == (2 * 1 * 3 * 3 + 2 + 2 + 2 + 2 * 3 + 3 + 3 * 3) * F32
    assert rec["weights_bytes"] == sum(p.numel() * p.element_size() for p in model.parameters())
    assert rec["iterations"][0]["gradient_bytes"] == rec["weights_bytes"] - 2 * F32
    mem = am.memory_breakdown(rec, None, None)
    assert (mem.weights, mem.gradients) == (rec["weights_bytes"], rec["weights_bytes"] - 2 * F32)
    assert mem.workspace is None and "no trace" in mem.reasons["workspace"]


def test_feature_maps_hand_count_excludes_inputs_and_params_and_dedupes():
    # Linear(4,8) -> ReLU -> Linear(8,2), batch 3, loss = out.pow(2).sum(). Autograd saves:
    # addmm#1: the input x (an input: excluded); relu: its (3,8) result; addmm#2: the same (3,8)
    # tensor (counted once) and W2.t() (a parameter: excluded); pow: out (3,2); sum: nothing.
    model, x = _mlp(), torch.randn(3, 4)
    tracker = MemoryTracker(model, None, lambda: [x])
    with tracker.iteration(0):
        _step(model, None, x, lambda y: y.pow(2).sum())
    it = tracker.records()["iterations"][0]
    assert it["feature_map_peak_bytes"] == (3 * 8 + 3 * 2) * F32
    assert sorted(n for _, n in it["saved"]) == [3 * 2 * F32, 3 * 8 * F32]
    # Without inputs_fn the batch is not known as an input, so it counts as a saved storage.
    bare = MemoryTracker(model, None, None)
    with bare.iteration(0):
        _step(model, None, x, lambda y: y.pow(2).sum())
    assert bare.records()["iterations"][0]["feature_map_peak_bytes"] == (3 * 8 + 3 * 2 + 3 * 4) * F32
    # All saved storages were released after backward.
    assert tracker._live_saved_bytes == 0 and bare._live_saved_bytes == 0


@pytest.mark.parametrize("make_opt, per_param", [
    (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9), lambda p: p.numel() * F32),  # momentum buffer
    # Adam: exp_avg, exp_avg_sq, and `step`, a float32 scalar tensor per parameter in torch 2.x.
    (lambda ps: torch.optim.Adam(ps), lambda p: 2 * p.numel() * F32 + F32),
])
def test_optimizer_state_bytes(make_opt, per_param):
    model, x = _mlp(), torch.randn(3, 4)
    opt = make_opt(model.parameters())
    tracker = MemoryTracker(model, opt, lambda: [x])
    with tracker.iteration(5):
        _step(model, opt, x, lambda y: y.sum())
    it = tracker.records()["iterations"][0]
    assert it["step"] == 5
    assert it["optimizer_state_bytes"] == sum(per_param(p) for p in model.parameters())
    assert it["input_bytes"] == 3 * 4 * F32


def test_several_optimizers_and_no_model():
    model, x = _mlp(), torch.randn(3, 4)
    opts = [torch.optim.SGD(model[0].parameters(), lr=0.1, momentum=0.9),
            torch.optim.SGD(model[2].parameters(), lr=0.1, momentum=0.9)]
    tracker = MemoryTracker(None, opts, None)  # params come from the optimizers
    with tracker.iteration(0):
        for o in opts:
            o.zero_grad()
        model(x).sum().backward()
        for o in opts:
            o.step()
    rec = tracker.records()
    assert rec["weights_bytes"] == (4 * 8 + 8 + 8 * 2 + 2) * F32
    assert rec["iterations"][0]["optimizer_state_bytes"] == (4 * 8 + 8 + 8 * 2 + 2) * F32
    nothing = MemoryTracker(None, None, None)
    with nothing.iteration(0):
        _step(model, None, x, lambda y: y.sum())
    mem = am.memory_breakdown(nothing.records(), None, None)
    assert mem.weights is None and mem.reasons["weights"] == "no model given"
    assert mem.gradients is None and mem.reasons["gradients"] == "no model given"


# --- hand-built allocator events -------------------------------------------------------------
# A CUDA-like device 0 (its allocator counts blocks made before the window).
# Ops: A [0, 100] holds B [10, 40]; C [50, 90]. One traced iteration, ProfilerStep#7 [-10, 130].
# Before the window: 1000 B live = weights 600 (0x1000) + optimizer state 300 (0x2000) + an
# unknown 100 B block (0x3000).
_EVENTS = [  # (ts, addr, bytes)
    (-5, 0xA, 200), (-3, 0xA, -200),  # short-lived reuse of the saved address, outside every op: dynamic
    (5, 0xA, 200),  # the saved tensor (longest-lived allocation at 0xA in step 7): feature map
    (15, 0xB, 50), (30, 0xB, -50),  # inside B, freed before B ends: workspace
    (45, 0xC, 80),  # innermost op A, freed at 120 after A ended: dynamic
    (60, 0xD, 30),  # inside C, freed at 70: workspace
    (62, 0xE, 40),  # a grad: gradients (never freed)
    (70, 0xD, -30),
    (85, 0x3000, -100),  # the unknown pre-window block is freed
    (120, 0xC, -80),
]
_PRE = 1000


def _trace(events=_EVENTS, pre=_PRE, device=0):
    ts, addr, b = (np.array(c) for c in zip(*events))
    mem = MemoryEvents(ts.astype(np.int64), addr.astype(np.uint64), b.astype(np.int64),
                       (pre + np.cumsum(b)).astype(np.int64), np.full(len(ts), device, dtype=np.int64))
    ops = OpTable(np.array(["ProfilerStep#7", "A", "B", "C"], dtype=object), np.array([-10, 0, 10, 50]),
                  np.array([130, 100, 40, 90]), np.zeros(4, dtype=np.int64))
    return TraceRecords("hand", "cpu" if device < 0 else "cuda", KernelTable.empty(), np.array([]), np.array([]),
                        (StepSpan(7, -10, 130, 130),), -10, 130, ops, mem)


def _records(**extra):
    rec = {
        "schema": RECORDS_SCHEMA, "device_index": 0, "weights_bytes": 600, "weights": [[0x1000, 600]],
        "window_start": {"weights": [[0x1000, 600]], "gradients": [], "optimizer_state": [[0x2000, 300]],
                         "inputs": []},
        "iterations": [{"step": 7, "feature_map_peak_bytes": 200, "gradient_bytes": 40,
                        "optimizer_state_bytes": 300, "input_bytes": 0, "saved": [[0xA, 200]],
                        "gradients": [[0xE, 40]], "optimizer_state": [[0x2000, 300]], "inputs": []}],
        "reasons": {},
    }
    rec.update(extra)
    return rec


def test_workspace_and_at_peak_on_hand_built_events():
    mem = am.memory_breakdown(_records(), _trace(), None)
    assert mem.workspace == 50  # 0xB alone; 0xD (30) comes after 0xB is freed
    # optimizer state + inputs + the peak of other dynamic bytes: 0xA's short-lived 200 B at t=-5
    # outweighs 0xC's 80 B later.
    assert mem.dynamic == 300 + 0 + max(200, 80)
    assert (mem.weights, mem.gradients, mem.feature_maps) == (600, 40, 200)
    # Peak after the alloc at t=62: 1000 + 200 + 80 + 30 + 40.
    assert mem.allocator_peak == 1000 + 200 + 80 + 30 + 40
    assert mem.at_peak == {"weights": 600, "gradients": 40, "feature_maps": 200, "workspace": 30,
                           "dynamic": 300 + 80, "unattributed": 100}
    assert sum(mem.at_peak.values()) == mem.allocator_peak
    assert mem.reasons == {}


def test_at_peak_prefers_cuda_max_allocated_and_still_sums():
    mem = am.memory_breakdown(_records(cuda_max_allocated=1400), _trace(), None)
    assert mem.allocator_peak == 1400
    assert mem.at_peak["unattributed"] == 1400 - (600 + 40 + 200 + 30 + 380)
    assert sum(mem.at_peak.values()) == 1400


def test_cpu_allocator_adds_the_persistent_tensors_as_a_baseline():
    events = [e for e in _EVENTS if e[1] != 0x3000]  # the CPU reporter never sees old blocks' frees
    mem = am.memory_breakdown(_records(device_index=-1), _trace(events, pre=0, device=-1), None)
    # the traced blocks' peak, plus weights (600) and optimizer state (300) held from before the window
    assert mem.allocator_peak == (200 + 80 + 30 + 40) + 600 + 300
    assert mem.at_peak == {"weights": 600, "gradients": 40, "feature_maps": 200, "workspace": 30,
                           "dynamic": 80 + 300, "unattributed": 0}
    assert "added to allocator_peak" in mem.reasons["at_peak"]
    # Blocks made after tracing began but before the window are counted but cannot be named.
    mem = am.memory_breakdown(_records(device_index=-1), _trace(events, pre=70, device=-1), None)
    assert mem.at_peak["unattributed"] == 70 and mem.at_peak["weights"] == 600
    assert sum(mem.at_peak.values()) == mem.allocator_peak == 70 + 200 + 80 + 30 + 40 + 600 + 300


def test_trace_without_records_measures_workspace_only():
    mem = am.memory_breakdown(None, _trace(), None)
    assert (mem.weights, mem.gradients, mem.feature_maps, mem.dynamic) == (None, None, None, None)
    assert mem.workspace == 50 and mem.allocator_peak == 1350
    assert mem.at_peak == {"weights": None, "gradients": None, "feature_maps": None, "workspace": 30,
                           "dynamic": None, "unattributed": 1350 - 30}
    assert all(mem.reasons[c] for c in ("weights", "gradients", "feature_maps", "dynamic"))


def test_innermost_op_and_transient_rules():
    trace = _trace()
    ends = am.innermost_op_end_ns(np.array([-5, 5, 15, 45, 60, 95, 200]), trace.ops)
    assert ends.tolist() == [-1, 100, 40, 100, 90, 100, -1]  # ProfilerStep# spans are not ops
    ev = am.device_events(trace.memory, 0)
    free_idx, orphan = am.pair_frees(ev)
    assert orphan.tolist() == [e[1] == 0x3000 for e in _EVENTS]
    assert am.transient_mask(ev, free_idx, trace.ops).tolist() == [e[1] in (0xB, 0xD) and e[2] > 0
                                                                  for e in _EVENTS]


def test_no_memory_events_gives_reasons():
    trace = _trace()
    empty = TraceRecords("hand", "cpu", KernelTable.empty(), np.array([]), np.array([]), trace.steps,
                         -10, 130, trace.ops, None)
    mem = am.memory_breakdown(_records(), empty, None)
    assert mem.workspace is None and mem.dynamic is None and mem.allocator_peak is None
    assert "no allocator events" in mem.reasons["workspace"]
    assert "optimizer state 300 B" in mem.reasons["dynamic"]
    assert set(mem.at_peak) == {"weights", "gradients", "feature_maps", "workspace", "dynamic", "unattributed"}


def test_bad_records_raise():
    with pytest.raises(ResultFormatError):
        am.memory_breakdown({"schema": "other"}, None, None)
    with pytest.raises(TbdError):
        am.memory_breakdown(_records(iterations=[{"step": "x"}]), None, None)
    assert am.RECORDS_SCHEMA == RECORDS_SCHEMA


# --- one real run ------------------------------------------------------------------------------

def _from_chrome_trace(path):
    """MemoryEvents, OpTable and StepSpans straight from an exported chrome trace (us -> ns)."""
    events = json.load(open(path))["traceEvents"]
    ns = lambda us: int(round(us * 1000))  # noqa: E731
    mem = [e for e in events if e.get("name") == "[memory]"]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    memory = MemoryEvents(np.array([ns(e["ts"]) for e in mem], dtype=np.int64),
                          np.array([e["args"]["Addr"] for e in mem], dtype=np.uint64),
                          np.array([e["args"]["Bytes"] for e in mem], dtype=np.int64),
                          np.array([e["args"]["Total Allocated"] for e in mem], dtype=np.int64),
                          np.array([e["args"]["Device Id"] for e in mem], dtype=np.int64))
    table = OpTable(np.array([e["name"] for e in ops], dtype=object),
                    np.array([ns(e["ts"]) for e in ops], dtype=np.int64),
                    np.array([ns(e["ts"] + e["dur"]) for e in ops], dtype=np.int64),
                    np.array([e["tid"] for e in ops], dtype=np.int64))
    spans = tuple(StepSpan(int(e["name"].split("#")[1]), ns(e["ts"]), ns(e["ts"] + e["dur"]),
                           ns(e["ts"] + e["dur"])) for e in steps)
    return TraceRecords(str(path), "cpu", KernelTable.empty(), np.array([]), np.array([]), spans,
                        0, 0, table, memory)


def test_real_cpu_run_matches_tracker_and_cross_check(tmp_path):
    model, x = _mlp(), torch.randn(3, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss = lambda y: y.pow(2).sum()  # noqa: E731
    _step(model, opt, x, loss)  # warm-up: optimizer state exists before the window
    tracker = MemoryTracker(model, opt, lambda: [x])
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        for n in (1, 2):
            with record_function(f"ProfilerStep#{n}"), tracker.iteration(n):
                _step(model, opt, x, loss)
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    trace = _from_chrome_trace(tmp_path / "trace.json")
    assert len(trace.memory) > 0 and [s.number for s in trace.steps] == [1, 2]
    rec = tracker.records()
    mem = am.memory_breakdown(rec, trace, torch_memory_cross_check(prof))
    assert isinstance(mem, Memory)
    weights = (4 * 8 + 8 + 8 * 2 + 2) * F32
    assert (mem.weights, mem.gradients) == (weights, weights)
    assert mem.feature_maps == (3 * 8 + 3 * 2) * F32
    assert mem.dynamic >= weights + 3 * 4 * F32  # momentum buffers + the batch, plus other allocations
    # the traced blocks' peak plus the persistent baseline: weights, momentum buffers, the batch
    baseline = weights + weights + 3 * 4 * F32
    assert sum(mem.at_peak.values()) == mem.allocator_peak == int(trace.memory.total_allocated.max()) + baseline
    # Address matching finds every saved storage's allocation: the feature-map line of the
    # allocator timeline peaks at exactly the tracker's count.
    ev = am.device_events(trace.memory, -1)
    free_idx, _ = am.pair_frees(ev)
    labels = am.allocation_labels(ev, free_idx, am.transient_mask(ev, free_idx, trace.ops), rec, trace.steps)
    live = am.category_timeline(ev, free_idx, labels)
    assert live[:, am.FEATURE_MAPS].max() == (3 * 8 + 3 * 2) * F32
    cross = mem.cross_check
    assert "peak_bytes" in cross or cross["value"] is None and cross["reason"]
    if "peak_bytes" in cross:
        assert set(cross["peak_bytes"]) == set(cross["maps_to"])
        assert cross["peak_bytes"]["parameter"] == weights
        assert sum(cross["at_peak"].values()) == cross["total_peak_bytes"]


def test_cross_check_failure_is_a_reason():
    out = torch_memory_cross_check(object())
    assert out["value"] is None and "torch memory profiler failed" in out["reason"]
