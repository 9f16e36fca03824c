"""What a user of HolisticTraceAnalysis would run on one trace: parse, temporal and kernel breakdowns.

    .venv-hta/bin/python bench/hta_analysis.py TRACE_DIR

Run by bench/trace_analysis.py inside HTA's own environment (HTA 0.5.0 needs pandas < 3, which
tbd's environment does not pin):

    python3 -m venv .venv-hta && .venv-hta/bin/pip install HolisticTraceAnalysis==0.5.0 "pandas<3"

Prints one JSON line: the idle and compute time HTA found (µs, rank 0) and its kernel count, so
the benchmark can show that HTA did the work it is timed for.
"""

from __future__ import annotations

import json
import sys
import warnings


def main() -> None:
    warnings.simplefilter("ignore")  # pandas FutureWarnings from inside HTA
    from hta.trace_analysis import TraceAnalysis

    analyzer = TraceAnalysis(trace_dir=sys.argv[1])
    temporal = analyzer.get_temporal_breakdown(visualize=False)
    _, kernels = analyzer.get_gpu_kernel_breakdown(visualize=False)
    row = temporal.iloc[0]
    print(json.dumps({"idle_us": float(row["idle_time(us)"]), "compute_us": float(row["compute_time(us)"]),
                      "kernel_groups": int(len(kernels))}))


if __name__ == "__main__":
    main()
