# Every target installs what it needs into .venv first, so a fresh clone needs only python3 and make.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test test-fast test-deep lint demo eval-demo statecharts docs bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(VENV)/bin/ruff check orchestrator tests
	$(VENV)/bin/ruff format --check orchestrator tests
	$(VENV)/bin/mypy

# Some machines set PYTHONDONTWRITEBYTECODE=1 for everything: then pytest rewrites every test
# module's asserts again on each run (over ten CPU-seconds a worker) and nothing imported is
# cached. The checkout's __pycache__ folders are git-ignored, so the targets here keep them.
unexport PYTHONDONTWRITEBYTECODE

# The suite's layers and what each may spend: docs/development.md. Three workers on two cores
# (the third fills the waits on timeouts and processes); the PostgreSQL tests share one worker
# (--dist loadgroup) and so one cluster. Each run ends with its ten slowest tests, so a test
# that outgrows its layer shows at once.
PYTEST_ARGS := --dist loadgroup --durations=10
PYTEST := $(PY) -m pytest -n 3 $(PYTEST_ARGS)

# Everything but the bench layer (docs/development.md), hypothesis under its ci profile.
test: lint
	$(PYTEST) -m "not bench"

# The unit layer alone, for the inner loop: no harness processes, terminals or PostgreSQL.
# Four workers on two cores: much of this layer waits (timeouts, silent endpoints) rather
# than computes, and a third and fourth worker fill those waits (1:38 -> 1:14 here).
test-fast: install
	$(PY) -m pytest -n 4 $(PYTEST_ARGS) -m "not e2e and not bench"

# Everything, with every hypothesis example each property asks for and the long runs at length.
test-deep: lint
	$(PYTEST) --hypothesis-profile=deep

demo: install
	$(VENV)/bin/orchestrator demo

# Offline and SCRIPTED: the eval pipeline end to end, proving nothing about real models.
EVAL_DEMO := .orchestrator/eval-demo
eval-demo: install
	rm -rf $(EVAL_DEMO)
	$(VENV)/bin/orchestrator eval --scripted --scripted-model forgetful \
		--arms board,no-board,reminder=10 --repeat 10 --jobs 2 --out $(EVAL_DEMO)/forgetful
	$(VENV)/bin/orchestrator eval --scripted --scripted-model diligent \
		--arms board,no-board --repeat 3 --jobs 2 --out $(EVAL_DEMO)/diligent

statecharts: install
	$(VENV)/bin/orchestrator diagram --write-statecharts statecharts

docs: install
	$(PY) -m orchestrator.cli_docs > docs/cli.md

# The figures, then the check that each wall-clock figure moves when what it measures slows.
bench: install
	$(PY) -m orchestrator.bench
	$(PY) -m pytest -n 0 -m bench tests/test_bench.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
