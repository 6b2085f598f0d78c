"""The click pieces every command shares: groups, context settings, a person's-mistake error.

click cuts a listed command's summary at the terminal width with ``...``; these groups show
the first sentence whole and let the help formatter wrap it. :class:`LazyGroup` knows its
commands from a table of ``name -> (module, attribute, summary)``, so ``orchestrator --version``
and ``orchestrator -h`` import no command module (the run commands pull in the SDK, the
sandbox and the loop). This module imports only click: every start pays for what it imports.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from typing import Any

import click

from orchestrator.exits import EXIT_USAGE

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "show_default": True}
#: Long enough for any first sentence: the help formatter wraps it instead of cutting it.
_WHOLE = 10_000


class InputError(click.ClickException):
    """A person's mistake: shown as one line, exit code 2."""

    exit_code = EXIT_USAGE


class FiniteFloatRange(click.FloatRange):
    """click's ``FloatRange`` that refuses ``nan`` and ``inf``.

    Every comparison with ``nan`` is false, so ``FloatRange`` lets it past any bound, and with
    no upper bound it takes ``inf``: a pace or a timeout that never ends.
    """

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value} is not a finite number", param, ctx)
        return number


class FullHelpGroup(click.Group):
    """A group whose command list shows each summary's first sentence whole, wrapped."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(_WHOLE)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class LazyGroup(FullHelpGroup):
    """A group that imports a command's module the first time the command is asked for."""

    def __init__(self, *args: object, lazy: Mapping[str, tuple[str, str, str]], **kwargs: object):
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.lazy, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands or cmd_name not in self.lazy:
            return super().get_command(ctx, cmd_name)
        module_name, attribute, _ = self.lazy[cmd_name]
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module_name}.{attribute} is not a click command")
        self.commands[cmd_name] = command
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Listing from the table alone keeps ``-h`` from importing every command module.
        rows = [(name, self.lazy[name][2]) for name in sorted(self.lazy)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)
