"""The conversation the loop keeps, and the Messages API request bodies built from it.

Messages are stored exactly as the API sees them, minus ``cache_control``; breakpoints are added
to copies when a request is built, so the stored history stays byte-stable from round to round
and every request's prefix is the previous request's prefix.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from orchestrator.protocols import JSONObject

#: The API allows four ``cache_control`` breakpoints per request.
MAX_CACHE_BREAKPOINTS = 4
_EPHEMERAL: JSONObject = {"type": "ephemeral"}

RESUME_PROMPT = "The run was interrupted. Continue the task from where you stopped."
INTERRUPTED_RESULT = "Error: not run: the run was interrupted before this tool call finished."


@attrs.define
class Conversation:
    """The message list of one session; mutation is the point, so it is not frozen."""

    messages: list[JSONObject] = attrs.field(factory=list)

    def add_user_text(self, text: str) -> None:
        self.close_dangling_tool_uses()
        self.messages.append({"role": "user", "content": [{"type": "text", "text": text}]})

    def add_assistant(self, content: Sequence[JSONObject]) -> None:
        blocks = [b for b in content if not (b.get("type") == "text" and not b.get("text"))]
        # An assistant turn with nothing but empty text would break the no-empty-text rule.
        self.messages.append({"role": "assistant", "content": blocks or [_placeholder()]})

    def add_tool_results(self, results: Iterable[JSONObject]) -> None:
        self.messages.append({"role": "user", "content": list(results)})

    def append_text_to_last_user(self, text: str) -> None:
        """Add a text block after everything in the newest user message (after all tool_results)."""
        last = self.messages[-1]
        assert last["role"] == "user", "a reminder goes into the user message with the results"
        last["content"].append({"type": "text", "text": text})

    def prepare_to_resume(self) -> None:
        """Make the history end in a user message, so it can be sent again as it is."""
        self.close_dangling_tool_uses()
        if self.messages and self.messages[-1]["role"] == "assistant":
            self.messages.append(
                {"role": "user", "content": [{"type": "text", "text": RESUME_PROMPT}]}
            )

    def close_dangling_tool_uses(self) -> None:
        """Answer tool_use blocks left without results (an interrupted round) with error results."""
        if not self.messages or self.messages[-1]["role"] != "assistant":
            return
        ids = [b["id"] for b in self.messages[-1]["content"] if b.get("type") == "tool_use"]
        if ids:
            self.add_tool_results(
                {
                    "type": "tool_result",
                    "tool_use_id": tool_id,
                    "content": INTERRUPTED_RESULT,
                    "is_error": True,
                }
                for tool_id in ids
            )

    def request(
        self,
        *,
        model: str,
        system: str,
        tools: Sequence[JSONObject],
        max_tokens: int,
    ) -> JSONObject:
        """Build the request body, with breakpoints on tools, system and the two newest turns.

        The breakpoint on the user message before the newest one is the one the previous
        request put on its newest message, so each round reads that whole prefix from cache.
        """
        tool_defs = [dict(t) for t in tools]
        if tool_defs:
            tool_defs[-1]["cache_control"] = _EPHEMERAL
        messages = [dict(m) for m in self.messages]
        user_indexes = [i for i, m in enumerate(messages) if m["role"] == "user"]
        marks = MAX_CACHE_BREAKPOINTS - (2 if tool_defs else 1)
        for index in user_indexes[-marks:]:
            messages[index] = _with_breakpoint(messages[index])
        return {
            "model": model,
            "max_tokens": max_tokens,
            "system": [{"type": "text", "text": system, "cache_control": _EPHEMERAL}],
            "tools": tool_defs,
            "messages": messages,
        }


def _with_breakpoint(message: JSONObject) -> JSONObject:
    content = copy.copy(message["content"])
    content[-1] = {**content[-1], "cache_control": _EPHEMERAL}
    return {**message, "content": content}


def _placeholder() -> JSONObject:
    return {"type": "text", "text": "(no text)"}


def count_breakpoints(body: Any) -> int:
    """Count ``cache_control`` keys anywhere in a request body."""
    if isinstance(body, dict):
        return int("cache_control" in body) + sum(count_breakpoints(v) for v in body.values())
    if isinstance(body, list):
        return sum(count_breakpoints(v) for v in body)
    return 0
