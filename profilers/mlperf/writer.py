"""MLPerf-format logs of a tbd training run, written with mlperf-logging's own mllog API.

Each run is one `result_N.txt` of `:::MLLOG {...}` lines, made by mllog's `MLLogger` (the class
MLPerf reference implementations log with) on a logger of its own that writes only to that file,
so runs in one process never mix. The file is written under a temporary name and renamed when the
run ends, or is stopped: a run cut short keeps its lines and no run_stop, which MLPerf's tools read
as a run that did not converge.
"""

from __future__ import annotations

import itertools
import logging
import os
from pathlib import Path
from typing import Any

from mlperf_logging.mllog import constants, mllog

_LOGGERS = itertools.count()


class RunLog:
    """One run's log: `event`, `start`, `end` as mllog's, into `path` once closed."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._partial = self.path.with_name(f".{self.path.name}.partial")
        self._logger = logging.getLogger(f"tbd.mllog.{os.getpid()}.{next(_LOGGERS)}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._handler = logging.FileHandler(self._partial, mode="w", encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._logger.addHandler(self._handler)
        # root_dir trims the calling file's path in each line's metadata to one relative to tbd.
        self.mllogger = mllog.MLLogger(logger=self._logger, root_dir=str(Path(__file__).parents[2]))

    def event(self, key: str, value: Any = None, **metadata: Any) -> None:
        self.mllogger.event(key=key, value=value, metadata=metadata or None, stack_offset=2)

    def start(self, key: str, value: Any = None, **metadata: Any) -> None:
        self.mllogger.start(key=key, value=value, metadata=metadata or None, stack_offset=2)

    def end(self, key: str, value: Any = None, **metadata: Any) -> None:
        self.mllogger.end(key=key, value=value, metadata=metadata or None, stack_offset=2)

    def close(self) -> Path:
        """Flush and rename the log to its final name (also for a run cut short)."""
        self._handler.flush()
        self._logger.removeHandler(self._handler)
        self._handler.close()
        os.replace(self._partial, self.path)
        return self.path


#: The keys tbd's runs log, by mllog's names.
KEYS = constants
