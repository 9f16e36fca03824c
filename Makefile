# Two entry points (README): `make profile` and `make test`. Both build .venv/ first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# CPU machines take the pinned CPU wheel; override on a CUDA machine, e.g. CONSTRAINTS=
CONSTRAINTS ?= constraints-cpu.txt
PIP_CONSTRAINT_FLAG := $(if $(CONSTRAINTS),-c $(CONSTRAINTS),)
MODEL ?= resnet50
ARGS ?=

.PHONY: setup setup-mxnet setup-tensorflow setup-browser setup-speech profile test clean

$(BIN)/tbd: setup.cfg pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(PIP_CONSTRAINT_FLAG) torch
	$(BIN)/pip install --quiet $(PIP_CONSTRAINT_FLAG) -e '.[pytorch,test]'
	@touch $(BIN)/tbd

setup: $(BIN)/tbd setup-mxnet setup-tensorflow

# MXNet 1.9 (its last release) does not import with numpy 2: it gets its own environment, whose
# interpreter runs the MXNet runner child (tbd/cli/frameworks.py). tbd's child-side modules need only
# numpy and psutil there.
# tbd itself is installed there too (editable, --no-deps: its own requirements would pull numpy 2),
# so the child imports `tbd` from its installation, never from PYTHONPATH or the working directory.
.venv-mxnet/bin/python:
	$(PYTHON) -m venv .venv-mxnet
	.venv-mxnet/bin/pip install --quiet "mxnet==1.9.1" "numpy<1.24" psutil nvidia-ml-py pytest

.venv-mxnet/.tbd-installed: .venv-mxnet/bin/python setup.cfg pyproject.toml
	.venv-mxnet/bin/pip install --quiet --no-deps -e .
	@touch $@

setup-mxnet: .venv-mxnet/.tbd-installed

.venv-tensorflow/bin/python:
	$(PYTHON) -m venv .venv-tensorflow
	.venv-tensorflow/bin/pip install --quiet tensorflow-cpu psutil nvidia-ml-py pytest

.venv-tensorflow/.tbd-installed: .venv-tensorflow/bin/python setup.cfg pyproject.toml
	.venv-tensorflow/bin/pip install --quiet --no-deps -e .
	@touch $@

setup-tensorflow: .venv-tensorflow/.tbd-installed

profile: setup
	$(BIN)/tbd profile $(MODEL) --framework pytorch $(ARGS)

# The main suite runs in .venv (the children of MXNet and TensorFlow runs use their own venvs); the
# tests that import mxnet or tensorflow themselves run again inside those venvs. tests/conftest.py
# marks tests by folder: `make test PYTEST_ARGS='-m "not e2e"'` runs the fast part.
PYTEST_ARGS ?=
MXNET_TESTS := tests/models/mxnet tests/readers/test_mxnet_trace.py tests/unit/test_memory_mxnet.py
TENSORFLOW_TESTS := tests/models/tensorflow tests/readers/test_tensorflow_trace.py tests/unit/test_memory_tensorflow.py

# tests/browser opens the HTML reports in Debian's chromium, driven by Playwright (installed into .venv by
# setup.cfg's `test` extra; it never downloads a browser of its own: no `playwright install`). The
# browser and the font its screenshots are reviewed in come from apt, only when the browser is absent
# (TBD_CHROMIUM, read by tests/browser too, names another one).
TBD_CHROMIUM ?= /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

setup-browser:
	@if [ ! -x $(TBD_CHROMIUM) ]; then \
		echo "installing chromium (for tests/browser)"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core; \
	fi

# `tbd train deepspeech2` synthesizes its spoken numbers with Debian's espeak-ng (models/tasks/spoken_numbers.py);
# the tests of that task need it too. Installed from apt only when absent.
setup-speech:
	@if ! command -v espeak-ng > /dev/null; then \
		echo "installing espeak-ng (for tbd train deepspeech2)"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends espeak-ng; \
	fi

test: setup setup-browser setup-speech
	$(BIN)/python -m pytest -q $(PYTEST_ARGS) tests
	.venv-mxnet/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS) $(MXNET_TESTS)
	.venv-tensorflow/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS) $(TENSORFLOW_TESTS)

clean:
	rm -rf $(VENV) .venv-mxnet .venv-tensorflow *.egg-info
