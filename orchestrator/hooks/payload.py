"""Claude Code's names for our tools and their fields: the one table both directions read.

A hook script written for Claude Code reads ``tool_name`` ``Bash`` and an absolute
``tool_input.file_path``; ours are ``bash`` and a ``path`` relative to the work directory.
:data:`TOOLS` says, per tool, what Claude Code calls it and each of its fields, and how a value
is turned into theirs (``out``) and back into ours (``back``, for a hook's ``updatedInput``).
A tool not in the table (MCP ``mcp__server__tool``, the caller's ``@tool`` functions) keeps its
own name and fields. docs/checks.md shows the same table; a test holds the two together.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from orchestrator.protocols import JSONObject, ToolResult

Convert = Callable[[Any, Path], Any]


def _same(value: Any, _workdir: Path) -> Any:
    return value


def _absolute(value: Any, workdir: Path) -> Any:
    """A path as Claude Code sends it: absolute (ours are relative to the work directory)."""
    if not isinstance(value, str) or not value:
        return value
    return os.path.normpath(workdir / Path(value).expanduser())


def _relative(value: Any, workdir: Path) -> Any:
    """A hook's absolute path back in ours: relative when inside the work directory."""
    if not isinstance(value, str) or not os.path.isabs(value):
        return value
    path = Path(os.path.normpath(value))
    return os.path.relpath(path, workdir) if path.is_relative_to(workdir) else value


def _milliseconds(value: Any, _workdir: Path) -> Any:
    """Our bash timeout (seconds) as Claude Code's (milliseconds)."""
    return value * 1000 if isinstance(value, int) and not isinstance(value, bool) else value


def _seconds(value: Any, _workdir: Path) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return max(1, math.ceil(value / 1000))
    return value


@attrs.frozen
class Field:
    """One field: our name, Claude Code's, and how a value crosses each way."""

    ours: str
    theirs: str
    out: Convert = _same
    back: Convert = _same


#: A todo item's fields: Claude Code's TodoWrite items are ``content``, ``status``, ``activeForm``.
TODO_ITEM = (
    Field("id", "id"),
    Field("text", "content"),
    Field("status", "status"),
    Field("active_form", "activeForm"),
)


def _renamed(item: Mapping[str, Any], fields: tuple[Field, ...], *, out: bool) -> dict[str, Any]:
    """``item`` with each field of ``fields`` renamed one way; any other field as it is."""
    by_name = {(f.ours if out else f.theirs): f for f in fields}
    renamed: dict[str, Any] = {}
    for name, value in item.items():
        field = by_name.get(name)
        if field is None:
            renamed.setdefault(name, value)
        else:
            renamed[field.theirs if out else field.ours] = value
    return renamed


def _todos_out(value: Any, _workdir: Path) -> Any:
    if not isinstance(value, list):
        return value
    return [_renamed(i, TODO_ITEM, out=True) if isinstance(i, dict) else i for i in value]


def _todos_back(value: Any, _workdir: Path) -> Any:
    if not isinstance(value, list):
        return value
    return [_renamed(i, TODO_ITEM, out=False) if isinstance(i, dict) else i for i in value]


def _bash_response(result: ToolResult, _input: Mapping[str, Any], _workdir: Path) -> JSONObject:
    # Our bash hands back one stream (stderr joined to stdout), so stderr is empty.
    return {"stdout": result.text, "stderr": "", "interrupted": False, "isImage": False}


def _written(_result: ToolResult, tool_input: Mapping[str, Any], workdir: Path) -> JSONObject:
    return {"filePath": _absolute(tool_input.get("path", ""), workdir), "success": True}


def _read(result: ToolResult, tool_input: Mapping[str, Any], workdir: Path) -> JSONObject:
    path = _absolute(tool_input.get("path", ""), workdir)
    return {"type": "text", "file": {"filePath": path, "content": result.text}}


def _output(result: ToolResult, _input: Mapping[str, Any], _workdir: Path) -> JSONObject:
    return {"output": result.text}


Response = Callable[[ToolResult, Mapping[str, Any], Path], JSONObject]


@attrs.frozen
class ToolNames:
    """One of our tools as Claude Code names it: the tool, its fields, its ``tool_response``."""

    ours: str
    theirs: str
    fields: tuple[Field, ...]
    response: Response = _output


_PATH = Field("path", "file_path", _absolute, _relative)

#: The one table: every built-in tool Claude Code has a name for.
TOOLS: tuple[ToolNames, ...] = (
    ToolNames(
        "bash",
        "Bash",
        (Field("command", "command"), Field("timeout", "timeout", _milliseconds, _seconds)),
        _bash_response,
    ),
    ToolNames(
        "read_file",
        "Read",
        (_PATH, Field("offset", "offset"), Field("limit", "limit")),
        _read,
    ),
    ToolNames("write_file", "Write", (_PATH, Field("content", "content")), _written),
    ToolNames(
        "edit_file",
        "Edit",
        (
            _PATH,
            Field("old_text", "old_string"),
            Field("new_text", "new_string"),
            Field("replace_all", "replace_all"),
        ),
        _written,
    ),
    ToolNames("todo", "TodoWrite", (Field("items", "todos", _todos_out, _todos_back),)),
)
_BY_OURS = {tool.ours: tool for tool in TOOLS}

#: Our ``--approval`` modes as Claude Code's ``permission_mode``.
PERMISSION_MODES = {
    "ask": "default",
    "edits": "acceptEdits",
    "auto": "bypassPermissions",
    "deny": "dontAsk",
}


def claude_tool_name(name: str) -> str:
    """Claude Code's name for our tool ``name``; any other tool keeps its own."""
    tool = _BY_OURS.get(name)
    return name if tool is None else tool.theirs


def claude_input(name: str, arguments: Mapping[str, Any], workdir: Path) -> JSONObject:
    """A call's arguments in Claude Code's field names (absolute paths)."""
    tool = _BY_OURS.get(name)
    if tool is None:
        return dict(arguments)
    converted = {
        f.ours: f.out(arguments[f.ours], workdir) for f in tool.fields if f.ours in arguments
    }
    return _renamed({**arguments, **converted}, tool.fields, out=True)


def our_input(name: str, theirs: Mapping[str, Any], workdir: Path) -> JSONObject:
    """A hook's ``updatedInput`` (Claude Code's names) as our tool's arguments.

    A field the table does not name passes as it is, so a hook that answers in our own names
    (``path``) is read too; where both spellings are given, Claude Code's wins.
    """
    tool = _BY_OURS.get(name)
    if tool is None:
        return dict(theirs)
    renamed = _renamed(theirs, tool.fields, out=False)
    for field in tool.fields:
        if field.theirs in theirs:
            renamed[field.ours] = field.back(theirs[field.theirs], workdir)
    return renamed


def claude_response(
    name: str, result: ToolResult, arguments: Mapping[str, Any], workdir: Path
) -> JSONObject:
    """What a call returned, shaped as Claude Code's ``tool_response`` for that tool."""
    tool = _BY_OURS.get(name)
    return (_output if tool is None else tool.response)(result, arguments, workdir)
