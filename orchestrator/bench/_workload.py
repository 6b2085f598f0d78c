"""What the benchmarks run: scripted sessions, an instant model, tool stubs, and both loops.

Both sides get the same :class:`~orchestrator.script.Script` played by the same
:class:`InstantModel` and the same :class:`StubTool` objects; only the harness differs. A session
repeats a five-round pattern a disciplined agent would follow (update the plan, read, edit, run
the tests, edit again), so every round after the third without a plan update carries a reminder
on both sides, and the plan moves one item on every update.
"""

from __future__ import annotations

import gc
import io
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from orchestrator.bench.baseline import (
    SEEDS_SYSTEM,
    SEEDS_TODO_SCHEMA,
    SeedsTodoManager,
    seeds_agent_loop,
    seeds_tool_handlers,
)
from orchestrator.conversation import Conversation
from orchestrator.loop import DEFAULT_SYSTEM, Loop, LoopSettings, RunOutcome
from orchestrator.plan import PlanBoard, TodoTool
from orchestrator.protocols import JSONObject, Model, ModelError, ModelTurn, Tool, ToolResult
from orchestrator.script import Script, ScriptedTurn, parse_script
from orchestrator.tools import (
    BashTool,
    EditFileTool,
    ReadFileTool,
    ToolRegistry,
    Workdir,
    WriteFileTool,
)
from orchestrator.trace import EventSink, open_trace

BENCH_WORKDIR = "/work/bench"
BENCH_TASK = "Refactor hello.py: add type hints, docstrings, and a main guard"
#: Not a credential: a fixed value so the redaction step of the trace chain has work to do.
FAKE_SECRET = "bench-fake-secret-0123456789"

#: The benchmarks' clock: CPU seconds of the calling thread (user and system), which a busy
#: neighbour on a shared machine disturbs far less than wall time. A thread's own clock leaves out
#: the loopback server's thread and the live view's refresh thread. Nothing timed sleeps or waits.
clock = time.thread_time

PLAN_TEXTS = (
    "Read hello.py and its tests",
    "Add type hints to greet()",
    "Add type hints to main()",
    "Write a docstring for the module",
    "Write docstrings for greet() and main()",
    "Add an if __name__ == '__main__' guard",
    "Replace print formatting with f-strings",
    "Add a test for greet() with an empty name",
    "Run the test suite and fix failures",
    "Run ruff and mypy and fix what they report",
)

_HELLO_PY = (
    '"""Greets people."""\n\n'
    + "".join(
        f"def greet_{n}(name):\n"
        f"    message = 'Hello, ' + name + ' (variant {n})'\n"
        "    print(message)\n"
        "    return message\n\n"
        for n in range(12)
    )
    + "def main():\n    greet_0('world')\n\nmain()\n"
)
_PYTEST_OUTPUT = "........................................ [100%]\n40 passed in 0.31s\n"


# --- the model ----------------------------------------------------------------------------------


class InstantModel:
    """Plays a script's turns in order and answers at once: no usage estimate, no checks.

    :class:`~orchestrator.script.ScriptedModel` estimates the prompt cache for every request,
    which costs as much as the harness itself; a benchmark of the harness leaves that out.
    """

    def __init__(self, script: Script) -> None:
        self._turns: Iterator[ScriptedTurn] = (
            entry for entry in script.turns if isinstance(entry, ScriptedTurn)
        )
        self._name = f"scripted:{script.name}"

    @property
    def name(self) -> str:
        return self._name

    def respond(self, request: Mapping[str, Any], on_text: Callable[[str], None]) -> ModelTurn:
        turn = next(self._turns, None)
        if turn is None:
            raise ModelError(f"{self._name} has no more turns")
        return ModelTurn(turn.content, turn.stop_reason, model=self._name)


# --- the tools ----------------------------------------------------------------------------------


@attrs.frozen
class StubTool:
    """A real tool's definition with a canned answer: the schema is asked of the real tool."""

    real: Tool
    output: str

    @property
    def name(self) -> str:
        return self.real.name

    @property
    def schema(self) -> JSONObject:
        return self.real.schema

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        return ToolResult(self.output)


def stub_tools() -> tuple[StubTool, ...]:
    """bash, read_file, write_file and edit_file, answering as if hello.py were being edited."""
    workdir = Workdir(BENCH_WORKDIR)
    return (
        StubTool(BashTool(workdir), _PYTEST_OUTPUT),
        StubTool(ReadFileTool(workdir), _HELLO_PY),
        StubTool(WriteFileTool(workdir), f"Wrote {len(_HELLO_PY)} bytes to hello.py"),
        StubTool(EditFileTool(workdir), "Edited hello.py (1 replacement)"),
    )


# --- the scripts --------------------------------------------------------------------------------


