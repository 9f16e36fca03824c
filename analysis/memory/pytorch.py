"""Memory by category (docs/architecture.md, "memory by category"): pure functions over tracker records and trace events.

Inputs: the dict `profilers.pytorch.memory.MemoryTracker.records()` wrote (addresses and bytes per
traced iteration), the trace window's allocator events (`MemoryEvents`) and ops (`OpTable`).

Each category's own peak over the traced iterations (the paper's measure):
- weights: Σ bytes of unique parameter storages (exact, from the tracker).
- gradients: max over iterations of Σ bytes of the unique `.grad` storages (exact; a parameter's
  latest grad, so several backward passes in one iteration are not double counted).
- feature_maps: max over iterations of the tracker's peak of live bytes of storages saved for
  backward, parameters and input batch excluded, each storage once (exact).
- workspace (from the trace): peak of live bytes of transient allocations. An allocation is transient when the
  allocator frees it before the innermost op that made it ends. Innermost op: among the ops
  whose [start, end] holds the allocation's time, the one that started last (ops on all threads;
  `ProfilerStep#` spans excluded). Null when the trace has no allocator events.
- dynamic: optimizer state + input batch (exact, the tracker's bytes at the end of each
  iteration, max over iterations) + the peak of live bytes of "other dynamic" allocations: every
  allocation made in the trace window that is no other category (not transient, not a saved
  storage, grad, parameter, optimizer-state or input storage). That is the contract's "allocated during
  iterations and not in the others", so activation gradients, losses and unsaved intermediates
  land here. Optimizer state and inputs are held across the whole iteration, so their bytes add
  to the other part's peak. Null without allocator events; a part that could not be measured (no
  optimizer given) is left out and `reasons["dynamic"]` says so.

Allocator peak and the split at it:
- allocator_peak: max of the allocator's total_allocated over the window, or the hook's
  `cuda_max_allocated` (torch.cuda.max_memory_allocated reset at the window start) when present.
- at_peak: live bytes per category at the event where total_allocated peaks. Allocations made in
  the window carry the category of their alloc event: workspace if transient, else matched by
  address against that iteration's recorded storages (saved -> feature_maps, grads -> gradients,
  parameters -> weights, optimizer state and inputs -> dynamic), else dynamic. Allocations made
  before the window have no alloc event; their live total is (total_allocated - bytes) of the
  first event minus frees of addresses never allocated in the window. Of that, the storages the
  tracker saw as the window began (weights, grads, optimizer state, inputs) are attributed by
  address on CUDA, unless their bytes exceed what the allocator counts (then none are, with a
  reason). On the CPU the profiler's reporter counts only blocks made since tracing began and
  records no free of an older block, so the storages that persist through every iteration
  (weights, optimizer state, inputs: exact bytes from the tracker) are added to allocator_peak
  and to the split as a constant baseline; other older tensors are not seen, and
  `reasons["at_peak"]` says so.
  `unattributed` = allocator_peak - Σ categories, so the parts add up to the peak exactly.
- Without tracker records (a trace analysed on its own) only workspace can be told apart: the
  other categories are null with a reason, and at_peak holds workspace and unattributed.

Residual ambiguity: allocators reuse addresses. A recorded storage (addr, bytes) is matched, within
the iteration (ProfilerStep span) that recorded it, to the longest-lived allocation of that
address and a compatible size (equal on the CPU; at least the storage's bytes on CUDA, whose
caching allocator rounds blocks up), because saved tensors and grads outlive the short-lived
temporaries that reuse their addresses. Two long-lived allocations at one address in one
iteration would still be confused. CUDA block rounding of pre-window storages stays unattributed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from tbd.core import rundir
from tbd.core.errors import ResultFormatError
from tbd.core.profile_result import MEMORY_CATEGORIES, Memory
from tbd.core.records import MemoryEvents, OpTable, StepSpan, TraceRecords

RECORDS_SCHEMA = rundir.PYTORCH_MEMORY_SCHEMA  # written by profilers.pytorch.memory.MemoryTracker

# Label codes for allocations on the timeline: the five categories, then dynamic storages the
# tracker knows exactly (optimizer state, inputs), kept apart so they are not counted twice.
WEIGHTS, GRADIENTS, FEATURE_MAPS, WORKSPACE, DYNAMIC, DYNAMIC_KNOWN = range(6)
_PRIORITY = (("saved", FEATURE_MAPS), ("gradients", GRADIENTS), ("weights", WEIGHTS),
             ("optimizer_state", DYNAMIC_KNOWN), ("inputs", DYNAMIC_KNOWN))


def memory_breakdown(records: dict | None, trace: TraceRecords | None, cross_check: dict | None) -> Memory:
    """Memory by category in bytes (see the module docstring for every rule).

    records: the tracker's dict, or None when there is none (a trace analysed on its own: only
    workspace, the allocator peak and workspace at the peak can be measured). trace: the trace
    window's records, or None. cross_check: passed through (torch's own categories), or None.
    """
    if records is not None:
        _check_records(records)
    if cross_check is not None and not isinstance(cross_check, dict):
        raise ResultFormatError("memory cross-check is not a JSON object")
    reasons: dict[str, str] = {}
    cats = _tracker_categories(records, reasons)
    device = _device(records, trace) if trace is not None else None
    events = None if trace is None else device_events(trace.memory, device)
    cuda_max = None if records is None else records.get("cuda_max_allocated")
    problem = allocator_totals_problem(events) if events is not None and len(events) else None
    if events is None or len(events) == 0 or problem:
        why = problem or ("no trace" if trace is None else "the trace has no allocator events"
                          + ("" if device is None else f" for device {device}"))
        reasons["workspace"] = reasons["at_peak"] = why
        reasons["dynamic"] = why + ("" if records is None else _known_dynamic_note(records["iterations"]))
        at_peak = {c: None for c in (*MEMORY_CATEGORIES, "unattributed")}
        return _labelled(Memory(*cats, None, None, cuda_max, at_peak, reasons, cross_check))
    free_idx, orphan = pair_frees(events)
    transient = transient_mask(events, free_idx, trace.ops)
    labels = allocation_labels(events, free_idx, transient, records, trace.steps)
    live = category_timeline(events, free_idx, labels)
    workspace = int(live[:, WORKSPACE].max())
    if records is None:
        dynamic = None
        reasons["dynamic"] = reasons["weights"]
    else:
        dynamic = _dynamic(records["iterations"], int(live[:, DYNAMIC].max()), records, reasons)
    peak_i = int(np.argmax(events.total_allocated))
    allocator_peak = int(events.total_allocated[peak_i]) if cuda_max is None else int(cuda_max)
    held = _cpu_held_before(records) if records is not None and int(events.device[0]) < 0 else {}
    # A constant baseline does not move the peak's instant, only its height.
    allocator_peak += sum(held.values())
    at_peak = _at_peak(events, orphan, live, peak_i, allocator_peak, records, reasons, held)
    return _labelled(Memory(*cats, workspace, dynamic, allocator_peak, at_peak, reasons, cross_check))


def allocator_totals_problem(events: MemoryEvents) -> str | None:
    """Why one device's allocator events cannot be believed, or None when they can.

    The allocator's live total never goes below zero, and right after an allocation it holds at
    least that allocation. A trace breaking either (a corrupt file, events of two processes mixed)
    would give a negative or meaningless peak, so memory from it is null with this reason.
    """
    total, nbytes = events.total_allocated, events.bytes
    if (total < 0).any():
        return f"the trace's allocator total goes negative ({int(total.min())} B): allocator events are inconsistent"
    if ((nbytes > 0) & (total < nbytes)).any():
        return "an allocation in the trace exceeds the allocator's total right after it: allocator events are inconsistent"
    return None


def _tracker_categories(records: dict | None, reasons: dict) -> tuple[int | None, int | None, int | None]:
    """(weights, gradients, feature_maps) from the tracker; None with reasons where unknown."""
    if records is None:
        for cat in ("weights", "gradients", "feature_maps"):
            reasons[cat] = "no memory records: the trace alone does not say which tensors are which"
        return None, None, None
    its = records["iterations"]
    weights = records.get("weights_bytes")
    if weights is None:
        reasons["weights"] = records["reasons"].get("weights", "weights were not recorded")
    gradients = _max_over(its, "gradient_bytes", "gradients", records, reasons)
    feature_maps = _max_over(its, "feature_map_peak_bytes", "feature_maps", records, reasons)
    if "feature_maps" in records["reasons"] and feature_maps is not None:
        reasons["feature_maps"] = records["reasons"]["feature_maps"]
    return weights, gradients, feature_maps


def _check_records(records: Any) -> None:
    if not isinstance(records, dict) or records.get("schema") != RECORDS_SCHEMA:
        raise ResultFormatError(f"memory records are not of schema {RECORDS_SCHEMA!r}")
    for key, kind in (("iterations", list), ("reasons", dict), ("weights", list)):
        if not isinstance(records.get(key), kind):
            raise ResultFormatError(f"memory records key '{key}' is missing or not a {kind.__name__}")
    for i, it in enumerate(records["iterations"]):
        if not isinstance(it, dict) or not isinstance(it.get("step"), int):
            raise ResultFormatError(f"memory records iteration {i} has no integer 'step'")


def _max_over(its: list[dict], key: str, category: str, records: dict, reasons: dict) -> int | None:
    """Max of an iteration field; None with a reason when no iteration measured it."""
    values = [it.get(key) for it in its]
    if not values or any(v is None for v in values):
        reasons[category] = records["reasons"].get(category) or "no traced iterations were recorded"
        return None
    return int(max(values))


def _known_dynamic_note(its: list[dict]) -> str:
    parts = [f"{name} {max(it[key] for it in its)} B"
             for name, key in (("optimizer state", "optimizer_state_bytes"), ("inputs", "input_bytes"))
             if its and all(it.get(key) is not None for it in its)]
    return f" (measured: {', '.join(parts)}; other dynamic allocations were not)" if parts else ""


def _dynamic(its: list[dict], other_peak: int, records: dict, reasons: dict) -> int:
    """Optimizer state + inputs (max over iterations) + peak of other dynamic allocations."""
    parts = (("optimizer_state_bytes", "optimizer_state", "optimizer state"), ("input_bytes", "inputs", "inputs"))
    keys = [k for k, _, _ in parts if its and all(it.get(k) is not None for it in its)]
    left_out = [f"{name}: {records['reasons'].get(rk, 'not recorded')}" for k, rk, name in parts if k not in keys]
    if left_out:
        reasons["dynamic"] = "leaves out " + "; ".join(left_out)
    known = max((sum(it[k] for k in keys) for it in its), default=0)
    return int(known + other_peak)


def _device(records: dict | None, trace: TraceRecords) -> int | None:
    """The device whose allocator events count: the tracker's, else the CPU for a CPU trace."""
    if records is not None and records.get("device_index") is not None:
        return int(records["device_index"])
    return -1 if trace.device_kind == "cpu" else None


