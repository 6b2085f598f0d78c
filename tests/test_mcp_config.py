"""Reading ``.mcp.json`` and ``[mcp_servers.NAME]``: shapes, precedence, variables, names, trust."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from orchestrator.approval import ApprovalPolicy
from orchestrator.config import UntrustedConfig, load_config, widens
from orchestrator.protocols import JSONObject, Refusal, Tool, ToolResult
from orchestrator.tools import ToolRegistry
from orchestrator.tools.mcp import NAME_LIMIT, _tool_name
from orchestrator.tools.mcp_config import McpConfigError, McpServerConfig, load_servers, resolve
from orchestrator.trust import TrustStore, file_digest


def _write_json(folder: Path, servers: Mapping[str, Any]) -> None:
    (folder / ".mcp.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")


def test_both_transports_are_read_from_mcp_json_in_claude_code_s_shape(tmp_path: Path) -> None:
    _write_json(
        tmp_path,
        {
            "docs": {"command": "npx", "args": ["-y", "docs"], "env": {"TOKEN": "${DOCS}"}},
            "web": {"type": "http", "url": "https://x.test/mcp", "headers": {"A": "b"}},
            "implied": {"url": "http://127.0.0.1:9/mcp"},
            "old": {"type": "sse", "url": "http://x.test/sse", "oauth": {"ignored": True}},
        },
    )
    docs, web, implied, old = load_servers(tmp_path, None)
    assert (docs.transport, docs.command, docs.args) == ("stdio", "npx", ("-y", "docs"))
    assert dict(docs.env) == {"TOKEN": "${DOCS}"} and docs.project
    assert (web.transport, web.url, dict(web.headers)) == ("http", "https://x.test/mcp", {"A": "b"})
    assert implied.transport == "http"
    assert "'sse' is not supported" in old.unusable


def test_the_nearest_file_wins_a_shared_name_and_the_user_s_file_is_not_the_project_s(
    tmp_path: Path,
) -> None:
    user = tmp_path / "user.toml"
    user.write_text(
        '[mcp_servers.a]\ncommand = "user-a"\n[mcp_servers.b]\ncommand = "user-b"\n', "utf-8"
    )
    project = tmp_path / "project"
    project.mkdir()
    (project / "orchestrator.toml").write_text(
        'max_rounds = 5\n[mcp_servers.b]\ncommand = "toml-b"\nargs = ["x"]\n', "utf-8"
    )
    _write_json(project, {"c": {"command": "json-c"}})
    a, b, c = load_servers(project, user)
    assert (a.command, a.project) == ("user-a", False)
    assert (b.command, b.args, b.project) == ("toml-b", ("x",), True)
    assert (c.command, c.project) == ("json-c", True)
    # Untrusted, the project's files cannot take over the user's own server's name.
    _write_json(project, {"c": {"command": "json-c"}, "a": {"command": "repo-a"}})
    assert load_servers(project, user)[0].command == "repo-a"
    untrusted = load_servers(project, user, trusted=False)
    assert [(s.name, s.command) for s in untrusted] == [
        ("a", "user-a"),
        ("b", "user-b"),
        ("c", "json-c"),
    ]
    # The settings loader leaves the table to this module instead of calling it unknown.
    assert load_config(project, env={}, user_file=False).max_rounds == 5


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[mcp_servers.a]\ncommand = 'x'\ntimeout = 5\n", "unknown key 'timeout'"),
        ("[mcp_servers.a]\ncommand = 'x'\ncwd = 3\n", "cwd must be a non-empty string"),
        ("mcp_servers = 3\n", "expected tables [mcp_servers.NAME]"),
        ("[mcp_servers.a]\ntype = 'http'\nurl = 'ftp://x'\n", "url must be an http(s) URL"),
        ("[mcp_servers.a]\ncommand = 'x'\nargs = 'y'\n", "args must be a list of strings"),
    ],
)
def test_a_malformed_table_is_one_line_naming_file_and_server(
    tmp_path: Path, toml: str, message: str
) -> None:
    (tmp_path / "orchestrator.toml").write_text(toml, encoding="utf-8")
    with pytest.raises(McpConfigError, match=re.escape(message)) as raised:
        load_servers(tmp_path, None)
    assert "\n" not in str(raised.value) and "orchestrator.toml" in str(raised.value)


def test_two_names_that_make_the_same_tool_prefix_are_refused(tmp_path: Path) -> None:
    _write_json(tmp_path, {"my.docs": {"command": "a"}, "my_docs": {"command": "b"}})
    with pytest.raises(McpConfigError, match="would both name their tools mcp__my_docs__"):
        load_servers(tmp_path, None)


@pytest.mark.parametrize(
    ("file", "name", "becomes"),
    [(".mcp.json", "time__evil", ""), ("orchestrator.toml", "a..b", "it becomes 'a__b'")],
)
def test_a_server_name_holding_a_double_underscore_is_refused_naming_file_and_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str, name: str, becomes: str
) -> None:
    if file == ".mcp.json":
        _write_json(tmp_path, {"time": {"command": "a"}, name: {"command": "b"}})
    else:
        (tmp_path / file).write_text(f'[mcp_servers."{name}"]\ncommand = "b"\n', "utf-8")
    with pytest.raises(McpConfigError, match="separates the server from the tool") as raised:
        load_servers(tmp_path, None)
    said = str(raised.value)
    assert "\n" not in said and str(tmp_path / file) in said and repr(name) in said
    assert becomes in said
    # As a person meets it: one line, exit 2, from any command that reads the servers.
    from orchestrator.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["mcp", "list", "--workdir", str(tmp_path), "--trust"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and repr(name) in err, err


def test_variables_are_read_with_defaults_and_a_missing_one_is_named() -> None:
    server = McpServerConfig(
        "s",
        "f",
        True,
        "stdio",
        command="${BIN:-run}",
        args=("--token=${TOKEN}",),
        env={"KEY": "${TOKEN}", "MODE": "${MODE:-fast}"},
    )
    resolved = resolve(server, {"TOKEN": "t0k"})
    assert (resolved.command, resolved.args) == ("run", ("--token=t0k",))
    assert dict(resolved.env) == {"KEY": "t0k", "MODE": "fast"} and not resolved.missing
    assert resolve(server, {}).missing == "TOKEN"


def test_a_server_starts_in_its_file_s_folder_or_its_cwd_never_the_caller_s(
    tmp_path: Path,
) -> None:
    user_folder, project = tmp_path / "config", tmp_path / "work"
    user_folder.mkdir()
    project.mkdir()
    user = user_folder / "config.toml"
    user.write_text(
        "[mcp_servers.mine]\ncommand = 'python3'\n"
        "[mcp_servers.here]\ncommand = 'x'\ncwd = 'tools'\n"
        "[mcp_servers.there]\ncommand = 'x'\ncwd = '${WHERE:-/srv}/bin'\n",
        encoding="utf-8",
    )
    _write_json(project, {"theirs": {"command": "node", "cwd": "/opt"}, "plain": {"command": "y"}})
    servers = {server.name: server for server in load_servers(project, user)}
    cwd = {name: resolve(server, {"WHERE": "/usr"}).cwd for name, server in servers.items()}
    assert cwd == {
        "mine": str(user_folder.resolve()),
        "here": str(user_folder.resolve() / "tools"),
        "there": "/usr/bin",
        "theirs": "/opt",
        "plain": str(project.resolve()),  # the project's own file lives in the work directory
    }
    assert servers["here"].describe() == "x (in tools)"
    # A server made in code, with no file, starts in the home folder.
    assert resolve(McpServerConfig("s", "f", False, "stdio", command="x")).cwd == str(Path.home())


def test_tool_names_keep_to_the_api_s_characters_and_length() -> None:
    server = McpServerConfig("my docs!", "f", True, "stdio", command="x")
    assert _tool_name(server, "search.v2") == "mcp__my_docs___search_v2"
    long_a, long_b = _tool_name(server, "a" * 80 + "1"), _tool_name(server, "a" * 80 + "2")
    assert len(long_a) == NAME_LIMIT and long_a != long_b


def test_trust_covers_mcp_json_by_digest_and_older_records_stay_valid(tmp_path: Path) -> None:
    (tmp_path / "orchestrator.toml").write_text("max_rounds = 3\n", encoding="utf-8")
    only_toml = file_digest(tmp_path)
    assert only_toml == hashlib.sha256(b"max_rounds = 3\n").hexdigest()
    store = TrustStore(tmp_path / "trust.json")
    _write_json(tmp_path, {"a": {"command": "x"}})
    store.add(tmp_path)
    assert store.trusts(tmp_path)
    _write_json(tmp_path, {"a": {"command": "something-else"}})
    assert not store.trusts(tmp_path) and store.changed_since_trusted(tmp_path)
    (tmp_path / "orchestrator.toml").unlink()
    assert file_digest(tmp_path) != ""  # .mcp.json alone is covered too


def test_a_project_s_auto_approve_needs_trust_unless_the_user_s_file_allows_as_much(
    tmp_path: Path,
) -> None:
    (tmp_path / "orchestrator.toml").write_text('auto_approve = ["mcp__a__b"]\n', "utf-8")
    with pytest.raises(UntrustedConfig, match="auto_approve"):
        load_config(tmp_path, env={}, user_file=False, trusted=False)
    assert not widens("auto_approve", ("mcp__a__b",), ("mcp__a__b", "mcp__c__d"))
    assert widens("auto_approve", ("bash",), ())


class _Source:
    """A tool source whose list a test changes."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.current = list(tools)

    def open(self, notify: Any) -> None: ...

    @property
    def tools(self) -> Sequence[Tool]:
        return self.current

    def close(self) -> None: ...


