# fairmonitor: the two commands a newcomer needs.
#   make demo  - set up .venv and run the main job on the embedded default
#   make test  - set up .venv (with the test and spark extras) and run the whole suite;
#                the Spark tests (marker `spark`) need Java 17
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint venv bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,spark]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/fairmonitor demo

test: $(STAMP)
	$(BIN)/python -m pytest --doctest-modules --doctest-glob=README.md fairmonitor plugins tests README.md

lint: $(STAMP)
	$(BIN)/ruff check fairmonitor plugins tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) demo build *.egg-info
