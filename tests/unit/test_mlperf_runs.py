"""One MLPerf run's terms (init, train, eval, throughput per block, the accuracy curve) and the
olympic mean's choice of runs, on small hand-written logs with every figure computed by hand."""

from __future__ import annotations

import json

import pytest

from tbd.analysis.mlperf_runs import run_timeline
from tbd.analysis.time_to_accuracy import olympic_verdicts, summarize_runs
from tbd.core.errors import TraceFormatError
from tbd.profilers.mlperf.log import read_log


def _line(t: float, key: str, value=None, **metadata) -> str:
    return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME", "key": key,
                                     "value": value, "metadata": {"file": "x.py", "lineno": 1, **metadata}})


def _log(tmp_path, lines, name="result_0.txt"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return read_log(path)


def test_blocks_with_cumulative_samples_evals_and_init(tmp_path):
    # As Red Hat's llama2_70b_lora logs: samples_count on block_start and block_stop is cumulative.
    log = _log(tmp_path, [
        "launcher banner, not an event",
        _line(0, "init_start"), _line(10_000, "init_stop"), _line(10_000, "run_start"),
        _line(10_000, "block_start", samples_count=0), _line(30_000, "block_stop", samples_count=400),
        _line(30_000, "eval_start"), _line(35_000, "eval_accuracy", 0.5, samples_count=400),
        _line(35_000, "eval_stop"),
        _line(35_000, "block_start", samples_count=400), _line(45_000, "block_stop", samples_count=800),
        "[rank 3] :::MLLOG {not json",
        _line(45_000, "eval_start"), _line(47_000, "eval_accuracy", 0.93, samples_count=800),
        _line(47_000, "eval_stop"), _line(47_000, "run_stop", 0.93, status="success")])
    t = run_timeline(log)
    assert t.status == "success"
    assert (t.init_s, t.run_s, t.eval_s, t.train_s) == (10.0, 37.0, 7.0, 30.0)  # eval 5 s + 2 s
    assert [(b.samples, b.seconds, b.samples_per_s) for b in t.throughput] == [(400, 20.0, 20.0), (400, 10.0, 40.0)]
    assert [(p.seconds, p.value) for p in t.accuracy] == [(25.0, 0.5), (37.0, 0.93)]
    assert (t.samples_to_converge, t.samples_reason) == (800, "eval_accuracy samples_count")
    assert t.notes == ["1 `:::MLLOG` line skipped (not JSON)"]


def test_epochs_of_train_samples_and_no_eval_intervals(tmp_path):
    # As tinycorp's resnet: epoch_start/epoch_stop, one epoch of train_samples each; here no eval_start.
    log = _log(tmp_path, [
        _line(0, "run_start"), _line(0, "train_samples", 1000),
        _line(0, "epoch_start", 1, epoch_num=1), _line(4000, "epoch_stop", 1, epoch_num=1),
        _line(4000, "epoch_start", 2, epoch_num=2), _line(9000, "epoch_stop", 2, epoch_num=2),
        _line(9500, "eval_accuracy", 0.76, epoch_num=2), _line(9500, "run_stop", status="success")])
    t = run_timeline(log)
    assert [(b.index, b.samples_per_s) for b in t.throughput] == [(1.0, 250.0), (2.0, 200.0)]
    assert t.eval_s is None and t.train_s is None  # not logged: unknown, never 0
    assert (t.epochs_to_converge, t.samples_to_converge) == (2.0, 2000.0)
    assert t.samples_reason == "epoch_num x train_samples"


def test_epoch_num_that_counts_samples_is_not_multiplied(tmp_path):
    # As Google's gpt3: epoch_num and epoch_count count samples, and train_samples is the samples trained.
    log = _log(tmp_path, [
        _line(0, "run_start"), _line(0, "train_samples", 300_000),
        _line(0, "block_start", first_epoch_num=0, epoch_count=150_000),
        _line(3000, "block_stop", first_epoch_num=0), _line(3000, "eval_accuracy", 2.7, epoch_num=150_000),
        _line(3000, "block_start", first_epoch_num=150_000, epoch_count=150_000),
        _line(6000, "block_stop", first_epoch_num=150_000), _line(6000, "eval_accuracy", 2.68, epoch_num=300_000),
        _line(6000, "run_stop", status="success")])
    t = run_timeline(log)
    assert [b.samples_per_s for b in t.throughput] == [50_000.0, 50_000.0]
    assert (t.epochs_to_converge, t.samples_to_converge) == (None, 300_000)


def test_an_aborted_run_has_no_convergence(tmp_path):
    t = run_timeline(_log(tmp_path, [_line(0, "run_start"), _line(100, "eval_accuracy", 0.1, epoch_num=1),
                                     _line(200, "run_stop", status="aborted")]))
    assert t.status == "aborted" and t.samples_to_converge is None and t.samples_reason == "the run did not converge"


def test_a_file_without_events_is_one_line(tmp_path):
    (tmp_path / "result_0.txt").write_text(":::MLLOG [1, 2]\n:::MLLOG {\"key\": 3}\n")
    with pytest.raises(TraceFormatError, match=r"result_0.txt: not an MLPerf result log: 2 malformed"):
        read_log(tmp_path / "result_0.txt")


def test_olympic_verdicts_by_hand():
    minutes = {"a": 10.0, "b": 12.0, "c": 11.0, "d": 20.0, "e": 9.0}
    verdicts, note = olympic_verdicts(minutes, {}, 1, 1.0, (10 + 12 + 11) / 3)
    assert {k for k, v in verdicts.items() if v.used} == {"a", "b", "c"}
    assert "fastest" in verdicts["e"].reason and "slowest" in verdicts["d"].reason and note is None
    # One failed run is the slowest: only the fastest of the rest is dropped.
    verdicts, note = olympic_verdicts({"a": 10.0, "b": 12.0, "c": 11.0, "e": 9.0}, {"d": "no run_stop"}, 1, 2.0,
                                      (10 + 12 + 11) / 3 * 2.0)
    assert {k for k, v in verdicts.items() if v.used} == {"a", "b", "c"} and note is None
    assert "as the slowest: no run_stop" in verdicts["d"].reason
    # A score the named runs do not give back is said, not hidden.
    _, note = olympic_verdicts(minutes, {}, 1, 1.0, 99.0)
    assert note and "could not be told apart" in note
    verdicts, _ = olympic_verdicts({"a": 1.0}, {"b": "x", "c": "y"}, 1, 1.0, None)
    assert not verdicts["a"].used and "2 runs failed" in verdicts["a"].reason


def test_run_summary_means_the_used_runs(tmp_path):
    from tbd.core.tta_result import TtaRun

    def run(used, init, train, ev):
        return TtaRun("f", used, None, "success", 1.0, None, None, None, None, None, init, train + ev, ev, train,
                      None, None)
    s = summarize_runs([run(True, 10.0, 100.0, 5.0), run(True, 20.0, 200.0, 15.0), run(False, 1e9, 1e9, 1e9)])
    assert (s.init_s, s.train_s, s.eval_s) == (15.0, 150.0, 10.0)


def test_hostile_times_and_counts_give_no_negative_or_infinite_figure(tmp_path):
    # An eval_accuracy whose time_ms is before run_start (a reordered log), a time_ms past a float's range
    # (10**400, read by json as an int), a negative train_samples and an epoch_num of -3.
    huge = ':::MLLOG {"namespace": "", "time_ms": 1' + "0" * 400 + ', "key": "eval_accuracy", "value": 0.9}'
    log = _log(tmp_path, [
        _line(0, "train_samples", -100), _line(2_000, "run_start"), _line(1_000, "eval_accuracy", 0.1, epoch_num=1),
        huge, _line(2_000, "epoch_start", epoch_num=1), _line(6_000, "epoch_stop", epoch_num=1),
        _line(7_000, "eval_accuracy", 0.9, epoch_num=-3), _line(8_000, "run_stop", status="success")])
    assert log.bad_lines == 1 and log.first_bad == "time_ms is not a number"
    t = run_timeline(log)
    # Only the eval after run_start is drawn: (7000 - 2000) / 1000 = 5 s; the early one is said.
    assert [(p.seconds, p.value) for p in t.accuracy] == [(5.0, 0.9)]
    assert "1 eval_accuracy logged before run_start (by time_ms) not drawn" in t.notes
    assert t.run_s == (8_000 - 2_000) / 1000 and t.epochs_to_converge is None  # epoch -3 is no epoch count
    # train_samples -100 is no count: the epoch's samples are unknown, not -100 / 4 s.
    assert [(r.seconds, r.samples, r.samples_per_s) for r in t.throughput] == [(4.0, None, None)]