class _Echo:
    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def schema(self) -> JSONObject:
        properties = {"text": {"type": "string"}}
        return {
            "name": self.name,
            "description": "echo",
            "input_schema": {"type": "object", "properties": properties, "required": ["text"]},
        }

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        return ToolResult(f"{self.name}: {arguments['text']}")


def test_the_registry_rereads_its_sources_and_asks_before_their_tools() -> None:
    source = _Source([_Echo("mcp__s__one")])
    asked: list[str] = []

    def approver(tool: str, arguments: Mapping[str, Any]) -> bool:
        asked.append(tool)
        return tool != "mcp__s__two"

    registry = ToolRegistry([], approver=approver, sources=[source])
    assert [s["name"] for s in registry.schemas] == ["mcp__s__one"]
    assert registry.dispatch("mcp__s__one", {"text": "hi"}).text == "mcp__s__one: hi"
    assert "field 'text' is required" in registry.dispatch("mcp__s__one", {}).text
    source.current = [_Echo("mcp__s__one"), _Echo("mcp__s__two")]
    assert [s["name"] for s in registry.schemas] == ["mcp__s__one", "mcp__s__two"]
    refused = registry.dispatch("mcp__s__two", {"text": "x"})
    assert refused.is_error and "not approved" in refused.text
    assert asked == ["mcp__s__one", "mcp__s__two"]


