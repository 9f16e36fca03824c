"""The loops that issue 27 item 11 replaced by numpy, against short brute-force recomputes of their rules.

Each rule is written here the plain way (a Python loop over every candidate), apart from tbd's
code, and compared on many small random cases that hit ties, empty ranges and repeats.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tbd.analysis import drilldown
from tbd.analysis.memory import pytorch as am
from tbd.core.records import KernelTable, MemoryEvents, OpTable
from tbd.profilers.kineto.tree import latest_above
from tbd.profilers.traces.times import fast_us_text_to_ns, us_text_to_ns


def _innermost_end(ts: int, starts, ends, names) -> int:
    """The rule: of the ops holding ts (start <= ts <= end, no ProfilerStep#), the latest start, then the shortest."""
    held = [(s, -e) for s, e, n in zip(starts, ends, names) if s <= ts <= e and not n.startswith("ProfilerStep#")]
    return -max(held)[1] if held else -1


@pytest.mark.parametrize("seed", range(4))
def test_innermost_op_end_matches_the_rule(seed):
    rng = np.random.default_rng(seed)
    for _ in range(400):
        n, q = int(rng.integers(0, 30)), int(rng.integers(0, 20))
        starts = rng.integers(0, 60, n)
        ends = starts + rng.integers(0, 30, n)
        names = ["ProfilerStep#3" if rng.random() < 0.1 else "aten::add" for _ in range(n)]
        ops = OpTable(np.array(names, dtype=object), starts, ends, np.zeros(n, dtype=np.int64))
        ts = np.sort(rng.integers(-5, 100, q))
        got = am.innermost_op_end_ns(ts, ops).tolist()
        assert got == [_innermost_end(t, starts.tolist(), ends.tolist(), names) for t in ts.tolist()]


def test_innermost_op_end_by_hand():
    ops = OpTable(np.array(["a", "b", "c", "ProfilerStep#1"], dtype=object), np.array([0, 10, 10, 0]),
                  np.array([100, 50, 20, 1000]), np.zeros(4, dtype=np.int64))
    # 15: a, b and c hold it, b and c start last, c is shorter; 30: a and b; 200: only the step (not an op).
    assert am.innermost_op_end_ns(np.array([15, 30, 100, 200]), ops).tolist() == [20, 50, 100, -1]


@pytest.mark.parametrize("seed", range(4))
def test_latest_above_matches_the_rule(seed):
    rng = np.random.default_rng(seed)
    for _ in range(400):
        n, q = int(rng.integers(1, 40)), int(rng.integers(0, 30))
        values = rng.integers(0, 20, n)
        lo = rng.integers(0, n, q)
        hi = np.minimum(lo + rng.integers(-2, n, q), n - 1)
        threshold = rng.integers(-1, 21, q)
        want = [max([j for j in range(a, b + 1) if values[j] > t], default=-1)
                for a, b, t in zip(lo.tolist(), hi.tolist(), threshold.tolist())]
        assert latest_above(values, lo, hi, threshold).tolist() == want


def _table(grid, block, regs, smem, dur) -> KernelTable:
    n = len(dur)
    empty = np.full(n, "", dtype=object)
    return KernelTable(np.full(n, "k", dtype=object), np.arange(n, dtype=np.int64), np.array(dur, dtype=np.int64),
                       np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), empty, np.full(n, np.nan), empty,
                       empty, np.full(n, -1, dtype=np.int64), grid=np.array(grid, dtype=np.int64).reshape(n, 3),
                       block=np.array(block, dtype=np.int64).reshape(n, 3), registers=np.array(regs, dtype=np.int64),
                       shared_memory=np.array(smem, dtype=np.int64), occupancy=np.full(n, np.nan))


@pytest.mark.parametrize("seed", range(3))
def test_launch_configuration_is_the_one_with_most_time(seed):
    rng = np.random.default_rng(seed)
    for _ in range(150):
        n = int(rng.integers(1, 25))
        # Few distinct values per column (so configurations repeat), with -1 (unknown) and sizes so large
        # that the packed key would overflow (the tuple path).
        pick = [-1, 1, 7, 2**31 - 1, 2**40] if rng.random() < 0.3 else [1, 2, 3]
        grid = rng.choice(pick, (n, 3)).tolist()
        block = rng.choice([1, 128, 256], (n, 3)).tolist()
        regs = rng.choice([-1, 32, 255, 2**62], n).tolist()
        smem = rng.choice([0, 49152], n).tolist()
        dur = rng.integers(0, 4, n).tolist()
        launch = drilldown.group_details(_table(grid, block, regs, smem, dur), ["k"])["k"].launch
        keys = [tuple(g) + tuple(b) + (r, s) for g, b, r, s in zip(grid, block, regs, smem)]
        weights = dur if sum(dur) > 0 else [1] * n
        per: Counter = Counter()
        for key, w in zip(keys, weights):
            per[key] += w
        first_seen = list(dict.fromkeys(keys))
        best = max(first_seen, key=lambda k: (per[k], -first_seen.index(k)))  # ties: the first seen
        assert launch.configs == len(first_seen)
        assert launch.grid == (best[:3] if min(best[:3]) >= 0 else None)
        assert launch.registers_per_thread == (best[6] if best[6] >= 0 else None)
        assert launch.share_pct == pytest.approx(100.0 * per[best] / sum(weights))


def test_fast_text_to_ns_takes_one_form_at_a_time():
    fixed = [b"1712195495505582.988", b"30.000"]
    assert fast_us_text_to_ns(fixed).tolist() == [1712195495505582988, 30000]
    assert fast_us_text_to_ns([b"400", b"7"]).tolist() == [400000, 7000]
    assert fast_us_text_to_ns([]).tolist() == []
    # Mixed forms, other decimals, signs: not its job; the exact reading gives the same values one by one.
    for texts in ([b"30.000", b"7"], [b"22.51"], [b"-3"]):
        assert fast_us_text_to_ns(texts) is None
    assert us_text_to_ns([b"30.000", b"7", b"22.51"])[0].tolist() == [30000, 7000, 22510]


def _pairs_by_loop(addr: list, nbytes: list) -> tuple[list, list]:
    """The rule as a walk through time: an open block per address, the newest alloc kept."""
    free_idx, orphan, open_at = [-1] * len(addr), [False] * len(addr), {}
    for i, (a, b) in enumerate(zip(addr, nbytes)):
        if b > 0:
            open_at[a] = i
        elif b < 0:
            j = open_at.pop(a, None)
            if j is None:
                orphan[i] = True
            else:
                free_idx[j] = i
    return free_idx, orphan


@pytest.mark.parametrize("seed", range(4))
def test_pair_frees_matches_a_walk_through_time(seed):
    rng = np.random.default_rng(seed)
    for _ in range(400):
        n = int(rng.integers(0, 30))
        addr = rng.choice(np.array([1, 2, 3, 2**63 + 5], dtype=np.uint64), n)
        nbytes = rng.choice([-64, -8, 0, 8, 64], n)
        events = MemoryEvents(np.arange(n, dtype=np.int64), addr, nbytes.astype(np.int64),
                              np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64))
        free_idx, orphan = am.pair_frees(events)
        assert (free_idx.tolist(), orphan.tolist()) == _pairs_by_loop(addr.tolist(), nbytes.tolist())
