"""The SCRIPTED team demo: a lead that writes a plan, and workers that claim what is ready.

No model and no key: the lead writes the same plan every time, and each worker reads the
board from what it was last shown (its first message, then each ``todo`` result), claims the
first ready item it has not tried, writes that item's file, and completes it, until nothing
it has not tried is ready. Claims race for real: two workers may reach for one item, and the
board refuses the second, which then tries the next.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from orchestrator.protocols import JSONObject, ModelTurn

#: The demo repository: what the workers' notes are about.
FILES = {
    "README.md": "# Greeter\n\nA tiny library the team documents, one note per function.\n",
    "greeter.py": (
        'def hello(name: str) -> str:\n    return f"Hello, {name}!"\n\n\n'
        'def goodbye(name: str) -> str:\n    return f"Goodbye, {name}!"\n'
    ),
}
#: The lead's plan: (id, text, blocked_by).
PLAN = (
    ("1", "Write notes/hello.md about hello()", ()),
    ("2", "Write notes/goodbye.md about goodbye()", ()),
    ("3", "Write notes/usage.md with an example", ()),
    ("4", "Write notes/testing.md on how to test greeter.py", ()),
    ("5", "Write notes/index.md linking the other notes", ("1", "2", "3", "4")),
)
MODEL_NAME = "scripted-team"
#: How often a worker with nothing ready looks at the board again, and how long it waits.
MAX_POLLS = 20
POLL_SECONDS = 0.3
_LINE = re.compile(r"^\[(?P<mark>.)\] #(?P<id>[^:\s]+): (?P<text>.*?)(?: \((?P<notes>[^()]*)\))?$")


def _turn(content: list[JSONObject], messages: int) -> ModelTurn:
    stop = "tool_use" if any(block["type"] == "tool_use" for block in content) else "end_turn"
    # Plausible counts, so the closing lines show tokens (the price is unknown: no cost).
    usage = {"input_tokens": 300 + 120 * messages, "output_tokens": 40}
    return ModelTurn(tuple(content), stop, usage, MODEL_NAME)


class ScriptedLead:
    """Writes :data:`PLAN` on the board in one ``todo`` call, then ends its turn."""

    name = MODEL_NAME

    def respond(self, request: Mapping[str, Any], on_text: Callable[[str], None]) -> ModelTurn:
        messages = list(request.get("messages", ()))
        if len(messages) == 1:
            items = [
                {"id": item_id, "text": text, "status": "pending", "blocked_by": list(blockers)}
                for item_id, text, blockers in PLAN
            ]
            text = f"The plan: {len(items)} items; the index waits for the other notes."
            on_text(text)
            call = {"type": "tool_use", "id": "toolu_lead_1", "name": "todo"}
            return _turn([{"type": "text", "text": text}, {**call, "input": {"items": items}}], 1)
        text = "The plan is on the board for the workers."
        on_text(text)
        return _turn([{"type": "text", "text": text}], len(messages))


class ScriptedWorker:
    """Claims ready items one at a time, writes each one's note, completes it; then stops."""

    name = MODEL_NAME

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self._tried: set[str] = set()
        self._current: str | None = None
        self._step = "claim"
        self._calls = 0
        self._polls = 0

    def respond(self, request: Mapping[str, Any], on_text: Callable[[str], None]) -> ModelTurn:
        messages = list(request.get("messages", ()))
        if self._step == "write" and _last_result_refused(messages):
            self._step = "claim"  # the claim lost the race, or the item was not ready
        if self._step == "claim":
            return self._claim(messages, on_text)
        assert self._current is not None
        if self._step == "write":
            self._step = "complete"
            path = _note_path(self._current)
            body = f"# {path.removeprefix('notes/')}\n\nWritten by {self.agent}.\n"
            return self._call("write_file", {"path": path, "content": body}, len(messages))
        self._step = "claim"
        update = {"merge": True, "items": [{"id": self._current, "status": "completed"}]}
        return self._call("todo", update, len(messages))

    def _claim(self, messages: list[Any], on_text: Callable[[str], None]) -> ModelTurn:
        board = _latest_board(messages)
        ready = [
            item_id
            for mark, item_id, notes in board
            if mark == " " and "blocked by" not in notes and item_id not in self._tried
        ]
        waiting = any(
            mark in (" ", ">") and item_id not in self._tried for mark, item_id, _ in board
        )
        if not ready and waiting and self._polls < MAX_POLLS:
            # Something is blocked or held by another worker: look again in a moment.
            self._polls += 1
            time.sleep(POLL_SECONDS)
            return self._call("todo", {"merge": True, "items": []}, len(messages))
        if not ready:
            text = f"{self.agent}: nothing left that I can take; ending my turn."
            on_text(text)
            return _turn([{"type": "text", "text": text}], len(messages))
        self._current = ready[0]
        self._tried.add(self._current)
        self._step = "write"
        claim = {"merge": True, "items": [{"id": self._current, "status": "in_progress"}]}
        return self._call("todo", claim, len(messages))

    def _call(self, tool: str, arguments: JSONObject, messages: int) -> ModelTurn:
        self._calls += 1
        block = {"type": "tool_use", "id": f"toolu_{self.agent}_{self._calls}", "name": tool}
        return _turn([{**block, "input": arguments}], messages)


def _texts(message: Mapping[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    found = []
    for block in content or ():
        if block.get("type") == "text":
            found.append(str(block.get("text", "")))
        elif block.get("type") == "tool_result":
            inner = block.get("content")
            found.append(inner if isinstance(inner, str) else json.dumps(inner))
    return found


def _latest_board(messages: list[Any]) -> list[tuple[str, str, str]]:
    """(mark, id, notes) of each item in the newest board text the worker was shown."""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        for text in reversed(_texts(message)):
            items = _last_board_in(text)
            if items:
                return items
    return []


def _last_board_in(text: str) -> list[tuple[str, str, str]]:
    """The last run of item lines in ``text``: a message may quote an older board first."""
    runs: list[list[tuple[str, str, str]]] = [[]]
    for line in text.splitlines():
        found = _LINE.match(line.strip())
        if found is not None:
            runs[-1].append((found["mark"], found["id"], found["notes"] or ""))
        elif runs[-1]:
            runs.append([])
    return next((run for run in reversed(runs) if run), [])


def _note_path(item_id: str) -> str:
    """The note an item asks for (``notes/hello.md``), read from the plan's text."""
    text = next((text for found, text, _ in PLAN if found == item_id), "")
    named = re.search(r"notes/[\w.-]+", text)
    return named.group(0) if named else f"notes/item-{item_id}.md"


def _last_result_refused(messages: list[Any]) -> bool:
    last = messages[-1] if messages else {}
    content = last.get("content") if isinstance(last, Mapping) else None
    if not isinstance(content, list):
        return False
    return any(b.get("type") == "tool_result" and b.get("is_error") for b in content)
