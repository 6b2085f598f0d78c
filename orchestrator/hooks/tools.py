"""Where hooks meet the machines: around each tool call, on the ``done`` edge, on ``complete``.

``PreToolUse`` runs before a call reaches the registry: it may block it, rewrite its input
(``updatedInput``, checked against the tool's schema and recorded in the trace beside the
model's; one the tool cannot take is the hook's error, and the model's input stands), skip the
approval prompt (``allow``) or force it (``ask``). ``PostToolUse`` follows a call that
succeeded and may add words for the model. ``Stop`` hooks are a done-check; ``TaskCompleted``
hooks are part of an item's ``check_passes`` guard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from orchestrator.hooks.payload import claude_input, claude_response, claude_tool_name, our_input
from orchestrator.hooks.runner import (
    BLOCKING_EXIT,
    PRE_TOOL_USE_BLOCKED,
    TASK_COMPLETED_HOOK,
    HookRunner,
)
from orchestrator.inert import inert
from orchestrator.protocols import (
    CURRENT_CALL,
    CheckResult,
    EventLog,
    JSONObject,
    Refusal,
    ToolResult,
)
from orchestrator.tools.arguments import schema_problem, with_note

if TYPE_CHECKING:
    from orchestrator.approval import ApprovalPolicy
    from orchestrator.tools.registry import ToolRegistry

#: The longest account of what is wrong with a hook's ``updatedInput``.
_PROBLEM_CHARACTERS = 200


@attrs.frozen
class HookedTools:
    """The registry with ``PreToolUse`` before each call and ``PostToolUse`` after it."""

    inner: ToolRegistry
    runner: HookRunner
    #: Who answers a hook's ``ask`` (and whose ``--approval deny`` an ``allow`` cannot lift).
    approval: ApprovalPolicy | None = None
    #: Where a rewritten input is recorded (``hook.updated_input``), beside the model's call.
    log: EventLog | None = None

    @property
    def schemas(self) -> Sequence[JSONObject]:
        return self.inner.schemas

    @property
    def workdir(self) -> Path:
        return self.runner.cwd

    def dispatch(self, name: str, arguments: object) -> ToolResult:
        call_id = CURRENT_CALL.get()
        tool_input: Mapping[str, Any] = arguments if isinstance(arguments, dict) else {}
        before = self.runner.run(
            "PreToolUse",
            self._call_fields(name, tool_input, call_id),
            name,
            ours={"tool_name": name, "tool_input": tool_input},
            input_problem=lambda theirs: self._input_problem(name, theirs),
        )
        if before.blocked:
            return ToolResult(
                f"{PRE_TOOL_USE_BLOCKED} {name} call: {before.reason}. Do not "
                "retry it as it is; take another approach or say what is left undone.",
                is_error=True,
            )
        if before.updated_input is not None:
            arguments = tool_input = our_input(name, before.updated_input, self.workdir)
            if self.log is not None:
                self.log.info(
                    "hook.updated_input",
                    id=call_id,
                    name=name,
                    input=tool_input,
                    hook=before.updated_by,
                )
        approved = self._approved(name, tool_input, before.permission, before.permission_reason)
        if isinstance(approved, Refusal):
            return ToolResult(approved.message, is_error=True)
        result = self.inner.dispatch(name, arguments, approved=approved)
        result = _with_context(result, "PreToolUse", before.context)
        if result.is_error:
            return result  # as in Claude Code, PostToolUse follows a call that succeeded
        after = self.runner.run(
            "PostToolUse",
            {
                **self._call_fields(name, tool_input, call_id),
                "tool_response": claude_response(name, result, tool_input, self.workdir),
            },
            name,
            ours={
                "tool_name": name,
                "tool_input": tool_input,
                "tool_response": {
                    "output": result.text,
                    "is_error": result.is_error,
                    "exit_code": result.exit_code,
                },
            },
        )
        if after.blocked:
            result = attrs.evolve(
                result, text=with_note(result.text, f"[PostToolUse hook: {after.reason}]")
            )
        return _with_context(result, "PostToolUse", after.context)

    def _call_fields(self, name: str, tool_input: Mapping[str, Any], call_id: str) -> JSONObject:
        return {
            "tool_name": claude_tool_name(name),
            "tool_input": claude_input(name, tool_input, self.workdir),
            "tool_use_id": call_id,
        }

    def _input_problem(self, name: str, theirs: Mapping[str, Any]) -> str:
        """What keeps the tool ``name`` from taking a hook's ``updatedInput`` ("" if nothing).

        Checked against the tool's whole input schema before the call, so the model is never
        told that a field it sent is missing when a hook dropped it.
        """
        tool = self.inner.get(name)
        if tool is None:
            return ""  # the registry tells the model there is no such tool
        schema = tool.schema.get("input_schema")
        if not isinstance(schema, dict):
            return ""
        return schema_violation(schema, our_input(name, theirs, self.workdir))

    def _approved(
        self, name: str, arguments: Mapping[str, Any], permission: str, why: str
    ) -> bool | Refusal:
        """Whether the registry may skip its approver: ``allow`` skips, ``ask`` asks first."""
        policy = self.approval
        if permission == "allow":
            return policy is None or policy.mode != "deny"  # deny outranks any hook's allow
        if permission != "ask" or policy is None:
            return False
        said = f": {why}" if why else ""
        self.runner.notice(
            inert(f"orchestrator: a PreToolUse hook asks you to confirm {name}{said}")
        )
        return policy.confirm(name, arguments)


def schema_violation(schema: Mapping[str, Any], value: Mapping[str, Any]) -> str:
    """The most telling way ``value`` breaks the JSON Schema ``schema``, in one line ("" if none).

    A schema the validator cannot read (a remote MCP server's) falls back to the registry's own
    top-level check.
    """
    import jsonschema

    try:
        kind = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        error = jsonschema.exceptions.best_match(kind(schema).iter_errors(value))
    except Exception:  # a schema it cannot read (a bad $ref, an odd draft) must not stop the call
        return schema_problem("", schema, value).removeprefix("Error: : ")
    if error is None:
        return ""
    where = "/".join(str(part) for part in error.absolute_path)
    message = " ".join(error.message.split())
    if len(message) > _PROBLEM_CHARACTERS:
        message = message[: _PROBLEM_CHARACTERS - 1] + "…"
    return f"{where}: {message}" if where else message


def _with_context(result: ToolResult, event: str, context: str) -> ToolResult:
    """The result with a hook's ``additionalContext`` beside it, where the model reads it."""
    if not context:
        return result
    return attrs.evolve(result, text=with_note(result.text, f"[{event} hook context: {context}]"))


def stop_check(runner: HookRunner) -> Callable[[int], CheckResult | None]:
    """The ``Stop`` hooks as a done-check: exit 2 keeps the model working, as in Claude Code."""

    def check(attempt: int) -> CheckResult | None:
        if not runner.has("Stop"):
            return None
        outcome = runner.run("Stop", {"stop_hook_active": attempt > 0})
        if not outcome.blocked:
            return None
        return CheckResult(f"Stop hook {outcome.command}", BLOCKING_EXIT, outcome.reason)

    return check


def task_completed_check(runner: HookRunner) -> Callable[[JSONObject], CheckResult | None]:
    """The ``TaskCompleted`` hooks as part of an item's ``check_passes`` guard."""

    def check(item: JSONObject) -> CheckResult | None:
        if not runner.has("TaskCompleted"):
            return None
        fields = {
            "task_id": str(item.get("id", "")),
            "task_subject": str(item.get("text", "")),
            "task": item,
        }
        outcome = runner.run("TaskCompleted", fields, ours={"task": item})
        if outcome.blocked:
            return CheckResult(
                f"{TASK_COMPLETED_HOOK} {outcome.command}", BLOCKING_EXIT, outcome.reason
            )
        return CheckResult(f"{TASK_COMPLETED_HOOK}s passed", 0, "")

    return check
