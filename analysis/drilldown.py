"""What a kernel engineer asks of one kernel group: how it was launched, by which op on which
shapes, how many bytes it moved, and which launches an Nsight Compute run must select to measure it.

Pure: a KernelTable and the group of each row in, plain records out. Groups are
`analysis.ranking.group_kernels`' (kernels by name); `group_codes` gives the same grouping.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tbd.analysis.ranking import factorize
from tbd.core.records import KernelTable

#: Launching ops listed per group (the rest are summed into the shares of those shown).
MAX_OPS = 3


@dataclass(frozen=True)
class LaunchConfig:
    """The launch configuration most of a group's time ran with, as the trace recorded it."""

    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    registers_per_thread: int | None
    shared_memory_bytes: int | None  # per block, static + dynamic
    occupancy_pct: float | None  # the trace's estimate, time-weighted over the config's calls
    configs: int  # distinct configurations among the group's calls
    share_pct: float  # of the group's time spent in this configuration


@dataclass(frozen=True)
class LaunchingOp:
    """An op that launched a group's kernels (its FLOPs' source), with its shapes and Python stack."""

    name: str
    shapes: str  # "33×100, 100×100 (float)"; "" when the trace has none
    stack: str  # Python frames innermost first; "" when the trace has none
    share_pct: float  # of the group's time


@dataclass(frozen=True)
class Launches:
    """Which launches an ncu run must select to measure a group: in its last traced iteration.

    ncu filters launches by name, then skips and counts among the launches that pass, in launch
    order: the order of their launching runtime calls (by kernel start where a trace has none,
    which is launch order on one stream only). A name that ncu and
    Kineto print alike (C linkage: "ampere_sgemm_128x64_nn") is matched whole (`name_base`
    "demangled"): `skip` counts the group's own earlier launches in the trace window and `count`
    its launches in that iteration, which are then consecutive among the matches. A C++ name is
    printed differently by the two demanglers, so it is matched by its bare function name
    ("function"), which other kernels (other template instances) may share: `skip` then counts
    every window launch of that function name before the selected launches, and `count` covers
    one run of consecutive matches that are all the group's launches of that iteration, so ncu
    measures only the group's launches.

    One ncu run selects one such run. Where the iteration interleaves the group's launches with
    another instance's (Add, Mul, Add, Add), the longest run is selected (the first of equally
    long ones) and `count` < `in_step`: the measurement covers `count` of the iteration's
    `in_step` launches (two of three here), not all of them.
    """

    skip: int
    count: int
    step: int  # ProfilerStep number of the measured iteration, -1 when the window has none
    name_base: str = "demangled"  # "demangled" or "function"
    in_step: int = 0  # the group's launches in that iteration (in the window when it has no steps)


@dataclass(frozen=True)
class GroupDetail:
    bytes: float  # summed estimate, NaN when any call's is unknown
    launch: LaunchConfig | None  # None when the trace records no launch configuration
    ops: list[LaunchingOp]
    launches: Launches


def group_codes(kernels: KernelTable) -> tuple[np.ndarray, list]:
    """Each row's group code and the group names (the grouping of `ranking.group_kernels`)."""
    return factorize(kernels.name)


def group_details(kernels: KernelTable, names: list[str],
                  function_name: Callable[[str], str] | None = None) -> dict[str, GroupDetail]:
    """The drill-down of each named group (kernel name) in `kernels`.

    function_name: a kernel's bare function name as ncu's "function" name base sees it
    (analysis.ncu.kernel_function_name); None treats every name as matched whole.
    """
    code, distinct = group_codes(kernels)
    functions = _function_codes(distinct, code, function_name)
    index = {name: i for i, name in enumerate(distinct)}
    by_group = np.argsort(code, kind="stable")  # rows of each group together, in row order
    bounds = np.searchsorted(code[by_group], np.arange(len(distinct) + 1))
    out = {}
    for name in names:
        g = index.get(name)
        if g is None:
            continue
        rows = by_group[bounds[g]:bounds[g + 1]]
        out[name] = GroupDetail(_bytes(kernels, rows), _launch(kernels, rows), _ops(kernels, rows),
                                _launches(kernels, rows, functions, name))
    return out


def whole_name_matches(name: str) -> bool:
    """Whether ncu and Kineto print `name` alike: no template arguments, parameters or spaces."""
    return not any(c in name for c in "<>() ")


def _function_codes(distinct: list, code: np.ndarray, function_name) -> np.ndarray | None:
    """Per row, a code of its kernel's function name (rows of one function name share it)."""
    if function_name is None:
        return None
    per_name = [function_name(str(n)) for n in distinct]
    fcode, _ = factorize(per_name)
    return fcode[code] if len(code) else np.zeros(0, dtype=np.int64)


def _bytes(kernels: KernelTable, rows: np.ndarray) -> float:
    if kernels.bytes is None:
        return float("nan")
    values = kernels.bytes[rows]
    return float(values.sum()) if np.isfinite(values).all() else float("nan")


def _weights(kernels: KernelTable, rows: np.ndarray) -> np.ndarray:
    """Row durations as weights; equal weights when every row has zero duration."""
    dur = kernels.dur_ns[rows].astype(np.float64)
    return dur if dur.sum() > 0 else np.ones(len(rows))


