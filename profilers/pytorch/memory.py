"""Record what PyTorch memory belongs to, around the traced iterations (runs in the runner child).

`MemoryTracker` watches the trace window only and writes a JSON-ready dict (`records()`, saved by
the hook as memory.json). `analysis.memory.pytorch.memory_breakdown` turns it, with the trace's allocator
events, into `tbd.core.profile_result.Memory`. What is recorded, and why:

- weights: every unique parameter storage (data_ptr, nbytes), from the model or, when no model is
  given, the optimizers' param_groups. Bytes are storage bytes, deduplicated by data_ptr, so a
  tied parameter counts once.
- gradients: per iteration, the unique storages of `.grad`, caught by
  `register_post_accumulate_grad_hook` (so grads a workload sets to None inside the step are still
  seen) and read again at the iteration's end.
- feature maps: every tensor autograd saves for backward passes through
  `torch.autograd.graph.saved_tensors_hooks`. The pack hook returns a small holder with a
  *detached* alias of the tensor (no grad_fn, so no reference cycle through the graph; autograd
  restores the grad_fn itself on unpack) and a `weakref.finalize` on that holder: autograd owns
  the holder until the saved variable is freed (after backward, or when the graph dies), so the
  finalizer marks the release. Storages are counted once however many ops save them
  (reference counted by data_ptr). Parameter and input-batch storages are excluded (they are
  weights and dynamic). Per iteration the peak of live saved bytes is kept. Limits: a workload's
  own saved_tensors_hooks (activation checkpointing, offloading) take precedence inside their
  context, so tensors saved there are not seen.
- optimizer state: unique tensor storages in `optimizer.state` (one optimizer or several, e.g.
  WGAN's two), read at the iteration's end.
- inputs: unique storages of `inputs_fn()` read at the iteration's start and end (a workload that
  builds its batch inside step() shows the previous batch at the start).
- window_start: the same address lists taken as the first traced iteration begins, so the parent
  can name allocations made before the window, which have no alloc event in the trace.

`torch_memory_cross_check(prof)` summarises PyTorch's own (private) memory profiler categories;
any failure gives {"value": None, "reason": ...}. It needs the profiler run with
profile_memory=True, record_shapes=True and with_stack=True.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any, Callable, Iterable, Iterator

import torch

from tbd.core import rundir

RECORDS_SCHEMA = rundir.PYTORCH_MEMORY_SCHEMA

#: torch.profiler._memory_profiler.Category name -> tbd category it corresponds to.
TORCH_CATEGORY_MAP = {
    "parameter": "weights",
    "gradient": "gradients",
    "activation": "feature_maps",
    "temporary": "workspace",
    "optimizer_state": "dynamic",
    "input": "dynamic",
    "autograd_detail": "dynamic",
    "unknown": "unattributed",
}


def _storage(t: torch.Tensor) -> tuple[int, int] | None:
    """(data_ptr, nbytes) of a tensor's storage; None for tensors without one (sparse, meta).

    A sharded DTensor (FSDP's parameters and gradients) is counted by its local shard: the bytes
    this rank holds.
    """
    try:
        if hasattr(t, "to_local") and hasattr(t, "device_mesh"):
            t = t.to_local()
        s = t.untyped_storage()
        return int(s.data_ptr()), int(s.nbytes())
    except (RuntimeError, NotImplementedError):
        return None


def _unique_storages(tensors: Iterable[Any]) -> dict[int, int]:
    """data_ptr -> nbytes over the tensors' storages, each storage once; non-tensors skipped."""
    out: dict[int, int] = {}
    for t in tensors:
        if isinstance(t, torch.Tensor):
            st = _storage(t)
            if st is not None and st[1] > 0:
                out[st[0]] = st[1]
    return out


def _pairs(storages: dict[int, int]) -> list[list[int]]:
    return [[addr, n] for addr, n in sorted(storages.items())]


def _note_grad(p: torch.Tensor, grads: dict[int, int], grad_of: dict[int, tuple[int, int]]) -> None:
    """Remember p.grad's storage: its address (grads) and as p's latest grad (grad_of)."""
    st = _storage(p.grad) if p.grad is not None else None
    if st is not None:
        grads[st[0]] = st[1]
        grad_of[id(p)] = st


class _Saved:
    """What the pack hook hands autograd: the finalizer on it marks the saved tensor's release."""

    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor


class MemoryTracker:
    """Records weights, gradients, saved tensors, optimizer state and inputs per traced iteration.

    model: nn.Module or None; optimizer: an optimizer, a sequence of them, or None; inputs_fn:
    callable returning the current batch's tensors (list) or None.
    """

    def __init__(self, model: torch.nn.Module | None, optimizer: Any = None,
                 inputs_fn: Callable[[], list | None] | None = None):
        if optimizer is None:
            self._optimizers: list = []
        elif isinstance(optimizer, (list, tuple)):
            self._optimizers = list(optimizer)
        else:
            self._optimizers = [optimizer]
        self._inputs_fn = inputs_fn
        self._params = self._find_params(model)
        self._reasons: dict[str, str] = {}
        if self._params is None:
            self._reasons["weights"] = self._reasons["gradients"] = "no model given"
        if not self._optimizers:
            self._reasons["optimizer_state"] = "no optimizer given"
        if inputs_fn is None:
            self._reasons["inputs"] = "no inputs_fn given"
        self._live_saved: dict[int, list[int]] = {}  # data_ptr -> [nbytes, holders alive]
        self._live_saved_bytes = 0
        self._iterations: list[dict] = []
        self._window_start: dict | None = None
        self._saved_without_storage = 0

    def _find_params(self, model: torch.nn.Module | None) -> list[torch.nn.Parameter] | None:
        if model is not None:
            return list(model.parameters())  # parameters() already yields a tied parameter once
        if self._optimizers:
            seen: dict[int, torch.nn.Parameter] = {}
            for opt in self._optimizers:
                for group in opt.param_groups:
                    for p in group["params"]:
                        seen.setdefault(id(p), p)
            return list(seen.values())
        return None

    def _weights(self) -> dict[int, int]:
        return _unique_storages(self._params or [])

    def _optimizer_state(self) -> dict[int, int]:
        tensors = []
        for opt in self._optimizers:
            for state in opt.state.values():
                tensors.extend(v for v in state.values() if isinstance(v, torch.Tensor))
        return _unique_storages(tensors)

    def _inputs(self) -> dict[int, int]:
        if self._inputs_fn is None:
            return {}
        batch = self._inputs_fn()
        return _unique_storages(batch or [])

    def _grads(self) -> dict[int, int]:
        return _unique_storages(p.grad for p in self._params or [] if p.grad is not None)

    @contextlib.contextmanager
    def iteration(self, step_number: int) -> Iterator[None]:
        """Watch one traced iteration; `step_number` is the ProfilerStep number Kineto gives it."""
        weights = self._weights()
        inputs = self._inputs()
        if self._window_start is None:
            self._window_start = {"weights": _pairs(weights), "gradients": _pairs(self._grads()),
                                  "optimizer_state": _pairs(self._optimizer_state()),
                                  "inputs": _pairs(inputs)}
        excluded = set(weights) | set(inputs)
        saved: dict[int, int] = {}
        grads: dict[int, int] = {}  # every grad storage seen: addresses for the parent
        grad_of: dict[int, tuple[int, int]] = {}  # id(param) -> its latest grad storage
        peak = [self._live_saved_bytes]

        def pack(t: torch.Tensor) -> _Saved:
            holder = _Saved(t.detach())
            st = _storage(t)
            if st is None:
                self._saved_without_storage += 1
            elif st[0] not in excluded and st[1] > 0:
                saved[st[0]] = st[1]
                self._hold(st, holder)
                peak[0] = max(peak[0], self._live_saved_bytes)
            return holder

        def grad_hook(p: torch.Tensor) -> None:
            _note_grad(p, grads, grad_of)

        handles = [p.register_post_accumulate_grad_hook(grad_hook)
                   for p in self._params or [] if p.requires_grad]
        try:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda h: h.tensor):
                yield
        finally:
            for h in handles:
                h.remove()
        for p in self._params or []:
            _note_grad(p, grads, grad_of)
        inputs.update(self._inputs())
        # A workload that backpropagates several times per iteration (WGAN's critic) may get new
        # grad storages each time: the category counts each parameter's latest grad, once per storage.
        grad_bytes = sum(dict(grad_of.values()).values())
        self._iterations.append(self._iteration_record(step_number, peak[0], saved, grads, grad_bytes, inputs))

    def _hold(self, st: tuple[int, int], holder: _Saved) -> None:
        """Count one more holder of a saved storage; its finalizer releases it."""
        addr, nbytes = st
        entry = self._live_saved.get(addr)
        if entry is None:
            self._live_saved[addr] = entry = [nbytes, 0]
            self._live_saved_bytes += nbytes
        entry[1] += 1
        weakref.finalize(holder, self._release, addr)

    def _release(self, addr: int) -> None:
        entry = self._live_saved.get(addr)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self._live_saved_bytes -= entry[0]
            del self._live_saved[addr]

    def _iteration_record(self, step: int, fm_peak: int, saved: dict, grads: dict, grad_bytes: int,
                          inputs: dict) -> dict:
        opt_state = self._optimizer_state()
        return {
            "step": int(step),
            "feature_map_peak_bytes": int(fm_peak),
            "gradient_bytes": None if self._params is None else int(grad_bytes),
            "optimizer_state_bytes": sum(opt_state.values()) if self._optimizers else None,
            "input_bytes": sum(inputs.values()) if self._inputs_fn is not None else None,
            "saved": _pairs(saved),
            "gradients": _pairs(grads),
            "optimizer_state": _pairs(opt_state),
            "inputs": _pairs(inputs),
        }

    def records(self) -> dict:
        """JSON-ready dict of everything recorded (schema RECORDS_SCHEMA); see the module docstring."""
        weights = self._weights()
        device_index = self._device_index()
        reasons = dict(self._reasons)
        if self._saved_without_storage:
            reasons["feature_maps"] = (f"{self._saved_without_storage} saved tensors had no storage "
                                       "(sparse or meta) and are not counted")
        return {
            "schema": RECORDS_SCHEMA,
            "device_index": device_index,
            "weights_bytes": None if self._params is None else sum(weights.values()),
            "weights": _pairs(weights),
            "window_start": self._window_start,
            "iterations": list(self._iterations),
            "reasons": reasons,
        }

    def _device_index(self) -> int | None:
        """-1 for CPU, the CUDA ordinal, or None when neither params nor inputs tell."""
        tensors = list(self._params or [])
        if not tensors and self._inputs_fn is not None:
            tensors = [t for t in (self._inputs_fn() or []) if isinstance(t, torch.Tensor)]
        for t in tensors:
            if t.device.type == "cpu":
                return -1
            if t.device.type == "cuda":
                return int(t.device.index or 0)
        return None


