"""Tier 2: one tool-less model call summarises older history; the conversation is rebuilt.

The rebuilt conversation has four parts: the original task, the summary, the current board as
the plan machines render it (never taken from the summary), and the last rounds verbatim. The
older history goes to the summariser as a plain transcript in one user message: a request that
carries ``tool_use`` blocks must also carry tools, and this call must have none.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from orchestrator.conversation import result_text
from orchestrator.protocols import JSONObject

SUMMARY_SYSTEM = (
    "You summarise the earlier part of a coding agent's working session so that the agent can "
    "carry on without it. You never call tools and you never continue the work yourself."
)
SUMMARY_INSTRUCTION = (
    "Summarise the session above for the agent that will continue it. Keep, in this order:\n"
    "1. the task, as the user stated it, and any later instructions from the user;\n"
    "2. decisions made and why;\n"
    "3. files read, created or changed, with what changed;\n"
    "4. errors met, and how each was resolved or that it is still open;\n"
    "5. what comes next.\n"
    "Do not restate the todo list: the harness shows the current board separately. "
    "Be specific (paths, commands, names) and brief."
)
SUMMARY_OPEN = (
    "<summary>\nWhat happened earlier in this session "
    "(summarised by the harness to fit the context window):\n"
)
SUMMARY_CLOSE = "\n</summary>"
BOARD_HEADER = (
    "The current plan, re-rendered by the harness from its board (this is the source of truth; "
    "change it only with the todo tool):\n"
)
_EMPTY_BOARD = "(the plan is empty)"
_EMPTY_SUMMARY = "(the summariser returned no text)"
_TOOL_INPUT_CHARS = 400
_RESULT_CHARS = 1500


def task_blocks(messages: Sequence[JSONObject]) -> list[JSONObject]:
    """The original task: the first text block of the first message (kept across compactions)."""
    if not messages:
        return []
    for block in messages[0]["content"]:
        if block.get("type") == "text":
            return [{"type": "text", "text": block["text"]}]
    return []


def transcript(messages: Sequence[JSONObject], limit_chars: int) -> str:
    """The history as plain text for the summariser, its middle elided past ``limit_chars``."""
    lines: list[str] = []
    for message in messages:
        for block in message["content"]:
            lines.append(_line(message["role"], block))
    text = "\n".join(line for line in lines if line)
    if len(text) <= limit_chars:
        return text
    head = limit_chars // 5
    tail = limit_chars - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n…[{cut:,} characters of the middle left out]…\n{text[-tail:]}"


def summary_request(
    model: str, messages: Sequence[JSONObject], *, max_tokens: int, limit_chars: int
) -> JSONObject:
    """The summariser's request: no tools, one user message, the transcript and what to keep."""
    text = (
        f"<transcript>\n{transcript(messages, limit_chars)}\n</transcript>\n\n{SUMMARY_INSTRUCTION}"
    )
    return {
        "model": model,
        "max_tokens": max_tokens,
        "system": [{"type": "text", "text": SUMMARY_SYSTEM}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
    }


def board_block(board: str) -> JSONObject:
    return {"type": "text", "text": BOARD_HEADER + ((board.strip() and board) or _EMPTY_BOARD)}


def rebuilt(
    messages: Sequence[JSONObject], keep_from: int, summary: str, board: str
) -> list[JSONObject]:
    """Task + summary + board in the first user message, then ``messages[keep_from:]`` verbatim."""
    summary = summary.strip() or _EMPTY_SUMMARY
    first: JSONObject = {
        "role": "user",
        "content": [
            *task_blocks(messages),
            {"type": "text", "text": SUMMARY_OPEN + summary + SUMMARY_CLOSE},
            board_block(board),
        ],
    }
    return [first, *messages[keep_from:]]


def _line(role: str, block: JSONObject) -> str:
    kind = block.get("type")
    if kind == "text":
        return f"[{role}] {block.get('text', '')}"
    if kind == "tool_use":
        arguments = json.dumps(block.get("input"), ensure_ascii=False)
        return f"[{role} calls {block.get('name')}] {_clip(arguments, _TOOL_INPUT_CHARS)}"
    if kind == "tool_result":
        error = " (error)" if block.get("is_error") else ""
        return f"[tool result{error}] {_clip(result_text(block), _RESULT_CHARS)}"
    if kind == "compaction":
        return f"[earlier summary] {block.get('content', '')}"
    return ""  # thinking and redacted thinking are the model's own, not the record


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"…[{len(text) - limit:,} more chars]"
