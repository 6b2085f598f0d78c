"""The command groups: whole summaries in every listing, and commands loaded only when run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from orchestrator.cli import COMMANDS, cli

#: What the fast commands must not load: the SDK, the loop, bash and the logger.
HEAVY = ("anthropic", "orchestrator.loop", "orchestrator.tools.bash", "structlog", "rich")


def test_every_listed_command_loads_and_its_summary_is_its_first_sentence() -> None:
    context = click.Context(cli)
    for name, (_, _, summary) in COMMANDS.items():
        command = cli.get_command(context, name)
        assert isinstance(command, click.Command), name
        assert command.get_short_help_str(10_000) == summary, (
            f"COMMANDS[{name!r}] has drifted from the first sentence of its docstring"
        )
    assert sorted(COMMANDS) == cli.list_commands(context)


@pytest.mark.parametrize("args", [["-h"], ["board", "-h"], ["eval", "-h"], ["mcp", "-h"]])
def test_no_listing_cuts_a_summary_short(args: list[str]) -> None:
    done = CliRunner().invoke(cli, args, terminal_width=80)
    assert done.exit_code == 0, done.output
    listing = done.output.split("Commands:", 1)[1]
    assert "..." not in listing
    assert listing.strip(), "no commands listed"


def test_the_top_listing_names_every_command_with_its_whole_summary() -> None:
    done = CliRunner().invoke(cli, ["-h"], terminal_width=200)
    for name, (_, _, summary) in COMMANDS.items():
        assert f"  {name} " in done.output
        assert summary in done.output


def _loaded_after(args: list[str], tmp_path: Path) -> list[str]:
    """The heavy modules a real ``orchestrator ARGS`` process had imported when it exited."""
    probe = textwrap.dedent(
        f"""
        import atexit, sys
        atexit.register(lambda: sys.__stderr__.write(
            "LOADED " + ",".join(m for m in {HEAVY!r} if m in sys.modules) + "\\n"))
        from orchestrator.cli import main
        main(sys.argv[1:])
        """
    )
    env = {**os.environ, "ORCHESTRATOR_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run(
        [sys.executable, "-c", probe, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    line = next(x for x in done.stderr.splitlines() if x.startswith("LOADED "))
    return [name for name in line.removeprefix("LOADED ").split(",") if name]


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["-h"],
        ["run", "-h"],
        ["config"],
        ["sessions"],
        ["show", "--last"],
        ["board", "show", "board.db"],
        ["board", "-h"],
        ["hooks"],
        ["trust", "--show"],
    ],
)
def test_commands_that_run_nothing_do_not_load_the_sdk_or_the_loop(
    args: list[str], tmp_path: Path
) -> None:
    assert _loaded_after(args, tmp_path) == []


def test_a_run_does_load_them(tmp_path: Path) -> None:
    # The probe must see a module that is loaded, or the test above proves nothing.
    loaded = _loaded_after(["demo", "--quiet", "--workdir", str(tmp_path / "demo")], tmp_path)
    assert "orchestrator.loop" in loaded
    assert "structlog" in loaded


def _every_command() -> list[tuple[str, click.Command, click.Context]]:
    found: list[tuple[str, click.Command, click.Context]] = []
    waiting: list[tuple[str, click.Command, click.Context | None]] = [("orchestrator", cli, None)]
    while waiting:
        path, command, parent = waiting.pop()
        # With its own settings, as the CLI builds it: click caches each help option on first use.
        name = path.rsplit(maxsplit=1)[-1]
        context = click.Context(command, info_name=name, parent=parent, **command.context_settings)
        found.append((path, command, context))
        if isinstance(command, click.Group):
            for name in command.list_commands(context):
                sub = command.get_command(context, name)
                assert sub is not None
                waiting.append((f"{path} {name}", sub, context))
    return found


def test_every_option_says_what_it_is_for_and_what_its_value_is() -> None:
    vague = ("TEXT", "FLOAT", "INTEGER")
    for path, command, context in _every_command():
        for param in command.get_params(context):
            if not isinstance(param, click.Option) or param.hidden:
                continue
            record = param.get_help_record(context)
            assert record is not None
            flags, text = record
            assert text.strip(), f"{path} {flags}: no help"
            if not param.is_flag:
                assert not any(f" {word}" in flags for word in vague), f"{path}: {flags}"


@pytest.mark.parametrize("value", ["nan", "-nan", "inf", "-inf", "1e309"])
def test_a_finite_range_refuses_what_every_bound_lets_past(value: str) -> None:
    import click

    from orchestrator.cli._click import FiniteFloatRange

    with pytest.raises(click.BadParameter, match="finite"):
        FiniteFloatRange().convert(value, None, None)
    assert FiniteFloatRange(min=0, max=60).convert("1.5", None, None) == 1.5