def plan_items(size: int, active: int, texts: Sequence[str] = PLAN_TEXTS) -> list[JSONObject]:
    """A full plan of ``size`` items: those before ``active`` completed, ``active`` in progress.

    ``active`` past the end gives a finished plan. Ids are ``"1"`` … ``str(size)``.
    """
    items: list[JSONObject] = []
    for number in range(1, size + 1):
        status = (
            "completed" if number < active else "in_progress" if number == active else "pending"
        )
        text = texts[(number - 1) % len(texts)]
        if size > len(texts):
            text = f"{text} (part {(number - 1) // len(texts) + 1})"
        items.append({"id": str(number), "text": text, "status": status})
    return items


class _SessionTurns:
    """Generates the five-round pattern; plans restart with fresh ids once all items are done.

    With ``todo_only`` every round is the pattern's first: a plan update that moves one item.
    """

    def __init__(self, plan_size: int, *, todo_only: bool = False) -> None:
        self.plan_size = plan_size
        self.todo_only = todo_only
        self.tool_rounds = 0
        self._cycle = 0
        self._active = 0  # 0: the next plan update starts a new plan

    def tool_turn(self) -> JSONObject:
        self.tool_rounds += 1
        number = self.tool_rounds
        phase = 0 if self.todo_only else (number - 1) % 5
        call: JSONObject
        if phase == 0:
            call = {"name": "todo", "input": {"items": self._next_plan()}}
            text = "Updating the plan."
        elif phase == 1:
            call = {"name": "read_file", "input": {"path": "hello.py"}}
            text = "Reading the file first."
        elif phase == 2:
            old, new = f"variant {number % 12})", f"variant {number % 12}, edited)"
            call = {
                "name": "edit_file",
                "input": {"path": "hello.py", "old_text": old, "new_text": new},
            }
            text = "Making the change."
        elif phase == 3:
            call = {"name": "bash", "input": {"command": f"python -m pytest -q -k round{number}"}}
            text = "Running the tests."
        else:
            call = {
                "name": "edit_file",
                "input": {"path": "hello.py", "old_text": "print(", "new_text": "print(  "},
            }
            text = "One more edit."
        call["id"] = f"toolu_{number:06d}"
        return {"text": text, "tool_calls": [call]}

    def _next_plan(self) -> list[JSONObject]:
        if self._active == 0 or self._active > self.plan_size:
            self._cycle += 1
            self._active = 1
        else:
            self._active += 1
        items = plan_items(self.plan_size, self._active)
        for item in items:
            item["id"] = f"{self._cycle}.{item['id']}"
        return items

    @staticmethod
    def final_turn() -> JSONObject:
        return {"text": "Done: hello.py is refactored and the tests pass."}


def todo_calls(script: Script) -> int:
    """How many ``todo`` calls a script makes (each must be accepted for a fair comparison)."""
    return sum(
        block.get("name") == "todo"
        for turn in script.turns
        if isinstance(turn, ScriptedTurn)
        for block in turn.content
    )


def session_script(
    rounds: int, *, runs: int = 1, plan_size: int = 10, todo_only: bool = False
) -> Script:
    """``runs`` runs of ``rounds`` rounds each (as the loop counts): tool rounds, then an answer.

    The plan carries on from run to run, as a chat's does. With ``todo_only`` every tool round
    is a plan update (the todo round the trace figures single out).
    """
    if rounds < 2:
        raise ValueError(f"a session needs at least 2 rounds, got {rounds}")
    turns = _SessionTurns(plan_size, todo_only=todo_only)
    raw: list[JSONObject] = []
    for _ in range(runs):
        raw.extend(turns.tool_turn() for _ in range(rounds - 1))
        raw.append(turns.final_turn())
    return parse_script({"name": f"bench-{rounds}x{runs}", "turns": raw}, source="bench")


# --- the two loops ------------------------------------------------------------------------------


class NullLog:
    """An event log that drops everything (where a figure does not involve the trace)."""

    def info(self, event: str, *args: Any, **fields: Any) -> None:
        return None


def our_settings(max_rounds: int) -> LoopSettings:
    return LoopSettings(
        model="claude-bench",
        system=DEFAULT_SYSTEM.format(workdir=BENCH_WORKDIR),
        max_rounds=max_rounds,
        workdir=BENCH_WORKDIR,
    )


def our_loop(model: Model, log: Any, *, max_rounds: int) -> Loop:
    """Our loop as the CLI wires it, with the stubs in place of the real tools."""
    board = PlanBoard()
    tools = ToolRegistry([*stub_tools(), TodoTool(board)])
    return Loop(model=model, tools=tools, plan=board, log=log, settings=our_settings(max_rounds))


def run_ours(
    script: Script, trace_path: Path, *, rounds: int, sinks: Sequence[EventSink] = ()
) -> tuple[float, RunOutcome]:
    """One run of our loop with a real trace; returns (seconds inside ``Loop.run``, outcome)."""
    with open_trace(trace_path, secrets=(FAKE_SECRET,), sinks=sinks) as trace:
        loop = our_loop(InstantModel(script), trace.log, max_rounds=rounds + 1)
        started = clock()
        outcome = loop.run(BENCH_TASK)
        elapsed = clock() - started
    played = outcome.status == "done" and outcome.rounds == rounds
    _check_outcome("our loop", played and loop.plan.revision == todo_calls(script), outcome)
    return elapsed, outcome


