"""The Python API: ``Agent`` and ``@tool`` through the real SDK against the loopback server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import orchestrator
from orchestrator import Agent, RunResult, SettingsError, tool
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer
from tests.in_process import run_cli


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A clean environment with a key; the tests start their own server per script."""
    for name in list(__import__("os").environ):
        if name.startswith(("ANTHROPIC_", "ORCHESTRATOR_")) and name != "ORCHESTRATOR_TEST_HOME":
            monkeypatch.delenv(name)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-api")
    monkeypatch.setenv("ORCHESTRATOR_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ORCHESTRATOR_STATE_DIR", str(tmp_path / "state"))
    workdir = tmp_path / "proj"
    workdir.mkdir()
    return workdir


def _server(turns: list[Mapping[str, Any]], monkeypatch: pytest.MonkeyPatch) -> MessagesServer:
    server = MessagesServer(parse_script({"name": "api", "turns": turns}, source="test"))
    server.__enter__()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    return server


ADD_TURNS: list[Mapping[str, Any]] = [
    {"tool_calls": [{"name": "add", "input": {"a": 2, "b": 3}}]},
    {"text": "The sum is 5."},
]


def test_the_readme_example_runs_against_the_messages_api(
    endpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = _server(ADD_TURNS, monkeypatch)
    try:
        agent = Agent(model="claude-test", workdir=endpoint, tools=[add], approval="auto")
        result = agent.run("Add 2 and 3, then say the sum.")
    finally:
        server.__exit__(None, None, None)
    assert isinstance(result, RunResult)
    assert result.status == "done"
    assert result.answer == "The sum is 5."
    assert result.rounds == 2
    assert result.exit_code == 0
    assert result.plan == ()
    assert sum(result.usage.values()) > 0 and result.usage["output_tokens"] > 0
    assert result.trace is not None and result.trace.is_file()
    assert result.run_id
    # The tool's schema reached the model from the type hints and docstring.
    definitions = {item["name"]: item for item in server.requests[0]["tools"]}
    assert definitions["add"]["description"] == "Add two integers."
    assert definitions["add"]["input_schema"]["required"] == ["a", "b"]
    # The function ran: its result is in the conversation the model saw next.
    second = json.dumps(server.requests[1]["messages"][-1])
    assert '"tool_result"' in second and '"5"' in second
    assert server.violations == []
    assert server.requests[0]["model"] == "claude-test"


def test_on_event_sees_every_event_of_the_trace_in_order(
    endpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Mapping[str, Any]] = []
    server = _server(ADD_TURNS, monkeypatch)
    try:
        result = Agent(workdir=endpoint, tools=[add], approval="auto", on_event=seen.append).run(
            "Add 2 and 3."
        )
    finally:
        server.__exit__(None, None, None)
    assert result.trace is not None
    lines = [json.loads(line) for line in result.trace.read_text().splitlines()]
    assert [(e["seq"], e["event"]) for e in seen] == [(e["seq"], e["event"]) for e in lines]
    assert seen[0]["event"] == "run.started" and seen[-1]["event"] == "run.finished"
    # And the trace an API run leaves is one the CLI replays.
    replayed = run_cli(["replay", "--check", str(result.trace)])
    assert replayed.returncode == 0, replayed.stderr


def test_a_tool_that_raises_or_gets_bad_arguments_is_a_tool_error(
    endpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    @tool
    def divide(a: float, b: float) -> float:
        """Divide a by b."""
        return a / b

    turns: list[Mapping[str, Any]] = [
        {
            "tool_calls": [
                {"name": "divide", "input": {"a": 1, "b": 0}},
                {"name": "divide", "input": {"a": "one", "b": 2}},
            ]
        },
        {"text": "Could not divide."},
    ]
    server = _server(turns, monkeypatch)
    try:
        result = Agent(workdir=endpoint, tools=[divide], approval="auto").run("Divide.")
    finally:
        server.__exit__(None, None, None)
    assert result.status == "done"
    blocks = server.requests[1]["messages"][-1]["content"]
    results = [block for block in blocks if block["type"] == "tool_result"]
    assert [block.get("is_error") for block in results] == [True, True]
    texts = [json.dumps(block["content"]) for block in results]
    assert "Error: divide raised ZeroDivisionError" in texts[0]
    assert "Error: divide: field 'a'" in texts[1]


def test_arun_runs_async_tools_on_the_callers_event_loop(
    endpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loops: list[int] = []

    @tool
    async def fetch_number(name: str) -> str:
        """Look a number up by name."""
        loops.append(id(asyncio.get_running_loop()))
        await asyncio.sleep(0)
        return f"{name}=42"

    turns: list[Mapping[str, Any]] = [
        {"tool_calls": [{"name": "fetch_number", "input": {"name": "answer"}}]},
        {"text": "It is 42."},
    ]
    server = _server(turns, monkeypatch)

    async def main() -> tuple[RunResult, int]:
        agent = Agent(workdir=endpoint, tools=[fetch_number], approval="auto")
        return await agent.arun("Look up answer."), id(asyncio.get_running_loop())

    try:
        result, caller = asyncio.run(main())
    finally:
        server.__exit__(None, None, None)
    assert result.status == "done" and result.answer == "It is 42."
    assert loops == [caller]
    assert "answer=42" in json.dumps(server.requests[1]["messages"][-1])
    assert threading.active_count() >= 1


def test_resume_continues_the_session_with_its_board(
    endpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = {"items": [{"id": "1", "text": "Add", "status": "in_progress"}]}
    first: list[Mapping[str, Any]] = [
        {"tool_calls": [{"name": "todo", "input": plan}]},
        {"text": "Stopping here."},
    ]
    server = _server(first, monkeypatch)
    try:
        # The first run stops with the item open on purpose (what resume is for).
        result = Agent(workdir=endpoint, approval="auto", settle_plan=False).run("Plan it.")
    finally:
        server.__exit__(None, None, None)
    assert result.plan[0]["status"] == "in_progress"
    assert result.trace is not None
    done = {"items": [{"id": "1", "text": "Add", "status": "completed"}]}
    second: list[Mapping[str, Any]] = [
        {"tool_calls": [{"name": "todo", "input": done}]},
        {"text": "Finished."},
    ]
    server = _server(second, monkeypatch)
    try:
        # On the class, as the issue writes it: the run goes on as it was set up (its workdir).
        resumed = Agent.resume(result.trace, "Finish it.")
    finally:
        server.__exit__(None, None, None)
    assert resumed.status == "done"
    assert [item["status"] for item in resumed.plan] == ["completed"]
    assert resumed.trace == result.trace
    assert resumed.rounds == 4
    # The resumed request carried the earlier conversation.
    assert "Plan it." in json.dumps(server.requests[0]["messages"])


def test_bad_settings_are_one_clear_error(endpoint: Path) -> None:
    with pytest.raises(TypeError, match="max_round"):
        Agent(workdir=endpoint, max_round=3)
    with pytest.raises(SettingsError, match=r"max_rounds=: max_rounds must be"):
        Agent(workdir=endpoint, max_rounds=-1).run("x")
    with pytest.raises(SettingsError, match="no such directory"):
        Agent(workdir=endpoint / "missing").run("x")
    with pytest.raises(SettingsError, match="the task is empty"):
        Agent(workdir=endpoint).run("  ")


def test_an_untrusted_project_file_naming_tool_modules_is_refused(endpoint: Path) -> None:
    (endpoint / "orchestrator.toml").write_text('tools = ["os"]\n')
    with pytest.raises(SettingsError, match="tools"):
        Agent(workdir=endpoint).run("x")


def test_tool_modules_from_settings_reach_the_model(
    endpoint: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    package = tmp_path / "lib"
    package.mkdir()
    (package / "my_agent_tools.py").write_text(
        "from orchestrator import tool\n\n"
        "@tool\n"
        "def shout(text: str) -> str:\n"
        '    """Upper-case the text."""\n'
        "    return text.upper()\n"
    )
    monkeypatch.syspath_prepend(str(package))
    turns: list[Mapping[str, Any]] = [
        {"tool_calls": [{"name": "shout", "input": {"text": "hi"}}]},
        {"text": "HI"},
    ]
    server = _server(turns, monkeypatch)
    try:
        result = Agent(workdir=endpoint, tools=["my_agent_tools"], approval="auto").run("Shout.")
    finally:
        server.__exit__(None, None, None)
    assert result.status == "done"
    assert '"HI"' in json.dumps(server.requests[1]["messages"][-1])


def test_public_names_are_exported_and_typed() -> None:
    assert set(orchestrator.__all__) >= {"Agent", "tool", "RunResult", "SettingsError"}
    assert (Path(orchestrator.__file__).parent / "py.typed").is_file()
    assert add(2, 3) == 5  # a tool is still the function


@pytest.mark.e2e
def test_a_consumer_module_type_checks_under_mypy_strict(tmp_path: Path) -> None:
    consumer = tmp_path / "consumer.py"
    consumer.write_text(
        "from orchestrator import Agent, RunResult, tool\n\n\n"
        "@tool\n"
        "def add(a: int, b: int) -> int:\n"
        '    """Add two integers."""\n'
        "    return a + b\n\n\n"
        "def main() -> str:\n"
        '    agent = Agent(model="claude-x", workdir=".", tools=[add], approval="auto")\n'
        '    result: RunResult = agent.run("Add 2 and 3.")\n'
        "    cost: float | None = result.cost_usd\n"
        "    return f'{result.status} {result.answer} {result.rounds} {len(result.plan)} {cost}'\n"
    )
    broken = tmp_path / "broken.py"
    broken.write_text(
        'from orchestrator import Agent\n\ndef main() -> int:\n    return Agent().run("x").answer\n'
    )
    # One run for both files, on the cache `make lint` has just filled (mypy re-checks what
    # changed): the package's own modules and the SDK's stubs are not parsed again.
    cache = Path(__file__).resolve().parent.parent / ".mypy_cache"
    command = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache)]
    checked = subprocess.run(
        [*command, "consumer.py", "broken.py"],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert [line.split(":")[0] for line in errors] == ["broken.py"], checked.stdout
    assert "Incompatible return value" in errors[0]
