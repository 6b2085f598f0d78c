"""The ``[[hooks.EVENT]]`` tables of the config files, read as Claude Code reads its settings.

Two shapes are read: ours, one table per command, and Claude Code's, a ``matcher`` with a list
of ``hooks = [{ type = "command", command = "…" }]``. A hook for an event this harness does not
run (``Notification``, ``SubagentStop``…) or of a type it does not run (``prompt``, ``http``) is
kept as *skipped*, with the reason, so a pasted Claude Code config loads and the run names what
it leaves out in one line. A table that cannot be used at all is a person's mistake:
:class:`HookConfigError`, one line naming the file and the table.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Sequence
from pathlib import Path

import attrs

from orchestrator.hooks.payload import claude_tool_name
from orchestrator.pinning import Reading, read_shell

#: The events this harness runs, each where it meets the machines (docs/checks.md).
HOOK_EVENTS = (
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "Stop",
    "SessionStart",
    "SessionEnd",
    "PreCompact",
    "TaskCompleted",
)
#: Claude Code's events (its hooks reference): those not in :data:`HOOK_EVENTS` are skipped.
CLAUDE_CODE_EVENTS = (
    "SessionStart",
    "Setup",
    "InstructionsLoaded",
    "UserPromptSubmit",
    "UserPromptExpansion",
    "MessageDisplay",
    "PreToolUse",
    "PermissionRequest",
    "PermissionDenied",
    "PostToolUse",
    "PostToolUseFailure",
    "PostToolBatch",
    "Notification",
    "SubagentStart",
    "SubagentStop",
    "TaskCreated",
    "TaskCompleted",
    "Stop",
    "StopFailure",
    "TeammateIdle",
    "ConfigChange",
    "CwdChanged",
    "DirectoryAdded",
    "FileChanged",
    "WorktreeCreate",
    "WorktreeRemove",
    "PreCompact",
    "PostCompact",
    "PreModelSwitch",
    "PostModelSwitch",
    "Elicitation",
    "ElicitationResult",
    "SessionEnd",
)
DEFAULT_TIMEOUT = 60.0
#: A matcher that matches everything, as in Claude Code.
_EVERY = ("", "*")


class HookConfigError(Exception):
    """A ``[[hooks.EVENT]]`` table that cannot be used; ``str()`` names the file and the table."""


@attrs.frozen
class Hook:
    """One configured command for one event."""

    event: str
    command: str
    matcher: str = ""
    timeout: float = DEFAULT_TIMEOUT
    origin: str = ""
    project: bool = False
    #: Run with the user's rights instead of in the sandbox (``outside = true``).
    outside: bool = False
    #: Claude Code's exec form: ``command`` is the program and these its arguments (no shell);
    #: None is the shell form.
    args: tuple[str, ...] | None = None
    #: Why this hook does not run here ("" when it runs).
    skipped: str = ""

    @property
    def runs(self) -> bool:
        return not self.skipped

    @property
    def shown(self) -> str:
        """The command as a person reads it (exec form joined as a shell would need it)."""
        return self.command if self.args is None else shlex.join([self.command, *self.args])

    def shell_command(self, project_dir: Path) -> str:
        """The line ``sh -c`` runs; in exec form ``${CLAUDE_PROJECT_DIR}`` is put in as text."""
        if self.args is None:
            return self.command
        words = [_placeholders(word, project_dir) for word in (self.command, *self.args)]
        return shlex.join(words)

    def reading(self, project_dir: Path) -> Reading:
        """What the command runs from the project folder (pinned), and names outside it."""
        return read_shell(self.shell_command(project_dir), project_dir)

    def matches(self, value: str | None) -> bool:
        """Whether this hook runs for a tool (or an event's source, reason or trigger)."""
        if value is None or self.matcher in _EVERY:
            return True
        names = (value, claude_tool_name(value))
        try:
            return any(re.fullmatch(self.matcher, name) for name in names)
        except re.error:
            return False  # refused when loaded; never reached


def _placeholders(word: str, project_dir: Path) -> str:
    return word.replace("${CLAUDE_PROJECT_DIR}", str(project_dir)).replace(
        "$CLAUDE_PROJECT_DIR", str(project_dir)
    )


def load_hooks(files: Sequence[tuple[Path, bool]]) -> tuple[Hook, ...]:
    """The hooks of each ``(file, is_project)`` in order, skipped ones too (none if missing)."""
    found: list[Hook] = []
    for path, project in files:
        if not path.is_file():
            continue
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise HookConfigError(f"{path}: cannot read it: {error}") from None
        found.extend(_hooks_of(document.get("hooks"), path, project))
    return tuple(found)


def skipped_line(hooks: Sequence[Hook], origin: str) -> str | None:
    """The one line a run says about ``origin``'s hooks that do not run here, or None."""
    skipped = [hook for hook in hooks if hook.origin == origin and not hook.runs]
    if not skipped:
        return None
    reasons = dict.fromkeys(f"{hook.event} ({hook.skipped})" for hook in skipped)
    return f"{origin}: hooks skipped, not run here: {'; '.join(reasons)}"


@attrs.frozen
class _Table:
    """Where an entry is: its event, file and table, and why that event is skipped ("")."""

    event: str
    origin: str
    project: bool
    skipped: str

    @property
    def where(self) -> str:
        return f"{self.origin}: [[hooks.{self.event}]]"


def _hooks_of(table: object, path: Path, project: bool) -> list[Hook]:
    if table is None:
        return []
    if not isinstance(table, dict):
        raise HookConfigError(f"{path}: [hooks] must be a table of [[hooks.EVENT]] arrays")
    hooks: list[Hook] = []
    for event, entries in table.items():
        place = _Table(event, str(path), project, _event_skipped(event))
        if not isinstance(entries, list):
            raise HookConfigError(
                f"{place.where}: write it as an array of tables, [[hooks.{event}]]"
            )
        for entry in entries:
            hooks.extend(_entry(entry, place))
    return hooks


def _event_skipped(event: str) -> str:
    if event in HOOK_EVENTS:
        return ""
    if event in CLAUDE_CODE_EVENTS:
        return "an event orchestrator does not have"
    return "not an event Claude Code or orchestrator knows; a typo?"


def _entry(entry: object, place: _Table) -> list[Hook]:
    """A table with ``command``, or Claude Code's shape: ``matcher`` and ``hooks = [{…}]``."""
    where = place.where
    if not isinstance(entry, dict):
        raise HookConfigError(f"{where}: each entry must be a table")
    matcher = entry.get("matcher", "")
    if not isinstance(matcher, str):
        raise HookConfigError(f"{where}: matcher must be a string (a regex over tool names)")
    if matcher not in _EVERY:
        try:
            re.compile(matcher)
        except re.error as error:
            raise HookConfigError(
                f'{where}: matcher {matcher!r} is not a regex ("*" or "" match every tool): {error}'
            ) from None
    inner = entry.get("hooks", [entry])
    if not isinstance(inner, list):
        raise HookConfigError(f"{where}: hooks must be an array of tables")
    return [_hook(spec, matcher, place, entry.get("outside", False)) for spec in inner]


def _hook(spec: object, matcher: str, place: _Table, outside: object) -> Hook:
    where = place.where
    if not isinstance(spec, dict):
        raise HookConfigError(f"{where}: each hook must be a table")
    kind = spec.get("type", "command")
    command = spec.get("command")
    if kind != "command":
        # Claude Code's http, mcp_tool, prompt and agent hooks: kept, named, never run.
        shown = str(spec.get("url") or spec.get("prompt") or command or kind)
        return Hook(
            place.event,
            shown,
            matcher,
            origin=place.origin,
            project=place.project,
            skipped=f"type {kind}",
        )
    if not isinstance(command, str) or not command.strip():
        raise HookConfigError(f"{where}: each hook needs a command (a non-empty string)")
    timeout = spec.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise HookConfigError(f"{where}: timeout must be a number of seconds above 0")
    args = spec.get("args")
    if args is not None and (
        not isinstance(args, list) or not all(isinstance(arg, str) for arg in args)
    ):
        raise HookConfigError(f"{where}: args must be an array of strings")
    outside = spec.get("outside", outside)
    if not isinstance(outside, bool):
        raise HookConfigError(f"{where}: outside must be true or false")
    return Hook(
        place.event,
        command,
        matcher,
        float(timeout),
        place.origin,
        place.project,
        outside=outside,
        args=None if args is None else tuple(args),
        skipped=place.skipped,
    )
