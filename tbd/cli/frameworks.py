"""Which interpreter runs each framework's runner child, and how to install a missing one.

Frameworks do not share a process well: MXNet 1.9 (its last release) does not import with numpy 2,
which current PyTorch and TensorFlow want. So each framework may live in its own virtual
environment, `.venv-<framework>/` at the repository root, built by `make` (Makefile). The parent
(`tbd` itself) never imports a framework; it starts `<python> -m tbd.cli.runner` in the right one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tbd.cli.registry import check_framework, framework_installed
from tbd.core.errors import FrameworkMissingError

#: Where `make` builds the framework venvs: the checkout tbd runs from (an editable install). An
#: installed tbd elsewhere finds no .venv-<fw> here and uses $TBD_PYTHON_<FW> or this interpreter.
ROOT = Path(__file__).resolve().parents[2]  # tbd/cli/frameworks.py -> the checkout

#: The exact command that installs each framework for tbd (run at the repository root).
INSTALL = {
    "pytorch": "make setup  (builds .venv/ with torch; or: pip install torch)",
    "mxnet": "make setup-mxnet  (builds .venv-mxnet/: mxnet==1.9.1 with numpy<1.24)",
    "tensorflow": "make setup-tensorflow  (builds .venv-tensorflow/: tensorflow-cpu)",
}


@dataclass(frozen=True)
class Runtime:
    """The interpreter that runs one framework's child, and where that choice came from."""

    framework: str
    python: str
    source: str  # "TBD_PYTHON_<FW>", ".venv-<fw>" or "this interpreter"


def runtime(framework: str, root: Path | None = None) -> Runtime:
    """The interpreter for `framework`: $TBD_PYTHON_<FW>, else root/.venv-<fw>, else this one if it can.

    Raises FrameworkMissingError with the install command when none has the framework.
    """
    check_framework(framework)
    root = ROOT if root is None else root
    override = os.environ.get(f"TBD_PYTHON_{framework.upper()}")
    if override:
        return Runtime(framework, override, f"TBD_PYTHON_{framework.upper()}")
    venv_python = root / f".venv-{framework}" / "bin" / "python"
    if venv_python.exists():
        return Runtime(framework, str(venv_python), f".venv-{framework}")
    if framework_installed(framework):
        return Runtime(framework, sys.executable, "this interpreter")
    raise FrameworkMissingError(f"{framework} is not installed for tbd", hint=f"install it with: {INSTALL[framework]}")


_PROBE = """
import json, sys
del sys.path[0]  # the working directory: never shadows the installed tbd (tbd/cli/runner.py)
out = {}
try:
    from tbd.profilers.%(fw)s import hook
    out = {"usable": True, **hook.versions()}
except Exception as exc:
    out = {"usable": False, "reason": f"{type(exc).__name__}: {exc}".splitlines()[0]}
sys.stdout.write(json.dumps(out))
"""


def probe(rt: Runtime, timeout_s: float = 120.0) -> dict:
    """Import the framework's hook in its interpreter and report versions and GPU (`tbd env`)."""
    try:
        done = subprocess.run([rt.python, "-c", _PROBE % {"fw": rt.framework}], capture_output=True, text=True,
                              timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"usable": False, "reason": f"{rt.python}: {exc}"}
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"usable": False, "reason": f"{rt.python} exited {done.returncode}: {tail}"}


#: Device nodes a GPU driver creates: NVIDIA's, and the ROCm kernel driver's (AMD).
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd")


def planned_device(requested: str, nodes: tuple[str, ...] = GPU_DEVICE_NODES) -> str:
    """The device a run will use, as far as the parent can tell without importing a framework.

    "auto" on a machine with no GPU driver's device node is the CPU for every framework, so a run
    directory and the CPU defaults can follow it before the child starts; with a node present the
    framework decides ("auto" is returned) and the run directory is renamed afterwards if needed.
    """
    if requested != "auto":
        return requested
    return "auto" if any(os.path.exists(n) for n in nodes) else "cpu"

