"""Hooks in Claude Code's protocol: the user's shell commands at points of a run.

A hook is configured in ``orchestrator.toml`` (the user's file and a trusted project's) as an
array of tables per event, mirroring Claude Code's JSON::

    [[hooks.PreToolUse]]
    matcher = "Bash"            # a regex over tool names; ours (bash, edit_file…) match too
    command = "./scripts/no-force-push.sh"
    timeout = 30

The command gets Claude Code's JSON on stdin in Claude Code's names (``Bash``, an absolute
``file_path``, ``tool_use_id``, ``permission_mode``…; :mod:`.payload` is the one table) and
answers with its exit code and, if it likes, a JSON decision (:mod:`.runner`). Where each event
meets the machines (:mod:`.tools`): ``PreToolUse`` and ``PostToolUse`` wrap dispatch, ``Stop``
is a done-check on the loop's ``done`` edge, ``TaskCompleted`` is part of the item's
``check_passes`` guard. Hooks run in bash's sandbox unless ``outside = true``; what their
commands run from the work directory is pinned by digest (:mod:`orchestrator.pinning`).
"""

from orchestrator.hooks.loading import (
    CLAUDE_CODE_EVENTS,
    DEFAULT_TIMEOUT,
    HOOK_EVENTS,
    Hook,
    HookConfigError,
    load_hooks,
    skipped_line,
)
from orchestrator.hooks.payload import PERMISSION_MODES, TOOLS, claude_tool_name
from orchestrator.hooks.runner import (
    JSON_LIMIT,
    PRE_TOOL_USE_BLOCKED,
    TASK_COMPLETED_HOOK,
    HookOutcome,
    HookRefusal,
    HookRunner,
)
from orchestrator.hooks.tools import HookedTools, stop_check, task_completed_check

__all__ = [
    "CLAUDE_CODE_EVENTS",
    "DEFAULT_TIMEOUT",
    "HOOK_EVENTS",
    "JSON_LIMIT",
    "PERMISSION_MODES",
    "PRE_TOOL_USE_BLOCKED",
    "TASK_COMPLETED_HOOK",
    "TOOLS",
    "Hook",
    "HookConfigError",
    "HookOutcome",
    "HookRefusal",
    "HookRunner",
    "HookedTools",
    "claude_tool_name",
    "load_hooks",
    "skipped_line",
    "stop_check",
    "task_completed_check",
]
