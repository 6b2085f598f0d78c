"""The conversation the loop keeps, and the Messages API request bodies built from it.

Messages are stored exactly as the API sees them, minus ``cache_control``; breakpoints are added
to copies when a request is built, so the stored history stays byte-stable from round to round
and every request's prefix is the previous request's prefix.
"""

from __future__ import annotations

import copy
import json
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import orjson

from orchestrator.protocols import JSONObject

#: The API allows four ``cache_control`` breakpoints per request.
MAX_CACHE_BREAKPOINTS = 4
_EPHEMERAL: JSONObject = {"type": "ephemeral"}
#: What a breakpoint adds to a block's encoding: after a key, and in an otherwise empty block.
_MARK_AFTER_KEY = len(', "cache_control": ') + len(json.dumps(_EPHEMERAL))
_MARK_ALONE = _MARK_AFTER_KEY - len(", ")
_FINGERPRINT_OPTIONS = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)

RESUME_PROMPT = "The run was interrupted. Continue the task from where you stopped."
INTERRUPTED_RESULT = "Error: not run: the run was interrupted before this tool call finished."


@attrs.frozen
class RequestSummary:
    """What ``model.request`` records of a request body: sizes, not the body."""

    messages: int
    cache_breakpoints: int
    bytes: int


@attrs.define
class _Encoded:
    """Running totals over the stored messages, so a round encodes only its new tail.

    ``objects[i]`` is the message whose encoding ``sizes[i]`` and ``marks[i]`` describe;
    ``before[i]`` is the sum of the sizes of the messages before it (likewise ``marks_before``).
    """

    objects: list[JSONObject] = attrs.field(factory=list)
    sizes: list[int] = attrs.field(factory=list)
    marks: list[int] = attrs.field(factory=list)
    before: list[int] = attrs.field(factory=lambda: [0])
    marks_before: list[int] = attrs.field(factory=lambda: [0])

    def keep(self, count: int) -> None:
        """Forget every message from position ``count`` on."""
        for column in (self.objects, self.sizes, self.marks):
            del column[count:]
        del self.before[count + 1 :]
        del self.marks_before[count + 1 :]

    def add(self, message: JSONObject) -> None:
        size, marks = len(_dumps(message)), _message_breakpoints(message)
        self.objects.append(message)
        self.sizes.append(size)
        self.marks.append(marks)
        self.before.append(self.before[-1] + size)
        self.marks_before.append(self.marks_before[-1] + marks)


def _forget_encodings(conversation: Conversation, _field: Any, messages: Any) -> Any:
    conversation._encoded.keep(0)
    return messages