def torch_memory_cross_check(prof: Any, device: str | None = None) -> dict:
    """PyTorch's memory-profiler categories for a finished torch.profiler run, in bytes.

    Returns {"source", "device", "peak_bytes": {torch category: its own peak},
    "at_peak": {torch category: live bytes at torch's total peak}, "total_peak_bytes",
    "maps_to": TORCH_CATEGORY_MAP}, or {"value": None, "reason": str} when the private API fails.
    `device` ("cpu", "cuda:0"): default the first CUDA device with memory events, else "cpu".
    """
    try:
        from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, MemoryProfileTimeline

        timeline = MemoryProfileTimeline(prof._memory_profile())
        if device is None:
            cuda = sorted({str(key.device) for _, _, (key, _), _ in timeline.timeline
                           if key.device.type == "cuda"})
            device = cuda[0] if cuda else "cpu"
        _, sizes = timeline._coalesce_timeline(device)
    except Exception as exc:  # a private API: any change in it must not break a run
        return {"value": None, "reason": f"torch memory profiler failed: {type(exc).__name__}: {exc}"}
    if not sizes:
        return {"value": None, "reason": f"torch memory profiler saw no tensors on {device}"}
    # sizes rows: [unused, one column per category in _CATEGORY_TO_INDEX order]; None = unknown.
    names = {idx + 1: ("unknown" if cat is None else cat.name.lower()) for cat, idx in _CATEGORY_TO_INDEX.items()}
    totals = [sum(row[1:]) for row in sizes]
    at = max(range(len(totals)), key=totals.__getitem__)
    return {
        "source": "torch.profiler._memory_profiler",
        "device": device,
        "peak_bytes": {name: int(max(row[i] for row in sizes)) for i, name in names.items()},
        "at_peak": {name: int(sizes[at][i]) for i, name in names.items()},
        "total_peak_bytes": int(totals[at]),
        "maps_to": dict(TORCH_CATEGORY_MAP),
    }
