"""The Workload: what a suite model (or a user's own loop) gives the framework hook, and
pool_workload, how a suite model builds one around its pool of synthetic batches."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Workload:
    """One training iteration and what it processes.

    `step()` runs one full training iteration (forward, backward, optimizer update) on the
    workload's own synthetic batch and returns the loss (a framework scalar; the hook does not
    read it on the hot path). A suite model keeps a small pool of pre-built synthetic batches on
    the device and cycles through them, so data loading never shows up in the profile.
    """

    name: str
    step: Callable[[], Any]
    samples_per_step: float  # samples (or units: seconds of audio) in one iteration; the batch for most models
    throughput_unit: str  # unit of the primary throughput, e.g. "images/s", "sentences/s"
    units_per_step: dict[str, float] = field(default_factory=dict)  # e.g. {"tokens/s": 1234.0}
    model: Any = None  # framework module holding the parameters (weights, gradients)
    optimizer: Any = None  # framework optimizer (its state is "dynamic" memory)
    inputs: Callable[[], list[Any]] | None = None  # tensors of the batches currently held
    description: str = ""
    # Several workers (A3C): cumulative samples processed by ALL workers so far. When set,
    # throughput is its increase over the timing window / the window's time, not
    # samples_per_step x iterations / time (the hook's own step is one worker among several).
    samples_counter: Callable[[], float] | None = None
    # Releases what build() started (worker processes, threads); called once when the run ends.
    close: Callable[[], None] | None = None
    # Modules without parameters that step() also runs, e.g. a separately hybridized MXNet loss
    # block: hooks that read operand shapes from the modules themselves (MXNet) read these too.
    aux_modules: list[Any] = field(default_factory=list)


def pool_workload(name: str, pool: Sequence[Sequence[Any]], train_step: Callable[..., Any], *,
                  scope: Callable[[], AbstractContextManager[Any]] | None = None, **fields: Any) -> Workload:
    """The Workload of a suite model that trains on a pool of synthetic batches already on the device.

    step() runs `train_step(*batch)` on the pool's batches in turn (cycling) and returns its
    result; with `scope`, inside `scope()` (TensorFlow: `lambda: tf.device(device)`). step keeps
    `train_step` as its attribute of that name: TensorFlow's hook reads the tf.function's traced
    graphs there, and tests its trace count. inputs() lists every tensor of every batch in order
    (lists and tuples inside a batch flattened) unless `fields` gives `inputs`. The other `fields`
    are the Workload's own (samples_per_step, throughput_unit, model, optimizer, description, ...).
    """
    batches = itertools.cycle(pool)
    if scope is None:
        def step() -> Any:
            return train_step(*next(batches))
    else:
        def step() -> Any:
            with scope():
                return train_step(*next(batches))
    step.train_step = train_step  # type: ignore[attr-defined]
    fields.setdefault("inputs", lambda: [t for batch in pool for t in _flattened(batch)])
    return Workload(name=name, step=step, **fields)


def _flattened(items: Sequence[Any]) -> Iterator[Any]:
    for item in items:
        if isinstance(item, (list, tuple)):
            yield from _flattened(item)
        else:
            yield item
