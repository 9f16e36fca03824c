"""Where the tests' shared files live, for test modules at any depth under tests/."""

import importlib
import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent  # the repository: README.md, Makefile
FIXTURES = TESTS / "fixtures"  # small real traces (see fixtures/README.md)
GOLDEN = TESTS / "golden"  # renderer goldens (tools/regen_goldens.py rewrites them)
BENCH = ROOT / "bench"  # benchmark scripts; the synthetic trace generator lives there
TOOLS = ROOT / "tools"  # scripts for people (tools/netns_link.py: two simulated machines)
#: Public data the project may not commit (real MLPerf submissions): a folder named shared beside
#: the repository, or inside it on a device machine. Tests that need it skip without it.
SHARED = next((p for p in (ROOT / "shared", ROOT.parent / "shared") if p.is_dir()), ROOT.parent / "shared")
#: Where the public traces that the project may not commit lie: tests/fixtures/<kind>/ when copied there by
#: hand (tests/fixtures/README.md, "gpu/" and "multirank/"), else shared/traces/<kind>/.
TRACE_FOLDERS = (FIXTURES, SHARED / "traces")


def real_trace(relative: str) -> Path:
    """A public trace (or folder of them) named relative to a trace folder, e.g. "gpu/pt19_resnet50_v100.json.gz":
    the first of TRACE_FOLDERS that holds it, else the fixtures path (absent: the test skips, saying so)."""
    return next((base / relative for base in TRACE_FOLDERS if (base / relative).exists()), FIXTURES / relative)


#: The folder of MLPerf Training result trees (training_results_vX.Y); TBD_MLPERF_RESULTS names another.
MLPERF_RESULTS = Path(os.environ.get("TBD_MLPERF_RESULTS", SHARED / "mlperf"))


def load_bench(name: str):
    """A module of bench/ (not a package: benchmarks run as scripts, importing their siblings by
    name from their own folder, which is why bench/ goes on sys.path here as it does for a script)."""
    if str(BENCH) not in sys.path:
        sys.path.append(str(BENCH))
    return importlib.import_module(name)


def load_tool(name: str):
    """A module of tools/, imported as bench/ and tools/ scripts import it (its folder on sys.path)."""
    if str(TOOLS) not in sys.path:
        sys.path.append(str(TOOLS))
    return importlib.import_module(name)
