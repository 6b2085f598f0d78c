"""Checking what the model sent: JSON types, required and optional fields, and error texts.

Shared by the registry (the schema check before any tool runs) and by each tool (reading its
fields). Every problem becomes a :class:`ToolError` or an ``Error:`` text saying how to fix it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from orchestrator.protocols import ToolError, ToolResult

_JSON_TYPES: Mapping[str, tuple[type, ...]] = MappingProxyType(
    {
        "string": (str,),
        "integer": (int,),
        "number": (int, float),
        "boolean": (bool,),
        "array": (list, tuple),
        "object": (dict, Mapping),
        "null": (type(None),),
    }
)
_JSON_NAMES: Mapping[type, str] = MappingProxyType({str: "string", int: "integer", bool: "boolean"})

_Scalar = TypeVar("_Scalar", str, int, bool)


def quoted(path: str) -> str:
    # repr escapes NUL and control characters, which must not reach the API verbatim.
    shown = path if len(path) <= 80 else path[:77] + "..."
    return repr(shown)


def suggestion(path: str) -> str:
    name = Path(path.lstrip("~")).name
    return name if name not in ("", ".", "..") else "notes.txt"


def json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    for name in ("integer", "number", "string", "array", "object"):
        if isinstance(value, _JSON_TYPES[name]):
            return name
    return type(value).__name__


def _has_json_type(value: object, expected: str) -> bool:
    kinds = _JSON_TYPES.get(expected)
    if kinds is None:
        return True  # a schema type we do not model; let the handler judge
    if isinstance(value, bool) and expected != "boolean":
        return False  # JSON true is not a number, although Python's bool is an int
    return isinstance(value, kinds)


def schema_problem(tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> str:
    """Return an ``Error:`` text for the first top-level schema violation, or ``""``."""
    properties: Mapping[str, Any] = schema.get("properties", {})
    for field in schema.get("required", ()):
        if field not in arguments:
            expected = properties.get(field, {}).get("type", "value")
            return f"Error: {tool}: field '{field}' is required ({_type_label(expected)})"
    for field, spec in properties.items():
        value = arguments.get(field)
        expected = spec.get("type") if isinstance(spec, Mapping) else None
        if field not in arguments or expected is None:
            continue
        if value is None and field not in schema.get("required", ()):
            continue  # an explicit null for an optional field reads as "not given"
        options = [expected] if isinstance(expected, str) else list(expected)
        if not any(_has_json_type(value, option) for option in options):
            return (
                f"Error: {tool}: field '{field}' must be {_type_label(expected)}, "
                f"got {json_type(value)}"
            )
    return ""


def _type_label(expected: object) -> str:
    return " or ".join(expected) if isinstance(expected, list) else str(expected)


def required(arguments: Mapping[str, Any], tool: str, field: str, kind: type[_Scalar]) -> _Scalar:
    value = optional(arguments, tool, field, kind)
    if value is None:
        raise ToolError(f"Error: {tool}: field '{field}' is required ({_JSON_NAMES[kind]})")
    return value


def optional(
    arguments: Mapping[str, Any], tool: str, field: str, kind: type[_Scalar]
) -> _Scalar | None:
    value = arguments.get(field)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ToolError(
            f"Error: {tool}: field '{field}' must be {_JSON_NAMES[kind]}, got {json_type(value)}"
        )
    return value


def error_result(text: str) -> ToolResult:
    return ToolResult(text, is_error=True)


def with_note(text: str, note: str) -> str:
    """Put a harness note on its own line after ``text``."""
    return f"{text}{note}" if text.endswith("\n") else f"{text}\n{note}"


#: What one tool result (or a hook's words) may hold before the middle is cut.
OUTPUT_LIMIT = 50_000


def cut_middle(text: str, limit: int = OUTPUT_LIMIT, *, cut: int = 0) -> str:
    """``text`` at most ``limit`` characters: its head and tail, the cut said between them.

    ``cut`` counts characters already left out of ``text`` (a reader that kept only the ends of
    something longer), so the marker says how much is missing in all.
    """
    if len(text) <= limit and not cut:
        return text
    half = min(limit, len(text)) // 2
    head, tail = text[:half], text[len(text) - half :] if half else ""
    missing = len(text) - len(head) - len(tail) + cut
    return f"{head}\n... [{missing} characters cut from the middle] ...\n{tail}"
