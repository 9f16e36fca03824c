"""Where the tests' shared files live, for test modules at any depth under tests/."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent  # the repository: README.md, Makefile
FIXTURES = TESTS / "fixtures"  # small real traces (see fixtures/README.md)
GOLDEN = TESTS / "golden"  # renderer goldens (tools/regen_goldens.py rewrites them)
