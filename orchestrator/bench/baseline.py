"""The benchmarks' baseline: the seeds' s03 loop, re-implemented faithfully and named as such.

This is the design the project started from (``/work/shared/seeds/000_*.txt`` in full, the loop
guard from ``001_*.txt``): a ``TodoManager`` holding plain dicts, a ``todo`` tool that rewrites
the whole list, the seeds' validation and render, the ``<reminder>`` text appended to the
results after three rounds without a ``todo`` call, the repeat guard with its ``{todo,
read_file}`` whitelist, and a print of every tool call. No ``cache_control`` anywhere.

It is not used by the harness; it exists so the benchmarks compare our loop with the seeds'
against the same scripted model and the same tool stubs. The seeds keep their state in module
globals (``TODO``, ``TOOL_HANDLERS``, ``client``); here they are arguments, so two runs do not
share a plan. Two details the seeds elide are filled in and marked below: the signature the
guard compares, and what a blocked call answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from orchestrator.protocols import JSONObject, Model

SEEDS_SYSTEM = (
    "You are a coding agent at {workdir}.\n"
    "Use the todo tool to plan multi-step tasks. Mark in_progress before starting, "
    "completed when done.\n"
    "Prefer tools over prose."
)
SEEDS_REMINDER = "<reminder>Update your todos.</reminder>"
SEEDS_REMINDER_ROUNDS = 3
SEEDS_MAX_TODOS = 20
SEEDS_GUARD_WHITELIST = frozenset({"todo", "read_file"})
SEEDS_MAX_TOKENS = 8000

#: The seeds' ``todo`` tool definition, as written in the s03 TOOLS list.
SEEDS_TODO_SCHEMA: JSONObject = {
    "name": "todo",
    "description": "Update task list. Track progress on multi-step tasks.",
    "input_schema": {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "text": {"type": "string"},
                        "status": {
                            "type": "string",
                            "enum": ["pending", "in_progress", "completed"],
                        },
                    },
                    "required": ["id", "text", "status"],
                },
            }
        },
        "required": ["items"],
    },
}

#: A handler as the seeds' TOOL_HANDLERS hold them: keyword arguments in, text out.
SeedsHandler = Callable[..., str]


class SeedsTodoManager:
    """The seeds' TodoManager: a list of plain dicts replaced wholesale by every update."""

    def __init__(self) -> None:
        self.items: list[dict[str, str]] = []

    def update(self, items: list[Any]) -> str:
        """Validate and store the full list; raise ValueError as the seeds do."""
        if len(items) > SEEDS_MAX_TODOS:
            raise ValueError(f"Max {SEEDS_MAX_TODOS} todos allowed")
        validated = []
        in_progress_count = 0
        for i, item in enumerate(items):
            text = str(item.get("text", "")).strip()
            status = str(item.get("status", "pending")).lower()
            item_id = str(item.get("id", str(i + 1)))
            if not text:
                raise ValueError(f"Item {item_id}: text required")
            if status not in ("pending", "in_progress", "completed"):
                raise ValueError(f"Item {item_id}: invalid status '{status}'")
            if status == "in_progress":
                in_progress_count += 1
            validated.append({"id": item_id, "text": text, "status": status})
        if in_progress_count > 1:
            raise ValueError("Only one task can be in_progress at a time")
        self.items = validated
        return self.render()

    def render(self) -> str:
        """The seeds' render: markers, ``#id: text``, a blank line, ``(k/n completed)``."""
        if not self.items:
            return "No todos."
        lines = []
        for item in self.items:
            marker = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}[item["status"]]
            lines.append(f"{marker} #{item['id']}: {item['text']}")
        done = sum(1 for t in self.items if t["status"] == "completed")
        lines.append(f"\n({done}/{len(self.items)} completed)")
        return "\n".join(lines)


def seeds_tool_handlers(
    todo: SeedsTodoManager, others: Mapping[str, SeedsHandler]
) -> dict[str, SeedsHandler]:
    """The seeds' TOOL_HANDLERS: the given tools plus ``todo`` bound to ``todo.update``."""
    return {**others, "todo": lambda **kw: todo.update(kw["items"])}


def seeds_tool_call_signature(name: str, arguments: Mapping[str, Any]) -> str:
    # Elided in the seeds ("tool_call_sig"); the name and the input with sorted keys.
    return f"{name}:{json.dumps(arguments, sort_keys=True)}"


#: Elided in the seeds ("trigger the dead-loop interception"); the call is answered, not run.
SEEDS_BLOCKED_OUTPUT = "Error: Repeated identical tool call blocked. Try a different approach."


def seeds_agent_loop(
    messages: list[JSONObject],
    *,
    model: Model,
    handlers: Mapping[str, SeedsHandler],
    tools: Sequence[JSONObject],
    system: str,
    out: TextIO,
    model_name: str = "claude-seeds",
) -> None:
    """The seeds' ``agent_loop(messages)``: call, run every tool_use, nag, repeat until no tools.

    ``model.respond`` stands in for ``client.messages.create``; ``out`` for stdout.
    """
    rounds_since_todo = 0
    last_tool_call: str | None = None
    while True:
        response = model.respond(
            {
                "model": model_name,
                "system": system,
                "messages": messages,
                "tools": tools,
                "max_tokens": SEEDS_MAX_TOKENS,
            },
            _ignore_text,
        )
        messages.append({"role": "assistant", "content": list(response.content)})
        if response.stop_reason != "tool_use":
            return
        results: list[JSONObject] = []
        used_todo = False
        for block in response.content:
            if block.get("type") == "tool_use":
                name, arguments = block["name"], block["input"]
                tool_call_sig = seeds_tool_call_signature(name, arguments)
                if name not in SEEDS_GUARD_WHITELIST and tool_call_sig == last_tool_call:
                    output = SEEDS_BLOCKED_OUTPUT
                else:
                    handler = handlers.get(name)
                    try:
                        output = handler(**arguments) if handler else f"Unknown tool: {name}"
                    except Exception as e:
                        output = f"Error: {e}"
                last_tool_call = tool_call_sig
                print(f"> {name}:", file=out)
                print(str(output)[:200], file=out)
                results.append(
                    {"type": "tool_result", "tool_use_id": block["id"], "content": str(output)}
                )
                if name == "todo":
                    used_todo = True
        rounds_since_todo = 0 if used_todo else rounds_since_todo + 1
        if rounds_since_todo >= SEEDS_REMINDER_ROUNDS:
            results.append({"type": "text", "text": SEEDS_REMINDER})
        messages.append({"role": "user", "content": results})


def _ignore_text(_text: str) -> None:
    """The seeds do not stream; text reaches the user only in the final answer."""
