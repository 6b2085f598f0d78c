"""``config`` and ``doctor``: the settings in effect, where each comes from, and the sandbox."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.cli._click import CONTEXT_SETTINGS, InputError
from orchestrator.config import Config


@click.command(name="config", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    help="Read this directory's orchestrator.toml.",
)
def show_config(workdir: Path) -> int:
    """Print the effective settings, where each comes from, and its variables; secrets masked."""
    from orchestrator.config import CONFIG_FILE, SETTINGS, user_config_path
    from orchestrator.doctor import sandbox_in_effect

    config = _inspected_config(workdir)
    rows = config.shown()
    width = max(len(name) for name, _, _ in rows)
    variables = {setting.name: ", ".join(setting.env) for setting in SETTINGS}
    for name, value, source in rows:
        click.echo(f"{name:<{width}}  {value}  ({source})  [env: {variables[name]}]")
    click.echo(f"\nproject file: {workdir / CONFIG_FILE}\nuser file:    {user_config_path()}")
    in_effect = sandbox_in_effect(workdir, config).removeprefix("sandbox: ")
    click.echo(f"sandbox in effect: {in_effect} (checked here)")
    return 0


@click.command()
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=".")
def doctor(workdir: Path) -> int:
    """Say which sandbox bash runs in here: the bwrap used, whether it works, and why."""
    from orchestrator.doctor import report

    return report(workdir, _inspected_config(workdir), click.echo)


def _inspected_config(workdir: Path) -> Config:
    """The settings as a run would see them; an untrusted file's widening is shown, flagged."""
    from orchestrator.config import ConfigError, UntrustedConfig, load_config
    from orchestrator.trust import TrustError, TrustStore, trust_file

    try:
        trusted = TrustStore(trust_file()).trusts(workdir)
        try:
            return load_config(workdir, trusted=trusted)
        except UntrustedConfig as error:
            click.echo(f"warning: {error} (a run refuses to start)", err=True)
            return load_config(workdir, trusted=True)
    except (ConfigError, TrustError) as error:
        raise InputError(str(error)) from None
