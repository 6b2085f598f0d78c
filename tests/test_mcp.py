"""MCP servers through the real CLI: real servers (``tests/mcp_servers.py``), a scripted model.

Each test writes a ``.mcp.json`` into the work directory, runs ``orchestrator run`` against the
loopback Messages API playing a script that calls ``mcp__NAME__TOOL``, and looks at what the
model got (the script's ``expect``), what the server saw (its call log) and what is left
running afterwards (``/proc``, by a marker only the test's servers carry on their command line).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import mcp.types as types
import pytest

from orchestrator.context.tokens import estimate_tokens
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer, check_request
from orchestrator.tools.mcp import _rendered
from orchestrator.trust import TrustStore, trust_file
from tests.in_process import run_cli

# Real MCP server processes (and signals, a terminal): the e2e layer (docs/development.md).
pytestmark = pytest.mark.e2e

TIMEOUT = 60
SERVERS = Path(__file__).with_name("mcp_servers.py")


@attrs.frozen
class Finished:
    code: int
    stdout: str
    stderr: str
    requests: list[dict[str, Any]]
    trace: list[dict[str, Any]]

    def events(self, name: str) -> list[dict[str, Any]]:
        return [event for event in self.trace if event["event"] == name]


def _environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "ORCHESTRATOR_"))
    }
    env.update(NO_COLOR="1", ORCHESTRATOR_CONFIG_DIR=str(tmp_path / "config"), **extra)
    return env


def _stdio(tmp_path: Path, mode: str = "stdio") -> dict[str, Any]:
    """A ``.mcp.json`` entry for a test server; ``tmp_path`` on its command line marks it."""
    return {
        "command": sys.executable,
        "args": [str(SERVERS), mode, str(tmp_path)],
        "env": {"MCP_CALLS": str(tmp_path / f"calls-{mode}.log")},
    }


def _workdir(tmp_path: Path, servers: Mapping[str, Any]) -> Path:
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    document = {"mcpServers": dict(servers)}
    (workdir / ".mcp.json").write_text(json.dumps(document), encoding="utf-8")
    return workdir


def _calls(tmp_path: Path, mode: str = "stdio") -> list[str]:
    path = tmp_path / f"calls-{mode}.log"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _survivors(marker: Path) -> list[int]:
    """Processes whose command line carries ``marker`` (the test's servers), from outside."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                words = cmdline.read().split(b"\0")
        except OSError:
            continue
        if str(marker).encode() in words and str(SERVERS).encode() in words:
            found.append(int(name))
    return found


def _call(name: str, arguments: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "input": dict(arguments)}], **extra}


def _ok(contains: str) -> list[dict[str, Any]]:
    return [{"is_error": False, "contains": contains}]


def _error(contains: str) -> list[dict[str, Any]]:
    return [{"is_error": True, "contains": contains}]


def _run(
    tmp_path: Path,
    workdir: Path,
    turns: Sequence[Mapping[str, Any]],
    *flags: str,
    **variables: str,
) -> Finished:
    trace = tmp_path / f"t{len(list(tmp_path.glob('t*.jsonl')))}.jsonl"
    script = parse_script({"name": "mcp", "turns": list(turns)}, source="test")
    with MessagesServer(script) as server:
        env = _environment(
            tmp_path,
            ANTHROPIC_API_KEY="test-key-1234",
            ANTHROPIC_BASE_URL=server.base_url,
            **variables,
        )
        process = run_cli(
            ["run", "Use the tools", "--workdir", str(workdir), "--trace", str(trace), *flags],
            env=env,
            cwd=tmp_path,
        )
        requests, violations = server.requests, server.violations
    assert "Traceback" not in process.stderr, process.stderr
    for body in requests:
        assert check_request(body) == []
    assert violations == [], process.stdout + process.stderr
    lines = trace.read_text(encoding="utf-8").splitlines() if trace.exists() else []
    return Finished(
        process.returncode,
        process.stdout,
        process.stderr,
        requests,
        [json.loads(line) for line in lines],
    )


def _tool_names(body: Mapping[str, Any]) -> list[str]:
    return [tool["name"] for tool in body.get("tools", [])]


