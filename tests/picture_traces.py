"""Traces the page tests draw: the demo's golden one, hand-written ones, and a hostile run's."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from orchestrator import Agent
from orchestrator.script import ScriptedModel, parse_script

GOLDEN = Path(__file__).resolve().parent / "data" / "demo_trace_golden.jsonl"
RUN_ID = "0123456789ab"

#: Markup and script a hostile model, file or tool output could carry.
HOSTILE_TAG = "<img src=x onerror=\"document.title='pwned'\">"
HOSTILE_SCRIPT = "</script><script>document.title='pwned'</script>"
HOSTILE = HOSTILE_TAG + HOSTILE_SCRIPT + " <!-- \u2028 &amp;"
HOSTILE_FILE = "<b onmouseover=alert(1)>.txt"


def golden_copy(folder: Path, run_id: str = RUN_ID, name: str = "demo.jsonl") -> Path:
    """The demo's golden trace with a real-looking run id, in ``folder``."""
    path = folder / name
    path.write_text(GOLDEN.read_text(encoding="utf-8").replace("{RUN_ID}", run_id), "utf-8")
    return path


def write_events(path: Path, events: Iterable[Mapping[str, Any]], *, run_id: str = RUN_ID) -> Path:
    """A trace of ``events`` with the envelope every line has (run id, seq, ts)."""
    lines = []
    for seq, event in enumerate(events, start=1):
        stamped = {"run_id": run_id, **event, "seq": seq, "ts": f"2026-01-01T00:00:{seq:02d}Z"}
        lines.append(json.dumps(stamped, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def started(**fields: Any) -> dict[str, Any]:
    return {
        "event": "run.started",
        "task": "a task",
        "model": "scripted",
        "settings": {"model": "claude-sonnet-4-5", "context_window": 1000, "settle_plan": True},
        "plan": {"limit": 20, "policy": "strict"},
        **fields,
    }


def response(round_number: int, **usage: int) -> dict[str, Any]:
    return {
        "event": "model.response",
        "round": round_number,
        "stop_reason": "tool_use",
        "content": [{"type": "text", "text": f"round {round_number}"}],
        "usage": {"input_tokens": 10, "output_tokens": 5, **usage},
        "model": "claude-sonnet-4-5",
        "context_tokens": 100 * round_number,
        "context_window": 1000,
    }


def hostile_run(folder: Path) -> Path:
    """A real run (the Agent API, a scripted model, the real tools) full of hostile text.

    The model's text, an item's text, a file's name and content (so a tool's input and output)
    all carry :data:`HOSTILE`. The environment must point the state and config elsewhere.
    """
    turns = [
        {
            "text": "model says " + HOSTILE,
            "tool_calls": [
                {
                    "name": "todo",
                    "input": {
                        "items": [{"id": "1", "text": "item " + HOSTILE, "status": "in_progress"}]
                    },
                },
                {
                    "name": "write_file",
                    "input": {"path": HOSTILE_FILE, "content": "file " + HOSTILE},
                },
            ],
        },
        {"tool_calls": [{"name": "read_file", "input": {"path": HOSTILE_FILE}}]},
        {
            "tool_calls": [
                {
                    "name": "todo",
                    "input": {"items": [{"id": "1", "status": "completed"}], "merge": True},
                }
            ]
        },
        {"text": "finished " + HOSTILE},
    ]
    workdir = folder / "work"
    workdir.mkdir()
    model = ScriptedModel(parse_script({"name": "hostile", "turns": turns}, source="test"))
    trace = folder / "hostile.jsonl"
    result = Agent(
        client=model, workdir=workdir, trace=trace, approval="auto", sandbox="workdir"
    ).run("draw " + HOSTILE)
    assert result.status == "done", result.reason
    return trace