@attrs.define
class Conversation:
    """The message list of one session; mutation is the point, so it is not frozen.

    Change messages through the methods (or assign a new list): they tell the running totals of
    :meth:`summary` which message changed. A message replaced by another object is noticed
    anyway; a block edited in place without a method is not.
    """

    messages: list[JSONObject] = attrs.field(factory=list, on_setattr=_forget_encodings)
    _encoded: _Encoded = attrs.field(factory=_Encoded, init=False, repr=False, eq=False)
    # The positions the last request() marked with a breakpoint (copies, not stored messages).
    _marked: tuple[int, ...] = attrs.field(default=(), init=False, repr=False, eq=False)
    # The last request head (all but the messages): its orjson bytes, encoded size, breakpoints.
    _head: tuple[bytes, int, int] | None = attrs.field(
        default=None, init=False, repr=False, eq=False
    )

    def add_user_text(self, text: str) -> None:
        self.close_dangling_tool_uses()
        block = {"type": "text", "text": text}
        if self.messages and self.messages[-1]["role"] == "user":
            # Roles must alternate: after closed tool uses or a failed run, the text joins the
            # user message already there, after its tool results.
            last = self.messages[-1]
            self.messages[-1] = {**last, "content": [*last["content"], block]}
            self._changed(len(self.messages) - 1)
            return
        self.messages.append({"role": "user", "content": [block]})

    def add_assistant(self, content: Sequence[JSONObject]) -> None:
        previous: list[JSONObject] = []
        if self.messages and self.messages[-1]["role"] == "assistant":
            # A pause_turn continuation: the API continues the same assistant message.
            previous = list(self.messages.pop()["content"])
            self._changed(len(self.messages))
        fresh = [b for b in content if not (b.get("type") == "text" and not _has_text(b))]
        blocks = _without_repeated_ids([*previous, *fresh])
        # An assistant turn with nothing but blank text would break the no-empty-text rule.
        self.messages.append({"role": "assistant", "content": blocks or [_placeholder()]})

    def replace(self, messages: Sequence[JSONObject]) -> None:
        """Take a rewritten history (cleared or compacted); nothing old is reused."""
        self.messages = list(messages)  # on_setattr forgets the running encodings

    def add_tool_results(self, results: Iterable[JSONObject]) -> None:
        self.messages.append({"role": "user", "content": list(results)})

    def append_text_to_last_user(self, text: str) -> None:
        """Add a text block after everything in the newest user message (after all tool_results)."""
        last = self.messages[-1]
        assert last["role"] == "user", "a reminder goes into the user message with the results"
        last["content"].append({"type": "text", "text": text})
        self._changed(len(self.messages) - 1)

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
        options: Mapping[str, Any] | None = None,
    ) -> JSONObject:
        """Build the request body, with breakpoints on tools, system and the two newest turns.

        The breakpoint on the user message before the newest one is the one the previous
        request put on its newest message, so each round reads that whole prefix from cache.
        """
        tool_defs = list(tools)
        if tool_defs:
            tool_defs[-1] = {**tool_defs[-1], "cache_control": _EPHEMERAL}
        messages = list(self.messages)
        marks = MAX_CACHE_BREAKPOINTS - (2 if tool_defs else 1)
        marked: list[int] = []
        for index in range(len(messages) - 1, -1, -1):  # the newest user turns, from the end
            if len(marked) == marks:
                break
            if messages[index]["role"] == "user":
                messages[index] = _with_breakpoint(messages[index])
                marked.append(index)
        self._marked = tuple(marked)
        return {
            "model": model,
            "max_tokens": max_tokens,
            **(options or {}),
            "system": [{"type": "text", "text": system, "cache_control": _EPHEMERAL}],
            "tools": tool_defs,
            "messages": messages,
        }

    def summary(self, body: Mapping[str, Any]) -> RequestSummary:
        """The message count, breakpoints and encoded size of a body :meth:`request` built.

        Stored messages are encoded once, when first seen; a round encodes the head (model,
        system, tools), the new messages and the few copies carrying breakpoints. A body that
        is not the latest request of this conversation is measured in full.
        """
        messages: Sequence[JSONObject] = body["messages"]
        head_size, head_marks = self._head_summary({**body, "messages": []})
        count = len(messages)
        if not self._is_latest_request(messages):
            sizes = sum(len(_dumps(message)) for message in messages)
            marks = sum(_message_breakpoints(message) for message in messages)
        else:
            encoded = self._refresh()
            sizes, marks = encoded.before[count], encoded.marks_before[count]
            for index in self._marked:
                copy_ = messages[index]
                added = _breakpoint_added(self.messages[index], copy_)
                if added is None:  # not the plain copy request() makes: measure it
                    sizes += len(_dumps(copy_)) - encoded.sizes[index]
                    marks += _message_breakpoints(copy_) - encoded.marks[index]
                else:
                    sizes += added
                    marks += 1
        separators = 2 * max(0, count - 1)  # the ", " between messages
        return RequestSummary(count, head_marks + marks, head_size + separators + sizes)

    def _head_summary(self, head: JSONObject) -> tuple[int, int]:
        """The encoded size and breakpoints of a request without its messages.

        The head (model, system, tool definitions) is the same round after round, and the
        largest thing json.dumps would encode each round: orjson's bytes of it, ten times
        cheaper, tell whether it changed. Equal bytes mean equal JSON: orjson is told to refuse
        what json.dumps renders otherwise or refuses (subclasses, dataclasses, datetimes), and
        it writes NaN and infinities as ``null``, so a head with ``null`` is always encoded.
        """
        try:
            fingerprint: bytes | None = orjson.dumps(head, option=_FINGERPRINT_OPTIONS)
        except (TypeError, orjson.JSONEncodeError):
            fingerprint = None  # what orjson cannot encode json.dumps must judge
        reusable = fingerprint is not None and b"null" not in fingerprint
        if reusable and self._head is not None and self._head[0] == fingerprint:
            return self._head[1], self._head[2]
        size, marks = len(_dumps(head)), count_breakpoints(head)
        if fingerprint is not None:
            self._head = (fingerprint, size, marks)
        return size, marks

    def _is_latest_request(self, messages: Sequence[JSONObject]) -> bool:
        """Whether ``messages`` are the stored ones but for the copies the last request marked."""
        stored = self.messages
        if len(messages) != len(stored):
            return False
        same = list(map(operator.is_, messages, stored))  # one pass in C
        return same.count(False) == len(self._marked) and not any(
            same[index] for index in self._marked
        )

    def _refresh(self) -> _Encoded:
        """The running totals, brought up to date with the stored messages."""
        encoded, stored = self._encoded, self.messages
        known = min(len(encoded.objects), len(stored))
        # One pass in C over identities: a message replaced without a method is re-encoded.
        same = list(map(operator.is_, encoded.objects[:known], stored[:known]))
        valid = same.index(False) if False in same else known
        if valid < len(encoded.objects):
            encoded.keep(valid)
        for message in stored[valid:]:
            encoded.add(message)
        return encoded

    def _changed(self, index: int) -> None:
        """The stored message at ``index`` changed (or went): totals from there on are stale."""
        if index < len(self._encoded.objects):
            self._encoded.keep(index)