def device_events(memory: MemoryEvents | None, device: int | None) -> MemoryEvents | None:
    """One device's events in time order (stable); device None: the CUDA device with most events."""
    if memory is None:
        return None
    dev = np.asarray(memory.device)
    if device is None:
        cuda = dev[dev >= 0]
        if len(cuda) == 0:
            return MemoryEvents(*(np.asarray(getattr(memory, f))[:0] for f in MemoryEvents.__dataclass_fields__))
        values, counts = np.unique(cuda, return_counts=True)
        device = int(values[np.argmax(counts)])
    keep = np.flatnonzero(dev == device)
    keep = keep[np.argsort(np.asarray(memory.ts_ns)[keep], kind="stable")]
    return MemoryEvents(**{f: np.asarray(getattr(memory, f))[keep] for f in MemoryEvents.__dataclass_fields__})


def pair_frees(events: MemoryEvents) -> tuple[np.ndarray, np.ndarray]:
    """For each event, the index of the free that ends it (allocs; -1 if never freed in the window).

    Returns (free_idx int64, orphan bool): orphan marks frees of addresses never allocated in the
    window, i.e. blocks made before it.

    Per address, in time order: a free ends the address's latest alloc when no free came between
    them (an alloc over a still-open one means the older one's free was lost: the newer is kept);
    otherwise it is an orphan. That is, a free pairs with the event just before it at its address
    when that event is an alloc; events of 0 bytes take no part.
    """
    n = len(events)
    free_idx = np.full(n, -1, dtype=np.int64)
    orphan = np.zeros(n, dtype=bool)
    nbytes = np.asarray(events.bytes)
    moved = np.flatnonzero(nbytes != 0)
    by_addr = moved[np.argsort(np.asarray(events.addr)[moved], kind="stable")]  # each address's events in order
    if not len(by_addr):
        return free_idx, orphan
    addr, sign = np.asarray(events.addr)[by_addr], nbytes[by_addr] > 0
    frees = np.flatnonzero(~sign)
    later = frees[frees > 0]
    paired = later[(addr[later] == addr[later - 1]) & sign[later - 1]]
    free_idx[by_addr[paired - 1]] = by_addr[paired]
    orphan[by_addr[frees]] = True
    orphan[by_addr[paired]] = False
    return free_idx, orphan


