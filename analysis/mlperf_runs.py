"""What one MLPerf run's events say beyond its score: where the time went, how fast each block ran,
and how the quality metric climbed.

The score (run_start to run_stop, olympic mean, RCP scaling) is mlperf-logging's to compute
(profilers/mlperf/scoring.py); these are the terms around it that a reader needs to see how
throughput became time to train: init (untimed), the timed run split into training and evaluation,
samples per second of each logged block or epoch, and the eval_accuracy curve.

Logs differ in what they carry, all seen in v4.0 submissions: blocks with a cumulative
samples_count on block_start and block_stop (Red Hat's llama2_70b_lora), blocks with epoch_count in
epochs of train_samples, epochs (tinycorp's resnet: epoch_start/epoch_stop, one epoch of
train_samples each), blocks with only first_epoch_num (Google's gpt3, where epoch_num counts
samples and train_samples is not logged: samples per block are then unknown, said so, never
guessed).

Some benchmarks count samples in epoch_num (gpt3, bert: 1,207,959,552 and 2,400,396 at convergence
in v4.0 logs), as their rules allow; no benchmark trains for 100,000 epochs (unet3d, the longest,
runs a few thousand), so an epoch_num or epoch_count at or above `SAMPLES_NOT_EPOCHS` is read as
a sample count, and is never multiplied by train_samples (which Google's gpt3 logs as the samples
trained, not the data set's size).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tbd.core.tta_records import Event, RunLog, number
from tbd.core.tta_result import AccuracyPoint, EpochThroughput

#: An epoch_num or epoch_count this large counts samples, not epochs (module docstring).
SAMPLES_NOT_EPOCHS = 100_000
#: The statuses MLPerf's logging rules give run_stop; only "success" is a converged run.
RUN_STATUSES = ("success", "aborted")


@dataclass(frozen=True)
class RunTimeline:
    status: str | None  # run_stop's metadata status; None: no run_stop
    init_s: float | None
    run_s: float | None
    eval_s: float | None
    train_s: float | None
    epochs_to_converge: float | None
    samples_to_converge: float | None
    samples_reason: str | None  # how samples_to_converge was found, or why it is null
    throughput: list[EpochThroughput] = field(default_factory=list)
    accuracy: list[AccuracyPoint] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def run_timeline(log: RunLog) -> RunTimeline:
    notes = []
    if log.bad_lines:
        notes.append(f"{log.bad_lines} `:::MLLOG` line{'s' * (log.bad_lines != 1)} skipped ({log.first_bad})")
    start, stop = log.first("run_start"), log.last("run_stop")
    status = None
    if stop is not None:
        raw = stop.metadata.get("status")
        status = raw if raw in RUN_STATUSES else None
        if raw is not None and status is None:  # never echoed: it may hold anything
            notes.append("run_stop's status is neither success nor aborted (MLPerf's two): not a converged run")
    run_s = _span(start, stop)
    init_s = _span(log.first("init_start"), log.first("init_stop"))
    origin = start.time_ms if start is not None else log.events[0].time_ms
    # The run is the events between run_start and run_stop in FILE order, as the RCP checker reads a
    # log: stable_diffusion's evaluations run offline after training and are merged into the log
    # before run_stop with later timestamps (Dell's v4.1 logs: run_stop at ...611029, evals to ...627873).
    run = _in_run(log.events, start, stop)
    eval_s = _eval_seconds(run)
    if eval_s is None and run_s is not None:
        notes.append("no eval_start/eval_stop pairs: the run's evaluation time is not logged")
    train_s = run_s - eval_s if run_s is not None and eval_s is not None and eval_s <= run_s else None
    train_samples = _amount(number(log.value("train_samples")))
    accuracy, left_out = _accuracy(run, origin)
    if left_out:
        notes.append(left_out)
    evals = [e for e in run if e.key == "eval_accuracy"]
    last = _eval_point(evals[-1], origin) if evals else None
    epochs, samples, samples_reason = _to_converge(last, train_samples, status)
    throughput, why = _throughput(log.events, origin, train_samples)
    if why:
        notes.append(why)
    return RunTimeline(status, init_s, run_s, eval_s, train_s, epochs, samples, samples_reason,
                       throughput, accuracy, notes)


def _amount(value: float | None) -> float | None:
    """`value` if a finite non-negative number (a product or difference of logged numbers may overflow), else None."""
    return value if value is not None and math.isfinite(value) and value >= 0 else None


def _span(begin: Event | None, end: Event | None) -> float | None:
    if begin is None or end is None or end.time_ms < begin.time_ms:
        return None
    return _amount((end.time_ms - begin.time_ms) / 1000.0)


def _in_run(events: tuple[Event, ...], start: Event | None, stop: Event | None) -> tuple[Event, ...]:
    """The events after run_start and up to the last run_stop, in file order (all of them without either)."""
    first = next((i for i, e in enumerate(events) if e is start), 0)
    last = next((i for i in range(len(events) - 1, -1, -1) if events[i] is stop), len(events) - 1)
    return events[first:last + 1]


def _eval_seconds(run: tuple[Event, ...]) -> float | None:
    """The eval_start -> eval_stop intervals inside the run, each start paired with the next stop."""
    total, opened, seen = 0.0, None, False
    for event in run:
        if event.key == "eval_start":
            opened = event.time_ms
        elif event.key == "eval_stop" and opened is not None:
            total += max(0.0, event.time_ms - opened)
            opened, seen = None, True
    return _amount(total / 1000.0) if seen else None  # evaluations not logged as intervals: unknown, not zero


def _eval_point(event: Event, origin: float) -> AccuracyPoint:
    """An eval_accuracy event as a point; its value is the first number of a dict of metrics (maskrcnn
    logs {"BBOX": 0.377, "SEGM": 0.339}), NaN-free: a value that is no number reads as 0 only here,
    where the point serves for its epoch and samples, never drawn."""
    epoch, samples = number(event.metadata.get("epoch_num")), number(event.metadata.get("samples_count"))
    value = _value(event.value)
    return AccuracyPoint((event.time_ms - origin) / 1000.0, value if value is not None else 0.0, epoch,
                         samples if samples is not None and samples >= 0 else None)


def _value(value: object) -> float | None:
    if isinstance(value, dict):
        return next((v for v in map(number, value.values()) if v is not None), None)
    return number(value)


def _accuracy(run: tuple[Event, ...], origin: float) -> tuple[list[AccuracyPoint], str | None]:
    """The evaluations with a number to draw, in time order, of one metric: the first of a dict of them
    (maskrcnn's BBOX of {"BBOX", "SEGM"}), or of the metadata `metric` the first evaluation names
    (stable_diffusion logs FID and CLIP as separate lines; one curve is one metric). And a note on
    what was left out."""
    evals = [e for e in run if e.key == "eval_accuracy" and _value(e.value) is not None]
    names = [e.metadata.get("metric") if isinstance(e.metadata.get("metric"), str) else None for e in evals]
    chosen = next((n for n in names if n is not None), None)
    evals = [e for e in evals if _amount((e.time_ms - origin) / 1000.0) is not None]
    points = [_eval_point(e, origin) for e, n in zip(evals, names) if n is None or n == chosen]
    others = sorted({n for n in names if n is not None and n != chosen})
    note = f"accuracy curve of {chosen}; {', '.join(o[:20] for o in others)} not drawn" if others else None
    if len(evals) < len(names):
        early = f"{len(names) - len(evals)} eval_accuracy logged before run_start (by time_ms) not drawn"
        note = f"{note}; {early}" if note else early
    return sorted(points, key=lambda p: p.seconds), note


def _to_converge(last: AccuracyPoint | None, train_samples: float | None,
                 status: str | None) -> tuple[float | None, float | None, str | None]:
    """The last evaluation's epoch and samples, as the RCP checker reads a converged run's."""
    if status != "success":
        return None, None, "the run did not converge" if status else "the log has no run_stop"
    if last is None:
        return None, None, "the log has no eval_accuracy"
    epoch = _amount(last.epoch)
    if epoch is not None and epoch >= SAMPLES_NOT_EPOCHS:
        samples = last.samples if last.samples is not None else epoch
        return None, samples, "eval_accuracy epoch_num, a sample count here"
    if last.samples is not None:
        return epoch, last.samples, "eval_accuracy samples_count"
    if epoch is not None and train_samples:
        return epoch, _amount(epoch * train_samples), "epoch_num x train_samples"
    why = "no samples_count on eval_accuracy" + ("" if train_samples else " and no train_samples logged")
    return epoch, None, why


def _throughput(events: tuple[Event, ...], origin: float,
                train_samples: float | None) -> tuple[list[EpochThroughput], str | None]:
    """Samples per second of each block (block_start/stop), else of each epoch (epoch_start/stop)."""
    keys = ("block_start", "block_stop") if any(e.key == "block_stop" for e in events) else ("epoch_start",
                                                                                            "epoch_stop")
    rows, opened, unknown = [], None, 0
    for event in events:
        if event.key == keys[0]:
            opened = event
        elif event.key == keys[1] and opened is not None:
            seconds = _amount((event.time_ms - opened.time_ms) / 1000.0)
            start_s = _amount((opened.time_ms - origin) / 1000.0)
            if seconds and start_s is not None:
                samples = _block_samples(opened, event, keys[0] == "epoch_start", train_samples)
                unknown += samples is None
                index = _index(opened, len(rows))
                rows.append(EpochThroughput(index, start_s, seconds, samples,
                                            _amount(samples / seconds) if samples is not None else None))
            opened = None
    why = None
    if unknown:
        why = (f"samples of {unknown} of {len(rows)} {keys[0].split('_')[0]}s unknown: the log gives no samples_count "
               "for them" + ("" if train_samples else " and no train_samples"))
    return rows, why


def _block_samples(start: Event, stop: Event, is_epoch: bool, train_samples: float | None) -> float | None:
    begin, end = number(start.metadata.get("samples_count")), number(stop.metadata.get("samples_count"))
    if begin is not None and end is not None and end > begin:
        return _amount(end - begin)  # cumulative counts (llama2_70b_lora)
    if is_epoch and train_samples:
        return train_samples
    count = number(start.metadata.get("epoch_count"))
    if count is not None and count >= SAMPLES_NOT_EPOCHS:
        return count  # gpt3's blocks count samples
    if count is not None and count > 0 and train_samples:
        return _amount(count * train_samples)
    return None


def _index(start: Event, order: int) -> float:
    for key in ("first_epoch_num", "epoch_num"):
        value = number(start.metadata.get(key))
        if value is not None:
            return value
    value = number(start.value)
    return value if value is not None else float(order)
