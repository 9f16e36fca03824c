"""The `Sweep`: one workload profiled at several batch sizes, saved as `sweep.json` (`"schema": "tbd.sweep/1"`).

docs/sweep-compare-json.md is the contract. Each point is one `tbd profile` run in its own child
process and its own run directory (`b<batch>/` under the sweep directory); a point that failed
(out of memory, a crash) keeps its status and the reason, and the sweep goes on. Loading validates
and raises `ResultFormatError` on anything malformed. Never pickle.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Annotated, Any

from tbd.core import field_checks as c
from tbd.core.errors import ResultFormatError
from tbd.core.field_checks import VERSION_TAG, Amount, Batch, Count, Name, Notes, Pct
from tbd.core.profile_result import MEMORY_CATEGORIES

SWEEP_SCHEMA = "tbd.sweep/1"
#: A point's outcome: the profile is complete; partial (interrupted, NOT STABLE is still "ok");
#: out of memory at this batch; any other failure (a crash, a usage error).
POINT_STATUSES = ("ok", "partial", "oom", "failed")
#: Memory keys of a point: each category's own peak, then the allocator's peak.
POINT_MEMORY_KEYS = (*MEMORY_CATEGORIES, "allocator_peak")


@dataclass(frozen=True)
class SweepPoint:
    """One batch size: the figures of its profile, or why there is none."""

    batch: Batch
    status: str  # one of POINT_STATUSES (checked on loading)
    reason: str | None  # why oom/failed/partial; None when ok
    run_dir: str | None  # the point's run directory, relative to the sweep directory; None if none was made
    throughput: Amount | None  # samples/s (or the model's unit) over the timing window
    throughput_unit: str | None
    iteration_s: Amount | None  # median iteration time of the timing window
    gpu_busy_pct: Pct | None
    flop_util_pct: Pct | None
    cpu_util_pct: Pct | None
    stable: bool | None  # the run's stability verdict; None when no profile
    memory_bytes: dict[str, Count | None] = field(default_factory=dict)  # POINT_MEMORY_KEYS -> bytes or None
    # The split at the allocator's peak (profile.json's memory_bytes.at_peak: the categories and "unattributed",
    # adding up to memory_bytes["allocator_peak"]); empty where unknown, or in files written before it.
    memory_at_peak: dict[str, Count | None] = field(default_factory=dict)
    # Why a figure is null, by figure name ("throughput", "gpu_busy_pct", "memory.feature_maps", ...).
    reasons: dict[str, str] = field(default_factory=dict)
    # The profile's measurement quality (profile.json's `quality`): False when a warning there makes the
    # figures unreliable on the machine it ran on; None when the profile has no quality record (reasons["reliable"]).
    reliable: bool | None = None
    quality_warnings: list[str] = field(default_factory=list)  # the profile's quality warnings, in its words
    # The throughput's 95 % interval (profile.json's throughput.interval_pct, a half-width in % of it) and its
    # bounds, throughput x (1 -/+ interval_pct / 100), the low one not below 0; null with reasons["throughput_interval"].
    throughput_interval_pct: Amount | None = None
    throughput_low: Amount | None = None
    throughput_high: Amount | None = None
    run_s: Amount | None = None  # the point's run as the sweep timed it, start to profile, seconds


@dataclass(frozen=True)
class Forecast:
    """What a sweep still has to run, said before its first point and after each (analysis.sweep_plan.forecast);
    not saved."""

    next_batch: int | None  # the batch it runs next; None when it is done
    fewest: int  # points still to run, at fewest and at most (equal for a list of batches)
    most: int
    point_s: float | None  # the last point's run time, seconds: the estimate of each later point's; None before one
    most_s: float | None  # most x point_s: an estimate (later points may run larger batches), not a measurement


@dataclass(frozen=True)
class Sweep:
    """A batch-size sweep of one model, framework and device."""

    model: Name
    framework: str
    device: str  # the device the points ran on ("cpu", "cuda:0"), as their profiles say
    device_name: str | None  # GPU name or CPU model
    size: str  # "full" or "test"
    mode: str  # "list" (--batch 2,4,8) or "max" (doubling, then bisection to the largest batch that fits)
    points: list[SweepPoint]  # sorted by batch
    largest_fitting_batch: Batch | None  # the largest batch whose point ran (ok or partial)
    smallest_failing_batch: Batch | None  # the smallest batch that ran out of memory, None if none did
    memory_limit_bytes: Count | None = None  # the --memory-limit-gib cap each point ran under
    notes: Notes = field(default_factory=list)
    # The points that ran (ok or partial) whose profile says its figures are unreliable (`reliable` false).
    unreliable_batches: list[Batch] = field(default_factory=list)
    schema: Annotated[str, VERSION_TAG] = SWEEP_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {"schema": data.pop("schema"), **data}

    @classmethod
    def from_dict(cls, data: Any) -> "Sweep":
        """Validate and rebuild; raises ResultFormatError naming the offending key."""
        with c.checking("sweep"):
            return cls._from_dict(data)

    @classmethod
    def _from_dict(cls, data: Any) -> "Sweep":
        if not isinstance(data, dict):
            raise ResultFormatError("sweep is not a JSON object")
        if data.get("schema") != SWEEP_SCHEMA:
            raise ResultFormatError(f"unknown sweep schema {str(data.get('schema'))[:80]!r}, expected {SWEEP_SCHEMA!r}")
        sweep = _LOAD(data)
        for i, point in enumerate(sweep.points):
            if point.status not in POINT_STATUSES:
                raise ResultFormatError(f"sweep key 'points[{i}].status' is {point.status[:40]!r}, "
                                        f"not one of {', '.join(POINT_STATUSES)}")
        return sweep


_LOAD = c.loader(Sweep)
