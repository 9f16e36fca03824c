"""The `tbd tta` mutation corpus in CI: hostile MLPerf result folders and logs and DAWNBench entries.

Each case (tests/fuzz/mutate_tta.py: seeded, so the same files every run) goes through `tbd tta`
in-process and must end "ok" (exit 0, sane output: no nan/inf, no negative figure, JSON that loads
again) or "error" (exit 2, one printable line): tests/fuzz/outcomes_tta.py. bench/fuzz_corpus.py runs
thousands. The real v4.0 logs (mlperf_real) are not in CI: only where /work/shared/mlperf is.
"""

from __future__ import annotations

import pytest
from mutate_tta import KINDS, cases
from outcomes_tta import BAD, ERROR, OK, run_case

#: Cases per kind: an MLPerf folder costs the summarizer ~0.3 s, a loose log or entry far less.
CASES = {"mlperf_folder": 12, "mlperf_log": 30, "dawnbench": 40}


@pytest.mark.parametrize("kind", KINDS)
def test_every_mutated_tta_input_gives_a_sane_result_or_one_clean_error(kind, tmp_path):
    outcomes = [(case, run_case(case, tmp_path)) for case in cases(CASES[kind], kinds_=(kind,))]
    bad = [f"case {case.index} ({case.mutation}): {out.detail}" for case, out in outcomes if out.kind == BAD]
    assert not bad, "\n".join(bad)
    kinds = {out.kind for _, out in outcomes}
    # Both outcomes must occur, or the mutations no longer attack (all accepted) or no longer reach
    # the scoring (all refused). A folder's broken logs are "could not read" lines beside the rest,
    # scored: exit 0 there, unless nothing at all scores.
    assert kinds == ({OK} if kind == "mlperf_folder" else {OK, ERROR}) or kinds == {OK, ERROR}, kinds
    slow = [f"case {case.index} ({case.mutation}): {out.seconds:.1f} s" for case, out in outcomes if out.seconds > 10]
    assert not slow, "\n".join(slow)
