"""The op tree's vectorised queries (profilers/kineto/tree.py) against the plain loops they replace.

A stack of open ops, one op at a time, is the definition of an op's parent; the brute-force
"latest index in range with a value above the threshold" is the definition of `latest_above`.
Hypothesis draws intervals with ties, zero lengths and improper nesting (a child outliving its
parent, as clock quirks produce).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tbd.profilers.kineto.columns import OpColumns
from tbd.profilers.kineto.tree import enclosing_ops, formula_roots, latest_above, op_tree, self_times


def stack_parents(start, end, thread):
    """The reference: per thread, pop the ops that ended at or before this start; the top is the parent."""
    parent, stack, current = [], [], None
    for s, t in zip(start, thread):
        if t != current:
            stack, current = [], t
        while stack and end[stack[-1]] <= s:
            stack.pop()
        parent.append(stack[-1] if stack else -1)
        stack.append(len(parent) - 1)
    return parent


def columns(ops: list[tuple[int, int, int]]) -> OpColumns:
    """OpColumns from (thread, start, dur) triples; names and signatures are the row numbers."""
    n = len(ops)
    thread = np.array([o[0] for o in ops], dtype=np.int64)
    return OpColumns(name=np.arange(n, dtype=np.int32), start_ns=np.array([o[1] for o in ops], dtype=np.int64),
                     dur_ns=np.array([o[2] for o in ops], dtype=np.int64), thread=thread, tid=thread,
                     signature=np.arange(n, dtype=np.int32))


intervals = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40), st.integers(0, 15)), max_size=60)


@settings(max_examples=400, deadline=None)
@given(intervals)
def test_parents_are_what_a_stack_of_open_ops_gives(ops):
    tree = op_tree(columns(ops))
    assert tree.parent.tolist() == stack_parents(tree.start_ns.tolist(), tree.end_ns.tolist(), tree.thread.tolist())
    # depth: the number of ancestors
    for i, p in enumerate(tree.parent.tolist()):
        assert tree.depth[i] == (0 if p < 0 else tree.depth[p] + 1)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.integers(0, 20), max_size=50), st.data())
def test_latest_above_is_the_brute_force_answer(values, data):
    n = len(values)
    q = data.draw(st.integers(0, 30))
    lo = np.array(data.draw(st.lists(st.integers(0, n), min_size=q, max_size=q)), dtype=np.int64)
    hi = np.array(data.draw(st.lists(st.integers(-1, max(n - 1, -1)), min_size=q, max_size=q)), dtype=np.int64)
    th = np.array(data.draw(st.lists(st.integers(-1, 21), min_size=q, max_size=q)), dtype=np.int64)
    got = latest_above(np.array(values, dtype=np.int64), lo, hi, th)
    expected = [max((j for j in range(a, b + 1) if values[j] > t), default=-1) for a, b, t in zip(lo, hi, th)]
    assert got.tolist() == expected


@settings(max_examples=300, deadline=None)
@given(intervals, st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60)), max_size=30))
def test_enclosing_op_is_the_innermost_open_op(ops, calls):
    tree = op_tree(columns(ops))
    thread = np.array([c[0] for c in calls], dtype=np.int64)
    t = np.array([c[1] for c in calls], dtype=np.int64)
    got = enclosing_ops(tree, thread, t).tolist()
    for g, th, ti in zip(got, thread.tolist(), t.tolist()):
        # the reference: walk up from the last op on the thread starting at or before t
        mine = [i for i in range(len(tree)) if tree.thread[i] == th and tree.start_ns[i] <= ti]
        i = mine[-1] if mine else -1
        while i >= 0 and tree.end_ns[i] <= ti:
            i = int(tree.parent[i])
        assert g == i


def test_self_times_and_formula_roots_by_hand():
    # thread 0: A [0, 100) > B [10, 40) > C [20, 30); A > D [50, 60)
    tree = op_tree(columns([(0, 0, 100), (0, 10, 30), (0, 20, 10), (0, 50, 10)]))
    assert tree.parent.tolist() == [-1, 0, 1, 0]
    assert self_times(tree).tolist() == [100 - 30 - 10, 30 - 10, 10, 10]
    # B and C have formulas: B is the outermost for itself and C; A and D have none
    assert formula_roots(tree, np.array([False, True, True, False])).tolist() == [-1, 1, 1, -1]
