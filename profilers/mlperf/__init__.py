"""MLPerf Training result logs: the tolerant event reader and the scoring by mlperf-logging."""
