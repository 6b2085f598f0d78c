"""docs/cli.md is what the click definitions generate, so it cannot go stale."""

from __future__ import annotations

from pathlib import Path

from orchestrator.cli import COMMANDS, cli
from orchestrator.cli_docs import render_reference
from orchestrator.config import SETTINGS

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "cli.md"


def test_docs_cli_md_is_generated_from_the_commands() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == render_reference(cli), (
        "docs/cli.md is stale: run `make docs`"
    )


def test_the_reference_names_every_command_flag_variable_and_exit_code() -> None:
    text = render_reference(cli)
    for name in COMMANDS:
        assert f"## `orchestrator {name}`" in text
    for setting in SETTINGS:
        for variable in setting.env:
            assert variable in text
        if not setting.secret:
            assert f"`{setting.flag} " in text or f"`{setting.flag}`" in text
    for code in (0, 1, 2, 3, 129, 130, 143):
        assert f"| {code} |" in text