def innermost_op_end_ns(ts_ns: np.ndarray, ops: OpTable) -> np.ndarray:
    """End (ns) of the innermost op holding each time; -1 where no op holds it.

    Innermost: of the ops whose [start, end] holds the time (`ProfilerStep#` spans excluded), the
    one that started last; of those starting together, the shortest. Without a Python loop: only
    the ops that hold some queried time can be an answer, and those, ordered by start (longest
    first among equal starts), are searched for each time at once: the last op starting at or
    before it whose end reaches it, found by skipping from there towards earlier ops blocks of
    2^j ops whose longest end falls short (a table of block maxima per power of two).
    """
    ts = np.asarray(ts_ns, dtype=np.int64)
    out = np.full(len(ts), -1, dtype=np.int64)
    starts, ends = np.asarray(ops.start_ns, dtype=np.int64), np.asarray(ops.end_ns, dtype=np.int64)
    if not len(ts) or not len(starts):
        return out
    sorted_ts = np.sort(ts)
    first = np.minimum(np.searchsorted(sorted_ts, starts, side="left"), len(ts) - 1)  # the first time >= start
    held = np.flatnonzero((sorted_ts[first] >= starts) & (sorted_ts[first] <= ends))
    names = np.asarray(ops.name, dtype=object)[held].tolist()
    is_op = {n: not str(n).startswith("ProfilerStep#") for n in set(names)}  # once per distinct name
    held = held[np.fromiter(map(is_op.__getitem__, names), dtype=bool, count=len(names))]
    order = np.lexsort((-ends[held], starts[held]))  # by start; a parent before a child that starts with it
    starts, ends = starts[held][order], ends[held][order]
    pos = np.searchsorted(starts, ts, side="right")  # the ops [0, pos) start at or before each time
    block_max = [ends]  # block_max[j][i]: the latest end of the ops i .. i + 2^j - 1
    while (2 << (len(block_max) - 1)) <= len(ends):
        half = 1 << (len(block_max) - 1)
        block_max.append(np.maximum(block_max[-1][:-half], block_max[-1][half:]))
    for j in range(len(block_max) - 1, -1, -1):  # skip, largest blocks first, the ops that end before the time
        size = 1 << j
        at = np.flatnonzero(pos >= size)
        at = at[block_max[j][pos[at] - size] < ts[at]]
        pos[at] -= size
    found = np.flatnonzero(pos)
    out[found] = ends[pos[found] - 1]
    return out


