"""Your own tools in Python: ``@tool`` turns a typed function into a tool the model can call.

The schema comes from the type hints and the description from the docstring, by the anthropic
SDK's own ``beta_tool``/``beta_async_tool`` (pydantic underneath), so a function reads the same
here as in the SDK's tool runner. Calls are validated against the hints; a validation failure
or an exception in the function comes back to the model as a tool error, never up the loop.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, overload

from orchestrator.protocols import JSONObject, ToolError, ToolResult


class FunctionTool:
    """A Python function as a tool; made by :func:`tool`, and still callable as the function."""

    def __init__(
        self, function: Callable[..., Any], *, name: str | None = None, description: str | None
    ) -> None:
        from anthropic import beta_async_tool, beta_tool

        self.function = function
        self.is_async = inspect.iscoroutinefunction(function)
        maker: Any = beta_async_tool if self.is_async else beta_tool
        self._sdk_tool = maker(function, name=name, description=description)
        definition = self._sdk_tool.to_dict()
        self._schema: JSONObject = {
            "name": definition["name"],
            "description": definition.get("description") or definition["name"],
            "input_schema": definition["input_schema"],
        }
        self._loop: asyncio.AbstractEventLoop | None = None
        self.__doc__ = function.__doc__
        self.__wrapped__ = function

    @property
    def name(self) -> str:
        return str(self._schema["name"])

    @property
    def schema(self) -> JSONObject:
        return self._schema

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tool {self.name}>"

    def bind_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """Run this async tool on ``loop`` (the caller's, from ``Agent.arun``) from now on."""
        self._loop = loop

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        from pydantic import ValidationError

        try:
            if self.is_async:
                value = self._await(self._sdk_tool.call(dict(arguments)))
            else:
                value = self._sdk_tool.call(dict(arguments))
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in item['loc']) or 'arguments'}: {item['msg']}"
                for item in error.errors()
            )
            raise ToolError(
                f"Error: {self.name}: {problems}; fix the arguments and call again"
            ) from None
        except Exception as error:  # the function's own failure is the model's to hear
            raise ToolError(f"Error: {self.name} raised {type(error).__name__}: {error}") from None
        return ToolResult(_as_text(value))

    def _await(self, coroutine: Any) -> Any:
        loop = self._loop
        if loop is not None and loop.is_running():
            return asyncio.run_coroutine_threadsafe(coroutine, loop).result()
        return asyncio.run(coroutine)


def _as_text(value: object) -> str:
    """What the model reads: text as it is, content blocks' text, anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(
        isinstance(block, Mapping) and block.get("type") == "text" for block in value
    ):
        return "\n".join(str(block.get("text", "")) for block in value)
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


@overload
def tool(function: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a typed function (sync or async) a tool: ``@tool`` or ``@tool(name=…)``.

    The input schema comes from the parameters' type hints, the description from the
    docstring (its ``Args:`` section describes the parameters).
    """

    def make(target: Callable[..., Any]) -> FunctionTool:
        if not callable(target):
            raise TypeError(f"@tool: expected a function, got {target!r}")
        return FunctionTool(target, name=name, description=description)

    return make(function) if function is not None else make


def tools_from_modules(modules: Iterable[str]) -> list[FunctionTool]:
    """Every ``@tool`` at the top level of each named module, in definition order.

    Importing runs the module's code, which is why a project file that names modules needs
    the folder trusted.
    """
    found: list[FunctionTool] = []
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            raise
        except Exception as error:  # the module's own code failed as it was imported
            raise ImportError(
                f"importing {module_name!r} raised {type(error).__name__}: {error}"
            ) from None
        tools = [value for value in vars(module).values() if isinstance(value, FunctionTool)]
        if not tools:
            raise ImportError(f"module {module_name!r} defines no @tool functions")
        found.extend(tools)
    return found