def run_ours_untraced(script: Script, *, rounds: int) -> float:
    """Seconds inside ``Loop.run`` for one run of our loop whose event log drops everything."""
    loop = our_loop(InstantModel(script), NullLog(), max_rounds=rounds + 1)
    started = clock()
    outcome = loop.run(BENCH_TASK)
    elapsed = clock() - started
    played = outcome.status == "done" and outcome.rounds == rounds
    _check_outcome("our loop", played and loop.plan.revision == todo_calls(script), outcome)
    return elapsed


@attrs.frozen
class BaselineRun:
    """What a run of the seeds' loop leaves behind."""

    messages: list[JSONObject]
    out: io.StringIO
    todo: SeedsTodoManager

    @property
    def printed(self) -> str:
        return self.out.getvalue()


def baseline_parts(
    model: Model,
) -> tuple[Callable[[], None], BaselineRun]:
    """The seeds' loop ready to go (as a closure) and the state it will leave behind."""
    todo = SeedsTodoManager()
    stubs = stub_tools()
    handlers = seeds_tool_handlers(todo, {s.name: _seeds_handler(s) for s in stubs})
    tools = [*(s.schema for s in stubs), SEEDS_TODO_SCHEMA]  # the seeds' TOOLS: built once
    messages: list[JSONObject] = [{"role": "user", "content": BENCH_TASK}]
    out = io.StringIO()
    system = SEEDS_SYSTEM.format(workdir=BENCH_WORKDIR)

    def go() -> None:
        seeds_agent_loop(
            messages, model=model, handlers=handlers, tools=tools, system=system, out=out
        )

    return go, BaselineRun(messages, out, todo)


def run_baseline(script: Script, *, rounds: int) -> tuple[float, BaselineRun]:
    """One run of the seeds' loop; returns (seconds inside the loop, what it left)."""
    go, left = baseline_parts(InstantModel(script))
    started = clock()
    go()
    elapsed = clock() - started
    answered = sum(m["role"] == "assistant" for m in left.messages)
    refused = [
        block["content"]
        for message in left.messages
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_result" and block["content"].startswith("Error")
    ]
    _check_outcome("the seeds' loop", answered == rounds and not refused, refused[:1] or answered)
    return elapsed, left


def _seeds_handler(stub: StubTool) -> Callable[..., str]:
    return lambda **kw: stub.run(kw).text


def _check_outcome(side: str, ok: bool, outcome: object) -> None:
    if not ok:
        raise RuntimeError(f"the benchmark session did not play out on {side}: {outcome}")


def write_trace_of_runs(path: Path, *, runs: int, rounds: int) -> None:
    """Drive our real loop through ``runs`` runs of ``rounds`` rounds into ONE trace file.

    One loop, board, guard and processor chain (so one run_id and one ``seq`` count), and a
    fresh conversation for every run, as a new chat conversation would start: a single
    conversation of 10,000 rounds would make the generator quadratic in the conversation.
    """
    script = session_script(rounds, runs=runs)
    with open_trace(path, secrets=(FAKE_SECRET,)) as trace:
        loop = our_loop(InstantModel(script), trace.log, max_rounds=rounds + 1)
        for _ in range(runs):
            loop.conversation = Conversation()
            outcome = loop.run(BENCH_TASK)
            _check_outcome("our loop", outcome.status == "done", outcome)


def full_rewrite(size: int, active: int) -> JSONObject:
    """A todo input that rewrites a plan of ``size`` items with ``active`` in progress."""
    return {"items": plan_items(size, active)}


def plan_update_seconds(
    size: int, updates: int, payload: Callable[[int, int], JSONObject] = full_rewrite
) -> float:
    """Seconds per todo update that rewrites ``size`` items and moves one, through the registry.

    ``payload(size, active)`` builds each update (plain items, or items with dependencies).
    """
    board = PlanBoard(limit=size)
    registry = ToolRegistry([TodoTool(board)])
    first = registry.dispatch("todo", payload(size, 1))
    moves = min(updates, size)
    payloads = [payload(size, active) for active in range(2, moves + 2)]
    # The inputs are the benchmark's own (a session receives one at a time): collect now, or the
    # full collection their allocation makes due lands inside the timed updates, and its cost
    # (the whole heap, the SDK's included) grows with ``moves`` × ``size``.
    gc.collect()
    started = clock()
    results = [registry.dispatch("todo", body) for body in payloads]
    elapsed = clock() - started
    refused = [r.text for r in (first, *results) if r.is_error]
    if refused or board.progress != (moves, size):
        raise RuntimeError(f"plan update benchmark did not apply at {size} items: {refused[:1]}")
    return elapsed / moves
