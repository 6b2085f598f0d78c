"""Tests for the in-process CLI runner: a subprocess's result, and nothing changed after it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.in_process import run_cli


def test_it_gives_the_exit_code_and_the_streams_and_restores_the_environment(
    tmp_path: Path,
) -> None:
    before_environment, before_cwd = dict(os.environ), os.getcwd()
    done = run_cli(["--version"], env={"PATH": os.environ["PATH"]}, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("orchestrator, version ")
    usage = run_cli(["run", "--max-rounds", "-5", "task"], env={"PATH": os.environ["PATH"]})
    assert usage.returncode == 2 and usage.stdout == ""
    assert usage.stderr.startswith("orchestrator: error: ") and usage.stderr.count("\n") == 1
    assert dict(os.environ) == before_environment and os.getcwd() == before_cwd


def test_stdin_is_the_input_given(tmp_path: Path) -> None:
    # An empty task from stdin is refused before any model is asked: stdin was read.
    done = run_cli(["run", "-"], env={"PATH": os.environ["PATH"]}, cwd=tmp_path, input="\n  \n")
    assert done.returncode == 2
    assert "the task is empty" in done.stderr


def test_an_escaping_exception_is_a_traceback_and_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    import orchestrator.cli as cli

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(cli.cli, "main", broken)
    done = run_cli(["config"])
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "RuntimeError: boom" in done.stderr
