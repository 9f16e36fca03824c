"""The mutation corpus in CI: a bounded number of hostile variants of every committed fixture trace.

Each case (tests/fuzz/mutate.py: seeded, so the same bytes every run) goes through the CLI
(`tbd analyze PATH --json OUT`, Kineto) or the reader itself (MXNet, TensorFlow; no framework
needed), and must end "ok" (exit 0, a profile that loads again with sane figures, a clean report)
or "error" (exit 2 and one printable line on stderr, no traceback): tests/fuzz/outcomes.py.
bench/fuzz_corpus.py runs thousands of them and prints the counts.
"""

from __future__ import annotations

import pytest
from mutate import FIXTURES, cases
from outcomes import BAD, ERROR, OK, run_case

CASES_PER_FIXTURE = 40


@pytest.mark.parametrize("fixture", sorted(FIXTURES))
def test_every_mutated_fixture_gives_a_sane_result_or_one_clean_error(fixture, tmp_path):
    outcomes = [(case, run_case(case, tmp_path)) for case in cases(CASES_PER_FIXTURE, fixtures=[fixture])]
    bad = [f"case {case.index} ({case.mutation}): {out.detail}" for case, out in outcomes if out.kind == BAD]
    assert not bad, "\n".join(bad)
    kinds = {out.kind for _, out in outcomes}
    # Both outcomes must occur, or the mutations no longer exercise the reader (all refused) or
    # no longer attack it (all accepted).
    assert kinds == {OK, ERROR}, kinds
    slow = [f"case {case.index} ({case.mutation}): {out.seconds:.1f} s" for case, out in outcomes if out.seconds > 10]
    assert not slow, "\n".join(slow)