def _launch(kernels: KernelTable, rows: np.ndarray) -> LaunchConfig | None:
    if kernels.grid is None or kernels.block is None:
        return None
    grid, block = kernels.grid[rows], kernels.block[rows]
    regs = kernels.registers[rows] if kernels.registers is not None else np.full(len(rows), -1)
    smem = kernels.shared_memory[rows] if kernels.shared_memory is not None else np.full(len(rows), -1)
    if (grid < 0).all() and (block < 0).all() and (regs < 0).all():
        return None
    key_code, configs = _configs(np.column_stack([grid, block, regs, smem]))
    w = _weights(kernels, rows)
    per = np.bincount(key_code, weights=w, minlength=len(configs))
    best = int(np.argmax(per))
    mine = key_code == best
    g, b, r, s = configs[best][:3], configs[best][3:6], configs[best][6], configs[best][7]
    occ = kernels.occupancy[rows][mine] if kernels.occupancy is not None else np.array([np.nan])
    known = np.isfinite(occ)
    occupancy = float(np.average(occ[known], weights=w[mine][known])) if known.any() and w[mine][known].sum() > 0 \
        else None
    return LaunchConfig(grid=tuple(g) if min(g) >= 0 else None, block=tuple(b) if min(b) >= 0 else None,
                        registers_per_thread=r if r >= 0 else None, shared_memory_bytes=s if s >= 0 else None,
                        occupancy_pct=occupancy, configs=len(configs), share_pct=100.0 * per[best] / per.sum())


def _configs(rows: np.ndarray) -> tuple[np.ndarray, list[tuple]]:
    """`factorize` of the (n, 8) launch configurations as tuples, without a tuple per row: each row
    packed into one int64 (every column offset by its minimum, the columns in mixed radix by their
    spans), exact where the spans' product fits; else a tuple per row."""
    if not len(rows):
        return np.zeros(0, dtype=np.int64), []
    lo, hi = rows.min(axis=0), rows.max(axis=0)
    spans = [int(h) - int(low) + 1 for low, h in zip(lo.tolist(), hi.tolist())]
    if math.prod(spans) >= 1 << 63:
        return factorize([tuple(r) for r in rows.tolist()])
    packed = np.zeros(len(rows), dtype=np.int64)
    for c, span in enumerate(spans):
        packed *= span
        packed += rows[:, c] - lo[c]  # below span: no int64 overflow
    _, first, inverse = np.unique(packed, return_index=True, return_inverse=True)
    seen = np.argsort(first)  # distinct configurations in first-seen order, as `factorize` numbers them
    rank = np.empty(len(seen), dtype=np.int64)
    rank[seen] = np.arange(len(seen))
    return rank[inverse.reshape(-1)], [tuple(r) for r in rows[first[seen]].tolist()]


def _ops(kernels: KernelTable, rows: np.ndarray) -> list[LaunchingOp]:
    shapes = kernels.op_shapes[rows] if kernels.op_shapes is not None else np.full(len(rows), "", dtype=object)
    stacks = kernels.op_stack[rows] if kernels.op_stack is not None else np.full(len(rows), "", dtype=object)
    key_code, distinct = factorize(list(zip(kernels.op[rows].tolist(), shapes.tolist(), stacks.tolist())))
    w = _weights(kernels, rows)
    per = np.bincount(key_code, weights=w, minlength=len(distinct))
    total = per.sum()
    out = []
    for k in np.argsort(-per, kind="stable")[:MAX_OPS].tolist():
        name, shape, stack = distinct[k]
        if name or shape:
            out.append(LaunchingOp(name, shape, stack, 100.0 * per[k] / total))
    return out


def _launches(kernels: KernelTable, rows: np.ndarray, functions: np.ndarray | None, name: str) -> Launches:
    """The group's launches in the last traced iteration that holds any of them (`Launches`)."""
    steps = kernels.step[rows]
    last = int(steps.max()) if (steps >= 0).any() else -1
    target = rows[steps == last] if last >= 0 else rows
    if functions is None or whole_name_matches(name):
        matched, base = rows, "demangled"
    else:
        matched, base = np.flatnonzero(functions == functions[rows[0]]), "function"
    matched = matched[_launch_order(kernels, matched)]
    mine = np.isin(matched, target).astype(np.int8)
    # Runs of consecutive matches that are the group's launches of that iteration: the longest.
    edges = np.diff(np.concatenate(([0], mine, [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    best = int(np.argmax(ends - starts))
    return Launches(skip=int(starts[best]), count=int(ends[best] - starts[best]), step=last, name_base=base,
                    in_step=len(target))


def _launch_order(kernels: KernelTable, rows: np.ndarray) -> np.ndarray:
    """The order of `rows` by launching call (`KernelTable.launch_ns`), else by start; ties by start."""
    start = kernels.start_ns[rows]
    if kernels.launch_ns is None:
        return np.argsort(start, kind="stable")
    launch = kernels.launch_ns[rows]
    return np.lexsort((start, np.where(launch >= 0, launch, start)))