def transient_mask(events: MemoryEvents, free_idx: np.ndarray, ops: OpTable) -> np.ndarray:
    """True for allocs freed before the innermost op that made them ends (workspace)."""
    op_end = innermost_op_end_ns(events.ts_ns, ops)
    freed = free_idx >= 0
    free_ts = np.where(freed, events.ts_ns[np.maximum(free_idx, 0)], 0)
    return (events.bytes > 0) & freed & (op_end >= 0) & (free_ts <= op_end)


def _step_of(ts_ns: np.ndarray, steps: tuple[StepSpan, ...]) -> np.ndarray:
    """ProfilerStep number holding each time, -1 outside every step."""
    if not steps:
        return np.full(len(ts_ns), -1, dtype=np.int64)
    spans = sorted(steps, key=lambda s: s.start_ns)
    starts = np.array([s.start_ns for s in spans], dtype=np.int64)
    ends = np.array([max(s.end_ns, s.host_end_ns) for s in spans], dtype=np.int64)
    numbers = np.array([s.number for s in spans], dtype=np.int64)
    k = np.searchsorted(starts, ts_ns, side="right") - 1
    inside = (k >= 0) & (ts_ns <= ends[np.maximum(k, 0)])
    return np.where(inside, numbers[np.maximum(k, 0)], -1)


