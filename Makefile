# Every target installs what it needs into .venv first, so a fresh clone needs only python3 and make.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test lint demo eval-demo statecharts bench clean

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

test: lint
	$(PY) -m pytest -n 2

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

bench: install
	$(PY) -m orchestrator.bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
