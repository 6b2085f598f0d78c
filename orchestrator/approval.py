"""Approval of side-effecting tool calls: the four modes, the terminal prompt, the refusals.

``--approval`` picks a mode: ``ask`` asks before bash and file writes, ``edits`` writes files
without asking but asks before bash, ``auto`` (``--yes``) never asks, ``deny`` refuses them all.
Where a mode would ask and there is no terminal, the call is refused, the run says so once at
its start, and the model is told why in words that do not pretend a person declined. Every
refusal is kept, so the run's closing line, its JSON result and its exit code count them.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import click

from orchestrator.config import flag_label, given
from orchestrator.guard import describe_arguments
from orchestrator.hooks.payload import claude_tool_name
from orchestrator.inert import inert
from orchestrator.protocols import Refusal
from orchestrator.tools.files import unified_diff

APPROVAL_MODES = ("ask", "edits", "auto", "deny")
EDIT_TOOLS = frozenset({"write_file", "edit_file"})
#: Commands whose first two words make the prefix a person allows ("git status", "npm test").
_TWO_WORD_COMMANDS = frozenset(
    {"git", "npm", "npx", "yarn", "pnpm", "cargo", "go", "uv", "poetry", "docker", "make"}
)
#: A command with any of these can chain another after an allowed prefix: always asked again.
_SHELL_CHAINING = re.compile(r"[;&|`$<>()\n\\]")
_PREVIEW_LINES = 40
#: Phrases only this module's refusals contain, so a trace's tool results show what was refused.
_REFUSAL_PHRASES = (
    " did not run: this session has no one to approve it",
    " is not allowed in this session (",
    "Error: the user declined to run ",
)


def is_refusal(output: str) -> bool:
    """Whether a tool result's text is one of this module's refusals."""
    return output.startswith("Error:") and any(phrase in output for phrase in _REFUSAL_PHRASES)


@attrs.frozen
class RefusedAction:
    """One side-effecting call that did not run, and why."""

    tool: str
    target: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"tool": self.tool, "target": self.target, "reason": self.reason}


@attrs.frozen
class Answer:
    """What a person said at the prompt: run it, run it for the session, or not (and why)."""

    allow: bool
    for_session: bool = False
    feedback: str = ""


Asker = Callable[[str, Mapping[str, Any]], Answer]


def asks_about(mode: str) -> frozenset[str]:
    """The tools a mode would ask a person about."""
    if mode == "ask":
        return frozenset({"bash", *EDIT_TOOLS})
    if mode == "edits":
        return frozenset({"bash"})
    return frozenset()


def no_terminal_notice(
    mode: str, *, has_terminal: bool, mcp: bool = False, label: Callable[[str], str] = flag_label
) -> str | None:
    """The one line a run prints at its start when it would ask but cannot.

    ``mcp``: the run has MCP servers, whose tools are asked about as bash is. ``label`` names
    the setting as the front end does (``--approval``, ``approval=``).
    """
    asked = asks_about(mode)
    if has_terminal or not asked:
        return None
    names = ", ".join([*sorted(asked), *(["MCP tools"] if mcp else [])])
    return (
        f"orchestrator: no terminal to ask for approval ({given(label, 'approval', mode)}): "
        f"{names} will be refused; pass {given(label, 'approval', 'auto')} to allow them, "
        f"{given(label, 'approval', 'deny')} to refuse quietly"
    )


def command_prefix(command: str) -> str:
    """The part of a bash command that "yes for this session" remembers."""
    words = command.split()
    if not words:
        return ""
    count = 2 if words[0] in _TWO_WORD_COMMANDS and len(words) > 1 else 1
    return " ".join(words[:count])


def _names(names: Iterable[str]) -> frozenset[str]:
    return frozenset(names)


def rule_matches(rule: str, tool: str, server: str | None = None) -> bool:
    """Whether an ``auto_approve`` rule covers ``tool``.

    A rule is a tool's name; ``mcp__SERVER`` also covers every tool of that MCP server (Claude
    Code's per-server rule), and so does ``mcp__SERVER__*``. ``server`` is the MCP server that
    offers ``tool``, as its tools' names spell it (None: not an MCP tool): a server is matched
    as a whole name, never as the start of a tool's name, so ``mcp__time`` does not cover a
    server named ``time_x``. No other wildcard exists (the setting refuses one), so ``bash``
    never covers more than bash. A built-in tool is named either way, ours or Claude Code's
    (``Bash``, ``Write``), as a hook's matcher names it.
    """
    if tool == rule:
        return True
    if server is None and rule == claude_tool_name(tool):
        return True
    return server is not None and rule_server(rule) == server and _whole_server(rule)


def rule_server(rule: str) -> str | None:
    """The MCP server an ``auto_approve`` rule names (``mcp__time__now`` → ``time``), or None.

    Server names never hold ``__`` (the config refuses them), so the first ``__`` after
    ``mcp__`` ends the server's name.
    """
    if not rule.startswith("mcp__"):
        return None
    server = rule.removeprefix("mcp__").split("__", 1)[0]
    return server or None


def unknown_server_rules(rules: Iterable[str], servers: Iterable[str]) -> list[str]:
    """The ``mcp__…`` rules that name a server none of ``servers`` is (a typo: ``mcp__tim``).

    ``servers`` are the configured servers' names as their tools' names spell them.
    """
    known = set(servers)
    return [
        rule
        for rule in sorted(rules)
        if (named := rule_server(rule)) is not None and named not in known
    ]


def _whole_server(rule: str) -> bool:
    return rule.endswith("__*") or "__" not in rule.removeprefix("mcp__")


def _no_server(_tool: str) -> str | None:
    return None


@attrs.define
class ApprovalPolicy:
    """The approver of one session; ``refused`` lists every call it turned down."""

    mode: str = attrs.field(validator=attrs.validators.in_(APPROVAL_MODES))
    asker: Asker | None = None
    #: Rules for tools that run without asking (``auto_approve = ["mcp__docs__search"]``,
    #: ``"mcp__docs"``: :func:`rule_matches`); deny still refuses.
    auto_approve: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    refused: list[RefusedAction] = attrs.field(factory=list)
    #: The MCP server offering a tool, as its tools' names spell it (None: not an MCP tool);
    #: the run sets it once its servers have started.
    server_of: Callable[[str], str | None] = attrs.field(default=_no_server, kw_only=True)
    #: How a setting is named in what the policy says (``--approval`` on the CLI, ``approval=``
    #: in the Python API).
    label: Callable[[str], str] = attrs.field(default=flag_label, kw_only=True)
    _allowed_tools: set[str] = attrs.field(factory=set)
    _allowed_prefixes: set[str] = attrs.field(factory=set)
    _allowed_commands: set[str] = attrs.field(factory=set)

    def __call__(self, tool: str, arguments: Mapping[str, Any]) -> bool | Refusal:
        if self.mode == "auto" or (self.mode == "edits" and tool in EDIT_TOOLS):
            return True
        if self.mode == "deny":
            deny = given(self.label, "approval", "deny")
            return self._refuse(
                tool,
                arguments,
                f"refused by {deny}",
                f"Error: {tool} is not allowed in this session ({deny}), so it did not "
                "run. Do not retry it; finish what you can without it and say in your answer "
                "what is left undone.",
            )
        if self._auto_approved(tool) or self._allowed_for_session(tool, arguments):
            return True
        return self._ask(tool, arguments, given(self.label, "approval", self.mode))

    def confirm(self, tool: str, arguments: Mapping[str, Any]) -> bool | Refusal:
        """Ask a person even where the mode would not (a ``PreToolUse`` hook's ``ask``).

        ``--approval deny`` still refuses, and without a terminal the call is refused, as any
        approval is there.
        """
        if self.mode == "deny":
            return self(tool, arguments)
        return self._ask(tool, arguments, "a PreToolUse hook asks for approval")

    def _ask(self, tool: str, arguments: Mapping[str, Any], why: str) -> bool | Refusal:
        if self.asker is None:
            return self._refuse(
                tool,
                arguments,
                f"no terminal to ask ({why})",
                f"Error: {tool} did not run: this session has no one to approve it (no "
                f"terminal, {why}). Do not retry it; finish what you can "
                "without it and say in your answer what is left undone.",
            )
        answer = self.asker(tool, arguments)
        if answer.allow:
            if answer.for_session:
                self._remember(tool, arguments)
            return True
        why = f": {answer.feedback}" if answer.feedback else ""
        return self._refuse(
            tool,
            arguments,
            "declined at the prompt" + why,
            f"Error: the user declined to run {tool}{why}. Do not retry the same call; "
            "take their answer into account or ask them what they want.",
        )

    def _auto_approved(self, tool: str) -> bool:
        server = self.server_of(tool)
        return any(rule_matches(rule, tool, server) for rule in self.auto_approve)

    def _refuse(
        self, tool: str, arguments: Mapping[str, Any], reason: str, message: str
    ) -> Refusal:
        self.refused.append(RefusedAction(tool, describe_arguments(arguments), reason))
        return Refusal(message)

    def _allowed_for_session(self, tool: str, arguments: Mapping[str, Any]) -> bool:
        if tool != "bash":
            return tool in self._allowed_tools
        command = str(arguments.get("command", ""))
        if command in self._allowed_commands:
            return True
        if _SHELL_CHAINING.search(command):
            return False
        return command_prefix(command) in self._allowed_prefixes

    def _remember(self, tool: str, arguments: Mapping[str, Any]) -> None:
        if tool == "bash":
            command = str(arguments.get("command", ""))
            if _SHELL_CHAINING.search(command):
                self._allowed_commands.add(command)  # a prefix could chain anything after it
            else:
                self._allowed_prefixes.add(command_prefix(command))
        else:
            self._allowed_tools.add(tool)


# --- the terminal prompt -----------------------------------------------------------------------


def preview(tool: str, arguments: Mapping[str, Any], workdir: Path) -> list[tuple[str, str]]:
    """What the prompt shows before asking, as (line, colour) pairs: a diff, content, a command."""
    if tool == "bash":
        return [(f"$ {arguments.get('command', '')}", "cyan")]
    if tool not in EDIT_TOOLS:  # an MCP tool: what it will be sent
        sent = json.dumps(dict(arguments), ensure_ascii=False, indent=2).splitlines()
        return [(line, "cyan") for line in sent[:_PREVIEW_LINES]]
    path = str(arguments.get("path", ""))
    current = _current_text(workdir, path)
    if tool == "write_file":
        new = str(arguments.get("content", ""))
        if current is None:
            lines = new.splitlines()
            shown = [(f"+ {line}", "green") for line in lines[:_PREVIEW_LINES]]
            if len(lines) > _PREVIEW_LINES:
                shown.append((f"… {len(lines) - _PREVIEW_LINES} more lines", "yellow"))
            return [(f"new file {path} ({len(lines)} lines)", "bold"), *shown]
        return _diff(path, current, new)
    old_text, new_text = str(arguments.get("old_text", "")), str(arguments.get("new_text", ""))
    if current is not None and old_text and old_text in current:
        return _diff(path, current, current.replace(old_text, new_text, 1))
    return _diff(path, old_text, new_text)


def _current_text(workdir: Path, path: str) -> str | None:
    try:
        target = (workdir / path).resolve()
        if not target.is_relative_to(workdir.resolve()) or not target.is_file():
            return None
        return target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _diff(path: str, old: str, new: str) -> list[tuple[str, str]]:
    shown = [(line, diff_colour(line)) for line in unified_diff(path, old, new).splitlines()]
    return shown or [(f"{path}: no change", "yellow")]


def diff_colour(line: str) -> str:
    """The colour a line of a unified diff is shown in."""
    if line.startswith("+") and not line.startswith("+++"):
        return "green"
    if line.startswith("-") and not line.startswith("---"):
        return "red"
    return "cyan" if line.startswith("@@") else ""


def _styled(line: str, colour: str) -> str:
    if not colour or os.environ.get("NO_COLOR"):
        return line
    if colour == "bold":
        return click.style(line, bold=True)
    return click.style(line, fg=colour)


def session_choice(tool: str, arguments: Mapping[str, Any]) -> str:
    """What "yes for this session" would cover, in words."""
    if tool == "bash":
        command = str(arguments.get("command", ""))
        if _SHELL_CHAINING.search(command):
            return "this exact command"
        return f"commands starting '{command_prefix(command)}'"
    return f"every {tool}"


def ask_at_terminal(tool: str, arguments: Mapping[str, Any], workdir: Path) -> Answer:
    """Show the preview and read y / a / n (with an optional reason) from the terminal.

    Ctrl-C or Ctrl-D at the question interrupts the run, as anywhere else: click turns them
    into ``Abort``, which the tool registry would otherwise report to the model as a failure.
    """
    try:
        return _ask(tool, arguments, workdir)
    except click.exceptions.Abort:
        raise KeyboardInterrupt from None


def _ask(tool: str, arguments: Mapping[str, Any], workdir: Path) -> Answer:
    click.echo(_styled(inert(f"{tool} {describe_arguments(arguments)}"), "bold"))
    for line, colour in preview(tool, arguments, workdir):
        click.echo(_styled(inert(line), colour))
    scope = session_choice(tool, arguments)
    _drop_typed_ahead()  # before the question shows: a key sent after seeing it must count
    click.echo(f"allow? [y]es, [a]lways ({scope}) this session, [n]o: ", nl=False)
    while True:
        key = _one_key().lower()
        if key in _KEYS:
            break
        if key.strip():
            click.echo("\nanswer y, a or n: ", nl=False)
    click.echo(_KEYS[key])
    if key == "y":
        return Answer(allow=True)
    if key == "a":
        return Answer(allow=True, for_session=True)
    _drop_typed_ahead()
    feedback = click.prompt("tell the model why (Enter to skip)", default="", show_default=False)
    return Answer(allow=False, feedback=feedback.strip())


#: The keys the approval question takes, and the word echoed for each.
_KEYS = {"y": "yes", "a": "always", "n": "no"}


def _one_key() -> str:
    """One key press, without Enter; Ctrl-D ends the run as Ctrl-C does (``EOFError``)."""
    try:
        return click.getchar()
    except EOFError:
        raise KeyboardInterrupt from None


def _drop_typed_ahead() -> None:
    """Forget what was typed before now: a stray key must not answer a question not yet read."""
    try:
        import termios

        termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)
    except (ImportError, OSError, ValueError, AttributeError):
        pass  # not a terminal: nothing is typed ahead there
