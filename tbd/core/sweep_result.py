"""The `Sweep`: one workload profiled at several batch sizes, saved as `sweep.json` (`"schema": "tbd.sweep/1"`).

docs/sweep-compare-json.md is the contract. Each point is one `tbd profile` run in its own child
process and its own run directory (`b<batch>/` under the sweep directory); a point that failed
(out of memory, a crash) keeps its status and the reason, and the sweep goes on. Loading validates
and raises `ResultFormatError` on anything malformed. Never pickle.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tbd.core import field_checks as c
from tbd.core.errors import ResultFormatError
from tbd.core.profile import MEMORY_CATEGORIES

SWEEP_SCHEMA = "tbd.sweep/1"
#: A point's outcome: the profile is complete; partial (interrupted, NOT STABLE is still "ok");
#: out of memory at this batch; any other failure (a crash, a usage error).
POINT_STATUSES = ("ok", "partial", "oom", "failed")
#: Memory keys of a point: each category's own peak, then the allocator's peak.
POINT_MEMORY_KEYS = (*MEMORY_CATEGORIES, "allocator_peak")


@dataclass(frozen=True)
class SweepPoint:
    """One batch size: the figures of its profile, or why there is none."""

    batch: int
    status: str  # one of POINT_STATUSES
    reason: str | None  # why oom/failed/partial; None when ok
    run_dir: str | None  # the point's run directory, relative to the sweep directory; None if none was made
    throughput: float | None  # samples/s (or the model's unit) over the timing window
    throughput_unit: str | None
    iteration_s: float | None  # median iteration time of the timing window
    gpu_busy_pct: float | None
    flop_util_pct: float | None
    cpu_util_pct: float | None
    stable: bool | None  # the run's stability verdict; None when no profile
    memory_bytes: dict[str, int | None] = field(default_factory=dict)  # POINT_MEMORY_KEYS -> bytes or None
    # Why a figure is null, by figure name ("throughput", "gpu_busy_pct", "memory.feature_maps", ...).
    reasons: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Sweep:
    """A batch-size sweep of one model, framework and device."""

    model: str
    framework: str
    device: str  # the device the points ran on ("cpu", "cuda:0"), as their profiles say
    device_name: str | None  # GPU name or CPU model
    size: str  # "full" or "test"
    mode: str  # "list" (--batch 2,4,8) or "max" (doubling, then bisection to the largest batch that fits)
    points: list[SweepPoint]  # sorted by batch
    largest_fitting_batch: int | None  # the largest batch whose point ran (ok or partial)
    smallest_failing_batch: int | None  # the smallest batch that ran out of memory, None if none did
    memory_limit_bytes: int | None = None  # the --memory-limit-gib cap each point ran under
    notes: list[str] = field(default_factory=list)
    schema: str = SWEEP_SCHEMA

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
        top = {k: None for k in _SWEEP} | c.fields(data, "", _SWEEP)
        points = []
        for i, p in enumerate(top.pop("points")):
            values = {k: None for k in _POINT} | c.fields(p, f"points[{i}].", _POINT)
            if values["status"] not in POINT_STATUSES:
                raise ResultFormatError(f"sweep key 'points[{i}].status' is {str(values['status'])[:40]!r}, "
                                        f"not one of {', '.join(POINT_STATUSES)}")
            values["memory_bytes"] = values["memory_bytes"] or {}
            values["reasons"] = values["reasons"] or {}
            points.append(SweepPoint(**values))
        top["notes"] = top["notes"] or []
        return cls(points=points, **top)


_POINT = {"batch": c.integer(low=1), "status": c.text(), "reason": c.text(null=True), "run_dir": c.text(null=True),
          "throughput": c.number(null=True), "throughput_unit": c.text(null=True),
          "iteration_s": c.number(null=True), "gpu_busy_pct": c.pct(null=True), "flop_util_pct": c.pct(null=True),
          "cpu_util_pct": c.pct(null=True), "stable": c.flag(null=True),
          "memory_bytes": c.mapping(c.integer(null=True), null=True), "reasons": c.mapping(c.text(), null=True)}
_SWEEP = {"model": c.text(), "framework": c.text(), "device": c.text(), "device_name": c.text(null=True),
          "size": c.text(), "mode": c.text(), "points": c.seq(), "largest_fitting_batch": c.integer(low=1, null=True),
          "smallest_failing_batch": c.integer(low=1, null=True), "memory_limit_bytes": c.integer(null=True),
          "notes": c.items(c.text(), null=True)}
