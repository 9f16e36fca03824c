"""Where the tests' shared files live, for test modules at any depth under tests/."""

import importlib
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent  # the repository: README.md, Makefile
FIXTURES = TESTS / "fixtures"  # small real traces (see fixtures/README.md)
GOLDEN = TESTS / "golden"  # renderer goldens (tools/regen_goldens.py rewrites them)
BENCH = ROOT / "bench"  # benchmark scripts; the synthetic trace generator lives there
TOOLS = ROOT / "tools"  # scripts for people (tools/netns_link.py: two simulated machines)


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
