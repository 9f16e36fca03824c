"""`tbd env` at 80 and 120 columns: no interpreter path or install hint folded inside a table cell."""

import pytest

from tbd.reports.info_tables import render_env

ROWS = [
    {"framework": "pytorch", "usable": True, "version": "2.13.0+cpu", "python": "/work/main/.venv/bin/python3 "
     "(this interpreter)", "gpu": None, "reason": None},
    {"framework": "tensorflow", "usable": True, "version": "2.21.0",
     "python": "/work/main/.venv-tensorflow/bin/python (.venv-tensorflow)", "gpu": "NVIDIA A100-SXM4-80GB",
     "reason": None},
    {"framework": "mxnet", "usable": False, "version": None, "python": None, "gpu": None,
     "reason": "mxnet is not installed for tbd: run `make venv-mxnet` (or set TBD_MXNET_PYTHON)"},
]


@pytest.mark.parametrize("width", (80, 120))
def test_env_fits_and_keeps_each_path_whole(width):
    text = render_env(ROWS, width=width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    table = lines[:lines.index("")]
    assert table[0].split() == ["Framework", "Usable", "Version", "GPU", "it", "would", "use"]
    assert [line.split()[:3] for line in table[2:]] == [["pytorch", "yes", "2.13.0+cpu"],
                                                        ["tensorflow", "yes", "2.21.0"], ["mxnet", "no", "-"]]
    assert "tensorflow  yes     2.21.0      NVIDIA A100-SXM4-80GB" in text
    assert "pytorch:    /work/main/.venv/bin/python3 (this interpreter)" in lines
    assert "tensorflow: /work/main/.venv-tensorflow/bin/python (.venv-tensorflow)" in lines
    words = " ".join(lines[lines.index("Interpreters") + 1:]).split()
    assert "`make" in words and "venv-mxnet`" in words and words[words.index("mxnet:") + 1:][:2] == ["not", "usable:"]
