"""The README's promises: its quick-start commands run, and its diagrams are the generated ones."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

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


@pytest.mark.e2e
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


# --- the demo's sample output -----------------------------------------------------------------

SAMPLE_HEAD, SAMPLE_TAIL = 34, 20
SAMPLE_WORKDIR = "/tmp/orchestrator-demo-capture"
_SAMPLE = re.compile(r"(This is what it prints.*?```text\n)(.*?)(```)", re.S)


def demo_sample() -> str:
    """What the README shows: the demo's head and tail, as if run in SAMPLE_WORKDIR.

    The work directory's path is in the system prompt, so its length moves the token counts:
    the demo runs in a private folder whose path is exactly as long as SAMPLE_WORKDIR.
    """
    scratch = Path(tempfile.mkdtemp(prefix="odc-", dir="/tmp"))
    try:
        return _demo_sample_in(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _demo_sample_in(scratch: Path) -> str:
    workdir = scratch / ("w" * (len(SAMPLE_WORKDIR) - len(str(scratch)) - 1))
    assert len(str(workdir)) == len(SAMPLE_WORKDIR)
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "ORCHESTRATOR_"))
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "demo",
            "--workdir",
            str(workdir),
            "--trace",
            str(workdir / "trace.jsonl"),
        ],
        check=True,
        cwd=ROOT,
        # What a person sees: the header and notices on stderr among the run's lines.
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
        env={**env, "NO_COLOR": "1"},
    )
    text = _as_on_a_bwrap_host(done.stdout).replace(str(workdir), SAMPLE_WORKDIR)
    text = text.replace(f"{shlex.quote(sys.executable)} -P -m orchestrator", "orchestrator")
    lines = text.rstrip("\n").splitlines()
    return "\n".join([*lines[:SAMPLE_HEAD], "…", *lines[-SAMPLE_TAIL:]]) + "\n"


def _as_on_a_bwrap_host(text: str) -> str:
    """The output as a host where bubblewrap works prints it (the sample's host)."""
    lines = [
        line.replace(" · sandbox workdir · ", " · sandbox bwrap · ")
        for line in text.splitlines(keepends=True)
        if not line.startswith("orchestrator: warning: bwrap unavailable")
    ]
    return "".join(lines)


def _timings_blurred(text: str) -> str:
    return re.sub(r"\b\d+ ms\b", "N ms", text)


def test_the_readme_sample_is_what_the_demo_prints() -> None:
    match = _SAMPLE.search(README)
    assert match is not None, "no sample block after 'This is what it prints'"
    assert _timings_blurred(match.group(2)) == _timings_blurred(demo_sample()), (
        "the README's demo sample is stale: run `python -m tests.test_readme`"
    )


def _regenerate() -> None:
    sample = demo_sample()
    text = _SAMPLE.sub(lambda m: m.group(1) + sample + m.group(3), README, count=1)
    (ROOT / "README.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    _regenerate()


# --- the command table ------------------------------------------------------------------------


def _command_rows() -> list[tuple[str, str]]:
    section = README.split("## Commands", 1)[1].split("\n\n", 2)[1]
    rows = []
    for line in section.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        rows.append((cells[0].strip("`"), cells[-1].strip("`")))
    return rows


def _help_of(words: list[str]) -> str:
    """Parse an example down to its command (unknown flags fail) and return that command's help."""
    from orchestrator.cli import cli

    runner = CliRunner()
    done = runner.invoke(cli, [*words, "--help"], prog_name="orchestrator", catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return done.output


def test_the_command_table_names_real_commands_with_examples_that_parse() -> None:
    from orchestrator.cli import COMMANDS

    rows = _command_rows()
    assert {row[0].split()[0] for row in rows} == set(COMMANDS)
    for command, example in rows:
        words = shlex.split(example)
        assert words[0] == "orchestrator", example
        usage = _help_of(words[1:]).splitlines()[0]
        assert usage.startswith(f"Usage: orchestrator {command.split()[0]}"), (example, usage)
