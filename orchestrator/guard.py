"""The loop guard: blocks a tool call identical to the one before it (the seeds' rule).

Calls to whitelisted tools (``todo`` and ``read_file`` by default) may repeat, since re-reading a
file or re-sending a plan is how a model gets its bearings. One rule is added to the seeds': a
``todo`` input refused three times in a row is not applied again; the model is told so instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from orchestrator.shorten import shorten_command

DEFAULT_WHITELIST = frozenset({"todo", "read_file"})
DEFAULT_REJECTION_LIMIT = 3


def canonical_call(name: str, arguments: object) -> str:
    """A stable signature of a call: the tool name and its input with keys sorted."""
    return name + " " + json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=repr)


@attrs.frozen
class Verdict:
    """Why a call was blocked: ``rule`` names the rule, ``message`` goes to the model."""

    rule: str
    message: str


@attrs.define
class RepeatGuard:
    """Remembers the previous call and the run of identical refused ``todo`` inputs."""

    whitelist: frozenset[str] = DEFAULT_WHITELIST
    rejection_limit: int = DEFAULT_REJECTION_LIMIT
    _previous: str | None = attrs.field(default=None, init=False)
    _refused: str | None = attrs.field(default=None, init=False)
    _refusals: int = attrs.field(default=0, init=False)

    def check(self, name: str, arguments: object) -> Verdict | None:
        """Return a verdict if the call must not run; remember the call as the previous one."""
        signature = canonical_call(name, arguments)
        previous, self._previous = self._previous, signature
        if name not in self.whitelist and signature == previous:
            return Verdict(
                "repeat",
                f"Error: blocked: this {name} call is identical to the previous one, so its "
                "result would not change; do something different, or update the plan with "
                "the todo tool",
            )
        if signature == self._refused and self._refusals >= self.rejection_limit:
            return Verdict(
                "refused_repeat",
                f"Error: blocked: this {name} input was refused {self._refusals} times in a row "
                "and was not applied again; read the last error and change the items",
            )
        return None

    def record(self, name: str, arguments: object, is_error: bool) -> str:
        """Note a finished call's outcome; return a note to add to a refused ``todo`` result."""
        if name != "todo":
            return ""
        signature = canonical_call(name, arguments)
        if not is_error:
            self._refused, self._refusals = None, 0
            return ""
        self._refusals = self._refusals + 1 if signature == self._refused else 1
        self._refused = signature
        if self._refusals >= self.rejection_limit:
            return (
                f" (refused {self._refusals} times in a row with the same input; it will not "
                "be applied again as it is: change the call)"
            )
        return ""


def describe_arguments(arguments: Mapping[str, Any] | Any, limit: int = 80) -> str:
    """A short one-line rendering of a call's key argument, for terminals and timelines.

    A command or path keeps its words: long paths in it are cut in their middles first, and
    only what is still past ``limit`` then loses its own middle (its start and end stay).
    """
    if isinstance(arguments, Mapping):
        for key in ("command", "path", "items"):
            if key in arguments:
                value = arguments[key]
                if key == "items" and isinstance(value, list):
                    return f"{len(value)} item" + ("" if len(value) == 1 else "s")
                one_line = str(value).replace("\n", " ")
                return shorten_command(one_line, limit, hard_limit=limit)
    return _clip(json.dumps(arguments, ensure_ascii=False, default=repr), limit)


def _clip(text: str, limit: int) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
