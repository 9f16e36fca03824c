"""The house reads top to bottom: which layer of tbd may import which (docs/architecture.md).

Read from the source (every import statement, those inside functions too), so a violation fails
here before anything runs. The layers:

- core: tbd.errors, tbd.records, tbd.profile, tbd.sweep_result, tbd.comparison, tbd.rundir. Imports only core.
- analysis/ (tbd.analysis): core and itself. Pure functions.
- models/ (tbd.models): core and itself.
- reports/ (tbd.reports): core and itself. Renderers compute nothing.
- profilers/ (tbd.profilers): core, analysis, itself and the Workload record (tbd.models.base).
  Trace readers (kineto*, *_trace, *_ops) do not import analysis at all: the caller passes the
  FLOP function in.
- shell: everything else in tbd/ (cli, commands, orchestrate, collect, api, runner, registry,
  frameworks). Nothing below imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from testpaths import ROOT

CORE = {"tbd.errors", "tbd.records", "tbd.profile", "tbd.profile_checks", "tbd.profile_cluster", "tbd.rundir",
        "tbd.sweep_result", "tbd.comparison"}
# package -> its folder in the checkout (setup.cfg package_dir)
FOLDERS = {"tbd.analysis": "analysis", "tbd.models": "models", "tbd.reports": "reports",
           "tbd.profilers": "profilers"}
ALLOWED = {
    "tbd.analysis": ("tbd.analysis",),
    "tbd.models": ("tbd.models",),
    "tbd.reports": ("tbd.reports",),
    "tbd.profilers": ("tbd.profilers", "tbd.analysis", "tbd.models.base"),
}
READERS = ("kineto", "kineto_batches", "kineto_columns", "kineto_decode", "kineto_signatures", "kineto_tree",
           "trace_times", "mxnet_trace", "tensorflow_trace", "mxnet_ops", "mxnet_layer_ops", "tensorflow_ops",
           "trace_events", "trace_files", "trace_names")


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    for package, folder in FOLDERS.items():
        if parts[0] == folder:
            parts = package.split(".") + parts[1:]
            break
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _tbd_imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) of every tbd import in the file; `from tbd.x import y` gives tbd.x.y
    when tbd/x/y is a module, else tbd.x."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "tbd"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tbd":
            for a in node.names:
                out.append((node.lineno, f"{node.module}.{a.name}" if _is_module(f"{node.module}.{a.name}")
                            else node.module))
    return out


def _is_module(name: str) -> bool:
    return name in _ALL_MODULES


def _sources() -> dict[str, Path]:
    files = list((ROOT / "tbd").rglob("*.py"))
    for folder in FOLDERS.values():
        files += list((ROOT / folder).rglob("*.py"))
    return {_module_name(p): p for p in files}


SOURCES = _sources()
_ALL_MODULES = set(SOURCES) | {m.rsplit(".", 1)[0] for m in SOURCES if "." in m}


def _within(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_source_tree_is_found():
    assert {"tbd.cli", "tbd.rundir", "tbd.profilers.kineto", "tbd.analysis.flops", "tbd.models.base",
            "tbd.reports.terminal"} <= set(SOURCES)


def test_core_imports_only_core():
    bad = [f"{m}:{line} imports {imp}" for m in sorted(CORE) for line, imp in _tbd_imports(SOURCES[m])
           if imp != "tbd" and not _within(imp, CORE)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_lower_layers_import_only_core_and_what_lies_below(layer):
    allowed = CORE | set(ALLOWED[layer])
    bad = [f"{m}:{line} imports {imp}" for m, path in sorted(SOURCES.items()) if _within(m, [layer])
           for line, imp in _tbd_imports(path) if not _within(imp, allowed)]
    assert not bad, "\n".join(bad)


def test_nothing_below_imports_the_shell():
    shell = {m for m in SOURCES if m.startswith("tbd.") and not _within(m, CORE | set(FOLDERS))}
    assert {"tbd.cli", "tbd.collect", "tbd.orchestrate", "tbd.api", "tbd.runner", "tbd.commands.profile"} <= shell
    bad = [f"{m}:{line} imports {imp}" for m, path in sorted(SOURCES.items()) if _within(m, FOLDERS)
           for line, imp in _tbd_imports(path) if _within(imp, shell)]
    assert not bad, "\n".join(bad)


def test_trace_readers_count_no_flops():
    readers = [m for m in SOURCES if m.rsplit(".", 1)[-1] in READERS]
    assert "tbd.profilers.kineto" in readers and "tbd.profilers.mxnet_trace" in readers
    bad = [f"{m}:{line} imports {imp}" for m in readers for line, imp in _tbd_imports(SOURCES[m])
           if _within(imp, ["tbd.analysis"])]
    assert not bad, "\n".join(bad)


def test_no_private_name_crosses_a_module():
    """A name used by another module is public: no `from tbd.x import _y`."""
    bad = []
    for m, path in sorted(SOURCES.items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tbd":
                bad += [f"{m}:{node.lineno} imports {node.module}.{a.name}" for a in node.names
                        if a.name.startswith("_") and a.name != "__version__"]
    assert not bad, "\n".join(bad)


# Where a project import inside a function is the point: `import tbd.<x>` must not pull the API's
# dependencies into the framework venvs (tbd/__init__.py), and tbd.api imports PyTorch only when a
# user profiles a step.
_LAZY_ON_PURPOSE = {"tbd", "tbd.api"}


def test_project_imports_sit_at_module_top():
    """Only a framework import may be deferred into a function (each says why in a comment)."""
    bad = []
    for m, path in sorted(SOURCES.items()):
        if m in _LAZY_ON_PURPOSE:
            continue
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                bad += [f"{m}:{n.lineno}" for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))
                        and any(name.split(".")[0] == "tbd" for name in
                                ([a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""]))]
    assert not bad, "\n".join(bad)
