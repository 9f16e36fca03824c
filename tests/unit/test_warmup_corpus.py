"""The warm-up rule's error rates on the recorded corpus are at most what docs/warmup.md states.

The rates are computed here (bench/warmup_rule.py over tests/fixtures/warmup_corpus/corpus.json),
the bounds read from the table in docs/warmup.md, so the document cannot claim better than the
code does. The corpus' ground truth is checked to come from bench/warmup_truth.py as stored.
"""

import json
import re

import pytest
from testpaths import FIXTURES, ROOT, load_bench

CORPUS = json.loads((FIXTURES / "warmup_corpus" / "corpus.json").read_text())
DOC = (ROOT / "docs" / "warmup.md").read_text()


def _documented(rule: str) -> tuple[int, int, float]:
    """(false stable, false unstable, median iterations to decide) of `rule`'s row in docs/warmup.md."""
    row = next(line for line in DOC.splitlines() if line.startswith(f"| {rule} |"))
    (fs, n), (fu, m) = re.findall(r"(\d+)/(\d+)", row)[:2]
    assert int(n) == len(CORPUS["series"]), "docs/warmup.md was measured on another corpus"
    decide = float(row.rstrip(" |").split("|")[-1])
    return int(fs), int(fu), decide


@pytest.mark.parametrize("name", ["new (change point)", "old (CV < 10 %)"])
def test_rates_on_the_corpus_are_at_most_the_documented_ones(name):
    bench = load_bench("warmup_rule")
    rates, _ = bench.evaluate(CORPUS, bench.RULES[name])
    false_stable, false_unstable, decide = _documented(name)
    assert rates.false_stable <= false_stable
    assert rates.false_unstable <= false_unstable
    assert rates.median_decided_at is None or rates.median_decided_at <= decide


def test_the_new_rule_converges_where_the_old_one_does_not():
    bench = load_bench("warmup_rule")
    new, _ = bench.evaluate(CORPUS, bench.new_rule)
    old, _ = bench.evaluate(CORPUS, bench.old_rule)
    assert new.false_unstable < old.false_unstable
    assert new.false_stable + new.false_unstable < old.false_stable + old.false_unstable


def test_corpus_is_small_and_complete():
    path = FIXTURES / "warmup_corpus" / "corpus.json"
    assert path.stat().st_size < 300_000
    keys = {"id", "model", "framework", "size", "batch", "load", "times_us", "truth"}
    for s in CORPUS["series"]:
        assert keys <= s.keys() and len(s["times_us"]) >= 100 and all(isinstance(t, int) for t in s["times_us"])
    assert {s["framework"] for s in CORPUS["series"]} == {"pytorch", "mxnet", "tensorflow"}
    assert {s["load"] != "none" for s in CORPUS["series"]} == {True, False}


@pytest.mark.parametrize("index", [0, 1, -1])
def test_stored_ground_truth_is_what_the_offline_method_gives(index):
    # the exact search is O(n^2) medians (~1 s a series): three series stand for the rest
    truth = load_bench("warmup_truth")
    series = CORPUS["series"][index]
    assert truth.true_warmup(series["times_us"]).to_json() == series["truth"]
    assert CORPUS["truth_method"] == truth.TRUTH_METHOD
