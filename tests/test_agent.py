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
        "\n\n"
        "def events(event: Mapping[str, Any]) -> None:\n"
        "    print(event['event'])\n\n\n"
        "def ended() -> Literal['done', 'failed', 'interrupted']:\n"
        '    return Agent(on_event=events).run("x").status\n'
    )
    consumer.write_text(
        "from collections.abc import Mapping\nfrom typing import Any, Literal\n\n"
        + consumer.read_text()
    )
    broken = tmp_path / "broken.py"
    broken.write_text(
        "from orchestrator import Agent\n\n"
        'def main() -> int:\n    return Agent().run("x").answer\n\n'
        'def finished() -> bool:\n    return Agent().run("x").status == "finished"\n'
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
    assert {line.split(":")[0] for line in errors} == {"broken.py"}, checked.stdout
    assert "Incompatible return value" in errors[0]
    # The status is a Literal: a status that cannot happen is a type error, not a silent False.
    assert any("Non-overlapping equality check" in line for line in errors), checked.stdout


# --- @tool: what the API would refuse is refused at decoration --------------------------------


def test_a_name_the_api_refuses_raises_at_decoration_naming_the_function() -> None:
    from orchestrator.tools.python import ToolDefinitionError

    with pytest.raises(ToolDefinitionError, match=r"<lambda> at .*test_agent\.py:\d+: '<lambda>'"):
        tool(lambda text: text)
    with pytest.raises(ToolDefinitionError, match=r"<locals>\.spaced: 'has space' is not"):

        @tool(name="has space")
        def spaced(text: str) -> str:
            """Echo."""
            return text

    with pytest.raises(ToolDefinitionError, match="is not a tool name"):
        tool(name="x" * 129)(add.function)
    # The same check guards a plain function given to Agent: it fails at Agent(), not round 1.
    with pytest.raises(ToolDefinitionError, match="<lambda>"):
        Agent(tools=[lambda text: text])
    assert tool(name="a-b_9" + "x" * 123)(add.function).name.startswith("a-b_9")


@pytest.mark.parametrize(
    ("signature", "what"),
    [
        ("city: CityName, days: int", "the type hint of city, 'CityName'"),
        ("city: str, days: list[Day]", "the type hint of days, 'list[Day]'"),
        ("city: str", "the return type, 'Forecast'"),
    ],
)
def test_a_type_hint_that_names_nothing_raises_the_tool_error_naming_it(
    signature: str, what: str
) -> None:
    from orchestrator.tools.python import ToolDefinitionError

    # As a module would define it: hints as text, their names imported only for type checkers.
    source = (
        "from __future__ import annotations\n"
        f"def forecast({signature}) -> Forecast:\n"
        '    """The weather to come."""\n'
    )
    namespace: dict[str, Any] = {"__name__": "weather"}
    exec(source, namespace)
    with pytest.raises(ToolDefinitionError) as raised:
        tool(namespace["forecast"])
    said = str(raised.value)
    assert said.startswith(f"@tool weather.forecast: {what}, cannot be resolved (NameError: ")
    assert "import what it names" in said and "\n" not in said


def test_every_tool_schema_is_an_object_and_star_args_is_refused() -> None:
    from orchestrator.tools.python import ToolDefinitionError

    with pytest.raises(ToolDefinitionError, match=r"\*values cannot be a tool's input.*list"):

        @tool
        def total(*values: int) -> int:
            """Add them up."""
            return sum(values)

    with pytest.raises(ToolDefinitionError, match="positional-only"):

        @tool
        def first(a: int, /, b: int) -> int:
            """The first."""
            return a

    @tool
    def tagged(name: str, **labels: str) -> str:
        """Name with labels."""
        return name

    @tool
    def nothing() -> str:
        """No input at all."""
        return "ok"

    for made in (add, tagged, nothing):
        assert made.schema["input_schema"]["type"] == "object", made.schema


def test_missing_type_hints_or_docstring_warn_where_the_tool_is_made() -> None:
    from orchestrator.tools.python import ToolDefinitionWarning

    with pytest.warns(ToolDefinitionWarning) as caught:

        @tool
        def untyped(a, b: int) -> int:  # type: ignore[no-untyped-def]
            """Half typed."""
            return b

        @tool(description="Given here instead.")
        def undocumented(a: int) -> int:
            return a

        @tool(name="bare")
        def bare(a: int) -> int:
            return a

    messages = [str(warning.message) for warning in caught]
    assert len(messages) == 2, messages
    assert ".untyped: no type hint for a;" in messages[0]
    assert "no docstring" in messages[1] and "bare" in messages[1]
    # Each points at the line that made the tool, not at orchestrator's own code.
    assert {Path(warning.filename).name for warning in caught} == {"test_agent.py"}
    assert untyped(1, 2) == 2 and undocumented.schema["description"] == "Given here instead."


# --- the API is silent, speaks in keywords, and refuses what it would silently leave out ------


def _user_mcp_server(config_dir: Path, name: str, command: str, *args: str, **env: str) -> None:
    config_dir.mkdir(parents=True, exist_ok=True)
    lines = [f"[mcp_servers.{name}]", f"command = {json.dumps(command)}"]
    lines.append(f"args = {json.dumps(list(args))}")
    if env:
        lines.append(
            "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }"
        )
    with (config_dir / "config.toml").open("a", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")


_EMBEDDED = """
import json, sys
from orchestrator import Agent
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer
import os

turns = [
    {"tool_calls": [{"name": "bash", "input": {"command": "echo hi > x"}}]},
    {"tool_calls": [{"name": "bash", "input": {"command": "echo again"}}]},
]
with MessagesServer(parse_script({"name": "quiet", "turns": turns}, source="test")) as server:
    os.environ["ANTHROPIC_BASE_URL"] = server.base_url
    result = Agent(workdir=sys.argv[1], max_rounds=2, sandbox="workdir").run("Write x.")
print(json.dumps({"status": result.status, "reason": result.reason, "code": result.exit_code}))
"""


def _embedded_environment(tmp_path: Path) -> dict[str, str]:
    env = {
        name: value
        for name, value in __import__("os").environ.items()
        if not name.startswith(("ANTHROPIC_", "ORCHESTRATOR_"))
    }
    env.update(
        ANTHROPIC_API_KEY="test-key-api",
        ORCHESTRATOR_CONFIG_DIR=str(tmp_path / "config"),
        ORCHESTRATOR_STATE_DIR=str(tmp_path / "state"),
    )
    return env


@pytest.mark.e2e
def test_an_embedded_run_prints_nothing_however_it_goes(endpoint: Path, tmp_path: Path) -> None:
    # An approval refusal (no terminal to ask), an MCP server that cannot start, the sandbox
    # chosen, and a run that fails (its rounds spent): a CLI run prints a line for each. A
    # program of its own, so nothing of pytest's (its log handlers) stands between them and
    # stderr.
    _user_mcp_server(tmp_path / "config", "broken", "/no/such/server")
    done = subprocess.run(
        [sys.executable, "-c", _EMBEDDED, str(endpoint)],
        env=_embedded_environment(tmp_path),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "failed" and "max_rounds=" in result["reason"]
    assert not (endpoint / "x").exists()


def test_the_person_s_lines_go_to_the_logger_in_the_api_s_words(
    endpoint: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _user_mcp_server(tmp_path / "config", "broken", "/no/such/server")
    turns: list[Mapping[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": "echo hi > x"}}]},
        {"tool_calls": [{"name": "bash", "input": {"command": "echo again"}}]},
    ]
    server = _server(turns, monkeypatch)
    try:
        with caplog.at_level("WARNING", logger="orchestrator"):
            result = Agent(workdir=endpoint, max_rounds=2).run("Write x.")
    finally:
        server.__exit__(None, None, None)
    assert result.status == "failed" and result.exit_code == 1
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "mcp server broken did not start" in logged
    assert "no terminal to ask for approval (approval='ask')" in logged
    assert "run failed: stopped after 2 rounds (max_rounds=)" in logged
    assert "--" not in logged


def test_console_shows_the_run_on_the_stream_it_is_given(
    endpoint: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    import io

    shown = io.StringIO()
    server = _server([{"text": "Hello."}], monkeypatch)
    try:
        Agent(workdir=endpoint, console=shown).run("Say hello.")
    finally:
        server.__exit__(None, None, None)
    assert "Hello." in shown.getvalue() and "run done" in shown.getvalue()
    assert capfd.readouterr().err == ""


def test_errors_name_settings_as_keywords_not_flags(endpoint: Path) -> None:
    with pytest.raises(SettingsError) as raised:
        Agent(workdir=endpoint, model="no-price-known", max_cost=1).run("x")
    assert "max_cost=1: the price of no-price-known is unknown" in str(raised.value)
    assert "price_per_mtok=" in str(raised.value) and "--" not in str(raised.value)
    with pytest.raises(SettingsError) as raised:
        Agent(workdir=endpoint, thinking=4096, max_tokens=2048).run("x")
    assert "must be below max_tokens=" in str(raised.value) and "--" not in str(raised.value)
    (endpoint / "orchestrator.toml").write_text('base_url = "http://127.0.0.1:9"\n')
    with pytest.raises(SettingsError) as raised:
        Agent(workdir=endpoint).run("x")
    assert "with trust=True" in str(raised.value) and "--" not in str(raised.value)


@pytest.mark.parametrize(
    ("file", "text"),
    [
        (".mcp.json", '{"mcpServers": {"notes": {"command": "/no/such/server"}}}'),
        ("orchestrator.toml", '[[hooks.UserPromptSubmit]]\ncommand = "true"\n'),
    ],
)
def test_an_untrusted_folder_with_hooks_or_mcp_servers_needs_trust_said(
    endpoint: Path, monkeypatch: pytest.MonkeyPatch, file: str, text: str
) -> None:
    (endpoint / file).write_text(text)
    with pytest.raises(SettingsError) as raised:
        Agent(workdir=endpoint, approval="auto").run("Say hello.")
    assert file in str(raised.value)
    assert "pass trust=True to run them, or trust=False to run without them" in str(raised.value)
    # Said either way, the run goes on: without the project's hooks and servers, or with them.
    for trust in (False, True):
        seen: list[Mapping[str, Any]] = []
        server = _server([{"text": "Hello."}], monkeypatch)
        try:
            result = Agent(
                workdir=endpoint, approval="auto", trust=trust, on_event=seen.append
            ).run("Say hello.")
        finally:
            server.__exit__(None, None, None)
        assert result.status == "done"
        mcp = [event.get("status") for event in seen if event["event"] == "mcp.server"]
        if file == ".mcp.json":
            assert mcp == (["failed"] if trust else ["not_trusted"])


def test_a_resume_keeps_the_model_settings_but_never_the_approval(
    endpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns: list[Mapping[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": "echo one > one.txt"}}]},
        {"text": "One written."},
        {"tool_calls": [{"name": "bash", "input": {"command": "echo two > two.txt"}}]},
        {"text": "Two not written."},
    ]
    server = _server(turns, monkeypatch)
    try:
        first = Agent(model="claude-kept", workdir=endpoint, approval="auto", max_tokens=1234).run(
            "Write one."
        )
        assert first.trace is not None
        more = Agent.resume(first.trace, "Write two.")
    finally:
        server.__exit__(None, None, None)
    assert (endpoint / "one.txt").exists() and not (endpoint / "two.txt").exists()
    assert more.exit_code == 3  # asked, with no one to ask: refused
    resumed = server.requests[2]
    assert (resumed["model"], resumed["max_tokens"]) == ("claude-kept", 1234)


def test_a_run_with_refusals_says_what_was_refused_and_why_its_exit_code_is_3(
    endpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.approval import RefusedAction

    plan = {"items": [{"id": "1", "text": "Write notes", "status": "in_progress"}]}
    turns: list[Mapping[str, Any]] = [
        {"tool_calls": [{"name": "todo", "input": plan}]},
        {
            "tool_calls": [
                {"name": "bash", "input": {"command": "touch asked"}},
                {"name": "write_file", "input": {"path": "notes.txt", "content": "x"}},
            ]
        },
        {"text": "I could not write them."},
        {"text": "Still could not."},
    ]
    server = _server(turns, monkeypatch)
    try:
        result = Agent(workdir=endpoint).run("Write notes.")  # approval="ask", no terminal
    finally:
        server.__exit__(None, None, None)
    assert (result.status, result.exit_code) == ("done", 3)
    asked = "no terminal to ask (approval='ask')"
    assert result.refused == (
        RefusedAction("bash", "touch asked", asked),
        RefusedAction("write_file", "notes.txt", asked),
    )
    assert result.reason == (
        "2 calls were refused: bash touch asked, write_file notes.txt; "
        "plan unfinished: 0/1 completed: #1"
    )
    assert not (endpoint / "asked").exists() and not (endpoint / "notes.txt").exists()
