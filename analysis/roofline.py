"""A kernel group's position on the roofline of its device: bound, attainable FLOP/s, share achieved.

Williams, Waterman and Patterson, "Roofline: an insightful visual performance model" (CACM 2009):
a kernel of arithmetic intensity I (FLOPs per byte of memory traffic) can reach at most
min(peak, I x bandwidth) FLOP/s on a device with that FLOP peak and memory bandwidth. It is
memory-bound when I lies left of the ridge point peak / bandwidth, compute-bound otherwise.

Here the bytes are an analytic estimate (each input read once, each output written once: the
least traffic the op can make) unless counters measured them, so the intensity is an upper
bound and a "memory" verdict is firm while a "compute" one may hide cache misses. A group that
does no arithmetic (copies, fills: FLOPs known to be 0) is judged by bandwidth alone.

A share above 100 % is no kernel beating its device: it says the estimate counted more than the
device did. Such a point carries `reason` saying which (`ABOVE_BANDWIDTH`, `ABOVE_PEAK`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

COMPUTE = "compute"
MEMORY = "memory"

#: Why a group moves more analytic bytes per second than the memory's bandwidth. The count reads each
#: input once in its recorded shape; the kernel read less from DRAM than that.
ABOVE_BANDWIDTH = ("above the memory bandwidth: the analytic bytes (each input read once in its recorded shape, "
                   "each output written once) exceed what DRAM can move in this time, so part came from cache: an "
                   "input still in L2 from the kernel before, or an expanded view (stride 0, e.g. a mean's backward "
                   "dividing its expanded gradient) whose recorded shape counts every element it repeats, while "
                   "DRAM serves each distinct element once; the trace's shapes do not tell a view from a tensor")
#: Why a group does more FLOP/s than its precision's peak.
ABOVE_PEAK = ("above the peak: the analytic FLOPs exceed what the device can do at this precision (a fast "
              "algorithm such as Winograd or FFT convolution does fewer operations than the direct count, or the "
              "precision or the peak is misdetected)")


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


_BYTES_UNKNOWN = "bytes unknown"


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def above_100_reason(roofline_pct: float | None, bandwidth_util_pct: float | None, bound: str | None) -> str | None:
    """Why a share is above 100 % (`ABOVE_BANDWIDTH`, `ABOVE_PEAK`, or both), None when none is."""
    over_bw = bandwidth_util_pct is not None and bandwidth_util_pct > 100.0
    over_roof = roofline_pct is not None and roofline_pct > 100.0
    # Right of the ridge the roof is the peak; left of it (and for data movement) the bandwidth.
    over_peak = over_roof and bound == COMPUTE
    reasons = [r for r, over in ((ABOVE_BANDWIDTH, over_bw or (over_roof and bound != COMPUTE)),
                                 (ABOVE_PEAK, over_peak)) if over]
    return "; ".join(reasons) or None


def roofline_point(flops: float | None, nbytes: float | None, seconds: float, peak_flops: float | None,
                   bandwidth: float | None, bytes_reason: str = _BYTES_UNKNOWN) -> RooflinePoint:
    """The roofline figures of `flops` and `nbytes` done in `seconds` on a device of that peak and bandwidth.

    Args:
        flops: FLOPs of the group (NaN/None unknown, 0 for data movement).
        nbytes: bytes it moved (NaN/None unknown).
        seconds: its summed kernel time.
        peak_flops: the peak FLOP/s of the group's precision (None unknown).
        bandwidth: the device's memory bandwidth in bytes/s (None unknown).
        bytes_reason: why `nbytes` is unknown, in words, for `reason` ("bytes unknown" unless told).
    Returns:
        The point; its `reason` says why the bound or a share is None, or why a share is above 100 %.
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
        if nbytes == 0:
            reason = "no FLOPs and no bytes (a view, an allocation, or overhead): no roofline bounds it"
        elif bw_pct is not None:
            reason = above_100_reason(bw_pct, bw_pct, MEMORY)
        else:
            reason = bytes_reason if nbytes is None else "memory bandwidth unknown"
        return RooflinePoint(0.0, moved, 0.0 if nbytes else None, MEMORY if nbytes else None, 0.0 if nbytes else None,
                             bw_pct, bw_pct, reason)
    told = bytes_reason != _BYTES_UNKNOWN  # a reason of its own is said apart; plain "bytes" joins the list
    missing = [what for what, unknown in (("FLOPs", flops is None), ("bytes", nbytes is None and not told),
                                          ("the precision's peak", peak is None), ("memory bandwidth", bw is None))
               if unknown]
    if missing or not nbytes:
        parts = [" and ".join(missing) + " unknown"] if missing else []
        if nbytes is None and told:
            parts.insert(0, bytes_reason)
        elif nbytes == 0:  # no intensity without bytes
            parts.insert(0, "0 bytes counted for a group that does arithmetic")
        return RooflinePoint(achieved, moved, intensity, None, None, None, bw_pct,
                             "; ".join([*parts, *filter(None, [above_100_reason(None, bw_pct, None)])]))
    attainable = min(peak, intensity * bw)
    bound = MEMORY if intensity < peak / bw else COMPUTE
    share = 100.0 * achieved / attainable
    return RooflinePoint(achieved, moved, intensity, bound, attainable, share, bw_pct,
                         above_100_reason(share, bw_pct, bound))
