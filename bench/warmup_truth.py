"""Offline ground truth of the warm-up corpus: where warm-up really ends, seen from the whole series.

The online rule (analysis/stability.py) must decide from the iterations so far; this one sees
every iteration of a recorded series, so it can segment the whole series optimally first. Method
(docs/warmup.md, "Ground truth"):

1. Work on log(time): warm-up and load change an iteration's time by a factor, and the log makes
   the right-skewed noise of a loaded machine roughly symmetric.
2. Optimal partitioning (exact dynamic programming, Jackson et al. 2005) with an L1 cost around
   each segment's median, robust to the single slow iterations a shared machine throws in, and a
   penalty per change point of PENALTY * b * log(n), b the series' noise scale (mean absolute
   deviation estimated from successive differences, so level changes do not inflate it).
3. The stable level is the median of the longest segment that ends in the second half (a plain
   second-half median is pulled up by another process's bursts); sigma is the noise of the second
   half (successive differences again). A segment of L iterations is "at the level" when its median is within
   max(LEVEL_TOL, 3 x its standard error 1.2533 sigma / sqrt(L)) of it.
4. Warm-up ends at the start of the first segment of at least MIN_SEGMENT iterations (or the last
   one) at the level: what comes before is the warm-up. Later excursions (another process's
   burst) are interference, not warm-up. The series has a stable phase when at least MIN_STABLE
   iterations follow the end and the median of its last quarter is at the level (a drift still
   going at the end has none; a burst in the last iterations does not count against it).

The online rule is not used here: no window test, no threshold of the rule's. Pure numpy; the
series are <= 200 iterations, so the O(n^2) exact search takes well under a second each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PENALTY = 3.0  # x b x log(n) per change point: BIC-like, a little stricter against noise
LEVEL_TOL = 0.10  # |log(segment median / stable level)| always allowed (~10 %)
MIN_SEGMENT = 8  # shorter segments before the end are part of warm-up; after it, bursts
MIN_STABLE = 30  # a stable phase shorter than this is not one (a rule could not confirm it)

TRUTH_METHOD = (f"bench/warmup_truth.py: optimal partitioning of log(time) (L1 cost around segment medians, penalty "
                f"{PENALTY:g} x b x log(n), b the noise from successive differences); stable level = median of the "
                f"longest segment ending in the second half; warm-up ends at the first segment of >= {MIN_SEGMENT} "
                f"iterations whose median is within max({LEVEL_TOL:.0%}, 3 standard errors) of it; a stable phase needs >= {MIN_STABLE} iterations after "
                f"the end and the last quarter's median at the level")


@dataclass(frozen=True)
class Truth:
    end: int | None  # first iteration of the stable phase; None: no stable phase
    stable_median_us: float  # the stable level: median of the longest segment ending in the second half
    sigma: float  # noise of log(time) in the second half (~ relative spread of one iteration)
    change_points: tuple[int, ...]  # segment starts after 0, from the optimal partitioning

    def to_json(self) -> dict:
        return {"end": self.end, "stable_median_us": round(self.stable_median_us, 1),
                "sigma": round(self.sigma, 4), "change_points": list(self.change_points)}


def sigma_of(x: np.ndarray) -> float:
    """Robust sigma of i.i.d. noise from successive differences: 1.4826 median|diff| / sqrt(2)."""
    return float(1.4826 * np.median(np.abs(np.diff(x))) / np.sqrt(2.0))


def noise_scale(x: np.ndarray) -> float:
    """Mean absolute deviation of the noise, from successive differences (level shifts excluded).

    sigma * sqrt(2/pi) is the mean absolute deviation of normal noise, what the L1 cost adds up.
    """
    return max(sigma_of(x) * float(np.sqrt(2.0 / np.pi)), 1e-3)


def segment(x: np.ndarray, penalty: float) -> list[int]:
    """Segment starts (0 first) minimising sum of L1 costs + penalty per change point."""
    n = x.size
    # cost[i][j]: L1 cost of x[i:j]
    best = np.full(n + 1, np.inf)
    best[0] = -penalty
    prev = np.zeros(n + 1, dtype=int)
    for j in range(1, n + 1):
        for i in range(j):
            seg = x[i:j]
            c = best[i] + penalty + float(np.abs(seg - np.median(seg)).sum())
            if c < best[j]:
                best[j], prev[j] = c, i
    starts, j = [], n
    while j > 0:
        starts.append(int(prev[j]))
        j = prev[j]
    return sorted(starts)


def true_warmup(times_us: list[int] | np.ndarray) -> Truth:
    t = np.asarray(times_us, dtype=np.float64)
    x = np.log(np.maximum(t, 1.0))
    n = x.size
    starts = segment(x, PENALTY * noise_scale(x) * np.log(n))
    bounds = list(zip(starts, starts[1:] + [n]))
    # The level: the longest segment that ends in the second half (bursts of another process pull
    # a plain second-half median up on a loaded machine).
    a, b = max((ab for ab in bounds if ab[1] > n // 2), key=lambda ab: ab[1] - ab[0])
    level = float(np.median(x[a:b]))
    sigma = sigma_of(x[n // 2:])

    def at_level(a: int, b: int) -> bool:
        return abs(float(np.median(x[a:b])) - level) <= max(LEVEL_TOL, 3 * 1.2533 * sigma / np.sqrt(b - a))

    end = next((a for a, b in bounds if (b - a >= MIN_SEGMENT or b == n) and at_level(a, b)), None)
    if end is not None and (n - end < MIN_STABLE or not at_level(n - n // 4, n)):
        end = None
    return Truth(end, float(np.exp(level)), sigma, tuple(starts[1:]))
