"""Tier 1: old ``tool_result`` contents become short stubs that say what was there.

Only the content of a result changes; the block, its ``tool_use_id`` and the ``tool_use`` it
answers stay, so no pair is ever broken. Results of rounds whose plan item is finished go first,
oldest first, and enough is cleared at once to fall well below the threshold, so the cached
prefix breaks once per batch rather than every round. The newest ``todo`` result is the board's
latest word and is never cleared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from orchestrator.context.tokens import estimate_tokens
from orchestrator.conversation import result_text
from orchestrator.guard import describe_arguments
from orchestrator.protocols import JSONObject

STUB_PREFIX = "[cleared: "
#: Results shorter than this are left alone: their stub would save next to nothing.
MIN_CLEARABLE_CHARS = 400
#: Savings are counted at four characters a token (the estimate adds at three), so the running
#: total after a clearing can only be too high, never too low.
SAVED_CHARS_PER_TOKEN = 4
_TRIM_NOTE = (
    "\n…[{cut:,} characters cut here to fit the context window; "
    "run it again with a narrower command if you need them]…\n"
)


def stub_text(name: str, arguments: Any, chars: int) -> str:
    """The stub left in place of a cleared result, in the issue's words."""
    return (
        f"{STUB_PREFIX}{name} `{describe_arguments(arguments)}` output, {chars:,} chars; "
        "run it again if you need it]"
    )


@attrs.frozen
class Cleared:
    """What one clearing did: the new message list and the ids of the results it cleared."""

    messages: list[JSONObject]
    ids: tuple[str, ...]
    saved: int = 0  # tokens saved, counted low (four characters a token) to stay conservative


def tool_uses(messages: Sequence[JSONObject]) -> dict[str, JSONObject]:
    """Every ``tool_use`` block in the history, by id (a later use of an id wins)."""
    return {
        str(block.get("id")): block
        for message in messages
        if message["role"] == "assistant"
        for block in message["content"]
        if block.get("type") == "tool_use"
    }


def clear_results(
    messages: Sequence[JSONObject],
    *,
    protect_from: int,
    need: int,
    finished: Callable[[str], bool],
) -> Cleared:
    """Stub old results before ``protect_from`` until about ``need`` tokens are freed.

    ``finished(tool_use_id)`` says whether the round of that call belongs to a plan item that
    is now completed or cancelled: those results are cleared first.
    """
    uses = tool_uses(messages)
    newest_todo = _newest_todo_result(messages, uses)
    candidates: list[tuple[int, int, int, str, int]] = []
    for index in range(min(protect_from, len(messages))):
        message = messages[index]
        if message["role"] != "user":
            continue
        for position, block in enumerate(message["content"]):
            if block.get("type") != "tool_result" or (index, position) == newest_todo:
                continue
            text = result_text(block)
            if len(text) < MIN_CLEARABLE_CHARS or text.startswith(STUB_PREFIX):
                continue
            tool_id = str(block.get("tool_use_id"))
            saved = _saved(text, _stub_for(uses, tool_id, text))
            rank = 0 if finished(tool_id) else 1
            candidates.append((rank, index, position, tool_id, saved))
    candidates.sort(key=lambda c: (c[0], c[1], c[2]))
    chosen: list[tuple[int, int, str]] = []
    freed = 0
    for _rank, index, position, tool_id, saved in candidates:
        if freed >= need:
            break
        chosen.append((index, position, tool_id))
        freed += saved
    rewritten = list(messages)
    for index, position, tool_id in chosen:
        message = rewritten[index]
        content = list(message["content"])
        block = content[position]
        content[position] = {**block, "content": _stub_for(uses, tool_id, result_text(block))}
        rewritten[index] = {**message, "content": content}
    return Cleared(rewritten, tuple(tool_id for _, _, tool_id in chosen), freed)


def trim_results(messages: Sequence[JSONObject], *, start: int, budget: int) -> Cleared:
    """Cut the middle out of the largest results from ``start`` on until they fit ``budget``.

    The last resort when the rounds kept whole are themselves too big for the window (one
    enormous output): the head and tail stay, the cut is said in the text.
    """
    sized = [
        (estimate_tokens(result_text(block)), index, position)
        for index in range(start, len(messages))
        if messages[index]["role"] == "user"
        for position, block in enumerate(messages[index]["content"])
        if block.get("type") == "tool_result"
    ]
    total = sum(tokens for tokens, _, _ in sized)
    rewritten = list(messages)
    ids: list[str] = []
    saved = 0
    for tokens, index, position in sorted(sized, reverse=True):
        if total <= budget:
            break
        keep_tokens = max(200, tokens - (total - budget))
        message = rewritten[index]
        content = list(message["content"])
        block = content[position]
        text = result_text(block)
        keep_chars = keep_tokens * 3
        if keep_chars >= len(text):
            continue
        head, tail = text[: keep_chars // 2], text[len(text) - keep_chars // 2 :]
        trimmed = head + _TRIM_NOTE.format(cut=len(text) - len(head) - len(tail)) + tail
        content[position] = {**block, "content": trimmed}
        rewritten[index] = {**message, "content": content}
        total -= tokens - estimate_tokens(trimmed)
        saved += _saved(text, trimmed)
        ids.append(str(block.get("tool_use_id")))
    return Cleared(rewritten, tuple(ids), saved)


def _saved(old: str, new: str) -> int:
    return max(0, len(old) - len(new)) // SAVED_CHARS_PER_TOKEN


def _stub_for(uses: Mapping[str, JSONObject], tool_id: str, text: str) -> str:
    use = uses.get(tool_id, {})
    return stub_text(str(use.get("name", "tool")), use.get("input", {}), len(text))


def _newest_todo_result(
    messages: Sequence[JSONObject], uses: Mapping[str, JSONObject]
) -> tuple[int, int] | None:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message["role"] != "user":
            continue
        for position in range(len(message["content"]) - 1, -1, -1):
            block = message["content"][position]
            if block.get("type") != "tool_result":
                continue
            use = uses.get(str(block.get("tool_use_id")), {})
            if use.get("name") == "todo" and not block.get("is_error"):
                return index, position
    return None
