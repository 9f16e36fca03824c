"""Error rates of the warm-up rule on the recorded corpus, the new rule beside the old one.

    python bench/warmup_rule.py [--corpus tests/fixtures/warmup_corpus/corpus.json] [--series]

Each series is replayed as the loop sees it: the rule is asked after every iteration (a candidate
depends only on the iterations before its decision, so one call over the series gives the same
first decision, at `decided_at`). Against the series' offline ground truth (bench/warmup_truth.py):

- false stable: the rule decided, and either the decision came before the true end of warm-up
  (the timing window would start inside it), or the median of the TIMING_WINDOW iterations after
  the decision is off the true stable level by more than max(TOL, how far such medians stray
  inside the true stable phase itself: their 95th percentile) -- a fixed 10 % would fail a
  perfect rule on a series whose iterations vary by a factor of 2 and come in bursts. Where the
  series has no stable phase, 3 standard errors of such a median at its noise replace the latter;
- false unstable: the series has a stable phase but the rule never decided within the budget
  (the series' length less TIMING_WINDOW, so every decision can be judged; at most the loop's
  max_warmup_iterations, 200);
- iterations to decide: the median of `decided_at` over the series where it decided.

docs/warmup.md gives the numbers; tests/unit/test_warmup_corpus.py recomputes them.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "warmup_corpus" / "corpus.json"
TIMING_WINDOW = 20  # iterations after the decision that are judged: the loop's default --iterations
TOL = 0.10  # |log| distance of their median from the stable level always accepted (~10 %)
MEDIAN_SE = 1.2533

#: A rule: per-iteration times -> (first stable iteration, iterations it needed to decide) or None.
Rule = Callable[[np.ndarray], "tuple[int, int] | None"]


def new_rule(times: np.ndarray) -> tuple[int, int] | None:
    from tbd.analysis.stability import detect_timed

    found = detect_timed(times, 1e-6)  # the corpus keeps microseconds; the loop's own call
    return None if found is None else (found.start, found.decided_at)


def old_rule(times: np.ndarray, window: int = 5, cv_max: float = 0.10, median_tol: float = 0.05) \
        -> tuple[int, int] | None:
    """The rule analysis/stability.py had before the corpus (verbatim): CV < 10 % in two windows of 5."""
    t = np.asarray(times, dtype=np.float64)
    w = window
    if t.size < 2 * w:
        return None
    windows = np.lib.stride_tricks.sliding_window_view(t, w)
    mean = windows.mean(axis=1)
    cv = np.divide(windows.std(axis=1), mean, out=np.full_like(mean, np.inf), where=mean > 0)
    median = np.median(windows, axis=1)
    n = windows.shape[0] - w
    here, after = median[:n], median[w : w + n]
    agree = np.abs(after - here) <= median_tol * here
    ok = (cv[:n] < cv_max) & (cv[w : w + n] < cv_max) & agree
    hits = np.flatnonzero(ok)
    return (int(hits[0]), int(hits[0]) + 2 * w) if hits.size else None


RULES: dict[str, Rule | None] = {"old (CV < 10 %)": old_rule, "new (change point)": new_rule,
                                 "oracle (true end)": None}


@dataclass(frozen=True)
class Outcome:
    series: str
    decided_at: int | None  # None: not within the budget
    start: int | None
    seconds_to_decide: float | None
    false_stable: bool
    false_unstable: bool
    why: str


def stray(t: np.ndarray, truth: dict) -> float:
    """How far a TIMING_WINDOW-iteration median strays from the stable level inside the true
    stable phase (95th percentile, |log|); 3 standard errors at the series' noise without one."""
    if truth["end"] is None or t.size - truth["end"] < TIMING_WINDOW:
        return 3 * MEDIAN_SE * truth["sigma"] / np.sqrt(TIMING_WINDOW)
    x = np.log(t[truth["end"]:])
    medians = np.median(np.lib.stride_tricks.sliding_window_view(x, TIMING_WINDOW), axis=1)
    return float(np.quantile(np.abs(medians - np.log(truth["stable_median_us"])), 0.95))


def oracle(series: dict) -> Rule:
    """Decides exactly at the true end (or never): the criteria's own floor, for comparison."""
    end = series["truth"]["end"]
    return lambda times: None if end is None or end >= times.size else (end, end)


def judge(series: dict, rule: Rule, max_warmup: int = 200) -> Outcome:
    t = np.asarray(series["times_us"], dtype=np.float64)
    truth = series["truth"]
    budget = min(t.size - TIMING_WINDOW, max_warmup)
    found = rule(t[:budget])
    if found is None:
        unstable = truth["end"] is not None
        return Outcome(series["id"], None, None, None, False, unstable,
                       "never decided" + (" though stable" if unstable else ""))
    start, decided = found
    level = np.log(truth["stable_median_us"])
    after = float(np.median(np.log(t[decided : decided + TIMING_WINDOW])))
    tol = max(TOL, stray(t, truth))
    seconds = float(t[:decided].sum()) / 1e6
    if truth["end"] is not None and decided < truth["end"]:
        return Outcome(series["id"], decided, start, seconds, True, False,
                       f"decided at {decided} < true end {truth['end']}")
    if abs(after - level) > tol:
        return Outcome(series["id"], decided, start, seconds, True, False,
                       f"next {TIMING_WINDOW} off the stable level by {np.expm1(abs(after - level)):.0%} > "
                       f"{np.expm1(tol):.0%}")
    return Outcome(series["id"], decided, start, seconds, False, False, "ok")