def allocation_labels(events: MemoryEvents, free_idx: np.ndarray, transient: np.ndarray,
                      records: dict | None, steps: tuple[StepSpan, ...]) -> np.ndarray:
    """Category code (WEIGHTS..DYNAMIC_KNOWN) of each alloc event; -1 for frees."""
    labels = np.where(events.bytes > 0, DYNAMIC, -1).astype(np.int64)
    labels[transient] = WORKSPACE
    if records is None:
        return labels
    step = _step_of(events.ts_ns, steps)
    n = len(events)
    # Lifetime in events; never freed counts as longest. Used to pick among address reuses.
    life = np.where(free_idx >= 0, free_idx - np.arange(n), n + 1)
    cuda = bool(len(events)) and int(events.device[0]) >= 0
    by_step = {it["step"]: it for it in records["iterations"]}
    for number, it in by_step.items():
        cand = np.flatnonzero((step == number) & (labels == DYNAMIC))
        for key, code in _PRIORITY:
            pairs = records["weights"] if key == "weights" else it.get(key) or []
            for addr, nbytes in pairs:
                hit = cand[(events.addr[cand] == addr) & _size_ok(events.bytes[cand], nbytes, cuda)]
                hit = hit[labels[hit] == DYNAMIC]
                if len(hit):
                    labels[hit[np.argmax(life[hit])]] = code
    return labels


def _size_ok(alloc_bytes: np.ndarray, nbytes: int, cuda: bool) -> np.ndarray:
    """CPU blocks are the storage's exact size; CUDA caching-allocator blocks are rounded up."""
    return alloc_bytes >= nbytes if cuda else alloc_bytes == nbytes


