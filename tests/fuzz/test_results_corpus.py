"""The corpus of every other input tbd reads back, in CI: a bounded, seeded subset of each kind.

tests/fuzz/mutate_results.py makes the cases (saved results mutated field by field, run directories
with hostile files, hostile names, poor terminals, numeric options at the edge);
tests/fuzz/outcomes_results.py judges them: "ok" (exit 0 and clean output: no NaN, no negative
percentage, no formula cell, no injected element) or "error" (exit 2, one printable line). Anything
else is a finding. bench/fuzz_corpus.py runs thousands of them and prints the counts per kind.
"""

from __future__ import annotations

import json

import mutate_json
import pytest
from mutate_results import RENDER, committed_seeds, option_cases
from mutate_results import cases as result_cases
from outcomes import BAD, ERROR, OK
from outcomes_results import csv_problem, html_problem, made_seeds, negative_percent, run_case

#: case indices per kind in CI (seconds each: results and rundir ~0.05, names ~0.1 but ~5 for a page or
#: figures (index 0: the first seed's page), terminal ~3)
CI_CASES = {"results": range(50), "rundir": range(30), "terminal": range(2)}


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return {**committed_seeds(), **made_seeds(tmp_path_factory.mktemp("seeds"))}


def _judged(kind, seeds, tmp_path, indices):
    outcomes = [(case, run_case(case, tmp_path)) for i in indices for case in result_cases(kind, seeds, 1, i)]
    bad = [f"{case.fixture}#{case.index} ({case.mutation}): {out.detail}" for case, out in outcomes if out.kind == BAD]
    assert not bad, "\n".join(bad)
    return {out.kind for _, out in outcomes}


@pytest.mark.parametrize("kind", sorted(CI_CASES))
def test_every_kind_gives_a_sane_result_or_one_clean_error(kind, seeds, tmp_path):
    kinds = _judged(kind, seeds, tmp_path, CI_CASES[kind])
    if kind in ("results", "rundir"):
        assert kinds == {OK, ERROR}, kinds  # both: the mutations still reach the renderers and the checks


def test_every_hostile_name_renders_clean(seeds, tmp_path):
    """Each of mutate_json.HOSTILE_NAMES once ($, backslashes, <script>, a formula, ESC, NUL, CR, a right-to-left
    override, 300k characters), each in another seed document and output (text, CSV, JSON; a page or figures for
    every SLOW_EVERY-th): names_case(i) takes seed i % n and hostile name i // n."""
    n = len([name for name in seeds if any(k in seeds[name] for k in RENDER)])
    _judged("names", seeds, tmp_path, [h * n + h % n for h in range(len(mutate_json.HOSTILE_NAMES))])


def test_every_numeric_option_at_the_edge_is_refused_or_sane(tmp_path):
    every = option_cases()
    chosen = every[::7]  # a seeded slice of the fixed list: every command, most values
    outcomes = [(case, run_case(case, tmp_path)) for case in chosen]
    bad = [f"tbd {' '.join(case.argv[:1])} {case.mutation}: {out.detail}" for case, out in outcomes if out.kind == BAD]
    assert not bad, "\n".join(bad)
    assert {case.argv[0] for case in chosen} == {case.argv[0] for case in every}


# -- the generators and judges themselves, on hand-made inputs --------------------------------

def test_field_paths_walk_each_field_once_whatever_the_list_length():
    doc = {"a": 1, "k": [{"x": 1, "y": [2, 3]}, {"x": 2, "y": [4]}, {"z": None}]}
    # k[*].y[*] once (its first item), k[*] once, k[*].z from the item that has it
    assert mutate_json.field_paths(doc) == [(), ("a",), ("k",), ("k", 0), ("k", 0, "x"), ("k", 0, "y"),
                                            ("k", 0, "y", 0), ("k", 2, "z")]


def test_serialise_writes_the_values_no_dumps_writes():
    text = mutate_json.serialise({"a": mutate_json.DEEP, "b": float("nan"), "c": mutate_json.HUGE_INT}).decode()
    assert text.startswith('{"a": ' + "[" * 5000) and '"b": NaN' in text and '"c": 1' + "0" * 400 in text
    assert json.loads(mutate_json.serialise({"x": [1]})) == {"x": [1]}


def test_cases_are_the_same_bytes_every_time(seeds):
    for kind in ("results", "rundir", "names"):
        assert list(result_cases(kind, seeds, 2, 3)) == list(result_cases(kind, seeds, 2, 3))


def test_the_judges_catch_what_they_are_for():
    assert csv_problem('name,value\n"=HYPERLINK(""x"")",1\n') and csv_problem("@SUM(A1),2\n")
    assert csv_problem("-2+3,1\n") and not csv_problem("-2.5,+3,1e-3\nname,'=x\n")
    assert negative_percent("FLOP utilization   -3.5 %") and not negative_percent("3.5 %  x-1 %")

    class Names:
        kind = "results"
    assert "script" in html_problem("<p>x</p><script>alert(1)</script>", Names)
    assert "onerror" in html_problem('<img src="x" onerror="alert(1)">', Names)
    assert "javascript" in html_problem('<a href=" JavaScript:alert(1)">x</a>', Names)
    assert html_problem("<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>", Names) is None
