# Every target installs what it needs into .venv first, so a fresh clone needs only python3 and make.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test lint demo statecharts docs bench clean

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

statecharts: install
	$(VENV)/bin/orchestrator diagram --write-statecharts statecharts

docs: install
	$(PY) -m orchestrator.cli_docs > docs/cli.md

bench: install
	$(PY) -m orchestrator.bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
