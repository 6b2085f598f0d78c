"""The README's promises: its quick-start commands run, and its diagrams are the generated ones."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _block_after(heading: str, fence: str = "sh") -> str:
    section = README.split(heading, 1)[1]
    match = re.search(rf"```{fence}\n(.*?)```", section, re.S)
    assert match is not None, f"no ```{fence} block after {heading}"
    return match.group(1)


def test_set_up_names_the_two_commands() -> None:
    commands = [line.split("#")[0].strip() for line in _block_after("## Set up").splitlines()]
    assert commands == ["make demo", "make test"]


def test_ci_runs_the_readme_test_command() -> None:
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


@pytest.mark.timeout(300)
def test_every_quick_start_command_runs() -> None:
    if not (ROOT / ".venv" / "bin" / "orchestrator").exists() or shutil.which("make") is None:
        pytest.fail("make test installs .venv before the suite runs; run the suite through it")
    shutil.rmtree("/tmp/orchestrator-quickstart", ignore_errors=True)
    for command in _block_after("## Quick start").splitlines():
        if not command.strip():
            continue
        done = subprocess.run(
            ["bash", "-c", command],
            check=False,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert done.returncode == 0, f"{command!r} exited {done.returncode}:\n{done.stderr}"


@pytest.mark.parametrize("machine", ["item", "loop"])
def test_readme_shows_the_generated_diagram(machine: str) -> None:
    chart = (ROOT / "statecharts" / f"{machine}.mmd").read_text(encoding="utf-8").rstrip()
    assert f"```mermaid\n{chart}\n```" in README
