"""Scripted assistant turns: the JSON format, its checked parser, and a model that plays them.

A script is a list of entries, each either an assistant turn (what the model "says") or a
fault (what the network does instead). The same script drives three things: the offline demo,
the tests, and the loopback Messages API server in :mod:`orchestrator.testing`. A turn may also
carry expectations about the request it answers, so a script doubles as an assertion that the
harness sent the tool results (and reminders) it should have.

Entries are numbered from 1 in every message, as a person counts them in the file.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, TypeGuard, cast

import attrs

from orchestrator.conversation import cache_usage, result_text
from orchestrator.protocols import JSONObject, ModelError, ModelTurn

FaultKind: TypeAlias = Literal["status", "disconnect", "cut_stream", "bad_json", "slow"]

FAULT_KINDS: Final[tuple[FaultKind, ...]] = (
    "status",
    "disconnect",
    "cut_stream",
    "bad_json",
    "slow",
)

STOP_REASONS: Final[frozenset[str]] = frozenset(
    {
        "end_turn",
        "tool_use",
        "max_tokens",
        "stop_sequence",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
    }
)

USAGE_KEYS: Final[tuple[str, ...]] = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)

#: The marker a reminder text block carries; ``expect_reminder`` looks for it.
REMINDER_MARKER: Final = "<reminder>"

_ERROR_TYPES: Final[Mapping[int, str]] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

_SHOWN_TEXT_LIMIT: Final = 200

_TOP_KEYS: Final = frozenset({"name", "scripted", "description", "turns"})
_COMPACT_KEYS: Final = frozenset({"text", "tool_calls"})
_TURN_KEYS: Final = frozenset({"stop_reason", "usage", "expect", "expect_reminder", "content"})
_FAULT_KEYS: Final[Mapping[FaultKind, frozenset[str]]] = {
    "status": frozenset({"status", "retry_after", "body"}),
    "disconnect": frozenset(),
    "cut_stream": frozenset(),
    "bad_json": frozenset(),
    "slow": frozenset({"seconds"}),
}
_TOOL_CALL_KEYS: Final = frozenset({"name", "input", "id"})
_EXPECT_KEYS: Final = frozenset({"is_error", "contains", "equals"})


class ScriptError(ValueError):
    """A script file or dict is malformed; the message names the file, the entry and the field."""


def error_type_for_status(status: int) -> str:
    """The Anthropic error ``type`` the service sends with an HTTP ``status``."""
    if status in _ERROR_TYPES:
        return _ERROR_TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"


@attrs.frozen
class Expectation:
    """What one ``tool_result`` block of the answered request must look like.

    ``None`` (or an empty ``contains``) leaves that aspect unchecked.
    """

    is_error: bool | None = None
    contains: tuple[str, ...] = ()
    equals: str | None = None


@attrs.frozen
class ScriptedTurn:
    """One assistant turn, with its content blocks exactly as the API returns them.

    ``usage`` of ``None`` means "estimate from the sizes"; ``expect`` of ``None`` means the
    request's tool results are not checked, and ``expect_reminder`` of ``None`` that the
    presence of a reminder is not checked.
    """

    content: tuple[JSONObject, ...]
    stop_reason: str
    usage: Mapping[str, int] | None = None
    expect: tuple[Expectation, ...] | None = None
    expect_reminder: bool | None = None

    @property
    def text(self) -> str:
        return "".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")

    def usage_for(
        self, request: Mapping[str, Any] | None, previous: Mapping[str, Any] | None = None
    ) -> dict[str, int]:
        """The ``usage`` object to report when answering ``request``.

        Keys the script leaves out are estimated at four characters a token, with the prompt
        cache modelled from ``previous`` (the request answered before this one), as the
        service's counts are close enough to that for a harness that only logs and budgets them.
        """
        estimate = {
            "input_tokens": 0,
            "output_tokens": max(1, len(json.dumps(list(self.content))) // 4),
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        }
        if request is not None:
            estimate.update(cache_usage(previous, request).tokens())
        return {**estimate, **(self.usage or {})}


@attrs.frozen
class Fault:
    """A network or service failure that takes the place of a turn for one request.

    A ``slow`` fault is the exception: it delays the answer to the same request by ``seconds``
    and the next entry answers it. A ``retry_after`` of 0 sends ``retry-after: 0``, which the
    SDK treats as "no advice" and answers with its own backoff (about half a second).
    """

    kind: FaultKind
    status: int | None = None
    retry_after: float | None = None
    seconds: float = 0.0
    body: str | JSONObject | None = None

    def describe(self) -> str:
        """One line saying what the client sees when this fault happens."""
        if self.kind == "status":
            status = self.status if self.status is not None else 500
            text = f"HTTP {status} {error_type_for_status(status)}"
            if isinstance(self.body, str):
                text += f": {self.body}"
            if self.retry_after is not None:
                text += f" (retry after {self.retry_after:g}s)"
            return text
        if self.kind == "disconnect":
            return "the connection closed before any response"
        if self.kind == "cut_stream":
            return "the response stream was cut off mid-message"
        if self.kind == "bad_json":
            return "the response body was not JSON"
        return f"the response was delayed {self.seconds:g}s"


ScriptEntry: TypeAlias = ScriptedTurn | Fault


@attrs.frozen
class Script:
    """A named sequence of scripted turns and faults.

    ``scripted`` marks a scenario meant to be played offline (the demo) rather than a recording.
    """

    name: str
    turns: tuple[ScriptEntry, ...]
    scripted: bool = True
    description: str = ""


def load_script(path: str | Path) -> Script:
    """Read and check a script file; every problem raises :class:`ScriptError`."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ScriptError(f"{source}: cannot read the script: {error.strerror or error}") from error
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ScriptError(
            f"{source}: not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from error
    return parse_script(data, source=source)


def parse_script(data: object, *, source: str) -> Script:
    """Check ``data`` (a decoded JSON value) and build a :class:`Script` from it."""
    if not isinstance(data, Mapping):
        raise ScriptError(f"{source}: a script must be a JSON object, got {_json_type(data)}")
    reject_unknown_keys(data, _TOP_KEYS, f"{source}: ")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ScriptError(f"{source}: name must be a non-empty string")
    scripted = data.get("scripted", True)
    if not isinstance(scripted, bool):
        raise ScriptError(f"{source}: scripted must be true or false")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ScriptError(f"{source}: description must be a string")
    raw_turns = data.get("turns")
    if not isinstance(raw_turns, list) or not raw_turns:
        raise ScriptError(f"{source}: turns must be a non-empty list")
    seen_ids: dict[str, int] = {}
    entries: list[ScriptEntry] = []
    for number, raw in enumerate(raw_turns, start=1):
        prefix = f"{source}: turn {number}: "
        if not isinstance(raw, Mapping):
            raise ScriptError(f"{prefix}an entry must be a JSON object, got {_json_type(raw)}")
        if "fault" in raw:
            entries.append(_parse_fault(raw, prefix))
        else:
            entries.append(_parse_turn(raw, number, prefix, seen_ids))
    return Script(name=name, turns=tuple(entries), scripted=scripted, description=description)


def check_expectations(turn: ScriptedTurn, request: Mapping[str, Any]) -> list[str]:
    """Compare ``turn``'s expectations with the request it answers; one string per mismatch."""
    results, trailing_texts, leading_texts = last_user_message_parts(request)
    mismatches: list[str] = []
    if turn.expect is not None:
        if len(results) != len(turn.expect):
            mismatches.append(
                f"expected {_count(len(turn.expect), 'tool result')}, "
                f"got {len(results)} in the last user message"
            )
        for number, (expectation, result) in enumerate(
            zip(turn.expect, results, strict=False), start=1
        ):
            mismatches.extend(_check_one(number, expectation, result))
    if turn.expect_reminder is not None:
        reminders = [text for text in trailing_texts if REMINDER_MARKER in text]
        if turn.expect_reminder and not reminders:
            misplaced = any(REMINDER_MARKER in text for text in leading_texts)
            where = " (one comes before the tool results)" if misplaced else ""
            mismatches.append(
                f"expected a {REMINDER_MARKER} text block after the tool results{where}"
            )
        elif not turn.expect_reminder and reminders:
            mismatches.append(
                f"expected no {REMINDER_MARKER} text block, found {_shown(reminders[0])}"
            )
    return mismatches


class ScriptedModel:
    """A :class:`~orchestrator.protocols.Model` that answers with a script's turns, in order.

    With ``strict`` a turn whose expectations do not hold raises :class:`ModelError`; without,
    the mismatches are collected in :attr:`mismatches` and the turn is played anyway.
    """

    def __init__(self, script: Script, *, strict: bool = True, pace: float = 0.0) -> None:
        self._script = script
        self._strict = strict
        # Seconds to wait before each turn, so a person can watch a scripted demo unfold.
        self._pace = pace
        self._position = 0
        self._mismatches: list[str] = []
        self._previous: Mapping[str, Any] | None = None

    @property
    def name(self) -> str:
        return f"scripted:{self._script.name}"

    @property
    def remaining(self) -> int:
        """How many script entries (turns and faults) have not been played yet."""
        return len(self._script.turns) - self._position

    @property
    def mismatches(self) -> tuple[str, ...]:
        """Expectation mismatches seen so far when not strict, each prefixed with its turn."""
        return tuple(self._mismatches)

    def respond(self, request: Mapping[str, Any], on_text: Callable[[str], None]) -> ModelTurn:
        """Play the next turn; a scripted fault (other than ``slow``) raises :class:`ModelError`."""
        while True:
            entries = self._script.turns
            if self._position >= len(entries):
                raise ModelError(
                    f"script {self._script.name!r} has no turn {self._position + 1}; "
                    f"it has {len(entries)}"
                )
            entry = entries[self._position]
            self._position += 1
            prefix = f"script {self._script.name!r} turn {self._position}: "
            if isinstance(entry, Fault):
                if entry.kind == "slow":
                    continue
                raise ModelError(f"{prefix}scripted fault: {entry.describe()}")
            mismatches = check_expectations(entry, request)
            previous, self._previous = self._previous, request
            if self._pace > 0:
                time.sleep(self._pace)
            if mismatches and self._strict:
                raise ModelError(prefix + "; ".join(mismatches))
            self._mismatches.extend(prefix + mismatch for mismatch in mismatches)
            for block in entry.content:
                if block.get("type") == "text":
                    on_text(str(block["text"]))
            return ModelTurn(
                content=tuple(copy.deepcopy(block) for block in entry.content),
                stop_reason=entry.stop_reason,
                usage=entry.usage_for(request, previous),
                model=self.name,
            )


def _parse_fault(raw: Mapping[str, Any], prefix: str) -> Fault:
    kind = raw["fault"]
    if kind not in FAULT_KINDS:
        raise ScriptError(f"{prefix}fault must be one of {', '.join(FAULT_KINDS)}, got {kind!r}")
    kind = cast(FaultKind, kind)
    allowed = _FAULT_KEYS[kind]
    for key in raw:
        if key != "fault" and key not in allowed:
            fields = ", ".join(sorted(allowed)) or "no other fields"
            raise ScriptError(
                f"{prefix}{key} does not apply to a {kind!r} fault (it takes {fields})"
            )
    if kind == "status":
        status = raw.get("status")
        if not _is_int(status) or not 400 <= status <= 599:
            raise ScriptError(f"{prefix}status must be an HTTP error status from 400 to 599")
        retry_after = raw.get("retry_after")
        if retry_after is not None and (not _is_number(retry_after) or retry_after < 0):
            raise ScriptError(f"{prefix}retry_after must be a number of seconds, 0 or more")
        body = raw.get("body")
        if body is not None and not isinstance(body, str | Mapping):
            raise ScriptError(
                f"{prefix}body must be a string (the error message) or a JSON object (the body)"
            )
        return Fault(
            kind=kind,
            status=status,
            retry_after=None if retry_after is None else float(retry_after),
            body=dict(body) if isinstance(body, Mapping) else body,
        )
    if kind == "slow":
        seconds = raw.get("seconds")
        if not _is_number(seconds) or seconds < 0:
            raise ScriptError(f"{prefix}seconds must be a number, 0 or more")
        return Fault(kind=kind, seconds=float(seconds))
    return Fault(kind=kind)


def _parse_turn(
    raw: Mapping[str, Any], number: int, prefix: str, seen_ids: dict[str, int]
) -> ScriptedTurn:
    reject_unknown_keys(raw, _COMPACT_KEYS | _TURN_KEYS, prefix)
    if "content" in raw:
        mixed = sorted(_COMPACT_KEYS & raw.keys())
        if mixed:
            raise ScriptError(
                f"{prefix}{mixed[0]} cannot be combined with content; "
                "write the turn either as content blocks or as text/tool_calls"
            )
        content = _parse_content(raw["content"], prefix)
    elif "text" in raw or "tool_calls" in raw:
        content = _parse_compact(raw, number, prefix)
    else:
        raise ScriptError(f"{prefix}a turn needs text, tool_calls or content (or fault)")
    for index, block in enumerate(content):
        if block["type"] != "tool_use":
            continue
        where = "content" if "content" in raw else "tool_calls"
        earlier = seen_ids.get(block["id"])
        if earlier is not None:
            raise ScriptError(
                f"{prefix}{where}[{index}].id {block['id']!r} is already used by turn {earlier}"
            )
        seen_ids[block["id"]] = number
    has_tool_use = any(block["type"] == "tool_use" for block in content)
    stop_reason = raw.get("stop_reason", "tool_use" if has_tool_use else "end_turn")
    if not isinstance(stop_reason, str) or stop_reason not in STOP_REASONS:
        raise ScriptError(
            f"{prefix}stop_reason must be one of {', '.join(sorted(STOP_REASONS))}, "
            f"got {stop_reason!r}"
        )
    expect_reminder = raw.get("expect_reminder")
    if expect_reminder is not None and not isinstance(expect_reminder, bool):
        raise ScriptError(f"{prefix}expect_reminder must be true or false")
    return ScriptedTurn(
        content=content,
        stop_reason=stop_reason,
        usage=_parse_usage(raw["usage"], prefix) if "usage" in raw else None,
        expect=_parse_expect(raw["expect"], prefix) if "expect" in raw else None,
        expect_reminder=expect_reminder,
    )


def _parse_compact(raw: Mapping[str, Any], number: int, prefix: str) -> tuple[JSONObject, ...]:
    blocks: list[JSONObject] = []
    if "text" in raw:
        text = raw["text"]
        if not isinstance(text, str) or not text.strip():
            raise ScriptError(f"{prefix}text must be a non-empty string")
        blocks.append({"type": "text", "text": text})
    calls = raw.get("tool_calls", [])
    if not isinstance(calls, list):
        raise ScriptError(f"{prefix}tool_calls must be a list")
    if not blocks and not calls:
        raise ScriptError(f"{prefix}tool_calls must not be empty when there is no text")
    for index, call in enumerate(calls):
        field = f"tool_calls[{index}]"
        if not isinstance(call, Mapping):
            raise ScriptError(f"{prefix}{field} must be an object with name and input")
        reject_unknown_keys(call, _TOOL_CALL_KEYS, f"{prefix}{field}: ")
        name = call.get("name")
        if not isinstance(name, str) or not name:
            raise ScriptError(f"{prefix}{field}.name must be a string")
        arguments = call.get("input", {})
        if not isinstance(arguments, Mapping):
            raise ScriptError(f"{prefix}{field}.input must be a JSON object")
        tool_id = call.get("id", f"toolu_{number:02d}_{index}")
        if not isinstance(tool_id, str) or not tool_id:
            raise ScriptError(f"{prefix}{field}.id must be a non-empty string")
        blocks.append({"type": "tool_use", "id": tool_id, "name": name, "input": dict(arguments)})
    return tuple(blocks)


def _parse_content(raw: object, prefix: str) -> tuple[JSONObject, ...]:
    if not isinstance(raw, list) or not raw:
        raise ScriptError(f"{prefix}content must be a non-empty list of content blocks")
    blocks: list[JSONObject] = []
    for index, block in enumerate(raw):
        field = f"content[{index}]"
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            raise ScriptError(f"{prefix}{field} must be an object with a string type")
        if block["type"] == "text":
            text = block.get("text")
            if not isinstance(text, str) or not text.strip():
                raise ScriptError(f"{prefix}{field}.text must be a non-empty string")
        elif block["type"] == "tool_use":
            for key in ("id", "name"):
                value = block.get(key)
                if not isinstance(value, str) or not value:
                    raise ScriptError(f"{prefix}{field}.{key} must be a non-empty string")
            if not isinstance(block.get("input"), Mapping):
                raise ScriptError(f"{prefix}{field}.input must be a JSON object")
        blocks.append(copy.deepcopy(dict(block)))
    return tuple(blocks)


def _parse_usage(raw: object, prefix: str) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        raise ScriptError(f"{prefix}usage must be a JSON object of token counts")
    usage: dict[str, int] = {}
    for key, value in raw.items():
        if key not in USAGE_KEYS:
            raise ScriptError(
                f"{prefix}usage.{key} is not a usage field (use {', '.join(USAGE_KEYS)})"
            )
        if not _is_int(value) or value < 0:
            raise ScriptError(f"{prefix}usage.{key} must be a whole number, 0 or more")
        usage[key] = value
    return usage


def _parse_expect(raw: object, prefix: str) -> tuple[Expectation, ...]:
    if not isinstance(raw, list):
        raise ScriptError(f"{prefix}expect must be a list with one entry per tool result")
    expectations: list[Expectation] = []
    for index, item in enumerate(raw):
        field = f"expect[{index}]"
        if not isinstance(item, Mapping):
            raise ScriptError(f"{prefix}{field} must be a JSON object")
        reject_unknown_keys(item, _EXPECT_KEYS, f"{prefix}{field}: ")
        is_error = item.get("is_error")
        if is_error is not None and not isinstance(is_error, bool):
            raise ScriptError(f"{prefix}{field}.is_error must be true or false")
        contains = item.get("contains", [])
        if isinstance(contains, str):
            contains = [contains]
        if not isinstance(contains, list) or not all(isinstance(c, str) for c in contains):
            raise ScriptError(f"{prefix}{field}.contains must be a string or a list of strings")
        equals = item.get("equals")
        if equals is not None and not isinstance(equals, str):
            raise ScriptError(f"{prefix}{field}.equals must be a string")
        expectations.append(Expectation(is_error=is_error, contains=tuple(contains), equals=equals))
    return tuple(expectations)


def reject_unknown_keys(
    raw: Mapping[str, Any],
    allowed: frozenset[str],
    prefix: str,
    error: type[ValueError] = ScriptError,
) -> None:
    """Raise ``error`` naming the first key of ``raw`` that is not in ``allowed``."""
    for key in raw:
        if key not in allowed:
            raise error(f"{prefix}{key} is not a known field (known: {', '.join(sorted(allowed))})")


def last_user_message_parts(
    request: Mapping[str, Any],
) -> tuple[list[JSONObject], list[str], list[str]]:
    """Split the request's last user message into tool results and the texts after and before.

    "Before" means a text block that precedes some ``tool_result``: the misplacement the
    Messages API rejects, reported separately so a mismatch message can name it.
    """
    messages = request.get("messages")
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        return [], [], []
    last_user = next(
        (m for m in reversed(messages) if isinstance(m, Mapping) and m.get("role") == "user"),
        None,
    )
    if last_user is None:
        return [], [], []
    content = last_user.get("content")
    if isinstance(content, str):
        return [], [content], []
    if not isinstance(content, Sequence):
        return [], [], []
    blocks = [block for block in content if isinstance(block, Mapping)]
    last_result = max(
        (i for i, block in enumerate(blocks) if block.get("type") == "tool_result"), default=-1
    )
    results = [dict(block) for block in blocks if block.get("type") == "tool_result"]
    texts = [(i, str(b.get("text", ""))) for i, b in enumerate(blocks) if b.get("type") == "text"]
    trailing = [text for i, text in texts if i > last_result]
    leading = [text for i, text in texts if i < last_result]
    return results, trailing, leading


def _check_one(number: int, expectation: Expectation, result: Mapping[str, Any]) -> list[str]:
    text = result_text(result)
    is_error = bool(result.get("is_error", False))
    what = f"tool result {number}"
    mismatches: list[str] = []
    if expectation.is_error is True and not is_error:
        mismatches.append(f"expected {what} to be an error, got a success: {_shown(text)}")
    if expectation.is_error is False and is_error:
        mismatches.append(f"expected {what} to succeed, got an error: {_shown(text)}")
    mismatches.extend(
        f"expected {what} to contain {part!r}, got {_shown(text)}"
        for part in expectation.contains
        if part not in text
    )
    if expectation.equals is not None and text != expectation.equals:
        mismatches.append(f"expected {what} to equal {expectation.equals!r}, got {_shown(text)}")
    return mismatches


def _shown(text: str) -> str:
    if len(text) > _SHOWN_TEXT_LIMIT:
        text = text[:_SHOWN_TEXT_LIMIT] + "..."
    return repr(text)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__
