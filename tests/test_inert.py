"""Untrusted text is inert on the terminal: the payloads are shown, never obeyed."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pexpect
import pytest
from rich.console import Console

from orchestrator.console import LiveView, PlainView
from orchestrator.inert import inert
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer

#: What a hostile model, tool output or file may carry, each aimed at the user's terminal.
PAYLOADS = {
    "clipboard": "\x1b]52;c;ZWNobyBwd25lZA==\x07",
    "title": "\x1b]0;owned\x07",
    "hyperlink": "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",
    "clear": "\x1b[2J",
    "ask-terminal": "\x1b[6n",
    "cursor-up": "\x1b[3A",
    "dcs": "\x1bPtmux;\x1b\x1b]52;c;eA==\x07\x1b\\",
    "apc": "\x1b_hidden\x1b\\",
    "reset": "\x1bc",
    "unterminated-osc": "\x1b]52;c;",
    "c1-csi": "\x9b2J",
    "c1-osc": "\x9d52;c;eA==\x9c",
    "bell": "\x07",
    "carriage-return": "safe\rEVIL",
    "bidi": "\u202eevil\u202c",
}
#: Byte sequences that must never reach the terminal raw (the views' own styling aside).
FORBIDDEN = (
    b"\x1b]",
    b"\x1bP",
    b"\x1b_",
    b"\x1bc",
    b"\x1b[2J",
    b"\x1b[6n",
    b"\x1b[3A",
    "\x9b".encode(),
    "\x9d".encode(),
    "\u202e".encode(),
    b"\x07",
    b"safe\rEVIL",
)


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_inert_shows_every_payload_and_obeys_none(name: str) -> None:
    shown = inert(f"before {PAYLOADS[name]} after")
    encoded = shown.encode()
    assert not any(bad in encoded for bad in FORBIDDEN), shown
    assert "\x1b" not in shown
    assert shown.startswith("before ") and shown.endswith(" after")
    assert shown != f"before {PAYLOADS[name]} after"  # something visible stands in for it


def test_inert_shows_half_a_surrogate_pair_as_its_escape() -> None:
    """A response's JSON may escape half a UTF-16 pair; printed as is, the terminal gets a raw
    byte (under surrogateescape) or the print fails."""
    shown = inert("before \ud800evil\udc80 after")
    assert shown == "before \\ud800evil\\udc80 after"
    shown.encode("utf-8")


def test_json_escaped_writes_what_a_terminal_obeys_as_escapes_and_keeps_the_value() -> None:
    from orchestrator.inert import json_escaped

    value = {"k\u202e": ["\x1b[2J", "\x9b6n", "\x7f", "\u2066x\u2069", "\ud800", "é\t\n😀"]}
    text = json_escaped(json.dumps(value, ensure_ascii=False))
    assert json.loads(text) == value
    assert inert(text) == text  # nothing left for a terminal to act on
    assert "é" in text and "😀" in text  # the rest stays readable, not ASCII-escaped
    text.encode("utf-8")  # half a surrogate pair no longer fails the write


def test_inert_line_keeps_a_line_one_line() -> None:
    from orchestrator.inert import inert_line

    assert inert_line("/tmp/a\nforged\x1b[2J\tx") == "/tmp/a\\nforged␛[2J\tx"


def test_inert_keeps_plain_text_tabs_and_newlines() -> None:
    text = "ok\ttabbed\nnext line — ünïcode ✓"
    assert inert(text) is text


def _events(payload: str) -> list[dict[str, object]]:
    return [
        {"event": "tool.call", "id": "t1", "name": "bash", "input": {"command": f"echo {payload}"}},
        {
            "event": "tool.result",
            "id": "t1",
            "name": "bash",
            "is_error": False,
            "output": f"line {payload}\nmore",
            "duration_ms": 3.0,
        },
        {
            "event": "plan.updated",
            "revision": 1,
            "merge": False,
            "items": [{"id": "1", "text": f"item {payload}", "status": "in_progress"}],
        },
        {"event": "run.finished", "status": "failed", "rounds": 1, "reason": f"why {payload}"},
    ]


@pytest.mark.parametrize("view", ["plain", "live"])
def test_the_console_views_pass_no_payload_through(view: str) -> None:
    stream = io.StringIO()
    for payload in PAYLOADS.values():
        sink = (
            PlainView(stream)
            if view == "plain"
            else LiveView(Console(file=stream, force_terminal=True, width=120))
        )
        with sink:
            sink.on_text(f"model says {payload}\n")
            for event in _events(payload):
                sink(event)
    written = stream.getvalue().encode()
    assert not any(bad in written for bad in FORBIDDEN)
    assert "␛]52;c;".encode() in written  # shown, not dropped


@pytest.mark.e2e
def test_a_real_run_on_a_terminal_receives_no_payload(tmp_path: Path) -> None:
    """Model text, tool output and a file's content carry payloads; the pty sees none raw."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    hostile = "".join(PAYLOADS.values())
    (workdir / "notes.txt").write_text(f"notes {hostile}\n")
    printf = "printf '\\033]52;c;ZWNobw==\\007 \\033[2J \\233 done\\n'"
    bash = {"name": "bash", "input": {"command": printf}}
    turns = [
        {"text": f"Looking {hostile}\n", "tool_calls": [bash]},
        {"tool_calls": [{"name": "read_file", "input": {"path": "notes.txt"}}]},
        {"text": f"All read {hostile}"},
    ]
    script = parse_script({"name": "hostile", "turns": turns}, source="test")
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "ORCHESTRATOR_", "NO_COLOR"))
    }
    with MessagesServer(script) as server:
        env.update(
            ANTHROPIC_API_KEY="test-key",
            ANTHROPIC_BASE_URL=server.base_url,
            ORCHESTRATOR_CONFIG_DIR=str(tmp_path / "config"),
            TERM="xterm-256color",
        )
        args = ["-m", "orchestrator", "run", "Read the notes", "--workdir", str(workdir), "--yes"]
        child = pexpect.spawn(
            sys.executable,
            [*args, "--trace", str(tmp_path / "t.jsonl")],
            env=env,
            timeout=240,
            dimensions=(40, 120),
        )
        received = bytearray()
        while True:
            try:
                received += child.read_nonblocking(65536, timeout=240)
            except pexpect.EOF:
                break
        child.close()
    assert child.exitstatus == 0, bytes(received)[-2000:]
    found = [bad for bad in FORBIDDEN if bad in received]
    assert found == [], found
    assert "␛]52;c;".encode() in received
    # The trace keeps the exact bytes.
    events = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    outputs = [e["output"] for e in events if e["event"] == "tool.result"]
    assert "\x1b]52;c;ZWNobw==\x07" in outputs[0]
    assert hostile in outputs[1]
