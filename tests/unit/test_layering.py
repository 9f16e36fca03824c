"""The house reads top to bottom: which layer of tbd may import which (docs/architecture.md).

Read from the source (every import statement, those inside functions too), so a violation fails
here before anything runs. The folder a module lives in says its layer:

- tbd/core/ (tbd.core): records, result schemas, errors, run-directory I/O. Imports only itself.
- analysis/ (tbd.analysis): core and itself. Pure functions.
- models/ (tbd.models): core and itself.
- reports/ (tbd.reports): core and itself. Renderers compute nothing.
- profilers/ (tbd.profilers): core, analysis, itself and the Workload record (tbd.models.base).
  Trace readers (profilers/kineto/, profilers/traces/, the MXNet and TensorFlow trace and op
  readers) do not import analysis at all: the caller passes the FLOP function in.
- tbd/cli/ (tbd.cli): commands, orchestration, the runner child, the API. Nothing below imports it.

And the tree says what the imports say: tbd/ holds nothing but core/ and cli/, and no folder holds
a family of three or more modules sharing a name prefix (a family gets its own folder).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest
from testpaths import ROOT

CORE = ("tbd.core",)
SHELL = "tbd.cli"
# package -> its folder in the checkout (setup.cfg package_dir)
FOLDERS = {"tbd.analysis": "analysis", "tbd.models": "models", "tbd.reports": "reports",
           "tbd.profilers": "profilers"}
ALLOWED = {
    "tbd.analysis": ("tbd.analysis",),
    "tbd.models": ("tbd.models",),
    "tbd.reports": ("tbd.reports",),
    "tbd.profilers": ("tbd.profilers", "tbd.analysis", "tbd.models.base"),
}
READERS = ("tbd.profilers.kineto", "tbd.profilers.traces", "tbd.profilers.mxnet.trace", "tbd.profilers.mxnet.ops",
           "tbd.profilers.mxnet.layer_ops", "tbd.profilers.tensorflow.trace", "tbd.profilers.tensorflow.ops")


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
    assert {"tbd.cli.main", "tbd.core.rundir", "tbd.profilers.kineto.reader", "tbd.analysis.flops.ops",
            "tbd.models.base", "tbd.reports.terminal"} <= set(SOURCES)


def test_core_imports_only_core():
    core = [m for m in SOURCES if _within(m, CORE)]
    assert "tbd.core.profile_result" in core and "tbd.core.errors" in core
    bad = [f"{m}:{line} imports {imp}" for m in sorted(core) for line, imp in _tbd_imports(SOURCES[m])
           if imp != "tbd" and not _within(imp, CORE)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_lower_layers_import_only_core_and_what_lies_below(layer):
    allowed = set(CORE) | set(ALLOWED[layer])
    bad = [f"{m}:{line} imports {imp}" for m, path in sorted(SOURCES.items()) if _within(m, [layer])
           for line, imp in _tbd_imports(path) if not _within(imp, allowed)]
    assert not bad, "\n".join(bad)


def test_nothing_below_imports_the_shell():
    assert {"tbd.cli.main", "tbd.cli.run_analysis", "tbd.cli.orchestrate", "tbd.cli.api", "tbd.cli.runner",
            "tbd.cli.commands.profile"} <= set(SOURCES)
    # tbd/__init__.py is the exception on purpose: its lazy profile_step and load_profile are the API's door.
    bad = [f"{m}:{line} imports {imp}" for m, path in sorted(SOURCES.items()) if m != "tbd" and not _within(m, [SHELL])
           for line, imp in _tbd_imports(path) if _within(imp, [SHELL])]
    assert not bad, "\n".join(bad)


def test_tbd_holds_only_core_and_cli():
    """The folder says the layer: a module directly in tbd/ would be neither floor nor roof."""
    top = sorted(p.name for p in (ROOT / "tbd").iterdir() if p.name != "__pycache__")
    assert top == ["__init__.py", "cli", "core"]


def test_trace_readers_count_no_flops():
    readers = [m for m in SOURCES if _within(m, READERS)]
    assert "tbd.profilers.kineto.reader" in readers and "tbd.profilers.mxnet.trace" in readers
    bad = [f"{m}:{line} imports {imp}" for m in readers for line, imp in _tbd_imports(SOURCES[m])
           if _within(imp, ["tbd.analysis"])]
    assert not bad, "\n".join(bad)


def _families() -> list[str]:
    """Folders where three or more modules share the first word of their name (kineto_a, kineto_b, ...)."""
    out = []
    for folder in ["tbd", *FOLDERS.values(), "tools", "bench"]:
        for sub in [ROOT / folder, *(p for p in (ROOT / folder).rglob("*") if p.is_dir())]:
            names = [p.stem for p in sub.glob("*.py") if p.stem != "__init__" and "_" in p.stem.strip("_")]
            counts = Counter(n.split("_")[0] for n in names)
            out += [f"{sub.relative_to(ROOT)}/{prefix}_* ({n} modules)" for prefix, n in counts.items() if n >= 3]
    return out


def test_no_family_hides_in_a_flat_folder():
    assert not _families(), "give each family its folder:\n" + "\n".join(_families())


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
# dependencies into the framework venvs (tbd/__init__.py), and tbd.cli.api imports PyTorch only when a
# user profiles a step.
_LAZY_ON_PURPOSE = {"tbd", "tbd.cli.api"}


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


def test_every_doc_the_source_cites_is_in_the_repository():
    """Docstrings and comments point a reader at docs/ pages that exist, never at a file outside the repo."""
    cited, outside = set(), []
    for m, path in SOURCES.items():
        text = path.read_text(encoding="utf-8")
        cited |= set(re.findall(r"docs/[\w./-]+?\.md", text))
        outside += [m for word in ("DESIGN.md", "STYLE.md", "../shared") if word in text]
    assert outside == []
    assert "docs/architecture.md" in cited
    assert sorted(c for c in cited if not (ROOT / c).is_file()) == []
