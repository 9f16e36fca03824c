"""Rewrite tests/golden/*.txt from the renderers (terminal reports at the widths `GOLDENS` names, colour off).

Usage, from the repository root:

    .venv/bin/python tools/regen_goldens.py          # rewrite every golden, list what changed
    .venv/bin/python tools/regen_goldens.py --check  # exit 1 if any golden is out of date

The Profiles and the calls that render them live in tests/unit/test_reports.py (`GOLDENS`), so the
test and this script can never disagree about inputs. A .txt in tests/golden that `GOLDENS` no
longer names is deleted (with --check, reported as out of date). Goldens are reviewed like code:
read each rewritten file (`git diff tests/golden`) before committing it.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load_goldens() -> dict:
    """The `GOLDENS` table (file name -> callable returning text) of tests/unit/test_reports.py."""
    sys.path.insert(0, str(ROOT / "tests"))  # its helpers (testpaths), as pytest's conftest puts them
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
    goldens = _load_goldens()
    stale = []
    for name, render in sorted(goldens.items()):
        path = golden_dir / name
        text = render()
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old == text:
            continue
        stale.append(name)
        if not args.check:
            path.write_text(text, encoding="utf-8")
    orphans = sorted(p.name for p in golden_dir.glob("*.txt") if p.name not in goldens)
    if not args.check:
        for name in orphans:
            (golden_dir / name).unlink()
    verb = "out of date" if args.check else "rewritten"
    print(f"{len(stale)} golden(s) {verb}: {', '.join(stale) or 'none'}")
    if orphans:
        print(f"{len(orphans)} no longer in GOLDENS{'' if args.check else ', deleted'}: {', '.join(orphans)}",
              file=sys.stderr if args.check else sys.stdout)
    return 1 if args.check and (stale or orphans) else 0


if __name__ == "__main__":
    raise SystemExit(main())