def test_a_stdio_server_s_tools_reach_the_model_and_the_server_sees_the_calls(
    tmp_path: Path,
) -> None:
    notes = _stdio(tmp_path)
    notes["env"]["NOTES_TOKEN"] = "${TOKEN_FOR_NOTES}"
    workdir = _workdir(tmp_path, {"notes": notes})
    turns = [
        _call("mcp__notes__note", {"text": "hello"}),
        _call("mcp__notes__environment", {}, expect=_ok("noted: hello")),
        _call("mcp__notes__large", {}, expect=_ok("MCP_CALLS")),
        _call("mcp__notes__grow", {}, expect=_ok("output truncated")),
        _call("mcp__notes__fresh", {}, expect=_ok("grown")),
        {"text": "Done.", "expect": _ok("fresh result")},
    ]
    run = _run(tmp_path, workdir, turns, "--yes", "--trust", TOKEN_FOR_NOTES="notes-token-42")
    assert run.code == 0, run.stderr
    assert _calls(tmp_path) == ["started stdio", "note hello", "environment"]
    # The model got the server's own schema and description, under mcp__SERVER__TOOL.
    first = run.requests[0]
    (note,) = [tool for tool in first["tools"] if tool["name"] == "mcp__notes__note"]
    assert note["description"] == "Write a note into the server's call log and say so."
    assert note["input_schema"]["properties"]["text"]["type"] == "string"
    assert note["input_schema"]["required"] == ["text"]
    assert "mcp__notes__fresh" not in _tool_names(first)
    # The tool-list-changed notification was followed: the next request offered the new tool.
    assert "mcp__notes__fresh" in _tool_names(run.requests[4])
    # Its environment holds what its config names and the minimal rest, never the key.
    results = [event for event in run.events("tool.result") if event["name"].endswith("ment")]
    names = results[0]["output"].split()
    assert "MCP_CALLS" in names and "PATH" in names
    assert not any(name.startswith(("ANTHROPIC", "ORCHESTRATOR")) for name in names)
    # The token its config hands it is its own: never shown to the model, nor in the trace.
    assert "NOTES_TOKEN=[REDACTED]" in names
    assert "notes-token-42" not in json.dumps(run.trace)
    assert "notes-token-42" not in json.dumps(run.requests)
    # The same path as built-in tools: output cap, redaction and the trace.
    (large,) = [event for event in run.events("tool.result") if event["name"].endswith("large")]
    assert "test-key-1234" not in large["output"] and "[REDACTED]" in large["output"]
    assert len(large["output"]) < 51_000
    started = [e for e in run.events("mcp.server") if e["status"] == "started"]
    assert started[0]["server"] == "notes" and "mcp__notes__note" in started[0]["tools"]
    changed = [e for e in run.events("mcp.server") if e["status"] == "tools_changed"]
    assert changed and "mcp__notes__fresh" in changed[0]["tools"]
    assert [e["seq"] for e in run.trace] == list(range(1, len(run.trace) + 1))
    assert run.trace[0]["event"] == "run.started"
    # Tool definitions are part of the request's fixed tokens.
    fixed = run.events("model.request")[0]["fixed_tokens"]
    assert fixed >= estimate_tokens(first["tools"])
    assert "mcp server notes: started (stdio), 6 tools" in run.stderr
    assert _survivors(tmp_path) == []
    replay = run_cli(["replay", "--check", str(tmp_path / "t0.jsonl")])
    assert replay.returncode == 0, replay.stderr


def test_an_untrusted_mcp_json_starts_nothing_and_says_so_in_one_line(tmp_path: Path) -> None:
    workdir = _workdir(tmp_path, {"notes": _stdio(tmp_path)})
    turns = [
        _call("mcp__notes__note", {"text": "hi"}),
        {"text": "No such tool.", "expect": _error("unknown tool 'mcp__notes__note'")},
    ]
    run = _run(tmp_path, workdir, turns, "--yes")
    assert run.code == 0, run.stderr
    assert _calls(tmp_path) == []
    assert "mcp__notes__note" not in _tool_names(run.requests[0])
    # Not the header line: it names the work directory, whose path says "mcp" too.
    lines = [line for line in run.stderr.splitlines() if "mcp" in line and "· workdir" not in line]
    assert len(lines) == 1 and "not trusted" in lines[0] and "--trust" in lines[0], run.stderr
    (event,) = run.events("mcp.server")
    assert (event["server"], event["status"]) == ("notes", "not_trusted")