@dataclass(frozen=True)
class Rates:
    series: int
    with_stable_phase: int
    false_stable: int
    false_unstable: int
    median_decided_at: float | None

    @property
    def false_stable_rate(self) -> float:
        return self.false_stable / self.series

    @property
    def false_unstable_rate(self) -> float:
        return self.false_unstable / self.with_stable_phase if self.with_stable_phase else 0.0


def rates(outcomes: list[Outcome], corpus: dict) -> Rates:
    decided = [o.decided_at for o in outcomes if o.decided_at is not None]
    return Rates(series=len(outcomes),
                 with_stable_phase=sum(s["truth"]["end"] is not None for s in corpus["series"]),
                 false_stable=sum(o.false_stable for o in outcomes),
                 false_unstable=sum(o.false_unstable for o in outcomes),
                 median_decided_at=float(np.median(decided)) if decided else None)


def evaluate(corpus: dict, rule: Rule | None) -> tuple[Rates, list[Outcome]]:
    """`rule` None: the oracle of each series."""
    outcomes = [judge(s, rule or oracle(s)) for s in corpus["series"]]
    return rates(outcomes, corpus), outcomes


def grid(corpus: dict) -> None:
    """False stable / false unstable / median iterations to decide of the new rule's neighbours."""
    from tbd.analysis.stability import StabilityRule, detect

    print(f"{'window':>6} {'z':>4}  false stable  false unstable  median iters")
    for w in (5, 8, 10, 12):
        for z in (2.0, 3.0, 4.0):
            rule = StabilityRule(window=w, z=z)

            def run(times: np.ndarray, rule: StabilityRule = rule) -> tuple[int, int] | None:
                found = detect(times, rule)
                return None if found is None else (found.start, found.decided_at)

            r, _ = evaluate(corpus, run)
            print(f"{w:>6} {z:>4g}  {r.false_stable:>5}/{r.series:<6} {r.false_unstable:>6}/{r.with_stable_phase:<7} "
                  f"{r.median_decided_at if r.median_decided_at is not None else '-':>12}")


def markdown(corpus: dict) -> None:
    """The corpus and rates tables of docs/warmup.md, from the data."""
    outcomes = {name: evaluate(corpus, rule)[1] for name, rule in RULES.items()}
    print("| series | iterations | median | sigma | true end | old rule decides | new rule decides |")
    print("|---|---|---|---|---|---|---|")
    for k, s in enumerate(corpus["series"]):
        cells = []
        for name in ("old (CV < 10 %)", "new (change point)"):
            o = outcomes[name][k]
            verdict = "" if o.why == "ok" else (" **false unstable**" if o.false_unstable else
                                                 " **false stable**" if o.false_stable else " (no stable phase)")
            cells.append(("never" if o.decided_at is None else f"{o.decided_at} ({o.seconds_to_decide:.1f} s)")
                         + verdict)
        t = s["truth"]
        print(f"| {s['id']} | {len(s['times_us'])} | {t['stable_median_us'] / 1000:.1f} ms | {t['sigma']:.2f} | "
              f"{'none' if t['end'] is None else t['end']} | {cells[0]} | {cells[1]} |")
    print()
    print("| rule | false stable | false unstable | median iterations to decide |")
    print("|---|---|---|---|")
    for name, rule in RULES.items():
        r, _ = evaluate(corpus, rule)
        decide = "-" if r.median_decided_at is None else f"{r.median_decided_at:g}"
        print(f"| {name} | {r.false_stable}/{r.series} ({r.false_stable_rate:.0%}) | "
              f"{r.false_unstable}/{r.with_stable_phase} ({r.false_unstable_rate:.0%}) | {decide} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--series", action="store_true", help="one line per series and rule")
    parser.add_argument("--grid", action="store_true", help="the new rule's rates over window x z (sensitivity)")
    parser.add_argument("--markdown", action="store_true", help="the tables of docs/warmup.md")
    args = parser.parse_args()
    corpus = json.loads(args.corpus.read_text())
    if args.grid:
        grid(corpus)
        return
    if args.markdown:
        markdown(corpus)
        return
    print(f"corpus: {len(corpus['series'])} series, {sum(len(s['times_us']) for s in corpus['series'])} iterations")
    print(f"{'rule':20} {'false stable':>14} {'false unstable':>16} {'median iters to decide':>24}")
    for name, rule in RULES.items():
        r, outcomes = evaluate(corpus, rule)
        decide = "-" if r.median_decided_at is None else f"{r.median_decided_at:g}"
        print(f"{name:20} {r.false_stable:>3}/{r.series:<3} {r.false_stable_rate:>5.0%} "
              f"{r.false_unstable:>4}/{r.with_stable_phase:<3} {r.false_unstable_rate:>5.0%} {decide:>24}")
        if args.series:
            for o in outcomes:
                secs = "" if o.seconds_to_decide is None else f" ({o.seconds_to_decide:.1f} s)"
                print(f"    {o.series:45} decided {o.decided_at}{secs} start {o.start}: {o.why}")


if __name__ == "__main__":
    main()
