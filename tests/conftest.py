"""Marks every test by the folder it lives in, so a part of the suite runs on its own.

    pytest -m "not e2e"          # unit, readers and models: no `tbd profile` child processes
    pytest -m e2e                # end to end: the CLI and API run workloads in child processes

Folders: unit/ (analysis, records, renderers, CLI parsing, packaging), readers/ (trace readers on
committed real traces), models/<framework>/ (the suite's workloads: sizes, parameter counts,
training), e2e/ (whole runs), fuzz/ (hostile inputs: property tests and a mutation corpus), browser/ (the HTML
reports in headless chromium: console, DOM values, screenshots against goldens). This directory is on sys.path (pytest puts a conftest's folder
there), so tests import the shared helpers `testpaths` and `param_counts` by name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
_MARKS = {"unit": "unit", "readers": "readers", "models": "models", "e2e": "e2e", "fuzz": "fuzz",
          "browser": "browser"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).resolve().relative_to(_HERE).parts
        mark = _MARKS.get(parts[0]) if len(parts) > 1 else None
        if mark:
            item.add_marker(getattr(pytest.mark, mark))
