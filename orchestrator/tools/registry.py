"""The tool registry: the single door the loop dispatches model calls through.

Whatever the model sends (an unknown tool, a list instead of an object, a wrong field type, a
handler that blows up), the registry answers with a :class:`ToolResult` whose text starts with
``Error:`` and says how to fix the call, and never raises.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs

from orchestrator.protocols import (
    Approver,
    JSONObject,
    Refusal,
    Tool,
    ToolError,
    ToolResult,
    ToolSource,
)
from orchestrator.tools.arguments import error_result, json_type, quoted, schema_problem
from orchestrator.tools.secrets import redact, redactable

#: Tools that change the machine; the registry asks the approver before running them.
SIDE_EFFECT_TOOLS = frozenset({"bash", "write_file", "edit_file"})


def _index_tools(tools: Iterable[Tool]) -> Mapping[str, Tool]:
    index: dict[str, Tool] = {}
    for tool in tools:
        if tool.name in index:
            raise ValueError(f"two tools are named {tool.name!r}")
        index[tool.name] = tool
    return MappingProxyType(index)


def _sources(sources: Iterable[ToolSource]) -> tuple[ToolSource, ...]:
    return tuple(sources)


@attrs.frozen
class ToolRegistry:
    """The tools the model may call, and the one place their calls are checked and run."""

    _tools: Mapping[str, Tool] = attrs.field(converter=_index_tools)
    approver: Approver | None = attrs.field(default=None, kw_only=True)
    needs_approval: frozenset[str] = attrs.field(default=SIDE_EFFECT_TOOLS, kw_only=True)
    #: Secret values the process holds (the API key, ``--env`` values): never in a result.
    secrets: tuple[str, ...] = attrs.field(default=(), kw_only=True, converter=redactable)
    #: Tools that come and go with the run (MCP servers): re-read on every round, and every
    #: one of them asks the approver first, as bash does.
    sources: Sequence[ToolSource] = attrs.field(default=(), kw_only=True, converter=_sources)
    # A tool's schema is fixed once it exists; built once here, not on every round.
    _schemas: Mapping[str, JSONObject] = attrs.field(init=False)

    @_schemas.default
    def _build_schemas(self) -> Mapping[str, JSONObject]:
        return MappingProxyType({name: tool.schema for name, tool in self._tools.items()})

    @property
    def schemas(self) -> list[JSONObject]:
        sourced = [tool.schema for tool in self._sourced().values()]
        return [*self._schemas.values(), *sourced]

    @property
    def names(self) -> tuple[str, ...]:
        return (*self._tools, *self._sourced())

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name) or self._sourced().get(name)

    def _sourced(self) -> dict[str, Tool]:
        """The sources' tools as they are now; a name taken already (built in) stays the first's."""
        found: dict[str, Tool] = {}
        for source in self.sources:
            for tool in source.tools:
                if tool.name not in self._tools:
                    found.setdefault(tool.name, tool)
        return found

    def dispatch(self, name: str, arguments: object, *, approved: bool = False) -> ToolResult:
        """Run one tool call; every failure comes back as an error result, never an exception.

        ``approved``: a person (or a ``PreToolUse`` hook's ``allow``) has already said yes, so
        the approver is not asked again.
        """
        try:
            result = self._dispatch(name, arguments, approved)
        except Exception as error:  # the loop must survive anything a tool does
            result = error_result(f"Error: {name} failed: {type(error).__name__}: {error}")
        if result.is_error and not result.text.startswith("Error:"):
            result = error_result(f"Error: {result.text}")
        return redact(result, self.secrets)

    def _dispatch(self, name: str, arguments: object, approved: bool) -> ToolResult:
        tool = self._tools.get(name) if isinstance(name, str) else None
        sourced = False
        if tool is None and isinstance(name, str) and self.sources:
            tool = self._sourced().get(name)
            sourced = tool is not None
        if tool is None:
            return error_result(
                f"Error: unknown tool {quoted(str(name))}; available tools: {', '.join(self.names)}"
            )
        schema: Mapping[str, Any] = (tool.schema if sourced else self._schemas[name]).get(
            "input_schema", {}
        )
        if not isinstance(arguments, dict):
            fields = ", ".join(schema.get("properties", {}))
            return error_result(
                f"Error: {name}: arguments must be a JSON object with fields {fields}; "
                f"got {json_type(arguments)}"
            )
        problem = schema_problem(name, schema, arguments)
        if problem:
            return error_result(problem)
        asks = sourced or name in self.needs_approval
        if asks and self.approver is not None and not approved:
            verdict = self.approver(name, arguments)
            if isinstance(verdict, Refusal):
                return error_result(verdict.message)
            if verdict is not True:
                return error_result(
                    f"Error: {name} was not approved, so it did not run; do not retry the same "
                    "call: take another approach, or say in your answer what is left undone"
                )
        started = time.perf_counter()
        try:
            result = tool.run(arguments)
        except ToolError as error:
            message = str(error)
            result = error_result(message if message.startswith("Error:") else f"Error: {message}")
        # The tool's own time: an approval prompt above is the person's, not the tool's.
        return attrs.evolve(result, duration_s=time.perf_counter() - started)
