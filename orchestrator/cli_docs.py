"""``docs/cli.md``, generated from the click definitions so the reference cannot go stale.

``python -m orchestrator.cli_docs > docs/cli.md`` (``make docs``) writes it; a test fails when
the file differs from what this module generates. Every command, its arguments and options
(with defaults and environment variables, which the option help carries), the settings'
variables and the exit codes come from the code.
"""

from __future__ import annotations

import click

from orchestrator.config import (
    CONFIG_DIR_VARIABLE,
    CONFIG_FILE,
    SETTINGS,
    USER_CONFIG_FILE,
    where_settable,
)
from orchestrator.sessions import STATE_DIR_VARIABLE

EXIT_CODES = (
    (0, "done"),
    (
        1,
        "the run failed (an API error that survived retries, --max-rounds, a done-check that "
        "kept failing, a replay mismatch); `mcp list`, `doctor`: a server or check failed",
    ),
    (
        2,
        "usage or input error: a bad flag, file, setting, task or check command; one line on "
        "stderr (and, with --output-format json or stream-json, one object on stdout: "
        '`{"status": "error", "exit_code": 2, "reason": …}`)',
    ),
    (
        3,
        "done, but not everything it reports happened: side-effecting calls were refused, or a "
        "hook or MCP server did not run because of what it runs from the work directory "
        "(`refused_actions`), the plan was left unfinished (`unfinished`; on a shared board, "
        "an item the run still holds), or a protected file changed (a `protected.changed` "
        "event); the closing lines say which",
    ),
    (4, "`board claim`: nothing is claimable now (no ready item, or the one named is taken)"),
    (129, "hung up (SIGHUP): tools killed, trace closed"),
    (130, "interrupted (Ctrl-C): tools killed, trace closed"),
    (143, "terminated (SIGTERM): tools killed, trace closed"),
)


def render_reference(group: click.Group) -> str:
    """The whole reference as Markdown."""
    lines = [
        "# Command-line reference",
        "",
        "Generated from the click definitions by `make docs` "
        "(`python -m orchestrator.cli_docs > docs/cli.md`); do not edit by hand. "
        "`-h` and `--help` work everywhere; bare `orchestrator` prints the command list.",
        "",
    ]
    context = click.Context(group, info_name="orchestrator", **group.context_settings)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        if command is not None and not command.hidden:
            lines.extend(_command(command, f"orchestrator {name}", context))
    lines.extend(_environment())
    lines.extend(_exit_codes())
    return "\n".join(lines).rstrip() + "\n"


def _command(command: click.Command, path: str, parent: click.Context) -> list[str]:
    context = click.Context(
        command, info_name=path.rsplit(maxsplit=1)[-1], parent=parent, **command.context_settings
    )
    usage = " ".join(command.collect_usage_pieces(context))
    lines = [f"## `{path}`", "", f"`{path} {usage}`", ""]
    if command.help:
        lines.extend([_clean(command.help), ""])
    rows = []
    for param in command.get_params(context):
        if isinstance(param, click.Argument):
            continue
        record = param.get_help_record(context)
        if record is not None:
            rows.append(f"| `{_cell(record[0])}` | {_cell(record[1])} |")
    if rows:
        lines.extend(["| option | meaning |", "| --- | --- |", *rows, ""])
    if isinstance(command, click.Group):
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            if sub is not None and not sub.hidden:
                lines.extend(_command(sub, f"{path} {name}", context))
    return lines


def _environment() -> list[str]:
    lines = [
        "## Settings and environment",
        "",
        "Each setting comes from the first of: its flag; its environment variable; "
        f"`{CONFIG_FILE}` in the work directory; the user file `{USER_CONFIG_FILE}` in the "
        f"per-user config directory (`~/.config/orchestrator/`, or `${CONFIG_DIR_VARIABLE}`); "
        "the default. `orchestrator config` shows the result. Secrets have no flag and are "
        "never read from a file; nor is `board` (a file must not choose a path for orchestrator "
        "to overwrite), and `allow_write` only from your own file. A project file that widens a "
        "setting needs the folder trusted (see the README's Configuration).",
        "",
        "| setting | flag | environment | files | default |",
        "| --- | --- | --- | --- | --- |",
    ]
    for setting in SETTINGS:
        flag = "(environment only)" if setting.secret else f"`{setting.flag}`"
        env = ", ".join(f"`{name}`" for name in setting.env)
        default = "" if setting.default is None else f"`{setting.default}`"
        files = where_settable(setting.name)
        lines.append(f"| {setting.name} | {flag} | {env} | {files} | {default} |")
    lines.extend(
        [
            "",
            f"Sessions (traces) and chat history live in the per-user state directory "
            f"(`~/.local/state/orchestrator/`, or `${STATE_DIR_VARIABLE}`), traces under "
            "`sessions/<work directory>/`. `NO_COLOR` or a non-terminal stdout gives plain "
            "text.",
            "",
        ]
    )
    return lines


def _exit_codes() -> list[str]:
    lines = ["## Exit codes", "", "| code | meaning |", "| --- | --- |"]
    lines.extend(f"| {code} | {meaning} |" for code, meaning in EXIT_CODES)
    return [*lines, ""]


def _clean(text: str) -> str:
    return "\n".join(line.strip() for line in text.strip().splitlines())


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def main() -> None:
    from orchestrator.cli import cli

    click.echo(render_reference(cli), nl=False)


if __name__ == "__main__":
    main()
