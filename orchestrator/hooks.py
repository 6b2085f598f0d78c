"""Hooks in Claude Code's protocol: the user's shell commands at points of a run.

A hook is configured in ``orchestrator.toml`` (the user's file and a trusted project's) as an
array of tables per event, mirroring Claude Code's JSON::

    [[hooks.PreToolUse]]
    matcher = "bash"            # a regex over tool names; Claude Code's Bash, Edit… match too
    command = "./scripts/no-force-push.sh"
    timeout = 30

The command gets Claude Code's JSON on stdin (``hook_event_name``, ``session_id``,
``transcript_path``, ``cwd``, ``tool_name``, ``tool_input``, ``tool_response``…) and answers
with its exit code: 0 goes on (a JSON object on stdout may still decide, as Claude Code reads
it), 2 blocks (stderr is the reason, sent to the model), anything else is an error shown to the
person that blocks nothing. Where each event meets the machines: ``PreToolUse`` and
``PostToolUse`` wrap dispatch, ``Stop`` is a done-check on the loop's ``done`` edge,
``TaskCompleted`` is part of the item's ``check_passes`` guard.

Hooks run outside the model's sandbox, because the person wrote them; a hook that outlives its
timeout is killed with its whole process group. Their output is redacted like tool output.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import tempfile
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import attrs

from orchestrator.inert import inert
from orchestrator.protocols import CheckResult, JSONObject, ToolResult, Tools
from orchestrator.tools.processes import kill_group

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
#: Claude Code's tool names for ours, so a matcher written for Claude Code matches here.
CLAUDE_TOOL_NAMES = {
    "bash": "Bash",
    "read_file": "Read",
    "write_file": "Write",
    "edit_file": "Edit",
    "todo": "TodoWrite",
}
DEFAULT_TIMEOUT = 60.0
#: How a call a ``PreToolUse`` hook refused begins (replay knows the tool never ran).
PRE_TOOL_USE_BLOCKED = "Error: a PreToolUse hook blocked this"
#: How a ``TaskCompleted`` hook's outcome is named in ``plan.check`` (replay finds it so).
TASK_COMPLETED_HOOK = "TaskCompleted hook"
#: What a hook may print before the rest is dropped: enough for a reason, not a flood.
_MAX_OUTPUT = 64 * 1024
_BLOCK = 2


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

    def matches(self, tool: str | None) -> bool:
        """Whether this hook runs for ``tool`` (events without a tool always match)."""
        if tool is None or self.matcher in ("", "*"):
            return True
        names = (tool, CLAUDE_TOOL_NAMES.get(tool, tool))
        try:
            return any(re.fullmatch(self.matcher, name) for name in names)
        except re.error:
            return False  # refused when loaded; never reached


@attrs.frozen
class HookOutcome:
    """What the hooks of one event said: whether one blocked, why, and what to tell whom."""

    blocked: bool = False
    reason: str = ""
    #: Non-blocking failures, one line each, for the person.
    errors: tuple[str, ...] = ()
    #: What a hook printed to add to the conversation (``SessionStart``, ``UserPromptSubmit``).
    context: str = ""
    #: The hook command that blocked.
    command: str = ""


def load_hooks(files: Sequence[tuple[Path, bool]]) -> tuple[Hook, ...]:
    """The hooks of each ``(file, is_project)`` in order; a missing file has none."""
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


def _hooks_of(table: object, path: Path, project: bool) -> list[Hook]:
    if table is None:
        return []
    if not isinstance(table, dict):
        raise HookConfigError(f"{path}: [hooks] must be a table of [[hooks.EVENT]] arrays")
    hooks: list[Hook] = []
    for event, entries in table.items():
        where = f"{path}: [[hooks.{event}]]"
        if event not in HOOK_EVENTS:
            raise HookConfigError(f"{where}: unknown event; known: {', '.join(HOOK_EVENTS)}")
        if not isinstance(entries, list):
            raise HookConfigError(f"{where}: write it as an array of tables, [[hooks.{event}]]")
        for entry in entries:
            hooks.extend(_entry(entry, event, where, str(path), project))
    return hooks


def _entry(entry: object, event: str, where: str, origin: str, project: bool) -> list[Hook]:
    """A table with ``command``, or Claude Code's shape: ``matcher`` and ``hooks = [{…}]``."""
    if not isinstance(entry, dict):
        raise HookConfigError(f"{where}: each entry must be a table")
    matcher = entry.get("matcher", "")
    if not isinstance(matcher, str):
        raise HookConfigError(f"{where}: matcher must be a string (a regex over tool names)")
    try:
        re.compile("" if matcher == "*" else matcher)  # Claude Code's "every tool"
    except re.error as error:
        raise HookConfigError(f"{where}: matcher {matcher!r} is not a regex: {error}") from None
    inner = entry.get("hooks", [entry])
    if not isinstance(inner, list):
        raise HookConfigError(f"{where}: hooks must be an array of tables")
    hooks = []
    for spec in inner:
        command = spec.get("command") if isinstance(spec, dict) else None
        if not isinstance(command, str) or not command.strip():
            raise HookConfigError(f"{where}: each hook needs a command (a non-empty string)")
        timeout = spec.get("timeout", DEFAULT_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise HookConfigError(f"{where}: timeout must be a number of seconds above 0")
        hooks.append(Hook(event, command, matcher, float(timeout), origin, project))
    return hooks


@attrs.define
class HookRunner:
    """Runs the hooks of a session; mutation is the point (``transcript_path`` is set late)."""

    hooks: tuple[Hook, ...]
    cwd: Path
    session_id: str = ""
    transcript_path: str = ""
    #: Values never to show (keys): hook output is redacted as tool output is.
    secrets: tuple[str, ...] = ()
    #: Where a non-blocking error goes (a line on stderr in the CLI).
    notice: Callable[[str], None] = lambda _line: None

    def has(self, event: str) -> bool:
        return any(hook.event == event for hook in self.hooks)

    def run(self, event: str, fields: Mapping[str, Any], tool: str | None = None) -> HookOutcome:
        """Every hook of ``event`` that matches ``tool``, in order, until one blocks."""
        payload = {
            "session_id": self.session_id,
            "transcript_path": self.transcript_path,
            "cwd": str(self.cwd),
            "hook_event_name": event,
            **fields,
        }
        errors: list[str] = []
        context: list[str] = []
        for hook in self.hooks:
            if hook.event != event or not hook.matches(tool):
                continue
            blocked, reason, said = self._run_one(hook, payload, errors)
            if said:
                context.append(said)
            if blocked:
                return HookOutcome(True, reason, tuple(errors), "\n".join(context), hook.command)
        for line in errors:
            self.notice(line)
        return HookOutcome(False, "", tuple(errors), "\n".join(context))

    def _run_one(self, hook: Hook, payload: JSONObject, errors: list[str]) -> tuple[bool, str, str]:
        """(blocked, reason, stdout to add as context) for one hook."""
        name = f"{hook.event} hook `{hook.command}`"
        try:
            code, out, err = _execute(hook, json.dumps(payload, ensure_ascii=False), self.cwd)
        except OSError as error:
            errors.append(inert(f"orchestrator: {name} could not start: {error}"))
            return False, "", ""
        out, err = self._redacted(out), self._redacted(err)
        if code is None:
            errors.append(inert(f"orchestrator: {name} timed out after {hook.timeout:g} s; killed"))
            return False, "", ""
        if code == _BLOCK:
            return True, err.strip() or f"blocked by {name}", ""
        if code != 0:
            detail = err.strip().splitlines()[-1:] or ["no message"]
            errors.append(inert(f"orchestrator: {name} failed (exit {code}): {detail[0]}"))
            return False, "", ""
        return _decision(out, name, errors)

    def _redacted(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[REDACTED]")
        return text


def _decision(out: str, name: str, errors: list[str]) -> tuple[bool, str, str]:
    """A hook's stdout after exit 0: Claude Code's JSON decision, or plain text as context."""
    stripped = out.strip()
    if not stripped.startswith("{"):
        return False, "", stripped
    try:
        document = json.loads(stripped)
    except ValueError:
        errors.append(inert(f"orchestrator: {name} printed something that is not JSON; ignored"))
        return False, "", ""
    if not isinstance(document, dict):
        return False, "", ""
    specific = document.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    reason = str(document.get("reason") or specific.get("permissionDecisionReason") or "")
    if document.get("continue") is False:
        # It outranks "decision", as in Claude Code, which then stops working altogether: a
        # Stop hook's lets the run end; elsewhere the step the hook guards is refused.
        if name.startswith("Stop "):
            return False, "", ""
        return True, str(document.get("stopReason") or reason or f"stopped by {name}"), ""
    if document.get("decision") == "block" or specific.get("permissionDecision") == "deny":
        return True, reason or f"blocked by {name}", ""
    return False, "", str(specific.get("additionalContext") or "")


def _execute(hook: Hook, stdin: str, cwd: Path) -> tuple[int | None, str, str]:
    """Run one hook in its own process group; (exit code or None on timeout, stdout, stderr).

    Its output goes to files, not pipes: a child it leaves behind (``setsid daemon &``) may
    hold them open for ever, and the hook's verdict is its own exit, not its children's.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(
            ["/bin/sh", "-c", hook.command],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            start_new_session=True,  # its children are killed with it
        )
        try:
            assert process.stdin is not None
            with contextlib.suppress(BrokenPipeError):
                process.stdin.write(stdin.encode("utf-8"))
            with contextlib.suppress(BrokenPipeError):
                process.stdin.close()
            code: int | None = process.wait(timeout=hook.timeout)
        except subprocess.TimeoutExpired:
            code = None
        except BaseException:
            kill_group(process.pid)  # Ctrl-C mid-hook: nothing it started may outlive the run
            process.kill()
            process.wait()
            raise
        # Whatever it left running in its group goes with it (a setsid child has left it).
        kill_group(process.pid)
        if code is None:
            process.kill()
            process.wait()
            return None, "", ""
        return code, _read(out), _read(err)


def _read(file: IO[bytes]) -> str:
    file.seek(0)
    return _text(file.read(_MAX_OUTPUT))


def _text(data: bytes) -> str:
    return data[:_MAX_OUTPUT].decode("utf-8", errors="replace")


@attrs.frozen
class HookedTools:
    """The registry with ``PreToolUse`` before each call and ``PostToolUse`` after it."""

    inner: Tools
    runner: HookRunner

    @property
    def schemas(self) -> Sequence[JSONObject]:
        return self.inner.schemas

    def dispatch(self, name: str, arguments: object) -> ToolResult:
        tool_input = arguments if isinstance(arguments, dict) else {}
        before = self.runner.run("PreToolUse", {"tool_name": name, "tool_input": tool_input}, name)
        if before.blocked:
            return ToolResult(
                f"{PRE_TOOL_USE_BLOCKED} {name} call: {before.reason}. Do not "
                "retry it as it is; take another approach or say what is left undone.",
                is_error=True,
            )
        result = self.inner.dispatch(name, arguments)
        if result.is_error:
            return result  # as in Claude Code, PostToolUse follows a call that succeeded
        response = {"output": result.text, "is_error": result.is_error}
        after = self.runner.run(
            "PostToolUse",
            {"tool_name": name, "tool_input": tool_input, "tool_response": response},
            name,
        )
        if after.blocked:
            note = f"[PostToolUse hook: {after.reason}]"
            text = f"{result.text}\n{note}" if result.text else note
            return attrs.evolve(result, text=text)
        return result


def stop_check(runner: HookRunner) -> Callable[[int], CheckResult | None]:
    """The ``Stop`` hooks as a done-check: exit 2 keeps the model working, as in Claude Code."""

    def check(attempt: int) -> CheckResult | None:
        if not runner.has("Stop"):
            return None
        outcome = runner.run("Stop", {"stop_hook_active": attempt > 0})
        if not outcome.blocked:
            return None
        return CheckResult(f"Stop hook {outcome.command}", _BLOCK, outcome.reason)

    return check


def task_completed_check(runner: HookRunner) -> Callable[[JSONObject], CheckResult | None]:
    """The ``TaskCompleted`` hooks as part of an item's ``check_passes`` guard."""

    def check(item: JSONObject) -> CheckResult | None:
        if not runner.has("TaskCompleted"):
            return None
        outcome = runner.run("TaskCompleted", {"task": item})
        if outcome.blocked:
            return CheckResult(f"{TASK_COMPLETED_HOOK} {outcome.command}", _BLOCK, outcome.reason)
        return CheckResult(f"{TASK_COMPLETED_HOOK}s passed", 0, "")

    return check
