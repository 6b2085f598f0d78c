"""Tests for context management: the long run under a small window, recovery, the window lookup.

The CLI runs for real against :class:`MessagesServer` with a small ``max_input_tokens``: the
server refuses any request over it with the service's 400, so a run that does not manage its
context cannot pass. Tool output is real (``cat`` of a 20 KB file in a temp dir).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from orchestrator.plan import items_from_dicts, render_items
from orchestrator.script import parse_script
from orchestrator.testing import (
    MessagesServer,
    ServerLimits,
    check_request,
    count_tokens,
    default_summary,
    full_capabilities,
)

TIMEOUT = 240
BIG = "".join(
    f"line {n:05d} of a long test log: all good so far, nothing to see here\n" for n in range(280)
)


@attrs.frozen
class Finished:
    code: int
    stdout: str
    stderr: str
    requests: list[dict[str, Any]]
    summaries: list[dict[str, Any]]
    refusals: list[str]
    trace: list[dict[str, Any]]
    trace_path: Path

    def events(self, name: str) -> list[dict[str, Any]]:
        return [event for event in self.trace if event["event"] == name]


def _environment(**extra: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "ORCHESTRATOR_"))
        and name.lower() not in ("http_proxy", "https_proxy", "all_proxy")
    }
    env.update(NO_COLOR="1", **extra)
    return env


def _orchestrator(
    args: Sequence[str], env: Mapping[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def _run(
    tmp_path: Path,
    turns: Sequence[Mapping[str, Any]],
    *flags: str,
    limits: ServerLimits,
) -> Finished:
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    (workdir / "big.txt").write_text(BIG, encoding="utf-8")
    trace = tmp_path / "t.jsonl"
    script = parse_script({"name": "long", "turns": list(turns)}, source="test")
    with MessagesServer(script, limits=limits, summarize=default_summary) as server:
        env = _environment(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=server.base_url)
        args = ["run", "Work through the plan", "--workdir", str(workdir), "--trace", str(trace)]
        process = _orchestrator([*args, "--yes", *flags], env, tmp_path)
        requests, violations = server.requests, server.violations
        summaries, refusals = server.summary_requests, server.refusals
    assert "Traceback" not in process.stderr, process.stderr
    assert violations == [], process.stderr
    for number, body in enumerate(requests, start=1):
        assert check_request(body) == [], f"request {number}"
    lines = trace.read_text(encoding="utf-8").splitlines() if trace.exists() else []
    return Finished(
        process.returncode,
        process.stdout,
        process.stderr,
        [body for body in requests if body.get("tools")],
        summaries,
        refusals,
        [json.loads(line) for line in lines],
        trace,
    )


def _todo(items: int, done: int) -> dict[str, Any]:
    """The plan with ``done`` items completed and the next one in progress."""
    status = [
        "completed" if n < done else "in_progress" if n == done else "pending" for n in range(items)
    ]
    return {
        "tool_calls": [
            {
                "name": "todo",
                "input": {
                    "items": [
                        {"id": str(n + 1), "text": f"Step {n + 1} of the work", "status": s}
                        for n, s in enumerate(status)
                    ]
                },
            }
        ]
    }


def _long_script(rounds: int, items: int) -> list[dict[str, Any]]:
    """Round 1 plans; every ``rounds / items`` rounds an item completes; the rest run bash."""
    every = rounds // items
    turns: list[dict[str, Any]] = [_todo(items, 0)]
    for number in range(2, rounds + 1):
        if number % every == 0:
            turns.append(_todo(items, number // every))
        else:
            command = f"cat big.txt; echo round {number}"
            turns.append({"tool_calls": [{"name": "bash", "input": {"command": command}}]})
    turns.append({"text": "Every step is done."})
    return turns


def _texts(body: Mapping[str, Any]) -> str:
    parts: list[str] = []
    for message in body["messages"]:
        for block in message["content"]:
            if block.get("type") == "text":
                parts.append(block["text"])
            elif block.get("type") == "tool_result":
                content = block.get("content")
                parts.append(content if isinstance(content, str) else json.dumps(content))
    return "\n".join(parts)


def test_a_300_round_run_under_a_30k_window_finishes_and_keeps_the_board(tmp_path: Path) -> None:
    limits = ServerLimits(max_input_tokens=30_000)
    run = _run(tmp_path, _long_script(300, 10), "--max-rounds", "400", limits=limits)
    assert run.code == 0, run.stderr
    assert run.refusals == []
    assert max(count_tokens(body) for body in run.requests) <= 30_000
    cleared, compacted = run.events("context.cleared"), run.events("context.compacted")
    assert cleared and compacted
    assert len(run.summaries) == len(compacted)
    for summary in run.summaries:
        assert "tools" not in summary
    (window,) = run.events("context.window")
    assert (window["window"], window["source"]) == (30_000, "models.retrieve")
    # The board each request must show: the latest accepted update before it.
    boards: list[str] = []
    current = "No todos."
    for event in run.trace:
        if event["event"] == "plan.updated":
            current = render_items(items_from_dicts(event["items"]))
        elif event["event"] == "model.request":
            boards.append(current)
    assert len(boards) == len(run.requests)
    first_compaction = min(event["seq"] for event in compacted)
    after = [
        index
        for index, event in enumerate(e for e in run.trace if e["event"] == "model.request")
        if event["seq"] > first_compaction
    ]
    assert len(after) > 100
    for index in after:
        assert boards[index] in _texts(run.requests[index]), f"request {index + 1}"
    # The stale counter goes on across compactions: reminders keep coming after them.
    reminders = [event["seq"] for event in run.events("audit.reminder")]
    assert any(seq > first_compaction for seq in reminders)
    check = _orchestrator(["replay", "--check", str(run.trace_path)], _environment(), tmp_path)
    assert check.returncode == 0, check.stderr


def test_a_refusal_as_too_long_is_compacted_and_asked_again(tmp_path: Path) -> None:
    # The server's real limit is far below the window the harness is told it has.
    limits = ServerLimits(max_input_tokens=14_000)
    run = _run(tmp_path, _long_script(8, 2), "--context-window", "100000", limits=limits)
    assert run.code == 0, run.stderr
    assert run.refusals and all(r.startswith("prompt is too long: ") for r in run.refusals)
    forced = [event for event in run.events("context.compacted") if event["forced"]]
    assert len(forced) == len(run.refusals)
    check = _orchestrator(["replay", "--check", str(run.trace_path)], _environment(), tmp_path)
    assert check.returncode == 0, check.stderr


def test_a_second_refusal_fails_the_run_with_one_line(tmp_path: Path) -> None:
    limits = ServerLimits(max_input_tokens=3_000)
    run = _run(tmp_path, _long_script(4, 2), "--context-window", "100000", limits=limits)
    assert run.code == 1
    (line,) = [
        text for text in run.stderr.splitlines() if text.startswith("orchestrator: run failed")
    ]
    assert "still too long" in line and "--context-window" in line
    assert len(run.refusals) == 2


def test_the_window_falls_back_to_200k_and_says_why(tmp_path: Path) -> None:
    limits = ServerLimits(known_models=frozenset({"another-model"}))
    run = _run(tmp_path, [{"text": "Nothing to do."}], limits=limits)
    assert run.code == 0, run.stderr
    (window,) = run.events("context.window")
    assert window["window"] == 200_000 and window["source"] == "fallback"
    assert "404" in window["reason"] and "200,000" in window["reason"]


def test_the_context_window_flag_overrides_the_models_api(tmp_path: Path) -> None:
    run = _run(
        tmp_path, [{"text": "Nothing to do."}], "--context-window", "50000", limits=ServerLimits()
    )
    (window,) = run.events("context.window")
    assert (window["window"], window["source"]) == (50_000, "--context-window")
    (response,) = run.events("model.response")
    assert response["context_window"] == 50_000
    assert "ctx " in run.stdout and "of 50k" in run.stdout


THINKING = {
    "type": "thinking",
    "thinking": "Let me look at the file first.",
    "signature": "c2lnbmF0dXJl+/==",
}
REDACTED = {"type": "redacted_thinking", "data": "RW5jcnlwdGVkIHRoaW5raW5n=="}


def test_thinking_blocks_come_back_byte_identical(tmp_path: Path) -> None:
    turns: list[dict[str, Any]] = [
        {
            "content": [
                THINKING,
                REDACTED,
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "bash",
                    "input": {"command": "echo hi"},
                },
            ]
        },
        {"text": "Done."},
    ]
    run = _run(tmp_path, turns, "--thinking", "adaptive", "--effort", "high", limits=ServerLimits())
    assert run.code == 0, run.stderr
    first, second = run.requests
    assert first["thinking"] == {"type": "adaptive"}
    assert first["output_config"] == {"effort": "high"}
    sent_back = second["messages"][1]["content"]
    assert json.dumps(sent_back[0], sort_keys=True) == json.dumps(THINKING, sort_keys=True)
    assert json.dumps(sent_back[1], sort_keys=True) == json.dumps(REDACTED, sort_keys=True)
    (response, _) = run.events("model.response")
    assert response["content"][:2] == [THINKING, REDACTED]


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (("--thinking", "500"), ["--thinking", "1024"]),
        (("--thinking", "9000", "--max-tokens", "8192"), ["--thinking 9000", "--max-tokens"]),
        (("--compaction", "sideways"), ["--compaction"]),
        (("--context-window", "10"), ["--context-window"]),
    ],
)
def test_bad_context_flags_are_one_line_and_exit_2(
    tmp_path: Path, flags: tuple[str, ...], words: list[str]
) -> None:
    args = ["run", "task", "--workdir", str(tmp_path), *flags]
    process = _orchestrator(
        args, _environment(ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL="http://127.0.0.1:9"), tmp_path
    )
    assert process.returncode == 2
    assert len(process.stderr.strip().splitlines()) == 1, process.stderr
    assert all(word in process.stderr for word in words), process.stderr


def test_a_model_without_adaptive_thinking_is_refused_at_the_start(tmp_path: Path) -> None:
    capabilities = full_capabilities()
    capabilities["thinking"]["types"]["adaptive"] = {"supported": False}
    run = _run(
        tmp_path,
        [{"text": "x"}],
        "--thinking",
        "adaptive",
        limits=ServerLimits(capabilities=capabilities),
    )
    assert run.code == 2
    assert "--thinking adaptive" in run.stderr and "does not support" in run.stderr
    assert run.requests == []