def test_trust_covers_mcp_json_by_digest_so_a_rewritten_file_is_not_trusted(
    tmp_path: Path,
) -> None:
    workdir = _workdir(tmp_path, {"notes": _stdio(tmp_path)})
    env = _environment(tmp_path)
    TrustStore(trust_file(env)).add(workdir)
    turns = [_call("mcp__notes__note", {"text": "trusted"}), {"text": "ok"}]
    run = _run(tmp_path, workdir, turns, "--yes")
    assert run.code == 0, run.stderr
    assert _calls(tmp_path) == ["started stdio", "note trusted"]
    # The model (or anyone) rewrites the file: the folder's trust no longer covers it.
    _workdir(tmp_path, {"notes": _stdio(tmp_path), "more": _stdio(tmp_path, "http")})
    run = _run(tmp_path, workdir, [{"text": "ok"}], "--yes")
    assert run.code == 0, run.stderr
    assert _calls(tmp_path) == ["started stdio", "note trusted"]
    assert "not trusted" in run.stderr


def test_a_project_server_whose_script_the_model_rewrote_does_not_start_and_exits_3(
    tmp_path: Path,
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    marker = tmp_path / "rewritten-server-ran"
    # The project's own server, started from its folder (the work directory) as `python3 srv.py`.
    (workdir / "srv.py").write_text(
        "import runpy, sys\n"
        f"sys.argv = [{str(SERVERS)!r}, 'stdio', {str(tmp_path)!r}]\n"
        f"runpy.run_path({str(SERVERS)!r}, run_name='__main__')\n",
        encoding="utf-8",
    )
    calls = {"MCP_CALLS": str(tmp_path / "calls-stdio.log")}
    _workdir(tmp_path, {"srv": {"command": sys.executable, "args": ["srv.py"], "env": calls}})
    trusted = run_cli(["trust", "--workdir", str(workdir)], env=_environment(tmp_path))
    assert trusted.returncode == 0 and "pins srv.py  sha256 " in trusted.stdout, trusted.stdout
    planted = f"open({str(marker)!r}, 'w').write('ran')\n"
    turns = [
        _call("mcp__srv__note", {"text": "trusted"}),
        _call("write_file", {"path": "srv.py", "content": planted}, expect=_ok("noted")),
        {"text": "ok", "expect": _ok("")},
    ]
    run = _run(tmp_path, workdir, turns, "--yes")
    assert run.code == 0, run.stderr
    assert (workdir / "srv.py").read_text(encoding="utf-8") == planted
    # The next run: the rewritten server does not start; one line says why; exit 3.
    run = _run(tmp_path, workdir, [{"text": "ok"}], "--yes")
    assert run.code == 3, run.stderr
    assert not marker.exists()
    assert _calls(tmp_path) == ["started stdio", "note trusted"]
    said = [line for line in run.stderr.splitlines() if "mcp server srv" in line]
    assert len(said) == 1 and "srv.py changed since the folder was trusted" in said[0], said
    (event,) = run.events("mcp.server")
    assert (event["status"], event["server"]) == ("refused", "srv")


def test_servers_that_crash_hang_lie_or_never_start_give_tool_errors_and_one_line_each(
    tmp_path: Path,
) -> None:
    workdir = _workdir(
        tmp_path,
        {
            "s": _stdio(tmp_path),
            "garbage": _stdio(tmp_path, "garbage"),
            "misshapen": _stdio(tmp_path, "misshapen"),
            "broken": {"command": str(tmp_path / "no-such-server")},
        },
    )
    turns = [
        _call("mcp__s__hang", {"seconds": 30}),
        _call("mcp__garbage__ask", {}, expect=_error("did not answer within 2 s")),
        _call("mcp__misshapen__ask", {}, expect=_error("not a valid MCP tool result")),
        _call("mcp__s__crash", {}, expect=_error("not a valid MCP tool result")),
        _call("mcp__s__note", {"text": "x"}, expect=_error("has stopped")),
        {"text": "Gave up on them.", "expect": _error("unavailable")},
    ]
    run = _run(tmp_path, workdir, turns, "--yes", "--trust", "--mcp-timeout", "2")
    assert run.code == 0, run.stderr
    assert _calls(tmp_path, "garbage") == ["ask"]
    assert _calls(tmp_path, "misshapen") == ["ask"]
    kinds = [(e["server"], e["kind"]) for e in run.events("mcp.error")]
    assert kinds == [
        ("s", "timeout"),
        ("garbage", "garbage"),
        ("misshapen", "garbage"),
        ("s", "crashed"),
        ("s", "not_running"),
    ]
    failed = [e for e in run.events("mcp.server") if e["status"] == "failed"]
    assert [e["server"] for e in failed] == ["broken"]
    stderr = run.stderr.splitlines()
    assert len([line for line in stderr if "broken did not start" in line]) == 1
    assert len([line for line in stderr if line.startswith("orchestrator: mcp: mcp__")]) == 5
    assert _survivors(tmp_path) == []


@pytest.mark.parametrize(
    ("signum", "code", "during"),
    [
        (signal.SIGINT, 130, "model"),
        (signal.SIGTERM, 143, "call"),
        (signal.SIGHUP, 129, "call"),
    ],
)
def test_the_servers_are_gone_after_ctrl_c_sigterm_and_sighup(
    tmp_path: Path, signum: signal.Signals, code: int, during: str
) -> None:
    """Stopped while the model answers, or while a server's tool is running."""
    workdir = _workdir(tmp_path, {"notes": _stdio(tmp_path)})
    first = (
        {"fault": "slow", "seconds": 30}
        if during == "model"
        else _call("mcp__notes__hang", {"seconds": 30})
    )
    script = parse_script({"name": "stop", "turns": [first, {"text": "late"}]}, source="test")
    trace = tmp_path / "t.jsonl"
    with MessagesServer(script) as server:
        env = _environment(
            tmp_path, ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=server.base_url
        )
        command = ["run", "Wait", "--workdir", str(workdir), "--trace", str(trace), "--yes"]
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", *command, "--trust"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + TIMEOUT
            waiting = "started stdio" if during == "model" else "hang "
            while not (
                server.requests and any(line.startswith(waiting) for line in _calls(tmp_path))
            ):
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the run never got there"
                time.sleep(0.05)
            assert _survivors(tmp_path), "the server should be running during the run"
            process.send_signal(signum)
            _, stderr = process.communicate(timeout=TIMEOUT)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    assert _survivors(tmp_path) == []
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert events[-1]["event"] == "run.finished"


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """A streamable-HTTP test server on a free loopback port; its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "MCP_CALLS": str(tmp_path / "calls-http.log")}
    process = subprocess.Popen(
        [sys.executable, str(SERVERS), "http", str(port), str(tmp_path)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:
            assert process.poll() is None, "the HTTP server exited"
            assert time.monotonic() < deadline, "the HTTP server never listened"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=TIMEOUT)


def test_a_streamable_http_server_on_loopback_works_the_same(
    tmp_path: Path, http_server: str
) -> None:
    server = {"type": "http", "url": http_server, "headers": {"X-Test": "${TEST_HEADER:-plain}"}}
    workdir = _workdir(tmp_path, {"web": server})
    turns = [
        _call("mcp__web__note", {"text": "over http"}),
        {"text": "Done.", "expect": _ok("noted: over http")},
    ]
    run = _run(tmp_path, workdir, turns, "--yes", "--trust")
    assert run.code == 0, run.stderr
    assert _calls(tmp_path, "http") == ["started http", "note over http"]
    (started,) = [e for e in run.events("mcp.server") if e["status"] == "started"]
    assert started["transport"] == "http"


def test_mcp_tools_ask_like_bash_and_auto_approve_names_the_ones_that_need_not(
    tmp_path: Path,
) -> None:
    workdir = _workdir(tmp_path, {"notes": _stdio(tmp_path)})
    turns = [
        _call("mcp__notes__note", {"text": "asked"}),
        _call("mcp__notes__note", {"text": "again"}, expect=_error("no one to approve it")),
        {"text": "ok", "expect": _error("no one to approve it")},
    ]
    run = _run(tmp_path, workdir, turns, "--trust")
    assert run.code == 3, run.stderr
    assert _calls(tmp_path) == ["started stdio"]
    assert "write_file, MCP tools will be refused" in run.stderr
    turns = [_call("mcp__notes__note", {"text": "auto"}), {"text": "ok", "expect": _ok("noted")}]
    run = _run(tmp_path, workdir, turns, "--trust", "--auto-approve", "mcp__notes__note")
    assert run.code == 0, run.stderr
    assert _calls(tmp_path)[-1] == "note auto"


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"mcpServers": {"a": {"args": ["x"]}}}', "command must be a non-empty string"),
        ('{"mcpServers": {"a": {"command": "x", "env": {"N": 1}}}}', "env must map names"),
    ],
)
def test_a_malformed_mcp_json_is_one_line_and_exit_2(
    tmp_path: Path, document: str, message: str
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / ".mcp.json").write_text(document, encoding="utf-8")
    done = run_cli(
        ["run", "x", "--workdir", str(workdir), "--yes"],
        env=_environment(tmp_path, ANTHROPIC_API_KEY="k"),
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


def _orchestrator(*args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli(args, env=env)


def test_mcp_list_shows_each_server_how_it_started_and_its_tools(tmp_path: Path) -> None:
    workdir = _workdir(
        tmp_path, {"notes": _stdio(tmp_path), "broken": {"command": "/no/such/server"}}
    )
    env = _environment(tmp_path)
    untrusted = _orchestrator("mcp", "list", "--workdir", str(workdir), env=env)
    assert untrusted.returncode == 1
    assert untrusted.stdout.count("not started: the folder is not trusted") == 2
    assert _calls(tmp_path) == []
    listed = _orchestrator("mcp", "list", "--workdir", str(workdir), "--trust", env=env)
    assert listed.returncode == 1, listed.stderr
    assert "notes: " in listed.stdout and "started, 6 tools" in listed.stdout
    assert "    mcp__notes__note" in listed.stdout
    assert "broken: /no/such/server" in listed.stdout
    assert "did not start: cannot run '/no/such/server'" in listed.stdout
    assert _survivors(tmp_path) == []
    doctor = _orchestrator("doctor", "--workdir", str(workdir), env=env)
    assert "mcp server notes" in doctor.stdout and "not started" in doctor.stdout
    TrustStore(trust_file(env)).add(workdir)
    trusted = _orchestrator("doctor", "--workdir", str(workdir), env=env)
    assert "started, 6 tools" in trusted.stdout
    assert "did not start: cannot run" in trusted.stdout and trusted.returncode == 1
    assert _survivors(tmp_path) == []


def test_on_a_terminal_the_question_covers_mcp_json_and_a_yes_is_recorded(tmp_path: Path) -> None:
    import pexpect

    workdir = _workdir(tmp_path, {"notes": _stdio(tmp_path)})
    script = parse_script(
        {"name": "ask", "turns": [{"text": "hi"}, {"text": "again"}]}, source="test"
    )
    with MessagesServer(script) as server:
        env = _environment(
            tmp_path, ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=server.base_url
        )
        args = ["-m", "orchestrator", "run", "Hi", "--workdir", str(workdir), "--yes", "--quiet"]
        child = pexpect.spawn(
            sys.executable,
            [*args, "--trace", str(tmp_path / "a.jsonl")],
            env=env,
            encoding="utf-8",
            timeout=TIMEOUT,
        )
        child.expect_exact("start MCP server notes: ")
        child.expect_exact("Do you trust the files in this folder")
        child.sendline("y")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0, child.before
        # Recorded: the next run, with no terminal to ask on, starts the server as well.
        again = run_cli([*args[2:], "--trace", str(tmp_path / "b.jsonl")], env=env)
    assert again.returncode == 0, again.stderr
    assert _calls(tmp_path) == ["started stdio", "started stdio"]
    assert TrustStore(trust_file(env)).trusts(workdir)


def test_text_is_passed_on_and_other_content_is_summarised_in_one_line_each() -> None:
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="hello"),
            types.ImageContent(type="image", data="aGVsbG8=", mime_type="image/png"),
            types.ResourceLink(type="resource_link", uri="file:///a.txt", name="a"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///b.txt", text="inside b"),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="file:///c.bin", blob="AAAA", mime_type="application/zip"
                ),
            ),
        ]
    )
    text = _rendered(result, "mcp__s__t").text
    assert text.splitlines() == [
        "hello",
        "[image image/png, 6 bytes, not shown]",
        "[resource link file:///a.txt (a)]",
        "inside b",
        "[resource file:///c.bin: application/zip]",
    ]
    failed = _rendered(
        types.CallToolResult(content=[types.TextContent(type="text", text="no")], is_error=True),
        "mcp__s__t",
    )
    assert failed.is_error and failed.text == "Error: mcp__s__t reported an error: no"
    structured = types.CallToolResult(content=[], structured_content={"n": 1})
    assert _rendered(structured, "mcp__s__t").text == '{"n": 1}'


# --- in this process: mcp list's timeout, server-wide approval, where servers start -------------


def _user_servers(tmp_path: Path, servers: Mapping[str, Mapping[str, Any]]) -> None:
    """The user's own config.toml naming ``servers`` (no trust needed for these)."""
    folder = tmp_path / "config"
    folder.mkdir(exist_ok=True)
    tables = []
    for name, entry in servers.items():
        lines = [f"[mcp_servers.{name}]"]
        for key, value in entry.items():
            if isinstance(value, Mapping):
                pairs = ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items())
                lines.append(f"{key} = {{ {pairs} }}")
            else:
                lines.append(f"{key} = {json.dumps(value)}")
        tables.append("\n".join(lines))
    (folder / "config.toml").write_text("\n\n".join(tables) + "\n", encoding="utf-8")


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """This process's environment as _environment() gives a child; the work directory."""
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "ORCHESTRATOR_")) and name != "ORCHESTRATOR_TEST_HOME":
            monkeypatch.delenv(name)
    monkeypatch.setenv("ORCHESTRATOR_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ORCHESTRATOR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-1234")
    monkeypatch.setenv("NO_COLOR", "1")
    workdir = tmp_path / "work"
    workdir.mkdir()
    return workdir


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from orchestrator.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    out, err = capsys.readouterr()
    assert isinstance(exited.value.code, int)
    return exited.value.code, out, err


