# fairmonitor: the two commands a newcomer needs.
#   make demo  - set up .venv with the package alone and run the main job on the embedded default
#   make test  - add the test, spark and docs extras to .venv and run the whole suite;
#                the Spark tests (marker `spark`) need Java 17, the docs test Chromium
#   make docs  - build the documentation site into build/docs/html (warnings are errors)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# the demo needs the package alone; the suite adds its extras on top, in the same .venv
BASE_STAMP := $(VENV)/.installed-base
STAMP := $(VENV)/.installed
# the compiled kernels (fairmonitor/_kernels/*.pyx, setup.py): rebuilt in place when one changes
KERNELS := $(VENV)/.kernels
DOCS_OUT := build/docs

.PHONY: demo test docs lint venv bench clean

# The installs go through uv (PyPI's `uv`: Astral's installer, written in Rust, with pip's
# `pip install` interface). It resolves the same requirements from the same index as pip, but
# fetches and unpacks wheels in parallel and links them from its cache instead of copying: pip
# spent minutes resolving and unpacking mlflow's ~100 dependencies one by one, which uv does in
# seconds (benchmarks/bench_first_use.py measures the demo install; docs/getting-started.md
# quotes it). pip installs uv into .venv, so nothing is needed beyond Python. Like pip, uv
# builds the package's Cython kernels in an isolated environment (pyproject's
# build-system.requires; setup.py translates and compiles them on every core) and does not
# byte-compile what it installs: Python compiles the modules a run imports, once.
UV_VERSION := uv>=0.13,<0.14
UV := $(BIN)/uv pip install --quiet --python $(BIN)/python

$(BASE_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet '$(UV_VERSION)'
	$(UV) -e .
	touch $(BASE_STAMP) $(KERNELS)

# Rebuild the kernels when setup.py or a .pyx is newer than the last build. A fresh install
# built them and touched $(KERNELS): make still runs this recipe after remaking $(BASE_STAMP),
# so the recipe checks the files itself instead of building twice. --reinstall-package: uv
# skips a package it sees installed unless told.
$(KERNELS): $(BASE_STAMP) setup.py $(wildcard fairmonitor/_kernels/*.pyx)
	if [ ! -e $@ ] || [ -n "$$(find setup.py fairmonitor/_kernels -newer $@ \( -name setup.py -o -name '*.pyx' \))" ]; then $(UV) --no-deps --reinstall-package fairmonitor -e .; fi
	touch $(KERNELS)

$(STAMP): $(BASE_STAMP)
	$(UV) -e '.[test,spark,docs]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(KERNELS)
	$(BIN)/fairmonitor demo

# -n auto: one pytest-xdist worker per core; each test still starts and stops its own servers
# on free ports, so the workers never share one
test: $(STAMP) $(KERNELS)
	$(BIN)/python -m pytest -n auto --doctest-modules --doctest-glob='*.md' fairmonitor plugins tests README.md docs/*.md

docs: $(STAMP) $(KERNELS)
	$(BIN)/python -m sphinx -W --keep-going -q -b html -d $(DOCS_OUT)/doctrees docs $(DOCS_OUT)/html

lint: $(STAMP)
	$(BIN)/ruff check fairmonitor plugins tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) demo build docs/_generated *.egg-info
