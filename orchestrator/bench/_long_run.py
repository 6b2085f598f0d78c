"""The long-run figure: 500 rounds of ~20 KB tool output under a small window, managed or not.

The model side is the scripted model behind the test server's rules: a request over the window
is refused with the service's words (``prompt is too long``), a request without tools gets a
summary, and usage reports the prompt cache as :func:`~orchestrator.conversation.cache_usage`
models it. The managed run must finish with every request below the window; the unmanaged run
(``--compaction off``) is refused, and the round where that happens is the comparison.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from orchestrator.bench._workload import NullLog, StubTool, our_settings
from orchestrator.context import ContextManager
from orchestrator.loop import Loop
from orchestrator.plan import PlanBoard, TodoTool
from orchestrator.protocols import ContextTooLong, ModelTurn
from orchestrator.script import Script, ScriptedModel, parse_script
from orchestrator.testing import count_tokens
from orchestrator.tools import BashTool, ToolRegistry, Workdir

LONG_WINDOW = 50_000
_OUTPUT = "".join(
    f"line {n:05d}: a long test log, all good so far, nothing to report\n" for n in range(300)
)


class WindowedModel:
    """A scripted model that refuses what the service would refuse and summarises on request."""

    def __init__(self, script: Script, window: int) -> None:
        self.inner = ScriptedModel(script)
        self.window = window
        self.peak = 0
        self.read = 0
        self.total = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def respond(self, request: Mapping[str, Any], on_text: Callable[[str], None]) -> ModelTurn:
        tokens = count_tokens(request)
        if tokens > self.window:
            raise ContextTooLong(f"prompt is too long: {tokens} tokens > {self.window} maximum")
        self.peak = max(self.peak, tokens)
        if not request.get("tools"):
            return ModelTurn(
                ({"type": "text", "text": "A summary of the work so far."},), "end_turn"
            )
        turn = self.inner.respond(request, on_text)
        self.read += int(turn.usage.get("cache_read_input_tokens", 0))
        self.total += turn.input_tokens
        return turn


def long_script(rounds: int) -> Script:
    items = 10
    every = max(1, rounds // items)
    turns: list[dict[str, Any]] = []
    for number in range(1, rounds + 1):
        if number == 1 or number % every == 0:
            done = min(items, number // every)
            status = [
                "completed" if n < done else "in_progress" if n == done else "pending"
                for n in range(items)
            ]
            todo = [
                {"id": str(n + 1), "text": f"Step {n + 1}", "status": s}
                for n, s in enumerate(status)
            ]
            turns.append({"tool_calls": [{"name": "todo", "input": {"items": todo}}]})
        else:
            command = f"pytest -q tests/ --round {number}"
            turns.append({"tool_calls": [{"name": "bash", "input": {"command": command}}]})
    turns.append({"text": "Every step is done."})
    return parse_script({"name": "long-run", "turns": turns}, source="bench")


def run_long(
    rounds: int, *, managed: bool, window: int = LONG_WINDOW
) -> tuple[str, int, WindowedModel]:
    """One run; returns its final status, its rounds, and the model with its counts."""
    model = WindowedModel(long_script(rounds), window)
    board = PlanBoard()
    tools = ToolRegistry([StubTool(BashTool(Workdir("/tmp")), _OUTPUT), TodoTool(board)])
    context = ContextManager(window, model="claude-bench", mode="auto" if managed else "off")
    loop = Loop(
        model=model,
        tools=tools,
        plan=board,
        log=NullLog(),
        settings=our_settings(rounds + 1),
        context=context,
    )
    outcome = loop.run("Work through the plan")
    return outcome.status, outcome.rounds, model
