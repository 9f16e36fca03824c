"""A kernel group's position on the roofline of its device: bound, attainable FLOP/s, share achieved.

Williams, Waterman and Patterson, "Roofline: an insightful visual performance model" (CACM 2009):
a kernel of arithmetic intensity I (FLOPs per byte of memory traffic) can reach at most
min(peak, I x bandwidth) FLOP/s on a device with that FLOP peak and memory bandwidth. It is
memory-bound when I lies left of the ridge point peak / bandwidth, compute-bound otherwise.

Here the bytes are an analytic estimate (each input read once, each output written once: the
least traffic the op can make) unless counters measured them, so the intensity is an upper
bound and a "memory" verdict is firm while a "compute" one may hide cache misses. A group that
does no arithmetic (copies, fills: FLOPs known to be 0) is judged by bandwidth alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

COMPUTE = "compute"
MEMORY = "memory"


@dataclass(frozen=True)
class RooflinePoint:
    """One group on the roofline; None where an input is unknown, with `reason`."""

    flops_per_s: float | None  # achieved: FLOPs / time
    bytes_per_s: float | None  # achieved: bytes / time
    intensity: float | None  # FLOPs per byte
    bound: str | None  # COMPUTE, MEMORY, or None (bytes or a peak unknown)
    attainable_flops_per_s: float | None  # min(peak, intensity x bandwidth)
    roofline_pct: float | None  # achieved / attainable x 100 (bandwidth share for data movement)
    bandwidth_util_pct: float | None  # achieved bytes/s / bandwidth x 100
    reason: str | None = None  # why bound or a share is unknown


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def roofline_point(flops: float | None, nbytes: float | None, seconds: float, peak_flops: float | None,
                   bandwidth: float | None) -> RooflinePoint:
    """The roofline figures of `flops` and `nbytes` done in `seconds` on a device of that peak and bandwidth.

    Args:
        flops: FLOPs of the group (NaN/None unknown, 0 for data movement).
        nbytes: bytes it moved (NaN/None unknown).
        seconds: its summed kernel time.
        peak_flops: the peak FLOP/s of the group's precision (None unknown).
        bandwidth: the device's memory bandwidth in bytes/s (None unknown).
    """
    flops = flops if _finite(flops) and flops >= 0 else None
    nbytes = nbytes if _finite(nbytes) and nbytes >= 0 else None
    peak = peak_flops if _finite(peak_flops) and peak_flops > 0 else None
    bw = bandwidth if _finite(bandwidth) and bandwidth > 0 else None
    if not seconds > 0:
        return RooflinePoint(None, None, None, None, None, None, None, "no time")
    achieved = flops / seconds if flops is not None else None
    moved = nbytes / seconds if nbytes is not None else None
    bw_pct = 100.0 * moved / bw if moved is not None and bw else None
    intensity = flops / nbytes if flops is not None and nbytes else None
    if flops == 0:
        # Data movement: no arithmetic to bound, the bandwidth is its roof.
        reason = None if bw_pct is not None else ("bytes unknown" if nbytes is None else "memory bandwidth unknown")
        return RooflinePoint(0.0, moved, 0.0 if nbytes else None, MEMORY if nbytes else None, 0.0 if nbytes else None,
                             bw_pct, bw_pct, reason)
    missing = [what for what, v in (("FLOPs", flops), ("bytes", nbytes), ("the precision's peak", peak),
                                    ("memory bandwidth", bw)) if v is None]
    if missing or not nbytes:
        return RooflinePoint(achieved, moved, intensity, None, None, None, bw_pct,
                             " and ".join(missing or ["bytes"]) + " unknown")
    attainable = min(peak, intensity * bw)
    bound = MEMORY if intensity < peak / bw else COMPUTE
    return RooflinePoint(achieved, moved, intensity, bound, attainable, 100.0 * achieved / attainable, bw_pct)
