"""Your own tools in Python: ``@tool`` turns a typed function into a tool the model can call.

The schema comes from the type hints and the description from the docstring, by the anthropic
SDK's own ``beta_tool``/``beta_async_tool`` (pydantic underneath), so a function reads the same
here as in the SDK's tool runner. Calls are validated against the hints; a validation failure
or an exception in the function comes back to the model as a tool error, never up the loop.

What the API would refuse is refused at decoration, naming the function, not by a 400 on the
first round: a name outside ``^[a-zA-Z0-9_-]{1,128}$`` (a lambda's ``<lambda>``), a
signature whose input is not a JSON object of named arguments (``*args``, positional-only
parameters), and a type hint that names nothing where the function is defined. Parameters
without type hints, or no docstring, still make a tool, with a :class:`ToolDefinitionWarning`:
the model then gets no types or no description to go by.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import re
import typing
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, overload

from orchestrator.protocols import JSONObject, ToolError, ToolResult

#: The Messages API's pattern for a tool's name.
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,128}")


class ToolDefinitionError(ValueError):
    """A function that cannot be a tool as written; ``str()`` names it and says what to change."""


class ToolDefinitionWarning(UserWarning):
    """A function that makes a tool the model will find hard to use (no types, no description)."""


def _where(function: Callable[..., Any]) -> str:
    """The function as a person finds it: ``module.name`` (and file:line for a lambda)."""
    name = f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', function)}"
    code = getattr(function, "__code__", None)
    if code is not None and getattr(function, "__name__", "") == "<lambda>":
        name += f" at {code.co_filename}:{code.co_firstlineno}"
    return name


def _check_definition(
    function: Callable[..., Any], name: str | None, description: str | None, stacklevel: int
) -> None:
    """Refuse what the API would refuse; warn about what the model would have to guess."""
    where = _where(function)
    shown = name if name is not None else getattr(function, "__name__", "")
    if not TOOL_NAME.fullmatch(shown):
        raise ToolDefinitionError(
            f"@tool {where}: {shown!r} is not a tool name the API accepts (1 to 128 letters, "
            "digits, _ or -); name it: @tool(name='…')"
        )
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as error:
        raise ToolDefinitionError(f"@tool {where}: cannot read its signature: {error}") from None
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            raise ToolDefinitionError(
                f"@tool {where}: *{parameter.name} cannot be a tool's input, which is a JSON "
                f"object of named arguments; take a list instead ({parameter.name}: list[…])"
            )
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"@tool {where}: {parameter.name} is positional-only, but a tool's arguments "
                "arrive by name; drop the / from its signature"
            )
    _check_hints_resolve(function, where)
    untyped = [
        p.name
        for p in signature.parameters.values()
        if p.annotation is inspect.Parameter.empty and p.kind is not p.VAR_KEYWORD
    ]
    if untyped:
        warnings.warn(
            f"@tool {where}: no type hint for {', '.join(untyped)}; the model is told any JSON "
            "value will do, and nothing is checked before the function runs",
            ToolDefinitionWarning,
            stacklevel=stacklevel,
        )
    if description is None and not inspect.getdoc(function):
        warnings.warn(
            f"@tool {where}: no docstring, so the model gets no description of the tool; "
            "write one (or pass description=)",
            ToolDefinitionWarning,
            stacklevel=stacklevel,
        )


def _check_hints_resolve(function: Callable[..., Any], where: str) -> None:
    """Every type hint names something that exists where the function is defined.

    A hint written as text (``from __future__ import annotations``, or quoted) is looked up
    only now, to build the schema: a name imported only under ``TYPE_CHECKING``, or a typo,
    would otherwise surface as a bare ``NameError`` from deep inside the schema's builder.
    """
    if not (inspect.isfunction(function) or inspect.ismethod(function)):
        return  # a callable object: its hints are its __call__'s, read by the SDK
    try:
        typing.get_type_hints(function, include_extras=True)
    except Exception as error:
        raise ToolDefinitionError(_unresolved(function, where, error)) from None


def _unresolved(function: Callable[..., Any], where: str, error: Exception) -> str:
    """Which hint could not be resolved, and why, in one line."""
    written = inspect.get_annotations(function)
    missing = getattr(error, "name", None) if isinstance(error, NameError) else None
    texts = [(name, hint) for name, hint in written.items() if isinstance(hint, str)]
    named = [
        (name, hint)
        for name, hint in texts
        if missing and re.search(rf"(?<![\w.]){re.escape(missing)}\b", hint)
    ]
    culprit = (named or texts or [("", "")])[0]
    why = f"{type(error).__name__}: {error}"
    if not culprit[0]:
        return f"@tool {where}: its type hints cannot be resolved ({why})"
    what = "return type" if culprit[0] == "return" else f"type hint of {culprit[0]}"
    return (
        f"@tool {where}: the {what}, {culprit[1]!r}, cannot be resolved ({why}); import what "
        "it names in the function's module (an import only under TYPE_CHECKING is not enough)"
    )


class FunctionTool:
    """A Python function as a tool; made by :func:`tool`, and still callable as the function."""

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None,
        stacklevel: int = 2,
    ) -> None:
        from anthropic import beta_async_tool, beta_tool

        _check_definition(function, name, description, stacklevel + 1)
        self.function = function
        self.is_async = inspect.iscoroutinefunction(function)
        maker: Any = beta_async_tool if self.is_async else beta_tool
        self._sdk_tool = maker(function, name=name, description=description)
        definition = self._sdk_tool.to_dict()
        if definition["input_schema"].get("type") != "object":  # what the checks above missed
            raise ToolDefinitionError(
                f"@tool {_where(function)}: its input schema is not a JSON object "
                f"({json.dumps(definition['input_schema'])[:200]}); take named parameters"
            )
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
    docstring (its ``Args:`` section describes the parameters). A name the API refuses, or a
    signature that is not named arguments (``*args``), raises :class:`ToolDefinitionError`
    here; a parameter without a type hint, or no docstring, warns
    (:class:`ToolDefinitionWarning`).
    """

    def make(target: Callable[..., Any], stacklevel: int = 2) -> FunctionTool:
        if not callable(target):
            raise TypeError(f"@tool: expected a function, got {target!r}")
        return FunctionTool(target, name=name, description=description, stacklevel=stacklevel + 1)

    # The warnings point at the line that applied @tool: one frame further up when it is called
    # with the function than when it returns ``make`` for the decorator to call.
    return make(function, 3) if function is not None else make


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
