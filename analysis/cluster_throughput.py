"""The throughput of several ranks trained together: the sum of each rank's own.

Each rank's throughput covers its own timing windows; the ranks ran the same iterations in lock
step (DDP's all-reduce holds every rank to the slowest), so their windows overlap in time and the
cluster processed the sum of their samples per second. With several timing windows (--repeat),
window r of the cluster is the sum of every rank's window r, which gives the sum its own spread
and interval, as one process's windows give its own.
"""

from __future__ import annotations

import numpy as np

from tbd.analysis.quality import interval_pct
from tbd.core.profile import Throughput


def summed_throughput(ranks: list[Throughput], missing: list[str] | None = None) -> Throughput:
    """The ranks' throughputs summed; null with the reason when a rank's is null or a rank is `missing`."""
    unit = ranks[0].unit if ranks else ""
    absent = list(missing or []) + [f"rank {i}" for i, t in enumerate(ranks) if t.value is None]
    if absent or not ranks:
        return Throughput(None, unit, reason=f"no throughput from {', '.join(absent) or 'any rank'}: the cluster's "
                                             "is the sum of every rank's")
    total = float(sum(t.value for t in ranks))  # type: ignore[misc]  # none is None here
    also = {u: float(sum(t.also.get(u, 0.0) for t in ranks)) for u in ranks[0].also
            if all(u in t.also for t in ranks)}
    windows = min(len(t.repeats) for t in ranks)
    repeats = [float(sum(t.repeats[r] for t in ranks)) for r in range(windows)] if windows >= 2 else []
    spread = None
    if repeats:
        spread = (max(repeats) - min(repeats)) / float(np.median(repeats)) * 100.0
    return Throughput(total, unit, also=also, repeats=repeats, spread_pct=spread,
                      interval_pct=interval_pct(repeats) if repeats else None)
