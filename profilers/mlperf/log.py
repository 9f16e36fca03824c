"""One MLPerf Training result log (`result_N.txt`) as the events of one run.

A result log is a framework's console output with `:::MLLOG {json}` lines among anything else
(launcher banners, progress bars, a rank prefix before the token: Red Hat's v4.0 logs carry 50 kB
of console output before the first event). mlperf-logging's parser takes the text from the token
to the end of the line; so does this one. Its own parser raises on a line whose JSON lacks "key"
or is not an object, so the details below (init/train/eval split, throughput per block, the
accuracy curve) come from this tolerant reading, while the score itself is left to mlperf-logging
(profilers/mlperf/scoring.py). A line that is not an event is counted, never fatal.

What each event means is the MLPerf Training logging rules': init_start/init_stop bracket the
untimed initialisation, run_start/run_stop the timed run (run_stop's metadata has its status),
block_start/block_stop or epoch_start/epoch_stop the training between evaluations (metadata
first_epoch_num, epoch_count, epoch_num, samples_count), eval_start/eval_stop each evaluation and
eval_accuracy its result.
"""

from __future__ import annotations

import json
import math
import os

from tbd.core.errors import TraceFormatError
from tbd.core.targets import MAX_MLPERF_LOG_BYTES
from tbd.core.tta_records import Event, RunLog
from tbd.profilers.traces.files import read_trace_bytes

TOKEN = ":::MLLOG "
#: A result log larger than this is not one a run printed (tbd.core.targets tells them by the same cap).
MAX_LOG_BYTES = MAX_MLPERF_LOG_BYTES


def read_log(path: str | os.PathLike) -> RunLog:
    """Parse a result log; raises TraceFormatError (one line) for a file that holds no event at all."""
    data = read_trace_bytes(path)
    if len(data) > MAX_LOG_BYTES:
        raise TraceFormatError(f"{os.fspath(path)}: {len(data) >> 20} MiB is not an MLPerf result log "
                               f"(at most {MAX_LOG_BYTES >> 20} MiB)")
    text = data.decode("latin-1")  # as mlperf-logging opens them: any byte reads
    events, bad, first_bad = [], 0, None
    for line in text.splitlines():
        at = line.find(TOKEN)
        if at < 0:
            continue
        event, why = _event(line[at + len(TOKEN):].strip())
        if event is None:
            bad += 1
            first_bad = first_bad or why
        else:
            events.append(event)
    if not events:
        what = f"{bad} malformed `:::MLLOG` lines ({first_bad})" if bad else "no `:::MLLOG` event lines"
        raise TraceFormatError(f"{os.fspath(path)}: not an MLPerf result log: {what}")
    return RunLog(os.fspath(path), tuple(events), bad, first_bad, frozenset(e.key for e in events))


def _event(text: str) -> tuple[Event | None, str]:
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None, "not JSON"
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    key, time_ms = obj.get("key"), obj.get("time_ms")
    if not isinstance(key, str):
        return None, "no key"
    if time_ms is None:  # Alibaba's v0.7 logs carry time_s, which mlperf-logging's parser does not read either
        return None, "time_s instead of time_ms, which mlperf-logging reads" if "time_s" in obj else "no time_ms"
    if isinstance(time_ms, str):
        try:
            time_ms = float(time_ms)
        except ValueError:
            return None, "time_ms is not a number"
    if isinstance(time_ms, bool) or not isinstance(time_ms, (int, float)):
        return None, "time_ms is not a number"
    try:
        time_ms = float(time_ms)  # an integer past a float's range (10**400) has no time
    except OverflowError:
        return None, "time_ms is not a number"
    if not math.isfinite(time_ms):
        return None, "time_ms is not a number"
    metadata = obj.get("metadata")
    return Event(time_ms, key, obj.get("value"), metadata if isinstance(metadata, dict) else {}), ""
