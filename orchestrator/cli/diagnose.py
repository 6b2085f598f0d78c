"""``config`` and ``doctor``: the settings in effect, where each comes from, and the sandbox."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from orchestrator.cli._click import CONTEXT_SETTINGS, InputError
from orchestrator.config import Config, Invalid
from orchestrator.inert import inert


@click.command(
    name="config",
    context_settings=CONTEXT_SETTINGS,
    short_help="The settings in effect, where each comes from, bad ones flagged.",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    help="Read this directory's orchestrator.toml.",
)
def show_config(workdir: Path) -> int:
    """Print the effective settings, where each comes from, and its variables; secrets masked.

    A value that does not parse is shown in its row, flagged, after which the command exits 2
    with the first such error on stderr.
    """
    from orchestrator.config import CONFIG_FILE, SETTINGS, user_config_path
    from orchestrator.doctor import sandbox_in_effect
    from orchestrator.inert import inert

    config, invalid, _ = _inspected_config(workdir)
    # Values, sources and paths come from the environment and files: inert for the terminal.
    rows = [(name, inert(value), inert(source)) for name, value, source in config.shown(invalid)]
    width = max(len(name) for name, _, _ in rows)
    variables = {setting.name: ", ".join(setting.env) for setting in SETTINGS}
    flags = {bad.name: f"  ← invalid: must be {bad.expected}" for bad in invalid}
    for name, value, source in rows:
        row = f"{name:<{width}}  {value}  ({source})  [env: {variables[name]}]"
        click.echo(row + inert(flags.get(name, "")))
    files = f"project file: {workdir / CONFIG_FILE}\nuser file:    {user_config_path()}"
    click.echo("\n" + inert(files))
    if invalid:
        # The sandbox check would run with a default standing in for the bad value.
        click.echo("sandbox in effect: not checked while a setting is invalid")
        more = f" (and {len(invalid) - 1} more, flagged above)" if len(invalid) > 1 else ""
        raise InputError(inert(str(invalid[0])) + more)
    in_effect = sandbox_in_effect(workdir, config).removeprefix("sandbox: ")
    click.echo(f"sandbox in effect: {in_effect} (checked here)")
    return 0


@click.command(
    context_settings=CONTEXT_SETTINGS,
    short_help="Check the key, base URL, model, state directory and sandbox.",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    help="Check the sandbox and settings as a run in this directory would see them.",
)
def doctor(workdir: Path) -> int:
    """Check what a first run needs: the key, base URL, model, state directory and sandbox.

    One line per check; exits 1 when any fails. The model is asked of the endpoint's Models
    API within about 10 seconds.
    """
    from orchestrator.doctor import report

    config, invalid, untrusted = _inspected_config(workdir)
    return report(workdir, config, click.echo, invalid=invalid, untrusted=untrusted)


def _inspected_config(workdir: Path) -> tuple[Config, tuple[Invalid, ...], tuple[str, ...]]:
    """The settings as a run would see them; an untrusted file's widening is shown, flagged.

    A value that does not parse is collected, not raised: both commands show it and go on.
    The last item names the settings an untrusted project file widens (a run refuses them).
    """
    from orchestrator.config import ConfigError, UntrustedConfig, inspect_config
    from orchestrator.trust import TrustError, TrustStore, trust_file

    try:
        trusted = TrustStore(trust_file()).trusts(workdir)
        try:
            return (*inspect_config(workdir, trusted=trusted), ())
        except UntrustedConfig as error:
            from orchestrator.doctor import UNTRUSTED_HINT

            hint = UNTRUSTED_HINT.format(workdir=shlex.quote(str(workdir)))
            click.echo(
                f"warning: {inert(str(error.path))}: {', '.join(error.names)} may only be set "
                f"by a trusted folder's file, so a run refuses to start ({inert(hint)})",
                err=True,
            )
            return (*inspect_config(workdir, trusted=True), tuple(error.names))
    except (ConfigError, TrustError) as error:
        raise InputError(str(error)) from None
