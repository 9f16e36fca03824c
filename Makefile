# Two entry points (README): `make profile` and `make test`. Both build .venv/ first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# CPU machines take the pinned CPU wheel; override on a CUDA machine, e.g. CONSTRAINTS=
CONSTRAINTS ?= constraints-cpu.txt
PIP_CONSTRAINT_FLAG := $(if $(CONSTRAINTS),-c $(CONSTRAINTS),)
MODEL ?= resnet50
ARGS ?=

.PHONY: setup profile test clean

$(BIN)/tbd: setup.cfg pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(PIP_CONSTRAINT_FLAG) torch
	$(BIN)/pip install --quiet $(PIP_CONSTRAINT_FLAG) -e '.[pytorch,test]'
	@touch $(BIN)/tbd

setup: $(BIN)/tbd

profile: setup
	$(BIN)/tbd profile $(MODEL) --framework pytorch $(ARGS)

test: setup
	$(BIN)/python -m pytest -q tests

clean:
	rm -rf $(VENV) *.egg-info
