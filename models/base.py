"""The Workload: what a suite model (or a user's own loop) gives the framework hook."""

from __future__ import annotations

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
