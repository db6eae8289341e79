# The two set-up commands of the README:
#   make lab    creates .venv on first use, installs minispec, opens JupyterLab on notebooks/
#   make test   creates .venv on first use, installs minispec, runs the whole suite
# TORCH picks the torch requirement. The default pin takes the CPU wheel on the course machines;
# on a Linux machine with an NVIDIA GPU the same pin from PyPI is a CUDA build.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
PY := $(VENV)/bin/python
STAMP := $(VENV)/.minispec-installed

.PHONY: lab test lint strip clean-venv

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

# root (containers, CI boxes) must say so to Jupyter explicitly
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(STAMP)
	cd notebooks && ../$(PY) -m jupyter lab $(ROOT_FLAG) $(LAB_ARGS)

test: $(STAMP)
	$(VENV)/bin/pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

strip: $(STAMP)
	$(VENV)/bin/nbstripout notebooks/*.ipynb

clean-venv:
	rm -rf $(VENV)