def test_auto_approve_skips_the_question_but_not_deny() -> None:
    def never(tool: str, arguments: Mapping[str, Any]) -> Any:
        raise AssertionError("asked")

    policy = ApprovalPolicy("ask", never, auto_approve=["mcp__docs__search"])
    assert policy("mcp__docs__search", {}) is True
    denied = ApprovalPolicy("deny", auto_approve=["mcp__docs__search"])("mcp__docs__search", {})
    assert isinstance(denied, Refusal)


@pytest.mark.parametrize(
    ("rule", "tool", "server", "matches"),
    [
        ("mcp__time", "mcp__time__now", "time", True),
        ("mcp__time__*", "mcp__time__now", "time", True),
        ("mcp__time__now", "mcp__time__now", "time", True),
        ("mcp__time__now", "mcp__time__later", "time", False),
        # A server whose name starts like the rule's is another server.
        ("mcp__time", "mcp__time___x", "time_", False),
        ("mcp__time__*", "mcp__time___x", "time_", False),
        ("mcp__time_", "mcp__time___x", "time_", True),
        ("mcp__time", "mcp__timer__x", "timer", False),
        # Not an MCP tool (a caller's @tool named like one): only its own name covers it.
        ("mcp__time", "mcp__time__now", None, False),
        ("bash", "bash", None, True),
    ],
)
def test_a_server_rule_matches_the_tool_s_server_not_a_prefix_of_its_name(
    rule: str, tool: str, server: str | None, matches: bool
) -> None:
    from orchestrator.approval import rule_matches

    assert rule_matches(rule, tool, server) is matches


def test_a_rule_naming_no_configured_server_is_found() -> None:
    from orchestrator.approval import unknown_server_rules

    rules = ["bash", "mcp__tim", "mcp__time", "mcp__time__now", "mcp__git__*", "mcp__gti__log"]
    assert unknown_server_rules(rules, ["time", "git"]) == ["mcp__gti__log", "mcp__tim"]
