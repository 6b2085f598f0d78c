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


def test_the_exit_code_table_holds_every_code_the_commands_return() -> None:
    from orchestrator import exits
    from orchestrator.cli.board import EXIT_NOTHING_CLAIMABLE
    from orchestrator.cli_docs import EXIT_CODES
    from orchestrator.report import exit_code

    table = dict(EXIT_CODES)
    codes = {value for name, value in vars(exits).items() if name.startswith("EXIT_")}
    assert codes | {EXIT_NOTHING_CLAIMABLE, 129, 143} <= set(table)
    assert "board claim" in table[EXIT_NOTHING_CLAIMABLE]
    # 3 is each way a done run can fall short, as report.exit_code counts them.
    assert exit_code("done", refused=1) == exit_code("done", 0, unfinished=1) == 3
    for reason in ("refused", "unfinished", "protected file"):
        assert reason in table[3]
    assert '"status": "error"' in table[2]


def test_what_a_resume_keeps_is_said_in_one_place_as_the_code_keeps_it() -> None:
    import re

    from orchestrator.agent import KEPT_ON_RESUME
    from orchestrator.cli.run import resume

    assert resume.help is not None
    text = " ".join(resume.help.split())
    said = re.search(r"settings unless a flag given here changes them: ([a-z_, ]+)\.", text)
    assert said is not None, text
    assert [name.strip() for name in said.group(1).split(",")] == list(KEPT_ON_RESUME)
    assert "approval" not in KEPT_ON_RESUME and "sandbox" not in KEPT_ON_RESUME
    assert "approval and sandbox are never taken from a trace" in text