#: ``json.dumps(value, ensure_ascii=False)`` builds this encoder on every call; one is enough.
_ENCODER = json.JSONEncoder(ensure_ascii=False)


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)


def _breakpoint_added(stored: Any, marked: Any) -> int | None:
    """What the breakpoint adds to ``stored``'s encoded size; None unless ``marked`` is a copy.

    ``marked`` must be exactly the copy :func:`_with_breakpoint` makes of ``stored``. Only the
    last block differs, by one key at its end, so the copy's encoding is the stored one with
    ``, "cache_control": {"type": "ephemeral"}`` before that block's closing brace.
    """
    if type(stored) is not dict or type(marked) is not dict or list(stored) != list(marked):
        return None
    content, marked_content = stored.get("content"), marked.get("content")
    if type(content) is not list or type(marked_content) is not list or not content:
        return None
    if len(content) != len(marked_content):
        return None
    for key, value in stored.items():
        if key != "content" and marked[key] is not value:
            return None
    if not all(map(operator.is_, content[:-1], marked_content[:-1])):
        return None
    last, marked_last = content[-1], marked_content[-1]
    if type(last) is not dict or type(marked_last) is not dict or "cache_control" in last:
        return None
    if list(marked_last) != [*last, "cache_control"]:
        return None
    if marked_last["cache_control"] is not _EPHEMERAL:
        return None
    if not all(marked_last[key] is value for key, value in last.items()):
        return None
    return _MARK_AFTER_KEY if last else _MARK_ALONE


def _with_breakpoint(message: JSONObject) -> JSONObject:
    content = copy.copy(message["content"])
    content[-1] = {**content[-1], "cache_control": _EPHEMERAL}
    return {**message, "content": content}


def _has_text(block: JSONObject) -> bool:
    # The API refuses text blocks that are empty or only whitespace.
    text = block.get("text")
    return isinstance(text, str) and bool(text.strip())