def test_mcp_list_waits_as_long_as_mcp_timeout_says_and_30_s_by_default(
    here: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from orchestrator.config import load_config
    from orchestrator.tools.mcp import DEFAULT_TIMEOUT

    _user_servers(
        tmp_path,
        {
            "hung": {"command": sys.executable, "args": [str(SERVERS), "silent", str(tmp_path)]},
            "notes": _stdio(tmp_path),
        },
    )
    code, out, err = _main(capsys, "mcp", "list", "--workdir", str(here), "--mcp-timeout", "1.5")
    assert code == 1, err
    assert "hung: " in out and "did not start: no answer within 1.5 s (--mcp-timeout)" in out
    # The other server is listed all the same (on a loaded machine it may need more than 1.5 s
    # to start, so its line is checked, not what it says).
    assert "\nnotes: " in "\n" + out
    assert _survivors(tmp_path) == []
    # Claude Code's default, as a setting and in the client.
    assert load_config(here, env={}, user_file=False).mcp_timeout == DEFAULT_TIMEOUT == 30
    code, _out, err = _main(capsys, "mcp", "list", "--workdir", str(here), "--mcp-timeout", "0")
    assert code == 2 and "--mcp-timeout" in err


@pytest.mark.parametrize(
    ("rule", "runs"),
    [("mcp__notes", True), ("mcp__notes__*", True), ("mcp__note", False), ("bash", False)],
)
def test_auto_approve_takes_a_whole_server_as_claude_code_writes_it(
    here: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rule: str, runs: bool
) -> None:
    from orchestrator import Agent

    _user_servers(tmp_path, {"notes": _stdio(tmp_path)})
    turns = [
        _call("mcp__notes__note", {"text": "auto"}),
        {"text": "ok", "expect": _ok("noted") if runs else _error("no one to approve it")},
    ]
    script = parse_script({"name": "rules", "turns": turns}, source="test")
    with MessagesServer(script) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        result = Agent(workdir=here, auto_approve=[rule]).run("Note it.")
    assert server.violations == []
    assert result.status == "done" and result.exit_code == (0 if runs else 3)
    assert ("note auto" in _calls(tmp_path)) is runs


@pytest.mark.parametrize("rule", ["*", "mcp__*", "mcp__notes*", "bash*"])
def test_any_other_wildcard_is_refused_in_one_line(
    here: Path, capsys: pytest.CaptureFixture[str], rule: str
) -> None:
    code, _out, err = _main(capsys, "run", "x", "--workdir", str(here), "--auto-approve", rule)
    assert code == 2 and err.count("\n") == 1, err
    assert "mcp__SERVER or mcp__SERVER__*" in err and repr(rule) in err


def _planted(workdir: Path, tmp_path: Path) -> dict[str, Path]:
    """What a hostile model leaves for the next run: a mytool.py and a node_modules/.bin/tool."""
    markers = {"python": tmp_path / "planted-python-ran", "npx": tmp_path / "planted-npx-ran"}
    (workdir / "mytool.py").write_text(
        f"open({str(markers['python'])!r}, 'w').write('imported')\n", encoding="utf-8"
    )
    binary = workdir / "node_modules" / ".bin" / "orchestrator-planted-tool"
    binary.parent.mkdir(parents=True)
    binary.write_text(f"#!/bin/sh\necho ran > {markers['npx']}\n", encoding="utf-8")
    binary.chmod(0o755)
    (workdir / "package.json").write_text('{"name": "planted"}\n', encoding="utf-8")
    return markers


def _user_tools(tmp_path: Path, **extra: str) -> dict[str, Any]:
    """``python3 -m mytool`` (the user's real one, on PYTHONPATH) and ``npx -y TOOL``."""
    legit = tmp_path / "legit"
    legit.mkdir(exist_ok=True)
    (legit / "mytool.py").write_text(
        "import runpy, sys\n"
        f"sys.argv = [{str(SERVERS)!r}, 'stdio', {str(tmp_path)!r}]\n"
        f"runpy.run_path({str(SERVERS)!r}, run_name='__main__')\n",
        encoding="utf-8",
    )
    calls = str(tmp_path / "calls-stdio.log")
    servers: dict[str, Any] = {
        "mytool": {
            "command": sys.executable,
            "args": ["-m", "mytool"],
            "env": {"PYTHONPATH": str(legit), "MCP_CALLS": calls},
            **extra,
        }
    }
    if shutil.which("npx") is not None:
        servers["tool"] = {
            "command": "npx",
            "args": ["-y", "orchestrator-planted-tool"],
            "env": {"npm_config_offline": "true"},  # never the registry: only what is local
            **extra,
        }
    return servers


def test_a_user_s_server_never_runs_what_the_model_planted_in_the_work_directory(
    here: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from orchestrator import Agent

    markers = _planted(here, tmp_path)
    servers = _user_tools(tmp_path)
    _user_servers(tmp_path, servers)
    turns = [_call("mcp__mytool__note", {"text": "real"}), {"text": "ok", "expect": _ok("noted")}]
    seen: list[Mapping[str, Any]] = []
    script = parse_script({"name": "planted", "turns": turns}, source="test")
    with MessagesServer(script) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        result = Agent(workdir=here, approval="auto", on_event=seen.append).run("Note it.")
    assert server.violations == [] and result.status == "done"
    # The user's own mytool served the call; the planted ones never ran.
    assert _calls(tmp_path) == ["started stdio", "note real"]
    assert [marker for marker in markers.values() if marker.exists()] == []
    started = {e["server"]: e["status"] for e in seen if e["event"] == "mcp.server"}
    assert started["mytool"] == "started"
    if "tool" in servers:
        assert started["tool"] == "failed"  # not found where it starts, and not fetched
    # A config that does say "start in the work directory" is refused: what it would run from
    # there cannot be pinned. The planted mytool.py is not even on its path (PYTHONSAFEPATH).
    _user_servers(tmp_path, _user_tools(tmp_path, cwd=str(here)))
    code, out, _err = _main(capsys, "mcp", "list", "--workdir", str(here))
    assert code == 1 and "may load mytool.py from the work directory" in out
    assert (
        "tool" not in servers or "npx would run node_modules/.bin/orchestrator-planted-tool" in out
    )
    assert [marker for marker in markers.values() if marker.exists()] == []
    # The control: judged against another work directory, the same config starts them, and npx
    # runs the planted tool: it was one a server would have run.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _main(capsys, "mcp", "list", "--workdir", str(elsewhere))
    assert markers["npx"].exists() or "tool" not in servers
    assert not markers["python"].exists()
    assert _survivors(tmp_path) == []
