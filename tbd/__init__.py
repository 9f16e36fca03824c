"""tbd: a profiler for deep-learning training (the TBD suite, modernised).

Public API (docs/api.md):

- `profile_step(step, *, samples_per_step, ...)`: profile your own PyTorch training step through the
  same stages and analysis as `tbd profile`; returns a `Profile`.
- `load_profile(path)`: read a saved profile.json (any name) or run directory, validated.
- `Profile`: the record both return (docs/profile-json.md); `profile.quality.reliable` is False when
  the figures are UNRELIABLE on the machine the run used.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # for the annotations only: importing the record here would load it in every child
    from tbd.core.profile_result import Profile

__version__ = "0.1.0"
__all__ = ["Profile", "__version__", "load_profile", "profile_step"]

# The public names resolve on first use, not here: every `import tbd.<anything>` runs this file
# first, in the runner child and the framework venvs too, which hold only numpy and psutil (no
# rich, no matplotlib); importing the API here would drag the whole shell into each of them. So the
# functions below repeat tbd.cli.api's signature (tests/unit/test_docs_api.py keeps the two equal)
# and forward to it.


def profile_step(step: Callable[[], Any], *, samples_per_step: int, model: Any = None, optimizer: Any = None,
                 inputs: Callable[[], list[Any]] | None = None, name: str = "user-step",
                 throughput_unit: str = "samples/s", units_per_step: dict[str, float] | None = None,
                 device: str = "auto", warmup: int | None = None, iterations: int = 20,
                 trace_iterations: int = 3, max_seconds: float = 600.0,
                 out: str | os.PathLike | None = None, progress: bool = False, force: bool = False) -> Profile:
    """Profile `step`, one full training iteration of your own (forward, backward, optimizer update).

    The step runs in this process through the same stages as `tbd profile`: warm-up until stable,
    timing windows, a trace window under torch.profiler, then the analysis.

    Args:
        step: callable running one training iteration on its own data; its return value is ignored.
        samples_per_step: samples one call processes (the batch size), for the throughput.
        model: the torch.nn.Module, for the weights and gradients memory (null with a reason if None).
        optimizer: the torch optimizer, for the optimizer-state memory (null with a reason if None).
        inputs: returns the input tensors the step uses (counted as dynamic memory).
        name: the workload's name in the report and profile.json.
        throughput_unit: the throughput's unit, e.g. "images/s" (default "samples/s").
        units_per_step: further throughput units and how many of each one step processes,
            e.g. {"tokens/s": 3200.0}.
        device: where `step` runs: "auto", "cpu", "cuda" or "cuda:N"; tbd only synchronises it.
        warmup: a fixed number of warm-up iterations; None (default) detects the end of warm-up.
        iterations: timing-window length in iterations (default 20).
        trace_iterations: trace-window length in iterations (default 3; 0: no trace).
        max_seconds: bound on warm-up plus timing, in seconds (default 600).
        out: run directory to write (profile.json, iterations.json, trace.pt.trace.json.gz), as
            `tbd profile --out`; None keeps nothing on disk.
        progress: show progress bars on stderr.
        force: replace a previous tbd run in `out` (a folder that is not empty is refused otherwise).
    Returns:
        The Profile: `.metrics` (each figure's `.value`, `.unit`, `.reason` when None), `.quality`
        (`.reliable`, `.warnings`), `.iterations` (`.stable`), `.status` ("complete" or "partial").
    Raises:
        tbd.core.errors.UsageError: an argument out of range (before anything runs), or `out` taken.
        KeyboardInterrupt, or whatever `step` raised: re-raised after a partial profile is written.
    """
    from tbd.cli.api import profile_step as _profile_step

    return _profile_step(step, samples_per_step=samples_per_step, model=model, optimizer=optimizer, inputs=inputs,
                         name=name, throughput_unit=throughput_unit, units_per_step=units_per_step, device=device,
                         warmup=warmup, iterations=iterations, trace_iterations=trace_iterations,
                         max_seconds=max_seconds, out=out, progress=progress, force=force)


def load_profile(path: str | os.PathLike) -> Profile:
    """Load and validate a saved profile: a profile.json (any file name) or a run directory.

    Args:
        path: the file or the run directory `tbd profile`, `tbd analyze --json` or
            `profile_step(out=...)` wrote.
    Returns:
        The Profile, as `tbd report` reads it.
    Raises:
        tbd.core.errors.TbdError: the path is missing, not a profile, or fails validation (the
            message says which field and why).
    """
    from tbd.cli.results import profile_at

    return profile_at(path)


def __getattr__(name: str):
    if name == "Profile":
        from tbd.core.profile_result import Profile

        return Profile
    raise AttributeError(f"module 'tbd' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"Profile"})