def category_timeline(events: MemoryEvents, free_idx: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Live bytes per label code (columns WEIGHTS..DYNAMIC_KNOWN) after each event, window allocs only."""
    n = len(events)
    delta = np.zeros((n, DYNAMIC_KNOWN + 1), dtype=np.int64)
    alloc = np.flatnonzero(labels >= 0)
    np.add.at(delta, (alloc, labels[alloc]), events.bytes[alloc])
    freed = alloc[free_idx[alloc] >= 0]
    np.add.at(delta, (free_idx[freed], labels[freed]), -events.bytes[freed])
    return np.cumsum(delta, axis=0)


def _at_peak(events: MemoryEvents, orphan: np.ndarray, live: np.ndarray, p: int, allocator_peak: int,
             records: dict | None, reasons: dict, held: dict[str, int]) -> dict[str, int | None]:
    """Live bytes per category at event p; 'unattributed' makes them sum to allocator_peak."""
    row = live[p]
    if records is None:  # without addresses only transient allocations can be told apart
        out: dict[str, int | None] = {c: None for c in MEMORY_CATEGORIES}
        out["workspace"] = int(row[WORKSPACE])
        return _with_unattributed(out, allocator_peak, reasons)
    out = {"weights": int(row[WEIGHTS]), "gradients": int(row[GRADIENTS]),
           "feature_maps": int(row[FEATURE_MAPS]), "workspace": int(row[WORKSPACE]),
           "dynamic": int(row[DYNAMIC] + row[DYNAMIC_KNOWN])}
    pre_total = int(events.total_allocated[0] - events.bytes[0])
    gone = orphan[: p + 1]
    pre_live = pre_total + int(events.bytes[: p + 1][gone].sum())  # orphan frees carry negative bytes
    known = _pre_window_known(records, set(events.addr[: p + 1][gone].tolist()))
    if int(events.device[0]) < 0:
        # The CPU allocator's profiler reporter counts only blocks made since tracing began and
        # records no free of an older block. Weights, optimizer state and inputs persist through
        # every iteration (updated in place), so their exact bytes are added as a baseline; other
        # older tensors (the previous iteration's gradients until zero_grad frees them) are unseen.
        for cat, b in held.items():
            out[cat] += b
        reasons["at_peak"] = (f"CPU: the allocator's trace counts only blocks made while tracing; weights, "
                              f"optimizer state and inputs held from before ({sum(held.values())} B, exact "
                              "tensor sizes) are added to allocator_peak and to this split; other tensors made "
                              "before the window are not seen")
        if pre_live:
            reasons["at_peak"] += f"; {pre_live} B made after tracing began but before the window are unattributed"
    elif sum(known.values()) <= pre_live:
        for cat, b in known.items():
            out[cat] += b
    else:
        reasons["at_peak"] = (f"the allocator counts {pre_live} B made before the trace window but the "
                              f"tensors alive then hold {sum(known.values())} B, so pre-window tensors are "
                              "not attributed")
    return _with_unattributed(out, allocator_peak, reasons)


def _with_unattributed(out: dict[str, int | None], allocator_peak: int, reasons: dict) -> dict[str, int | None]:
    """`out` plus "unattributed" = allocator_peak - Σ known parts; null with a reason when that is negative."""
    unattributed = allocator_peak - sum(v for v in out.values() if v is not None)
    out["unattributed"] = unattributed if unattributed >= 0 else None
    if unattributed < 0:
        reasons["unattributed"] = (f"categories exceed the allocator peak by {-unattributed} B: the peak source and "
                                   "the trace disagree")
    return out


def _cpu_held_before(records: dict) -> dict[str, int]:
    """Bytes of the storages that persist across iterations (weights; optimizer state and inputs
    as dynamic), alive as the window began, each address once."""
    start = records.get("window_start") or {}
    seen: set[int] = set()
    out = {"weights": 0, "dynamic": 0}
    for key, cat in (("weights", "weights"), ("optimizer_state", "dynamic"), ("inputs", "dynamic")):
        for addr, nbytes in start.get(key) or []:
            if addr not in seen:
                seen.add(addr)
                out[cat] += int(nbytes)
    return out


def _pre_window_known(records: dict, freed: set[int]) -> dict[str, int]:
    """Bytes of storages alive as the window began, by category, each address once, minus freed ones."""
    start = records.get("window_start") or {}
    seen: set[int] = set(freed)
    out = {"weights": 0, "gradients": 0, "dynamic": 0}
    for key, cat in (("weights", "weights"), ("gradients", "gradients"),
                     ("optimizer_state", "dynamic"), ("inputs", "dynamic")):
        for addr, nbytes in start.get(key) or []:
            if addr not in seen:
                seen.add(addr)
                out[cat] += int(nbytes)
    return out


def _labelled(memory: Memory) -> Memory:
    """Every figure PyTorch gives is measured: the tracker's exact storages and the allocator's events."""
    known = [c for c in (*MEMORY_CATEGORIES, "allocator_peak") if getattr(memory, c) is not None]
    return replace(memory, sources={c: "measured" for c in known})

