"""Rewrite tests/golden/*.txt from the renderers (terminal reports, width 100, colour off).

Usage, from the repository root:

    .venv/bin/python tools/regen_goldens.py          # rewrite every golden, list what changed
    .venv/bin/python tools/regen_goldens.py --check  # exit 1 if any golden is out of date

The Profiles and the calls that render them live in tests/unit/test_reports.py (`GOLDENS`), so the
test and this script can never disagree about inputs. Goldens are reviewed like code: read each
rewritten file (`git diff tests/golden`) before committing it.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load_goldens() -> dict:
    """The `GOLDENS` table (file name -> callable returning text) of tests/unit/test_reports.py."""
    spec = importlib.util.spec_from_file_location("_tbd_test_reports", ROOT / "tests" / "unit" / "test_reports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.GOLDENS


def main(argv: list[str] | None = None) -> int:
    """Regenerate (or with --check, verify) every golden; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report out-of-date goldens")
    args = parser.parse_args(argv)
    golden_dir = ROOT / "tests" / "golden"
    golden_dir.mkdir(parents=True, exist_ok=True)
    stale = []
    for name, render in sorted(_load_goldens().items()):
        path = golden_dir / name
        text = render()
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old == text:
            continue
        stale.append(name)
        if not args.check:
            path.write_text(text, encoding="utf-8")
    verb = "out of date" if args.check else "rewritten"
    print(f"{len(stale)} golden(s) {verb}: {', '.join(stale) or 'none'}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
