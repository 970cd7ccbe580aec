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

# --no-compile: pip would byte-compile every installed module (~240 MB); Python compiles the
# ones a run imports, once
$(BASE_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e .
	touch $(BASE_STAMP) $(KERNELS)

$(KERNELS): $(BASE_STAMP) setup.py $(wildcard fairmonitor/_kernels/*.pyx)
	$(BIN)/python -m pip install --quiet --no-compile --no-deps -e .
	touch $(KERNELS)

$(STAMP): $(BASE_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,spark,docs]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(KERNELS)
	$(BIN)/fairmonitor demo

test: $(STAMP) $(KERNELS)
	$(BIN)/python -m pytest --doctest-modules --doctest-glob='*.md' fairmonitor plugins tests README.md docs/*.md

docs: $(STAMP) $(KERNELS)
	$(BIN)/python -m sphinx -W --keep-going -q -b html -d $(DOCS_OUT)/doctrees docs $(DOCS_OUT)/html

lint: $(STAMP)
	$(BIN)/ruff check fairmonitor plugins tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) demo build docs/_generated *.egg-info