def _placeholder() -> JSONObject:
    return {"type": "text", "text": "(no text)"}


def _without_repeated_ids(blocks: list[JSONObject]) -> list[JSONObject]:
    """Drop a tool_use whose id came earlier: the API refuses ids used twice in one message."""
    seen: set[object] = set()
    kept: list[JSONObject] = []
    for block in blocks:
        if block.get("type") == "tool_use":
            if block.get("id") in seen:
                continue
            seen.add(block.get("id"))
        kept.append(block)
    return kept


def result_text(block: Mapping[str, Any]) -> str:
    """The text of a ``tool_result`` block, whether its content is a string or text blocks."""
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return ""


def _message_breakpoints(message: JSONObject) -> int:
    content = message.get("content")
    if type(content) is not list:
        return 0
    return sum(type(block) is dict and "cache_control" in block for block in content)


def count_breakpoints(body: Mapping[str, Any] | Sequence[JSONObject]) -> int:
    """Count ``cache_control`` markers in a request body or a list of messages.

    Only where requests carry them: tool definitions, system blocks, message content blocks.
    """
    if isinstance(body, Mapping):
        system = body.get("system")
        parts: list[Any] = [body.get("tools"), system if isinstance(system, list) else None]
        messages: Sequence[Any] = body.get("messages") or ()
    else:
        parts, messages = [], body
    parts.extend(message.get("content") for message in messages)
    # Concrete type checks: this runs every round over the whole history.
    return sum(
        type(block) is dict and "cache_control" in block
        for part in parts
        if type(part) is list
        for block in part
    )


@attrs.frozen
class CacheUsage:
    """How a prompt cache would split a request's input, in characters (about 4 per token)."""

    read: int
    write: int
    uncached: int

    @property
    def total(self) -> int:
        return self.read + self.write + self.uncached

    def tokens(self) -> dict[str, int]:
        """The request's usage keys, estimated at four characters a token."""
        return {
            "input_tokens": self.uncached // 4,
            "cache_read_input_tokens": self.read // 4,
            "cache_creation_input_tokens": self.write // 4,
        }


def cache_usage(previous: Mapping[str, Any] | None, current: Mapping[str, Any]) -> CacheUsage:
    """Estimate what a prompt cache serves for ``current`` after ``previous`` was sent.

    The cache reads the byte-identical prefix up to the last breakpoint that ``previous`` also
    had; it writes from there up to ``current``'s own last breakpoint; the rest is uncached.
    The prefix is compared block by block in the API's order: tools, system, messages.
    """
    blocks, marks = _flatten(current)
    sizes = [len(block) for block in blocks]
    read = 0
    if previous is not None:
        before, before_marks = _flatten(previous)
        for index in sorted(before_marks, reverse=True):
            if index < len(blocks) and before[: index + 1] == blocks[: index + 1]:
                read = sum(sizes[: index + 1])
                break
    written_up_to = sum(sizes[: max(marks) + 1]) if marks else 0
    write = max(0, written_up_to - read)
    return CacheUsage(read=read, write=write, uncached=sum(sizes) - read - write)


def _flatten(request: Mapping[str, Any]) -> tuple[list[str], list[int]]:
    """The request as canonical JSON blocks (without ``cache_control``), and breakpoint indexes."""
    parts: list[tuple[str, Mapping[str, Any]]] = [("tool", t) for t in request.get("tools", ())]
    system = request.get("system", ())
    if isinstance(system, str):
        system = [{"type": "text", "text": system}] if system else []
    parts.extend(("system", block) for block in system)
    for message in request.get("messages", ()):
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        parts.extend((message["role"], block) for block in content)
    blocks, marks = [], []
    for index, (where, block) in enumerate(parts):
        if "cache_control" in block:
            marks.append(index)
        plain = {k: v for k, v in block.items() if k != "cache_control"}
        blocks.append(where + ":" + json.dumps(plain, sort_keys=True, ensure_ascii=False))
    return blocks, marks
